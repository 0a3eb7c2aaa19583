"""One phase of the gated interpreter: its preconditions, stop conditions, evidence and waivers,
and the status and reason they give.

A phase the mode does not select, or that an earlier phase gates (policyrun.evaluate.gating), is
SKIPPED before any of its checks run. The rules are in policyrun.evaluate.interpreter's docstring
and docs/semantics.md.

Kept apart from the loop over phases (policyrun.evaluate.interpreter) and from what is settled
once a phase is decided (policyrun.evaluate.settle): this is where check outcomes become a phase's
status.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policyrun.checkid import CheckId, location_key, part_key, phase_key
from policyrun.evaluate.expreval import CheckOutcome, EvalContext
from policyrun.evaluate.expreval import record_check as _record
from policyrun.evaluate.expreval import run_check as _run_check
from policyrun.evaluate.expreval import run_value as _run_value
from policyrun.evaluate.expreval import summarise as _summarise
from policyrun.evaluate.gating import Selection, gated_by
from policyrun.evaluate.templates import at_least_blocked, check_next, render_message, render_violations
from policyrun.language.violationrows import row_problem
from policyrun.model import SEVERITY, MissingPolicy, Phase, RowSpec, Status, on_missing_for
from policyrun.trace.records import CheckRec, PhaseRec


def run_phase(ctx: EvalContext, phase: Phase, sel: Selection, done: Mapping[str, PhaseRec],
           first_block: str | None) -> PhaseRec:
    loc = ctx.locations.get(phase_key(phase.id))
    mode_check = [sel.checks[phase.id]] if phase.id in sel.checks else []

    def record(status: Status, reason: str, checks: list[CheckRec], blocker: str | None = None,
               next_action: str | None = None) -> PhaseRec:
        blockers = [c["message"] for c in checks if c["outcome"] is not None and c["message"]]
        # `checks` is in evaluation order, each kind after the one before (mode selection,
        # preconditions, stop conditions, evidence): each goes to the field of its kind.
        return {"phase": phase.id, "title": phase.title, "status": status, "reason": reason,
                "mode_check": mode_check[0] if mode_check else None,
                "preconditions": [c for c in checks if c["kind"] == "precondition"],
                "stop_when": [c for c in checks if c["kind"] == "stop_when"],
                "evidence": [c for c in checks if c["kind"] == "evidence"], "next_action_check": None,
                "blocker": blocker, "blockers": blockers if len(blockers) > 1 else [],
                "disabled": [{"id": d.id, "reason": d.reason} for d in phase.disabled],
                "next_allowed_action": next_action or "", "location": loc}

    skipped = sel.phases[phase.id]
    if skipped is not None:
        return record("SKIPPED", skipped, mode_check)

    gate = gated_by(ctx, phase, sel, done, first_block)
    if gate is not None:
        return record("SKIPPED", gate, mode_check)

    checks: list[CheckRec] = list(mode_check)
    if mode_check and mode_check[0]["result"] == "UNKNOWN":
        mode_check[0]["outcome"] = "BLOCKED"
        return record("BLOCKED", f"mode selection {mode_check[0]['expression']!r} could not be evaluated",
                      checks, mode_check[0]["message"])

    for i, cond in enumerate(phase.preconditions):
        cid = CheckId.listed(phase.id, "precondition", cond.id, i)
        key = location_key(cid, i)
        outcome, violations = _judge(ctx, cond.check, cond.violations, key, empty_holds=True, row=cond.row)
        rec = _record(ctx, cid.id, "precondition", cond.condition, outcome, key)
        _keep_violations(rec, violations, cond.row)
        checks.append(rec)
        if outcome.result != "SATISFIED":
            msg = cond.message and render_message(ctx, cond.message, rec, violations, cond.row)
            if not msg and violations is not None and outcome.result == "UNSATISFIED":
                msg = f"precondition {cond.id + ' ' if cond.id else ''}not met: " \
                      f"{render_violations(violations, cond.row)}"
            rec["message"] = msg or f"precondition not met: {cond.condition}" + (
                f" ({outcome.message})" if outcome.message else "")
            rec["outcome"] = "BLOCKED"
            return record("BLOCKED", f"precondition {cond.id or cond.condition!r} not met", checks, rec["message"])

    # The first stop condition that holds (or cannot be ruled out) decides the status; every
    # evidence item is still evaluated and recorded, so the trace shows the whole phase.
    stopped: tuple[Status, str, str | None, str | None] | None = None  # (status, reason, blocker, next action)
    for i, stop in enumerate(phase.stop_when):
        cid = CheckId.listed(phase.id, "stop_when", stop.id, i)
        key = location_key(cid, i)
        outcome, violations = _judge(ctx, stop.when, stop.violations, key, empty_holds=False, row=stop.row)
        rec = _record(ctx, cid.id, "stop_when", stop.condition, outcome, key)
        _keep_violations(rec, violations, stop.row)
        checks.append(rec)
        name = stop.id or stop.condition
        if outcome.result == "SATISFIED":
            rec["message"] = render_message(ctx, stop.blocker, rec, violations, stop.row)
            if stop.id and _waive(ctx, phase.id, stop.id, rec):
                continue
            imposed: Status = at_least_blocked(stop.status) if rec.get("_unavailable") else stop.status
            rec["outcome"] = imposed
            stopped = (imposed, f"stop condition {name!r} holds", rec["message"],
                       check_next(ctx, stop.next, violations, rec, stop.row))
            break
        if outcome.result == "UNKNOWN":
            policy = _missing_policy(ctx, stop.on_missing, outcome)
            if policy != "UNKNOWN":
                rec["outcome"] = policy
                rec["message"] = f"cannot rule out stop condition {name!r}: {outcome.message}"
                stopped = (policy, f"stop condition {name!r} could not be evaluated",
                           rec["message"], check_next(ctx, stop.next, None, rec))
                break

    # (severity, deciding record, its next action rendered with its violations bound, its status)
    worst: tuple[int, CheckRec, str | None, Status] | None = None
    for ev in phase.evidence:
        key = location_key(CheckId(phase.id, "evidence", ev.id))
        rec = _evidence(ctx, phase, ev, key)
        violations = rec.pop("_violations", None)
        own_next = check_next(ctx, ev.next, violations, rec, ev.row) if rec["outcome"] is not None else None
        if stopped is not None:
            # Recorded with its result and message, but it imposes nothing: the stop condition
            # decided the status (so no check outranks the phase it belongs to).
            rec["outcome"] = None
        elif rec["outcome"] is not None and _waive(ctx, phase.id, ev.id, rec):
            rec["outcome"] = None
        checks.append(rec)
        status = rec["outcome"]
        if status is not None and (worst is None or SEVERITY[status] > worst[0]):
            worst = (SEVERITY[status], rec, own_next, status)
    if stopped is not None:
        return record(stopped[0], stopped[1], checks, stopped[2], stopped[3])
    waived = [f"{c['id']} ({c['waiver']['owner']}, until {c['waiver']['expires']})" for c in checks if c.get("waiver")]
    # A waiver is named in the phase's reason whatever the status, so no report can hide it.
    waived_note = f"; WAIVED: {', '.join(waived)}" if waived else ""
    if worst is not None:
        status = worst[3]
        failing = [f"{c['id']} {c['result']}" for c in checks if c["kind"] == "evidence" and c["outcome"] == status]
        return record(status, f"evidence {', '.join(failing)}{waived_note}", checks, worst[1]["message"],
                      worst[2])
    unknown = [c["id"] for c in checks if c["kind"] == "evidence" and c["result"] == "UNKNOWN" and not c["outcome"]
               and not c.get("waiver")]
    reason = "all evidence satisfied" if not unknown else \
        f"evidence satisfied; UNKNOWN allowed in mode {ctx.mode}: {', '.join(unknown)}"
    return record("PASS", reason + waived_note, checks)


def _waive(ctx: EvalContext, phase_id: str, check_id: str, rec: CheckRec) -> bool:
    """Whether a waiver keeps this failing check from imposing a status (recorded on the check)."""
    if ctx.waivers is None:
        return False
    found = ctx.waivers.find(ctx.rulebook, ctx.mode, phase_id, check_id)
    if found is None:
        return False
    rec["waiver"] = found
    return True


NOT_APPLICABLE_CODE = "probe.not_applicable"  # collect.NOT_APPLICABLE: a probe whose `when` is false


def _not_applicable(outcome: CheckOutcome) -> str | None:
    """Why a check is NOT_APPLICABLE rather than UNKNOWN: the decision needed facts, and every fact it
    lacked is of a probe whose `when` was false (the rulebook chose not to collect it). A
    check that also lacks a fact for any other reason stays UNKNOWN (fail closed)."""
    if outcome.result != "UNKNOWN" or outcome.error or outcome.deliberate:
        return None
    missing = [r for r in outcome.reads if r.get("missing")]
    if not missing or not all(str(r.get("error", "")).startswith(NOT_APPLICABLE_CODE + ":") for r in missing):
        return None
    probes = sorted(dict.fromkeys(".".join(r["path"].split(".")[:2]) for r in missing))
    return f"not applicable: {', '.join(probes)} not collected (its probe's `when` is false)"


def _evidence(ctx: EvalContext, phase: Phase, ev: Any, key: str) -> CheckRec:
    condition = ev.condition
    if ev.applies_when is not None:
        gate = _run_check(ctx, ev.applies_when, part_key(key, "applies_when"))
        skipped = _not_applicable(gate)
        if skipped is not None:
            return _record(ctx, ev.id, "evidence", condition,
                           CheckOutcome("NOT_APPLICABLE", gate.reads, gate.facts, skipped), key)
        if gate.result == "UNSATISFIED":
            return _record(ctx, ev.id, "evidence", condition,
                           CheckOutcome("NOT_APPLICABLE", gate.reads, gate.facts,
                                        f"applies_when is false: {ev.applies_when}"), key)
        if gate.result == "UNKNOWN":
            # Whether the check applies is itself unknown: treat as a missing fact.
            gate.message = f"cannot tell whether it applies ({ev.applies_when}): {gate.message}"
            return _decide(ctx, ev, _record(ctx, ev.id, "evidence", condition, gate, key), gate)
    outcome, violations = _judge(ctx, ev.check, ev.violations, key, empty_holds=True, row=ev.row)
    skipped = _not_applicable(outcome)
    if skipped is not None:
        outcome = CheckOutcome("NOT_APPLICABLE", outcome.reads, outcome.facts, skipped)
    rec = _record(ctx, ev.id, "evidence", condition, outcome, key)
    _keep_violations(rec, violations, ev.row)
    if violations is not None:
        rec["_violations"] = violations  # taken back by run_phase for the next action, never in the trace
    return _decide(ctx, ev, rec, outcome, violations)


def _judge(ctx: EvalContext, check: str | None, violations_source: str | None, key: str, *,
           empty_holds: bool, row: RowSpec | None = None) -> tuple[CheckOutcome, list[Any] | None]:
    """A check's outcome, and its violations list when it states one. Without `check`, an empty
    list decides SATISFIED when `empty_holds` (evidence, preconditions), a non-empty one when not
    (stop conditions), with no second evaluation. Fail closed: a list that cannot be computed,
    or a value that is not a list (or, with `row:`, a row without a declared field), is UNKNOWN (an
    evaluation error for the latter), never a pass."""
    if violations_source is None:
        assert check is not None  # the models require one of them
        return _run_check(ctx, check, key), None
    found = _run_value(ctx, violations_source, part_key(key, "violations"))
    if not found.ok:
        return CheckOutcome("UNKNOWN", found.reads, found.facts, found.message, error=found.error), None
    violations = found.value
    if not isinstance(violations, list):
        return CheckOutcome("UNKNOWN", found.reads, found.facts,
                            f"evaluation error: violations must be a list, got {type(violations).__name__}",
                            error=True), None
    problem = row_problem(violations, row) if row is not None else None
    if problem is not None:
        return CheckOutcome("UNKNOWN", found.reads, found.facts, f"evaluation error: {problem}", error=True), None
    if check is None:
        holds = not violations if empty_holds else bool(violations)
        return CheckOutcome("SATISFIED" if holds else "UNSATISFIED", found.reads, found.facts, None), violations
    outcome = _run_check(ctx, check, key, violations)
    if found.reads:
        outcome.reads = found.reads + [r for r in outcome.reads if r["path"] != "violations"]
        outcome.facts = sorted(set(outcome.facts) | set(found.facts))
    return outcome, violations


def _keep_violations(rec: CheckRec, violations: list[Any] | None, row: RowSpec | None) -> None:
    """The violations as the trace records them (summarised when large), and the fields of their
    rows when the check declares them (what reports locate each row by)."""
    if violations is not None:
        rec["violations"] = _summarise(violations)
    if row is not None:
        rec["row"] = row.model_dump()


def _decide(ctx: EvalContext, ev: Any, rec: CheckRec, outcome: CheckOutcome, violations: list[Any] | None = None) -> CheckRec:
    """The status an evidence check imposes on its phase, and its message."""
    if outcome.result == "UNSATISFIED":
        rec["outcome"] = ev.on_fail
        if ev.message:
            rec["message"] = render_message(ctx, ev.message, rec, violations, ev.row)
            if rec.get("_unavailable"):
                rec["outcome"] = at_least_blocked(ev.on_fail)
        elif violations is not None:
            rec["message"] = f"{ev.id}: {render_violations(violations, ev.row)}"
        else:
            rec["message"] = f"check {ev.id} failed: {ev.condition}"
    elif outcome.result == "UNKNOWN":
        policy = _missing_policy(ctx, ev.on_missing, outcome)
        if policy != "UNKNOWN":
            rec["outcome"] = policy
            rec["message"] = f"evidence {ev.id} could not be established: {outcome.message}"
    return rec



def _missing_policy(ctx: EvalContext, policy: Any, outcome: CheckOutcome) -> MissingPolicy:
    if outcome.error:
        return "BLOCKED"  # an evaluation error is a defect, not an evidence gap
    mode = ctx.rulebook.modes[ctx.mode]
    return on_missing_for(policy, ctx.mode, mode.on_missing)
