"""The gated phase interpreter: rulebook + inputs + facts in, trace out. Pure: no I/O.

Order of decisions for each phase (docs/semantics.md has the full rules):
1. not in the mode, or its mode `when` is false  → SKIPPED ("outside mode M")
2. a required earlier phase did not PASS          → SKIPPED ("gated by X=STATUS")
3. a precondition does not hold (or is unknown)   → BLOCKED, naming the condition
4. the first stop condition that holds            → its status (STOPPED by default)
5. evidence checks; the most severe outcome wins  → STOPPED > BLOCKED > FAIL, else PASS
Fail closed: a check that reads a missing or failed fact is UNKNOWN, never SATISFIED, and an
evaluation error is never a pass.

Records are built as plain dicts and validated into the `Trace` model once, at the end: one
pass of pydantic's Rust validator costs far less than constructing thousands of models one by
one, and keeps per-check cost close to the CEL runtime's own.
"""

from __future__ import annotations

import gc
import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from policyrun.errors import EXIT_BLOCKED, EXIT_FAIL, EXIT_OK
from policyrun.expr import (ExprError, compile_condition, evaluate, interpolate_text, is_missing,
                            lookup)
from policyrun.facts import FactsSnapshot
from policyrun.model import MissingPolicy, Phase, Rulebook, on_missing_for
from policyrun.trace import RulebookRef, Trace

Rec = dict[str, Any]  # a phase or check record as a dict, validated once into the Trace

SEVERITY = {"FAIL": 1, "BLOCKED": 2, "STOPPED": 3}
_MAX_READ_BYTES = 16_384  # larger values are summarised in the trace; facts_sha256 pins them


@dataclass
class EvalContext:
    rulebook: Rulebook
    mode: str
    inputs: Mapping[str, Any]
    facts: FactsSnapshot
    locations: Mapping[str, str] = field(default_factory=dict)  # node key → "file:line:col"
    variables: dict[str, Any] = field(default_factory=dict)


@dataclass
class CheckOutcome:
    result: str  # SATISFIED | UNSATISFIED | UNKNOWN
    reads: list[Rec]
    facts: list[str]
    message: str | None
    error: bool = False  # an evaluation error (not a missing fact): never tolerated as UNKNOWN


def evaluate_rulebook(rulebook: Rulebook, *, mode: str, inputs: Mapping[str, Any], facts: FactsSnapshot,
                      rulebook_ref: RulebookRef, locations: Mapping[str, str] | None = None,
                      generated_at: str | None = None) -> Trace:
    # Evaluation allocates many small, acyclic records while a large snapshot stays alive; the
    # cyclic collector's full passes over that snapshot would otherwise cost more than the checks.
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _evaluate(rulebook, mode, inputs, facts, rulebook_ref, locations, generated_at)
    finally:
        if enabled:
            gc.enable()


def _evaluate(rulebook: Rulebook, mode: str, inputs: Mapping[str, Any], facts: FactsSnapshot,
              rulebook_ref: RulebookRef, locations: Mapping[str, str] | None, generated_at: str | None) -> Trace:
    ctx = EvalContext(rulebook, mode, inputs, facts, locations or {})
    phases_var: dict[str, dict[str, Any]] = {}
    ctx.variables = {"facts": facts.values(), "inputs": dict(inputs), "vars": dict(rulebook.vars),
                     "mode": mode, "phases": phases_var}
    selected = _mode_selection(ctx)
    records: list[Rec] = []
    by_id: dict[str, Rec] = {}
    for phase in rulebook.phases:
        record = _phase(ctx, phase, selected, by_id)
        records.append(record)
        by_id[phase.id] = record
        phases_var[phase.id] = {"status": record["status"], "reason": record["reason"]}
    _next_actions(ctx, records, selected)
    exit_code = _exit_code(records, selected)
    verdict = _verdict(ctx, records, exit_code)
    provenance = {pid: facts.facts[pid].provenance for rec in records for chk in rec["evidence"]
                  for pid in chk["facts"] if pid in facts.facts}
    return Trace.model_validate({
        "generated_at": generated_at, "rulebook": rulebook_ref, "mode": mode, "inputs": dict(inputs),
        "vars": dict(rulebook.vars), "facts_sha256": facts.digest(), "phases": records, "verdict": verdict,
        "exit_code": exit_code, "provenance": dict(sorted(provenance.items()))})


# --- mode selection ---------------------------------------------------------------------------

@dataclass
class Selection:
    phases: dict[str, str | None]  # phase id → None when selected, else the reason it is not
    checks: dict[str, Rec]


