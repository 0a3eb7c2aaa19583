"""One plain-data view of a trace, shared by every report.

Templates (ours and rulebooks') render this view, never the trace models directly: plain dicts,
lists and strings are all a sandboxed template needs, and the view is where the rulebook-agnostic
sections are derived. Nothing here evaluates an expression again; every value comes from
the reads of the phases' checks (`trace.phases[]` and `PhaseRecord.checks()`) and
`trace.provenance`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from policyrun.checkid import check_label
from policyrun.facts import FactError, Provenance
from policyrun.model import STATUSES
from policyrun.model import worst_status
from policyrun.render.records import check_probes, probe_of
from policyrun.trace.model import CheckRecord, PhaseRecord, Read, Trace, waiver_text

FAILING = ("FAIL", "BLOCKED", "STOPPED")
# Probe families (the part of a probe kind before the first dot) whose facts describe the
# machine and software stack, and those whose facts can only come from real hardware.
STACK_FAMILIES = frozenset({"gpu", "python", "toolchain"})
HARDWARE_FAMILIES = frozenset({"gpu"})
# Full git object names: SHA-1 (40) or SHA-256 (64) hex digits.
_SHA = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")
_STACK_ROWS_PER_PROBE = 16

STATUS_ICONS = {"PASS": "✅", "WARN": "⚠️", "FAIL": "❌", "BLOCKED": "⛔", "STOPPED": "🛑", "SKIPPED": "⏭️"}
RESULT_ICONS = {"SATISFIED": "✓", "UNSATISFIED": "✗", "UNKNOWN": "?", "NOT_APPLICABLE": "–",
                "NOT_EVALUATED": "·"}


def format_value(value: Any, limit: int | None = 160) -> str:
    """A fact value as compact JSON, cut to `limit` characters with the full length noted."""
    text = json.dumps(value, ensure_ascii=False, separators=(", ", ": "), default=str)
    if limit is not None and len(text) > limit:
        return f"{text[:limit - 1]}… ({len(text)} chars)"
    return text


def format_read(read: Read, limit: int | None = 160) -> str:
    if read.missing or read.error:
        why = f": {read.error}" if read.error else ""
        return f"{read.path} is missing{why}"
    return f"{read.path} = {format_value(read.value, limit)}"



def family(kind: str) -> str:
    return kind.split(".", 1)[0]


def is_decisive(check: CheckRecord) -> bool:
    """Whether a person asking "why not PASS?" needs to see this check.

    A check that imposed a status decides the phase; besides those, anything not SATISFIED or
    NOT_APPLICABLE is shown, except a stop condition that simply did not fire.
    """
    if check.outcome is not None:
        return True
    if check.kind == "stop_when" and check.result in ("UNSATISFIED", "SATISFIED"):
        return False
    return check.result not in ("SATISFIED", "NOT_APPLICABLE")



def did_not_fire(check: CheckRecord) -> bool:
    """A stop condition whose `when` was false (recorded UNSATISFIED): nothing happened, so a
    report must not show it as a failure beside the check that decided the phase."""
    return check.kind == "stop_when" and check.result == "UNSATISFIED" and check.outcome is None



def provenance_view(prov: Provenance) -> dict[str, Any]:
    repo = None
    if prov.repo is not None:
        repo = f"{prov.repo.path} @ {prov.repo.head}" if prov.repo.head else prov.repo.path
    error = f"{prov.error.code}: {prov.error.message}" if prov.error else None
    duration = f"{prov.duration_s:.3g} s" if prov.duration_s is not None else None
    parts = [prov.kind]
    if prov.commands:
        parts.append("ran " + "; ".join(prov.commands))
    if prov.sources:
        parts.append("read " + ", ".join(prov.sources))
    if repo:
        parts.append(f"repo {repo}")
    if error:
        parts.append(f"error {error}")
    return {
        "probe": prov.probe,
        "kind": prov.kind,
        "params": format_value(prov.params, None) if prov.params else "",
        "commands": list(prov.commands),
        # The last command is the one whose output became the fact (git probes first locate the
        # repository, read its config and so on); reports show it and fold the others.
        "command": prov.commands[-1] if prov.commands else None,
        "earlier_commands": list(prov.commands[:-1]),
        "repo": repo,
        "sources": list(prov.sources),
        "error": error,
        "duration": duration,
        "started_at": prov.started_at,
        "summary": "; ".join(parts),
    }


def _missing_provenance(probe: str) -> dict[str, Any]:
    return {"probe": probe, "kind": "(no provenance)", "params": "", "commands": [], "command": None,
            "earlier_commands": [], "repo": None, "sources": [],
            "error": None, "duration": None, "started_at": None,
            "summary": "no provenance recorded in the trace"}


def _check_view(check: CheckRecord, provenance: Mapping[str, dict[str, Any]]) -> dict[str, Any]:
    return {
        "id": check.id,
        "kind": check.kind,
        "expression": check.expression,
        "result": check.result,
        "result_icon": RESULT_ICONS.get(check.result, "?"),
        "outcome": check.outcome,
        # A waived check imposed nothing: every report says WAIVED, by whom and until when.
        "waived": waiver_text(check.waiver) if check.waiver else None,
        "message": check.message,
        "location": check.location,
        "decisive": is_decisive(check),
        "did_not_fire": did_not_fire(check),
        "reads": [{"path": r.path, "value": None if r.missing else format_value(r.value),
                   "full_value": None if r.missing else format_value(r.value, 20000),
                   "missing": r.missing, "error": r.error, "probe": probe_of(r.path),
                   "text": format_read(r)} for r in check.reads],
        "sources": [provenance.get(p) or _missing_provenance(p) for p in check_probes(check)],
    }


def record_text(phase: PhaseRecord) -> str:
    """The workflow's phase record (`phase / status / evidence / blocker / next_allowed_action`)."""
    lines = [f"phase: {phase.phase}", f"status: {phase.status}"]
    checks = list(phase.checks())
    if checks:
        # The workflow's record calls every check of the phase its evidence.
        lines.append("evidence:")
        for check in checks:
            outcome = f" -> {check.outcome}" if check.outcome else ""
            reads = "; ".join(format_read(r, 72) for r in check.reads)
            lines.append(f"  - {check_label(check.kind, check.id)}: {check.result}{outcome}"
                         + (f"; {reads}" if reads else ""))
    else:
        lines.append("evidence: none recorded")
    lines.append(f"blocker: {phase.blocker or 'none'}")
    lines.append(f"next_allowed_action: {phase.next_allowed_action}")
    return "\n".join(lines)


