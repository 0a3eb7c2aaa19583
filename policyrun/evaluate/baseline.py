"""`evaluate --baseline DIR`: an earlier evaluation's output folder, read as the CEL `baseline`.

The folder holds that evaluation's trace.json and, when it was written with `--keep-facts`, the
facts.json it was evaluated over. Both are checked against the folder's manifest.json, so a file
edited after the run is refused rather than compared with (docs/cli.md, "Comparing with a baseline").
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from policyrun.errors import UsageError

TRACE = "trace.json"
FACTS = "facts.json"
_FIX = "pass the --out folder of an earlier `policyrun evaluate` (with --keep-facts to compare facts)"


@dataclass(frozen=True)
class Baseline:
    variable: dict[str, Any]  # the CEL `baseline`
    record: dict[str, Any]  # what the trace records (trace.BaselineRef)


def _digest(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as exc:
        raise UsageError(f"--baseline: cannot read {path}: {exc.strerror or exc}; {_FIX}", code="U060") from None


def _manifest(folder: Path) -> dict[str, str]:
    from policyrun.outfiles import MANIFEST

    path = folder / MANIFEST
    if not path.is_file():
        raise UsageError(f"--baseline: {folder} has no {MANIFEST}; {_FIX}", code="U060")
    try:
        files = json.loads(path.read_text(encoding="utf-8")).get("files")
    except (OSError, ValueError, AttributeError) as exc:
        raise UsageError(f"--baseline: {path} is not a policyrun manifest ({exc}); {_FIX}", code="U060") from None
    if not isinstance(files, dict) or not all(isinstance(v, str) for v in files.values()):
        raise UsageError(f"--baseline: {path} is not a policyrun manifest (no `files` map); {_FIX}", code="U060")
    return files


def _checked(folder: Path, name: str, listed: dict[str, str]) -> str:
    digest = _digest(folder / name)
    if listed.get(name) != digest:
        raise UsageError(f"--baseline: {folder / name} has sha256 {digest}, but the folder's manifest lists "
                         f"{listed.get(name) or 'no such file'}; it changed after that evaluation wrote it. "
                         "Evaluate the baseline again", code="U060")
    return digest


def load_baseline(folder: Path) -> Baseline:
    """The earlier evaluation in `folder`: its verdict, mode and phase statuses and (with
    facts.json) its fact values, as `baseline.*` reads them. Derived values are not offered: the
    trace summarises large ones, and the facts give them again exactly."""
    from policyrun.trace.model import load_trace

    if not (folder / TRACE).is_file():
        raise UsageError(f"--baseline: {folder} has no {TRACE}; {_FIX}", code="U060")
    listed = _manifest(folder)
    trace_sha = _checked(folder, TRACE, listed)
    trace = load_trace(folder / TRACE)
    variable: dict[str, Any] = {
        "verdict": trace.verdict.id, "exit_code": trace.exit_code, "mode": trace.mode,
        "rulebook": trace.rulebook.name, "generated_at": trace.generated_at or "",
        "phases": {p.phase: {"status": p.status, "reason": p.reason} for p in trace.phases},
    }
    facts_sha: str | None = None
    if FACTS in listed:
        from policyrun.facts import load_facts

        facts_sha = _checked(folder, FACTS, listed)
        snapshot = load_facts(folder / FACTS)
        if snapshot.digest() != trace.facts_sha256:
            raise UsageError(f"--baseline: {folder / FACTS} is not the snapshot {folder / TRACE} was evaluated over "
                             f"(facts sha256 {snapshot.digest()}, the trace says {trace.facts_sha256})", code="U060")
        variable["facts"] = snapshot.values()
    record = {"path": str(folder / TRACE), "sha256": trace_sha, "facts_sha256": facts_sha,
              "verdict": trace.verdict.id, "mode": trace.mode}
    return Baseline(variable, record)