def _mode_selection(ctx: EvalContext) -> Selection:
    mode = ctx.rulebook.modes[ctx.mode]
    listed = {m.phase: m for m in mode.phases}
    out: dict[str, str | None] = {}
    checks: dict[str, Rec] = {}
    for phase in ctx.rulebook.phases:
        entry = listed.get(phase.id)
        if entry is None:
            out[phase.id] = f"outside mode {ctx.mode}"
            continue
        if entry.when is None:
            out[phase.id] = None
            continue
        outcome = _run_check(ctx, entry.when)
        checks[phase.id] = _record(ctx, f"mode.{phase.id}", "mode_selection", entry.when, outcome,
                                   f"modes.{ctx.mode}.{phase.id}.when")
        if outcome.result == "SATISFIED":
            out[phase.id] = None
        elif outcome.result == "UNSATISFIED":
            out[phase.id] = f"outside mode {ctx.mode}: {entry.when} is false"
        else:
            out[phase.id] = None  # cannot decide: run the phase, which then cannot be skipped silently
    return Selection(out, checks)


# --- one phase --------------------------------------------------------------------------------

def _phase(ctx: EvalContext, phase: Phase, sel: Selection, done: Mapping[str, Rec]) -> Rec:
    loc = ctx.locations.get(f"phase.{phase.id}")

    def record(status: str, reason: str, checks: list[Rec], blocker: str | None = None) -> Rec:
        return {"phase": phase.id, "title": phase.title, "status": status, "reason": reason, "evidence": checks,
                "blocker": blocker, "next_allowed_action": "", "location": loc}

    mode_check = [sel.checks[phase.id]] if phase.id in sel.checks else []
    skipped = sel.phases[phase.id]
    if skipped is not None:
        return record("SKIPPED", skipped, mode_check)

    gate = _gate(ctx, phase, sel, done)
    if gate is not None:
        return record("SKIPPED", gate, mode_check)

    checks: list[Rec] = list(mode_check)
    if mode_check and mode_check[0]["result"] == "UNKNOWN":
        return record("BLOCKED", f"mode selection {mode_check[0]['expression']!r} could not be evaluated",
                      checks, mode_check[0]["message"])

    for i, cond in enumerate(phase.preconditions):
        outcome = _run_check(ctx, cond.check)
        rec = _record(ctx, cond.id or f"precondition[{i}]", "precondition", cond.check, outcome,
                      f"phase.{phase.id}.preconditions.{i}")
        if outcome.result != "SATISFIED":
            msg = cond.message and interpolate_text(cond.message, ctx.variables)
            blocker = msg or f"precondition not met: {cond.check}" + (
                f" ({outcome.message})" if outcome.message else "")
            rec["outcome"] = "BLOCKED"
            checks.append(rec)
            return record("BLOCKED", f"precondition {cond.id or cond.check!r} not met", checks, blocker)
        checks.append(rec)

    for i, stop in enumerate(phase.stop_when):
        outcome = _run_check(ctx, stop.when)
        rec = _record(ctx, stop.id or f"stop_when[{i}]", "stop_when", stop.when, outcome,
                      f"phase.{phase.id}.stop_when.{i}")
        if outcome.result == "SATISFIED":
            rec["outcome"] = stop.status
            checks.append(rec)
            return record(stop.status, f"stop condition {stop.id or stop.when!r} holds", checks,
                          interpolate_text(stop.blocker, ctx.variables))
        if outcome.result == "UNKNOWN":
            policy = _missing_policy(ctx, stop.on_missing, outcome)
            if policy != "UNKNOWN":
                rec["outcome"] = policy
                checks.append(rec)
                return record(policy, f"stop condition {stop.id or stop.when!r} could not be evaluated",
                              checks, f"cannot rule out stop condition {stop.when!r}: {outcome.message}")
        checks.append(rec)

    worst: tuple[int, str, str] | None = None  # (severity, status, blocker)
    for ev in phase.evidence:
        path = f"phase.{phase.id}.evidence.{ev.id}"
        if ev.applies_when is not None:
            gate_outcome = _run_check(ctx, ev.applies_when)
            if gate_outcome.result == "UNSATISFIED":
                checks.append(_record(ctx, ev.id, "evidence", ev.check,
                                      CheckOutcome("NOT_APPLICABLE", gate_outcome.reads, gate_outcome.facts,
                                                   f"applies_when is false: {ev.applies_when}"), path))
                continue
            if gate_outcome.result == "UNKNOWN":
                # Whether the check applies is itself unknown: treat as a missing fact.
                outcome = gate_outcome
                outcome.message = f"cannot tell whether it applies ({ev.applies_when}): {outcome.message}"
            else:
                outcome = _run_check(ctx, ev.check)
        else:
            outcome = _run_check(ctx, ev.check)
        rec = _record(ctx, ev.id, "evidence", ev.check, outcome, path)
        status: str | None = None
        blocker = ""
        if outcome.result == "UNSATISFIED":
            status = ev.on_fail
            blocker = (interpolate_text(ev.message, ctx.variables) if ev.message
                       else f"check {ev.id} failed: {ev.check}")
        elif outcome.result == "UNKNOWN":
            policy = _missing_policy(ctx, ev.on_missing, outcome)
            if policy != "UNKNOWN":
                status = policy
                blocker = f"evidence {ev.id} could not be established: {outcome.message}"
        if status is not None:
            rec["outcome"] = status
            if worst is None or SEVERITY[status] > worst[0]:
                worst = (SEVERITY[status], status, blocker)
        checks.append(rec)
    if worst is not None:
        failing = [f"{c['id']} {c['result']}" for c in checks
                   if c["kind"] == "evidence" and c["outcome"] == worst[1]]
        return record(worst[1], f"evidence {', '.join(failing)}", checks, worst[2])
    unknown = [c["id"] for c in checks if c["kind"] == "evidence" and c["result"] == "UNKNOWN"]
    reason = "all evidence satisfied" if not unknown else \
        f"evidence satisfied; UNKNOWN allowed in mode {ctx.mode}: {', '.join(unknown)}"
    return record("PASS", reason, checks)