def _phase_view(phase: PhaseRecord, index: int, provenance: Mapping[str, dict[str, Any]],
                hardware: bool) -> dict[str, Any]:
    checks = [_check_view(c, provenance) for c in phase.checks()]
    return {
        "index": index,
        "id": phase.phase,
        "title": phase.title,
        "status": phase.status,
        "icon": STATUS_ICONS[phase.status],
        "reason": phase.reason,
        "blocker": phase.blocker,
        "next_allowed_action": phase.next_allowed_action,
        "location": phase.location,
        "checks": checks,
        "decisive": [c for c in checks if c["decisive"]],
        "gaps": [c["id"] for c in checks if c["result"] == "UNKNOWN"],
        "record": record_text(phase),
        "hardware": hardware,
        "failing": phase.status in FAILING,
    }


def _walk(value: Any, path: str, depth: int = 0) -> Iterator[tuple[str, Any, Mapping[str, Any] | None]]:
    """Scalar leaves under `value` (with the mapping that holds each), a few levels deep."""
    if isinstance(value, Mapping) and depth < 4:
        for key, item in value.items():
            if isinstance(item, (Mapping, list)):
                yield from _walk(item, f"{path}.{key}", depth + 1)
            else:
                yield f"{path}.{key}", item, value
    elif isinstance(value, list) and depth < 4:
        for i, item in enumerate(value[:32]):
            yield from _walk(item, f"{path}[{i}]", depth + 1)
    else:
        yield path, value, None


def _all_reads(trace: Trace) -> Iterator[tuple[PhaseRecord, CheckRecord, Read]]:
    for phase in trace.phases:
        for check in phase.checks():
            for read in check.reads:
                yield phase, check, read


