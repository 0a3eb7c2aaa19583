"""SARIF 2.1.0 for code scanning: lint findings, and a trace's failing phases at the code they are about.

GitHub code scanning (and other SARIF viewers) show a result on the file and line its primary
`physicalLocation` names, so URIs are relative to the source root (`uriBaseId: %SRCROOT%`) and
regions carry 1-based `startLine`/`startColumn`. A failing phase is placed on the code its failing
checks read (policyrun.render.codelocations), with the rulebook lines as related locations when
the rulebook is a file of the user's repository (a shipped rulebook's file is not: it is never a
location). Mentions of related locations in the message are embedded links, so code scanning
shows both sides of a disagreement. A failing check whose `row:` names a file adds one result per
row, at the row's file and line. Output is deterministic: results are sorted, and no timestamps are written.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path, PurePosixPath
from typing import Any
from urllib.parse import quote

from policyrun.checkid import check_label, phase_rule_id
from policyrun.errors import Finding, Location
from policyrun.lintcodes import describe, help_markdown
from policyrun.render.codelocations import SRCROOT, CodeLocation, Resolver, failing_checks, phase_locations
from policyrun.render.rowsites import located_rows
from policyrun.safetext import json_controls
from policyrun.render.view import format_read
from policyrun.trace.model import PhaseRecord, Trace

__all__ = ["artifact_uri", "render_sarif", "trace_to_sarif"]

SARIF_VERSION = "2.1.0"
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
_LEVELS = {"error": "error", "warning": "warning"}
# Phases that are results; PASS and SKIPPED phases are not (nothing to act on).
_PHASE_LEVELS = {"WARN": "warning", "FAIL": "error", "BLOCKED": "error", "STOPPED": "error"}


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


def _region(line: int, column: int) -> dict[str, Any] | None:
    if line <= 0:
        return None
    region: dict[str, Any] = {"startLine": line}
    if column > 0:
        region["startColumn"] = column
    return region


def _location(loc: Location, base_dir: Path | None) -> dict[str, Any]:
    uri = artifact_uri(loc.file, base_dir)
    artifact: dict[str, Any] = {"uri": uri}
    if ":" not in uri.split("/", 1)[0]:  # relative to the working directory: the source root
        artifact["uriBaseId"] = SRCROOT
    physical: dict[str, Any] = {"artifactLocation": artifact}
    if (region := _region(loc.line, loc.column)) is not None:
        physical["region"] = region
    return {"physicalLocation": physical}


def _code_location(loc: CodeLocation, message: str | None = None, ident: int | None = None) -> dict[str, Any]:
    absolute = loc.base is None and loc.path.startswith("/")
    artifact: dict[str, Any] = {"uri": Path(loc.path).as_uri() if absolute else artifact_uri(loc.path)}
    if loc.base:
        artifact["uriBaseId"] = loc.base
    physical: dict[str, Any] = {"artifactLocation": artifact}
    if (region := _region(loc.line, loc.column)) is not None:
        physical["region"] = region
    out: dict[str, Any] = {}
    if ident is not None:
        out["id"] = ident
    out["physicalLocation"] = physical
    if message or loc.note:
        out["message"] = {"text": message or loc.note}
    return out


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
        entry = describe(code)
        first = next(f for f in ordered if f.code == code)
        rules.append({"id": code, "name": code,
                      "shortDescription": {"text": descriptions.get(code, entry.short)},
                      "fullDescription": {"text": entry.help},
                      "help": {"text": f"{code}: {entry.short}. {entry.help}", "markdown": help_markdown(entry)},
                      "defaultConfiguration": {"level": _LEVELS[first.severity]},
                      "properties": {"tags": ["policyrun", "rulebook"]}})
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




def _phase_markdown(phase: PhaseRecord, code: list[CodeLocation]) -> str:
    lines = [f"**{phase.phase}** is **{phase.status}**: {phase.blocker or phase.reason}", "",
             f"Next allowed action: {phase.next_allowed_action}"]
    checks = failing_checks(phase)
    if checks:
        lines += ["", "Checks that decided it:"]
        for c in checks:
            outcome = f" → {c.outcome}" if c.outcome else ""
            reads = "; ".join(f"`{format_read(r, 120)}`" for r in c.reads)
            lines.append(f"- `{c.id}` ({c.kind}) {c.result}{outcome}: `{c.expression}`"
                         + (f"; read {reads}" if reads else ""))
    if code:
        lines += ["", "Code it is about:"]
        lines += [f"- `{loc.text()}` ({loc.note})" if loc.note else f"- `{loc.text()}`" for loc in code]
    return "\n".join(lines)


def _escape_brackets(text: str) -> str:
    return text.replace("[", "\\[").replace("]", "\\]")


def _embed_links(text: str, targets: Mapping[str, int]) -> str:
    """`path:line` mentions in a plain-text message as SARIF embedded links (`[path:line](id)`)
    to the related locations they name: code scanning shows a related location only through a link
    in the message. With links, literal brackets are escaped (SARIF 3.11.6); without, the text is
    left as it is."""
    if not targets:
        return text
    names = "|".join(re.escape(site) for site in sorted(targets, key=len, reverse=True))
    pattern = re.compile(rf"(?<![\w./-])({names})(?::[0-9]+)?(?![\w/])")
    parts: list[str] = []
    last = 0
    for m in pattern.finditer(text):
        parts += [_escape_brackets(text[last:m.start()]), f"[{_escape_brackets(m.group(0))}]({targets[m.group(1)]})"]
        last = m.end()
    if not parts:
        return text
    return "".join(parts) + _escape_brackets(text[last:])


def _phase_result(trace: Trace, phase: PhaseRecord, index: int, resolver: Resolver) -> dict[str, Any]:
    code = phase_locations(trace, phase, resolver)
    # Rulebook lines are locations only when the rulebook is a file of the user's repository: a
    # shipped rulebook's lines (Resolver.rulebook gives None) are inside the installed package.
    checks: list[tuple[CodeLocation, str | None]] = []
    for check in failing_checks(phase):
        if (loc := resolver.rulebook(check.location)) is not None:
            checks.append((loc, f"{check_label(check.kind, check.id)} in the rulebook"))
    phase_loc = resolver.rulebook(phase.location)
    if phase_loc is None and trace.rulebook.path:
        phase_loc = resolver.rulebook(Location(trace.rulebook.path, 1, 1))
    tail = [(phase_loc, f"phase {phase.phase} in the rulebook")] if phase_loc is not None else []
    # Primary: the first code location; related: the rulebook checks, the other code, the phase.
    # Without code locations the phase's rulebook line is primary, as for a rulebook finding.
    candidates: list[tuple[CodeLocation, str | None]]
    if code:
        candidates = [(code[0], None), *checks, *((loc, None) for loc in code[1:]), *tail]
    else:
        candidates = [*tail, *checks]
    seen: set[tuple[str, int, int, str | None]] = set()
    unique = []
    for loc, text in candidates:
        key = (loc.path, loc.line, loc.column, loc.base)
        if key not in seen:
            seen.add(key)
            unique.append((loc, text))
    primary, related = (unique[0], unique[1:]) if unique else (None, [])
    status = phase.status
    text = f"{phase.phase} {status}: {phase.blocker or phase.reason}. Next allowed action: {phase.next_allowed_action}"
    targets: dict[str, int] = {}
    for i, (loc, _) in enumerate(related, 1):
        if loc.site and (primary is None or loc.site != primary[0].site):
            targets.setdefault(loc.site, i)
    result: dict[str, Any] = {
        "ruleId": phase_rule_id(trace.rulebook.name, phase.phase), "ruleIndex": index,
        "kind": "fail", "level": _PHASE_LEVELS[status],
        "message": {"text": _embed_links(text, targets), "markdown": _phase_markdown(phase, code)},
    }
    if primary is not None:
        result["locations"] = [_code_location(primary[0], primary[1])]
    if related:
        result["relatedLocations"] = [_code_location(loc, text, ident=i) for i, (loc, text) in enumerate(related, 1)]
    result["partialFingerprints"] = {"policyrunPhase/v1": _fingerprint(trace.rulebook.name, trace.mode,
                                                                        phase.phase, status)}
    props: dict[str, Any] = {"rulebook": trace.rulebook.name, "phase": phase.phase, "status": status,
                             "reason": phase.reason, "next_allowed_action": phase.next_allowed_action,
                             "checks": [c.id for c in failing_checks(phase)], "code_locations": len(code)}
    if phase.location and phase_loc is None:
        # Where the phase is defined, for people, when that is no file of this repository (a
        # shipped rulebook is named `<shipped>/NAME.yaml`, never by its installed path).
        if Location.parse(phase.location).file.startswith("<"):
            props["rulebook_location"] = phase.location
    result["properties"] = props
    return result


def _row_results(trace: Trace, phase: PhaseRecord, index: int, resolver: Resolver) -> list[dict[str, Any]]:
    """One result per located row of the phase's failing checks (a check with `row:` naming a file),
    at the row's file and line, under the phase's rule."""
    out = []
    for check in failing_checks(phase):
        for row in located_rows(check, resolver):
            where = row.location.text()
            text = f"{phase.phase} {phase.status}: {check.id}: {row.text}"
            out.append({
                "ruleId": phase_rule_id(trace.rulebook.name, phase.phase), "ruleIndex": index,
                "kind": "fail", "level": _PHASE_LEVELS[phase.status],
                "message": {"text": text},
                "locations": [_code_location(row.location)],
                "partialFingerprints": {"policyrunRow/v1": _fingerprint(trace.rulebook.name, trace.mode, phase.phase,
                                                                        check.id, where, row.text)},
                "properties": {"rulebook": trace.rulebook.name, "phase": phase.phase, "status": phase.status,
                               "check": check.id, "row": True,
                               "next_allowed_action": phase.next_allowed_action}})
    return out


def _phase_rule(trace: Trace, p: PhaseRecord) -> dict[str, Any]:
    return {"id": phase_rule_id(trace.rulebook.name, p.phase), "name": p.phase,
            "shortDescription": {"text": p.title or p.phase},
            "fullDescription": {"text": f"Phase {p.phase} of rulebook {trace.rulebook.name}"},
            "help": {"text": f"Phase {p.phase} ({p.title or p.phase}) of rulebook {trace.rulebook.name} did not "
                             f"pass. `policyrun explain TRACE --phase {p.phase}` shows why.",
                     "markdown": f"Phase **{p.phase}** ({p.title or p.phase}) of rulebook "
                                 f"`{trace.rulebook.name}` did not pass.\n\n"
                                 f"`policyrun explain trace.json --phase {p.phase}` shows each check, the values "
                                 "it read and where they came from."},
            "defaultConfiguration": {"level": _PHASE_LEVELS[p.status]}}


def trace_to_sarif(trace: Trace, *, tool_version: str | None = None, base_dir: Path | None = None,
                   located_only: bool = False) -> str:
    """A trace's failing phases as results: FAIL, BLOCKED and STOPPED are errors, WARN a warning.

    PASS and SKIPPED phases are not results. Each result's primary location is the first code
    location its failing checks read (at most 20 per result), else the phase in the rulebook when
    the rulebook is a file of the user's repository, else none (a shipped rulebook): the rule is
    then named by `ruleId` and `properties` only. The rulebook lines of those checks and the other
    code locations are related locations. URIs are relative to `base_dir` (`--base`) when given,
    else to the repository most probes read.

    `located_only` leaves out results without a location (GitHub code scanning refuses a whole
    file when one result has none), naming them in the run's `properties.unlocated`.
    """
    if tool_version is None:
        from policyrun import __version__
        tool_version = __version__
    resolver = Resolver(trace, base_dir)
    phases = [p for p in trace.phases if p.status in _PHASE_LEVELS]
    # Per phase: its result, then one result per located row of its failing checks (`row:`).
    per_phase = [[_phase_result(trace, p, i, resolver), *_row_results(trace, p, i, resolver)]
                 for i, p in enumerate(phases)]
    unlocated = [found[0]["ruleId"] for found in per_phase if "locations" not in found[0]]
    if located_only and unlocated:
        kept = [(p, [r for r in found if "locations" in r]) for p, found in zip(phases, per_phase, strict=True)]
        kept = [(p, found) for p, found in kept if found]
        phases = [p for p, _ in kept]
        per_phase = [[{**r, "ruleIndex": i} for r in found] for i, (_, found) in enumerate(kept)]
    results = [r for found in per_phase for r in found]
    rules = [_phase_rule(trace, p) for p in phases]
    run_props: dict[str, Any] = {"rulebook": trace.rulebook.name, "rulebook_version": trace.rulebook.version,
                                 "rulebook_sha256": trace.rulebook.sha256,
                                 "rulebook_path": trace.rulebook.path, "mode": trace.mode,
                                 "verdict": trace.verdict.id, "exit_code": trace.exit_code,
                                 "facts_sha256": trace.facts_sha256}
    if located_only and unlocated:
        run_props["unlocated"] = unlocated  # left out, but never silently
    extra: dict[str, Any] = {}
    if bases := resolver.original_uri_base_ids():
        extra["originalUriBaseIds"] = bases
    return _log(_driver(tool_version, rules), results,
                automationDetails={"id": f"policyrun/{trace.rulebook.name}/{trace.mode}/"},
                properties=run_props, **extra)