def _gate(ctx: EvalContext, phase: Phase, sel: Selection, done: Mapping[str, Rec]) -> str | None:
    """Why an earlier required phase keeps this one from starting, or None."""
    if phase.requires is None:
        required = [pid for pid in done if sel.phases.get(pid) is None]
    else:
        required = [pid for pid in phase.requires if pid in done]
    for pid in required:
        status, reason = done[pid]["status"], done[pid]["reason"]
        if status == "PASS":
            continue
        if status == "SKIPPED" and sel.phases.get(pid) is not None:
            continue  # deliberately not run in this mode; nothing to wait for
        if status == "SKIPPED":
            # Name the phase at the root of the chain, not the intermediate skip.
            return reason if reason.startswith("gated by ") else f"gated by {pid}=SKIPPED ({reason})"
        return f"gated by {pid}={status}"
    return None


def _missing_policy(ctx: EvalContext, policy: Any, outcome: CheckOutcome) -> MissingPolicy:
    if outcome.error:
        return "BLOCKED"  # an evaluation error is a defect, not an evidence gap
    mode = ctx.rulebook.modes[ctx.mode]
    return on_missing_for(policy, ctx.mode, mode.on_missing)


# --- checks -----------------------------------------------------------------------------------

def _run_check(ctx: EvalContext, source: str) -> CheckOutcome:
    try:
        compiled = compile_condition(source)
    except ExprError as exc:  # lint rejects these; guard so evaluation never crashes
        return CheckOutcome("UNKNOWN", [], [], f"expression error: {exc.message}", error=True)
    reads = [_read(ctx, path) for path in compiled.reads]
    fact_ids = sorted(compiled.fact_ids())
    missing = [r for r in reads if r.get("missing")]
    if missing:
        # One line per missing fact, however many of its fields the check reads.
        by_fact: dict[str, str] = {}
        for r in missing:
            root = ".".join(r["path"].split(".")[:2])
            by_fact.setdefault(root, r.get("error") or "not collected")
        why = "; ".join(f"{root}: {err}" for root, err in by_fact.items())
        return CheckOutcome("UNKNOWN", reads, fact_ids, f"missing fact {why}")
    outcome = evaluate(compiled, ctx.variables)
    if not outcome.ok:
        text = outcome.error or ""
        if (found := _NOT_FOUND.search(text)) is not None:
            return CheckOutcome("UNKNOWN", reads, fact_ids, f'missing value: no key "{found.group(1)}"')
        return CheckOutcome("UNKNOWN", reads, fact_ids, f"evaluation error: {_short(text)}", error=True)
    if not isinstance(outcome.value, bool):
        return CheckOutcome("UNKNOWN", reads, fact_ids,
                            f"evaluation error: condition produced {type(outcome.value).__name__}, not a bool",
                            error=True)
    return CheckOutcome("SATISFIED" if outcome.value else "UNSATISFIED", reads, fact_ids, None)


# The CEL runtime's wording for reading a key or field that is not there.
_NOT_FOUND = re.compile(r'(?:Key not found in map|No such key)\s*:?\s*"?(.*?)"?\s*$')