def _identities(trace: Trace, provenance: Mapping[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """Every full SHA a check read, and every repository HEAD a probe recorded."""
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for _, _, read in _all_reads(trace):
        if read.missing:
            continue
        for path, value, holder in _walk(read.value, read.path):
            if isinstance(value, str) and _SHA.match(value):
                ref = holder.get("ref") if holder else None
                probe = probe_of(read.path)
                source = (provenance[probe]["summary"] if probe is not None and probe in provenance
                          else read.path.split(".")[0])
                rows.setdefault((path, value), {"what": path, "sha": value,
                                                "ref": ref if isinstance(ref, str) else None,
                                                "source": source})
    for probe, prov in sorted(trace.provenance.items()):
        if prov.repo is not None and prov.repo.head and _SHA.match(prov.repo.head):
            key = (f"repo {prov.repo.path}", prov.repo.head)
            rows.setdefault(key, {"what": f"HEAD of {prov.repo.path}", "sha": prov.repo.head, "ref": None,
                                  "source": f"{probe} ({prov.kind})"})
    return list(rows.values())


def _stack(trace: Trace) -> list[dict[str, Any]]:
    """Scalar facts read from stack probes (GPU, Python, toolchain), grouped by probe."""
    rows: dict[str, dict[str, Any]] = {}
    per_probe: dict[str, int] = {}
    for _, _, read in _all_reads(trace):
        probe = probe_of(read.path)
        prov = trace.provenance.get(probe) if probe else None
        if prov is None or family(prov.kind) not in STACK_FAMILIES:
            continue
        if read.missing:
            rows.setdefault(read.path, {"probe": probe, "kind": prov.kind, "path": read.path,
                                        "value": f"missing{': ' + read.error if read.error else ''}"})
            continue
        for path, value, _ in _walk(read.value, read.path):
            if path in rows or per_probe.get(probe or "", 0) >= _STACK_ROWS_PER_PROBE:
                continue
            per_probe[probe or ""] = per_probe.get(probe or "", 0) + 1
            rows[path] = {"probe": probe, "kind": prov.kind, "path": path, "value": format_value(value, 120)}
    return sorted(rows.values(), key=lambda r: (r["probe"], r["path"]))


def _table(value: Any, source: str) -> dict[str, Any] | None:
    """A list of mappings as columns and rows; `{"columns", "rows"}` passes through."""
    if isinstance(value, Mapping) and "columns" in value and "rows" in value:
        return {"columns": [str(c) for c in value["columns"]],
                "rows": [[_cell(c) for c in row] for row in value["rows"]], "source": source}
    if isinstance(value, list) and value and all(isinstance(r, Mapping) for r in value):
        columns: list[str] = []
        for row in value:
            columns.extend(str(k) for k in row if str(k) not in columns)
        return {"columns": columns, "rows": [[_cell(row.get(c)) for c in columns] for row in value],
                "source": source}
    return None


def _cell(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else format_value(value, None)


def _impact_matrix(trace: Trace, context: Mapping[str, Any]) -> dict[str, Any] | None:
    if "impact_matrix" in context:
        return _table(context["impact_matrix"], "template context")
    for _, check, read in _all_reads(trace):
        if not read.missing and read.path.rsplit(".", 1)[-1].endswith("impact_matrix"):
            table = _table(read.value, f"{read.path} (read by {check.id})")
            if table:
                return table
    return None


def _gaps(trace: Trace) -> list[dict[str, Any]]:
    gaps = []
    for phase in trace.phases:
        for check in phase.checks():
            if check.result != "UNKNOWN":
                continue
            missing = [format_read(r) for r in check.reads if r.missing or r.error]
            explained = {probe_of(r.path) for r in check.reads if r.error}
            errors = [f"fact {p}: {err.code}: {err.message}" for p in check_probes(check)
                      if p not in explained and (err := _fact_error(trace, p)) is not None]
            gaps.append({"phase": phase.phase, "status": phase.status, "check": check.id, "kind": check.kind,
                         "expression": check.expression, "outcome": check.outcome, "missing": missing,
                         "errors": errors, "message": check.message})
    return gaps


def _fact_error(trace: Trace, probe: str) -> FactError | None:
    prov = trace.provenance.get(probe)
    return prov.error if prov else None


def _reads_hardware(phase: PhaseRecord, trace: Trace) -> list[str]:
    probes = {p for c in phase.checks() for p in check_probes(c)}
    return sorted(f"{p} ({trace.provenance[p].kind})" for p in probes
                  if p in trace.provenance and family(trace.provenance[p].kind) in HARDWARE_FAMILIES)


def _readiness(phases: list[dict[str, Any]], trace: Trace, hardware_phases: Iterable[str],
               evidence: list[dict[str, Any]]) -> dict[str, list[Any]]:
    """Readiness split as the workflow asks: hardware-validated, shared-code, unverified claims.
    The one model every report (md, HTML, a rulebook's template) shows; a phase that passed only
    with an exception (policyrun.trace.exceptions) is unverified."""
    declared = set(hardware_phases)
    out: dict[str, list[Any]] = {"hardware_validated": [], "shared_code": [], "unverified": []}
    for view, record, ev in zip(phases, trace.phases, evidence, strict=True):
        item = {"phase": view["id"], "title": view["title"], "status": view["status"], "evidence": ev["label"]}
        hardware = _reads_hardware(record, trace)
        if view["status"] != "PASS":
            why = view["blocker"] or view["reason"]
            out["unverified"].append({**item, "why": f"{view['status']}: {why}"})
        elif view["gaps"]:
            out["unverified"].append({**item, "why": "PASS with evidence gaps: "
                                      + ", ".join(f"{g} UNKNOWN" for g in view["gaps"])})
        elif ev["label"] == "unverified":
            out["unverified"].append({**item, "why": f"PASS with exceptions: {ev['why']}"})
        elif (view["id"] in declared) if declared else bool(hardware):
            # A rulebook that declares its hardware phases (report.hardware_phases) knows better than
            # "reads a GPU fact": a phase may record the GPU without being a claim about it.
            why = ("declared a hardware phase" + (": hardware facts " + ", ".join(hardware) if hardware else "")
                   if declared else "hardware facts: " + ", ".join(hardware))
            out["hardware_validated"].append({**item, "why": why})
        else:
            out["shared_code"].append({**item, "why": "PASS on facts that need no hardware"})
    return out


def build_view(trace: Trace, context: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The `report` variable of every template; see docs/reports.md for its fields."""
    from policyrun.render.mermaid import render_mermaid
    from policyrun.render.summary import build_summary
    from policyrun.trace.exceptions import KIND_LABELS, summary_line, trace_exceptions

    context = context or {}
    provenance = {p: provenance_view(v) for p, v in sorted(trace.provenance.items())}
    hardware_ids = {p.phase for p in trace.phases if _reads_hardware(p, trace)}
    phases = [_phase_view(p, i, provenance, p.phase in hardware_ids) for i, p in enumerate(trace.phases, 1)]
    counts = {s: sum(1 for p in trace.phases if p.status == s) for s in STATUSES}
    exceptions = trace_exceptions(trace)
    identities = _identities(trace, provenance)
    summary = build_summary(trace, exceptions, identities)
    return {
        "title": f"{trace.rulebook.name} · {trace.mode}",
        "rulebook": trace.rulebook.model_dump(mode="json"),
        "mode": trace.mode,
        "generated_at": trace.generated_at,
        "facts_sha256": trace.facts_sha256,
        "verdict": trace.verdict.model_dump(mode="json"),
        "exit_code": trace.exit_code,
        "worst": worst_status(s for s in counts if counts[s]),
        "counts": counts,
        "total": len(trace.phases),
        "inputs": [{"name": k, "value": format_value(v, None)} for k, v in sorted(trace.inputs.items())],
        "vars": [{"name": k, "value": format_value(v, 200)} for k, v in sorted(trace.vars.items())],
        "phases": phases,
        "summary": summary,
        "identities": identities,
        "stack": _stack(trace),
        "impact_matrix": _impact_matrix(trace, context),
        "gaps": _gaps(trace),
        "readiness": _readiness(phases, trace, context.get("hardware_phases", ()), summary["phases"]),
        "provenance": list(provenance.values()),
        "exceptions": [{"kind": e.kind, "phase": e.phase, "check": e.check, "detail": e.detail,
                        "label": KIND_LABELS[e.kind], "text": e.text()} for e in exceptions],
        "exceptions_summary": summary_line(exceptions),
        "mermaid": render_mermaid(trace),
    }
