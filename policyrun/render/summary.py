"""The one-page summary every human report opens with: what the verdict rests on.

Each phase is labelled by the kind of evidence it rests on (policyrun.evidencekinds):
- *measured*: every fact its checks read was measured by policyrun (git objects, ASTs, NVML,
  processes, the interpreter it ran);
- *attested*: some fact is a file a person or an agent supplied (an attestation, a JUnit or
  results file), named with its author field and sha256, or the phase read only inputs;
- *unverified*: the phase did not run in this mode (SKIPPED by a `when` or gated), or it carries
  an exception (a waiver, a tolerated UNKNOWN, stale facts, a check an overlay disabled).
A phase outside the mode is listed as such. The verdict's tone follows what it means, not the
exit code alone: a verdict reached with exceptions, or with phases of the mode that never ran, is
`partial`, never a green PASS.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from policyrun.evidencekinds import evidence_of
from policyrun.render.records import check_probes, outside_mode
from policyrun.trace.model import PhaseRecord, Trace
from policyrun.trace.exceptions import TraceException

TONES = {"pass": "PASS", "partial": "PARTIAL", "fail": "FAIL", "blocked": "BLOCKED"}


def phase_evidence(trace: Trace, phase: PhaseRecord, exceptions: list[TraceException]) -> dict[str, Any]:
    probes = sorted({p for c in phase.checks() for p in check_probes(c)})
    kinds = {p: trace.provenance[p].kind for p in probes if p in trace.provenance}
    files = [f.model_dump(mode="json") for f in trace.evidence_files if f.probe in kinds]
    stale = {s.probe for s in trace.stale_facts} & set(probes)
    mine = [e for e in exceptions if e.phase == phase.phase]
    row: dict[str, Any] = {"id": phase.phase, "title": phase.title, "status": phase.status, "files": files,
                           "measured": sorted(p for p, k in kinds.items() if evidence_of(k) == "measured"),
                           "supplied": sorted(p for p, k in kinds.items() if evidence_of(k) == "supplied")}
    if phase.status == "SKIPPED":
        if outside_mode(phase, trace.mode):
            return {**row, "label": "outside mode", "why": "not a phase of this mode"}
        return {**row, "label": "unverified", "why": f"did not run: {phase.reason}"}
    if mine or stale:
        why = [e.text() for e in mine] + [f"stale facts: {p}" for p in sorted(stale)]
        return {**row, "label": "unverified", "why": "; ".join(why)}
    if row["supplied"]:
        if files:
            named = ", ".join(f"{f['path']} (sha256 {f['sha256'][:12]}…" + (f", {f['author']}" if f.get("author")
                                                                               else "") + ")" for f in files)
            return {**row, "label": "attested", "why": f"rests on supplied files: {named}"}
        named = ", ".join(f"{p} ({kinds[p]})" for p in row["supplied"])
        return {**row, "label": "attested", "why": f"rests on supplied evidence (no file sha256 recorded): {named}"}
    if not kinds:
        return {**row, "label": "attested", "why": "read no measured fact (inputs and rulebook values only)"}
    return {**row, "label": "measured", "why": "measured by policyrun: " + ", ".join(sorted(set(kinds.values())))}


def verdict_tone(trace: Trace, phases: list[dict[str, Any]], exceptions: list[TraceException]) -> dict[str, str]:
    """`pass` (green) only when the exit code is 0, no exception was needed and every phase of the
    mode ran; `partial` when the exit code is 0 otherwise; `fail` (exit 1) or `blocked` (exit 2)."""
    if trace.exit_code == 1:
        tone, why = "fail", "a required phase failed"
    elif trace.exit_code != 0:
        tone, why = "blocked", "a required phase is blocked or stopped"
    elif exceptions or any(p["label"] == "unverified" for p in phases):
        not_run = [p["id"] for p in phases if p["label"] == "unverified" and p["status"] == "SKIPPED"]
        parts = ([f"{len(exceptions)} exception(s)"] if exceptions else []) + (
            [f"{len(not_run)} phase(s) of the mode did not run"] if not_run else [])
        tone, why = "partial", "exit code 0, but " + " and ".join(parts)
    else:
        tone, why = "pass", "every phase of the mode ran and passed without exceptions"
    return {"tone": tone, "badge": TONES[tone], "why": why}


def commits(trace: Trace, identities: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The commits the verdict is about: each repository HEAD a probe recorded, then each named ref
    a check read resolved."""
    out: list[dict[str, Any]] = []
    for prov in trace.provenance.values():
        if prov.repo is not None and prov.repo.head:
            row = {"what": f"HEAD of {prov.repo.path}", "sha": prov.repo.head}
            if row not in out:
                out.append(row)
    for ident in identities:
        if ident.get("ref"):
            row = {"what": f"{ident['ref']} ({ident['what']})", "sha": ident["sha"]}
            if row not in out:
                out.append(row)
    return out


def build_summary(trace: Trace, exceptions: list[TraceException],
                  identities: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    phases = [phase_evidence(trace, p, exceptions) for p in trace.phases]
    counts = {label: sum(1 for p in phases if p["label"] == label)
              for label in ("measured", "attested", "unverified", "outside mode")}
    return {"verdict": verdict_tone(trace, phases, exceptions), "phases": phases,
            "in_mode": [p for p in phases if p["label"] != "outside mode"], "counts": counts,
            "commits": commits(trace, identities),
            "files": [f.model_dump(mode="json") for f in trace.evidence_files],
            "run": trace.run.model_dump(mode="json") if trace.run else None}


def summary_lines(summary: Mapping[str, Any]) -> list[str]:
    """The summary as plain text lines (explain)."""
    v = summary["verdict"]
    lines = [f"summary: {v['badge']} — {v['why']}"]
    for p in summary["in_mode"]:
        lines.append(f"  {p['label']:<10} {p['id']} {p['status']}: {p['why']}")
    lines += [f"  commit     {c['what']} {c['sha']}" for c in summary["commits"]]
    lines += [f"  file       {f['path']} sha256 {f['sha256']}" + (f" ({f['author']})" if f.get("author") else "")
              for f in summary["files"]]
    if run := summary["run"]:
        lines.append(f"  run        by {run['user'] or '?'} on {run['hostname'] or '?'}, policyrun "
                     f"{run['policyrun_version']}, Python {run['python_version']}, {run['platform']}")
    return lines