def _short(text: str) -> str:
    return text.replace("NOT_FOUND: ", "").replace("UNKNOWN: ", "").replace("INVALID_ARGUMENT: ", "").strip()


def _read(ctx: EvalContext, path: str) -> Rec:
    parts = path.split(".")
    if parts[0] == "facts" and len(parts) > 1:
        fact = ctx.facts.facts.get(parts[1])
        if fact is None:
            return {"path": path, "missing": True, "error": "not collected"}
        if fact.error is not None:
            return {"path": path, "missing": True, "error": f"{fact.error.code}: {fact.error.message}"}
    if parts[0] == "phases" and len(parts) > 1 and parts[1] not in ctx.variables["phases"]:
        return {"path": path, "missing": True, "error": "phase not evaluated yet"}
    value = lookup(ctx.variables, path)
    if is_missing(value):
        # A field absent inside a collected fact: not an error of collection, let CEL decide
        # (`has()` and optional chaining may handle it); record that it is absent.
        return {"path": path, "error": "absent"}
    return {"path": path, "value": _summarise(value)}


_CONTAINERS = (list, dict)


def _summarise(value: Any) -> Any:
    kind = type(value)
    if kind is not list and kind is not dict:
        return value
    items = value.values() if kind is dict else value
    if len(value) <= 64 and not any(type(v) in _CONTAINERS for v in items):
        return value  # small and flat: cheaper to keep than to measure
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    if len(text) <= _MAX_READ_BYTES:
        return value
    type_name = type(value).__name__
    size = len(value) if isinstance(value, (list, dict)) else len(text)
    return {"truncated": True, "type": type_name, "length": size,
            "sha256": hashlib.sha256(text.encode()).hexdigest()}


def _record(ctx: EvalContext, check_id: str, kind: str, expression: str, outcome: CheckOutcome,
            loc_key: str) -> Rec:
    return {"id": check_id, "kind": kind, "expression": expression, "result": outcome.result, "outcome": None,
            "reads": outcome.reads, "facts": outcome.facts, "message": outcome.message,
            "location": ctx.locations.get(loc_key)}


# --- after all phases -------------------------------------------------------------------------

def _next_actions(ctx: EvalContext, records: list[Rec], sel: Selection) -> None:
    runnable = [r["phase"] for r in records if sel.phases.get(r["phase"]) is None]
    for rec in records:
        phase = ctx.rulebook.phase(rec["phase"])
        assert phase is not None
        template = phase.next.get(rec["status"])
        rec["next_allowed_action"] = (interpolate_text(template, ctx.variables) if template
                                      else _default_action(ctx, rec, runnable, sel))


def _default_action(ctx: EvalContext, rec: Rec, runnable: list[str], sel: Selection) -> str:
    status, pid = rec["status"], rec["phase"]
    if status == "PASS":
        later = runnable[runnable.index(pid) + 1:] if pid in runnable else []
        return f"proceed to {later[0]}" if later else f"none: mode {ctx.mode} is complete"
    if status == "SKIPPED":
        if sel.phases.get(pid) is not None:
            return f"none in mode {ctx.mode}"
        return f"none until {rec['reason'].removeprefix('gated by ').split('=')[0].split(' ')[0]} passes"
    # The blocker has its own field; the action says what to do about it without repeating it.
    if status == "FAIL":
        return f"fix what {pid} reports, then evaluate again"
    if status == "STOPPED":
        return "stop here and report the decision the blocker asks for"
    return f"resolve {pid}'s blocker, then evaluate again"


def _exit_code(records: list[Rec], sel: Selection) -> int:
    for rec in records:
        if sel.phases.get(rec["phase"]) is not None or rec["status"] in ("PASS", "SKIPPED"):
            continue
        return EXIT_FAIL if rec["status"] == "FAIL" else EXIT_BLOCKED
    return EXIT_OK


def _verdict(ctx: EvalContext, records: list[Rec], exit_code: int) -> Rec:
    for verdict in ctx.rulebook.verdicts:
        outcome = _run_check(ctx, verdict.when)
        if outcome.result == "SATISFIED":
            return {"id": verdict.id, "summary": interpolate_text(verdict.summary, ctx.variables),
                    "expression": verdict.when}
    if exit_code == EXIT_OK:
        return {"id": "complete", "summary": f"every phase of mode {ctx.mode} passed"}
    first = next(r for r in records if r["status"] in ("FAIL", "BLOCKED", "STOPPED"))
    return {"id": "incomplete", "summary": f"{first['phase']} is {first['status']}: {first['blocker']}"}
