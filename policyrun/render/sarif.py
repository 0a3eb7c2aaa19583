"""SARIF 2.1.0 for code scanning: lint findings, and a trace's non-PASS phases.

GitHub code scanning (and other SARIF viewers) show a result on the file and line its
`physicalLocation` names, so URIs are relative to the repository root (the working directory by
default) and regions carry 1-based `startLine`/`startColumn`. Output is deterministic: results
are sorted by location, and no timestamps are written.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import quote

from policyrun.errors import Finding, Location
from policyrun.render.safetext import json_controls
from policyrun.render.view import FAILING, format_read, is_decisive
from policyrun.trace import Trace

SARIF_VERSION = "2.1.0"
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
_LEVELS = {"error": "error", "warning": "warning"}
_PHASE_LEVELS = {"WARN": "warning", "FAIL": "error", "BLOCKED": "error", "STOPPED": "error"}


def parse_location(text: str | None) -> Location | None:
    """`file:line:col` (line and column optional) as a Location."""
    if not text:
        return None
    parts = text.rsplit(":", 2)
    if len(parts) == 3 and parts[1].isdigit() and parts[2].isdigit():
        return Location(parts[0], int(parts[1]), int(parts[2]))
    parts = text.rsplit(":", 1)
    if len(parts) == 2 and parts[1].isdigit():
        return Location(parts[0], int(parts[1]))
    return Location(text)


def artifact_uri(file: str, base_dir: Path | None = None) -> str:
    """A relative URI when the file is under `base_dir` (default: cwd), else a file: URI."""
    path = Path(file)
    if path.is_absolute():
        base = os.path.abspath(base_dir or Path.cwd())
        rel = os.path.relpath(path, base)
        if rel.startswith(".."):
            return path.as_uri()
        path = Path(rel)
    posix = PurePosixPath(*path.parts).as_posix()
    # surrogateescape: a file name that is not UTF-8 keeps its bytes (%FF) instead of crashing.
    return quote(posix.removeprefix("./"), safe="/-._~!$&'()*+,;=@", errors="surrogateescape")


def _location(loc: Location, base_dir: Path | None) -> dict[str, Any]:
    physical: dict[str, Any] = {"artifactLocation": {"uri": artifact_uri(loc.file, base_dir)}}
    if loc.line > 0:
        region: dict[str, Any] = {"startLine": loc.line}
        if loc.column > 0:
            region["startColumn"] = loc.column
        physical["region"] = region
    return {"physicalLocation": physical}


def _fingerprint(*parts: str) -> str:
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()[:32]


def _log(driver: dict[str, Any], results: list[dict[str, Any]], **run: Any) -> str:
    log = {"$schema": SARIF_SCHEMA, "version": SARIF_VERSION,
           "runs": [{"tool": {"driver": driver}, "columnKind": "unicodeCodePoints", **run, "results": results}]}
    return json_controls(json.dumps(log, indent=2, ensure_ascii=False) + "\n")


def _driver(tool_version: str, rules: list[dict[str, Any]]) -> dict[str, Any]:
    return {"name": "policyrun", "version": tool_version, "semanticVersion": tool_version, "rules": rules}


def render_sarif(findings: Iterable[Finding], *, tool_version: str,
                 rule_descriptions: Mapping[str, str] | None = None, base_dir: Path | None = None) -> str:
    """Lint findings as SARIF: one rule per finding code, one result per finding."""
    ordered = sorted(findings, key=Finding.sort_key)
    descriptions = rule_descriptions or {}
    codes = sorted({f.code for f in ordered})
    rules = []
    for code in codes:
        first = next(f for f in ordered if f.code == code)
        rules.append({"id": code, "name": code,
                      "shortDescription": {"text": descriptions.get(code, f"policyrun lint {code}")},
                      "defaultConfiguration": {"level": _LEVELS[first.severity]}})
    index = {code: i for i, code in enumerate(codes)}
    results = []
    for f in ordered:
        text = f"{f.message} (at {f.node})" if f.node else f.message
        result: dict[str, Any] = {
            "ruleId": f.code, "ruleIndex": index[f.code], "level": _LEVELS[f.severity],
            "message": {"text": text},
            "locations": [_location(f.location, base_dir)],
            "partialFingerprints": {"policyrunFinding/v1": _fingerprint(f.code, f.location.file, f.node or
                                                                        f"{f.location.line}", f.message)},
        }
        if f.node:
            result["properties"] = {"node": f.node}
        results.append(result)
    return _log(_driver(tool_version, rules), results)


def _phase_markdown(trace: Trace, phase_id: str) -> str:
    phase = trace.phase(phase_id)
    assert phase is not None
    lines = [f"**{phase.phase}** is **{phase.status}**: {phase.blocker or phase.reason}", "",
             f"Next allowed action: {phase.next_allowed_action}"]
    decisive = [c for c in phase.evidence if is_decisive(c)]
    if decisive:
        lines += ["", "Checks that decided it:"]
        for c in decisive:
            outcome = f" → {c.outcome}" if c.outcome else ""
            reads = "; ".join(f"`{format_read(r, 120)}`" for r in c.reads)
            lines.append(f"- `{c.id}` ({c.kind}) {c.result}{outcome}: `{c.expression}`"
                         + (f"; read {reads}" if reads else ""))
    return "\n".join(lines)


def trace_to_sarif(trace: Trace, *, tool_version: str | None = None, base_dir: Path | None = None) -> str:
    """A trace's non-PASS phases as results located at each phase in the rulebook.

    FAIL, BLOCKED and STOPPED are errors and WARN a warning (`kind: fail`); SKIPPED phases are recorded as
    `kind: notApplicable` with level `none`, which SARIF requires for non-failures.
    """
    if tool_version is None:
        from policyrun import __version__
        tool_version = __version__
    phases = [p for p in trace.phases if p.status != "PASS"]
    rule_ids = [f"{trace.rulebook.name}/{p.phase}" for p in phases]
    rules = [{"id": rid, "name": p.phase,
              "shortDescription": {"text": p.title or p.phase},
              "fullDescription": {"text": f"Phase {p.phase} of rulebook {trace.rulebook.name}"},
              "defaultConfiguration": {"level": _PHASE_LEVELS.get(p.status, "none")}}
             for rid, p in zip(rule_ids, phases, strict=True)]
    fallback = parse_location(trace.rulebook.path) if trace.rulebook.path else None
    if fallback is not None and fallback.line == 0:
        fallback = Location(fallback.file, 1, 1)
    results = []
    for i, (rid, phase) in enumerate(zip(rule_ids, phases, strict=True)):
        failing = phase.status in FAILING or phase.status == "WARN"
        result: dict[str, Any] = {
            "ruleId": rid, "ruleIndex": i,
            "kind": "fail" if failing else "notApplicable",
            "level": _PHASE_LEVELS[phase.status] if failing else "none",
            "message": {"text": f"{phase.phase} {phase.status}: {phase.blocker or phase.reason}. "
                                f"Next allowed action: {phase.next_allowed_action}",
                        "markdown": _phase_markdown(trace, phase.phase)},
            "partialFingerprints": {"policyrunPhase/v1": _fingerprint(trace.rulebook.name, trace.mode, phase.phase,
                                                                      phase.status)},
            "properties": {"status": phase.status, "reason": phase.reason,
                           "next_allowed_action": phase.next_allowed_action,
                           "checks": [c.id for c in phase.evidence if is_decisive(c)]},
        }
        loc = parse_location(phase.location) or fallback
        if loc is not None:
            result["locations"] = [_location(loc, base_dir)]
        results.append(result)
    run_props = {"rulebook": trace.rulebook.name, "rulebook_version": trace.rulebook.version,
                 "rulebook_sha256": trace.rulebook.sha256, "mode": trace.mode, "verdict": trace.verdict.id,
                 "exit_code": trace.exit_code, "facts_sha256": trace.facts_sha256}
    return _log(_driver(tool_version, rules), results,
                automationDetails={"id": f"policyrun/{trace.rulebook.name}/{trace.mode}/"},
                properties=run_props)
