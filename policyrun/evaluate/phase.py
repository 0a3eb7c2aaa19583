"""The gated phase interpreter: rulebook + inputs + facts in, trace out. Pure: no I/O.

Before any phase, the derive stage (policyrun.evaluate.derive) computes the rulebook's `derive` values from
the facts, and marks failed the facts collected with a derived value it could not compute
(docs/semantics.md, "Derived values"). Then, for each phase (the full rules are in
docs/semantics.md):
1. not in the mode, or its mode `when` is false  → SKIPPED ("outside mode M")
2. a required earlier phase did not PASS          → SKIPPED ("gated by X=STATUS")
3. a precondition does not hold (or is unknown)   → BLOCKED, naming the condition
4. the first stop condition that holds            → its status (STOPPED by default); the evidence
                                                     is still evaluated and recorded, imposing nothing
5. evidence checks; the most severe outcome wins  → STOPPED > BLOCKED > FAIL, else PASS
Fail closed: a check that reads a missing or failed fact (or a derived value that could not be
computed) is UNKNOWN, never SATISFIED, and an evaluation error is never a pass.

Records are built as typed dicts (policyrun.trace.records) and validated into the `Trace` model once, at the end: one
pass of pydantic's Rust validator costs far less than constructing thousands of models one by
one, and keeps per-check cost close to the CEL runtime's own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from policyrun.checkid import CheckId, location_key, part_key, phase_key
from policyrun.evaluate.derive import Budget, derive_values
from policyrun.errors import EXIT_BLOCKED, EXIT_FAIL, EXIT_OK
from policyrun.language.expr import ExprError, bounded_text, make_activation, render_value, split_template
from policyrun.evaluate.expreval import CheckOutcome, EvalContext, fact_status_of
from policyrun.evaluate.expreval import record_check as _record
from policyrun.evaluate.expreval import run_check as _run_check
from policyrun.evaluate.expreval import run_value as _run_value
from policyrun.evaluate.expreval import summarise as _summarise
from policyrun.facts import FactsSnapshot
from policyrun.language.functions.factstatus import fact_status
from policyrun.gcpause import gc_paused
from policyrun.trace.headline import headline
from policyrun.model import PASSING, SEVERITY, MissingPolicy, Phase, RowSpec, Rulebook, Status, on_missing_for
from policyrun.trace.model import RulebookRef, Trace
from policyrun.trace.records import CheckRec, PhaseRec, VerdictRec, phase_checks
from policyrun.language.violationrows import row_problem, rows_text



def evaluate_rulebook(rulebook: Rulebook, *, mode: str, inputs: Mapping[str, Any], facts: FactsSnapshot,
                      rulebook_ref: RulebookRef, locations: Mapping[str, str] | None = None,
                      generated_at: str | None = None, notes: Mapping[str, Any] | None = None,
                      fail_on_warn: bool = False, waivers: Any = None) -> Trace:
    return Trace.model_validate(with_provenance(evaluate_records(
        rulebook, mode=mode, inputs=inputs, facts=facts, rulebook_ref=rulebook_ref, locations=locations,
        generated_at=generated_at, notes=notes, fail_on_warn=fail_on_warn, waivers=waivers), facts))


def with_provenance(records: dict[str, Any], facts: FactsSnapshot) -> dict[str, Any]:
    """The records with the provenance of every backing fact (listed by id) from the snapshot."""
    records["provenance"] = {pid: facts.facts[pid].provenance for pid in records["provenance"]}
    return records


def evaluate_records(rulebook: Rulebook, *, mode: str, inputs: Mapping[str, Any], facts: FactsSnapshot,
                     rulebook_ref: RulebookRef, locations: Mapping[str, str] | None = None,
                     generated_at: str | None = None, notes: Mapping[str, Any] | None = None,
                     fail_on_warn: bool = False, waivers: Any = None,
                     baseline: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The trace as plain data (validated into `Trace` by the caller): cheap to pass from the
    guarded evaluation child to its parent."""
    # Evaluation allocates many small, acyclic records while a large snapshot stays alive; the
    # cyclic collector's full passes over that snapshot would otherwise cost more than the checks.
    status = fact_status_of(facts)
    with gc_paused(), fact_status(status):
        return _evaluate(rulebook, mode, inputs, facts, rulebook_ref, locations, generated_at, notes,
                         fail_on_warn, waivers, status.tainted, baseline)


def _evaluate(rulebook: Rulebook, mode: str, inputs: Mapping[str, Any], facts: FactsSnapshot,
              rulebook_ref: RulebookRef, locations: Mapping[str, str] | None, generated_at: str | None,
              notes: Mapping[str, Any] | None, fail_on_warn: bool, waivers: Any,
              tainted: dict[str, str], baseline: Mapping[str, Any] | None = None) -> dict[str, Any]:
    ctx = EvalContext(rulebook, mode, inputs, facts, locations or {}, waivers=waivers, tainted=tainted)
    phases_var: dict[str, dict[str, Any]] = {}
    ctx.variables = {"facts": facts.values(), "inputs": dict(inputs), "vars": dict(rulebook.vars), "mode": mode,
                     "phases": phases_var, "derived": {}, "hosts": facts.host_values(),
                     # An empty map without --baseline: `has(baseline.verdict)` asks whether there is one.
                     "baseline": dict(baseline or {})}
    derived = derive_values(ctx, budget=Budget())
    # Facts whose probes' parameters read a derived value this evaluation could not compute were
    # taken out of `facts` by the derive stage (ctx.tainted): no check can pass on them.
    fact_values = ctx.variables["facts"]
    # One shared binding for every expression that does not read `phases` or `violations`: the
    # runtime converts each fact once, however many checks read it. Facts of probes the rulebook
    # does not declare are left out, so a large foreign snapshot costs nothing.
    ctx.activation = make_activation({**ctx.variables, "facts": {k: fact_values[k] for k in rulebook.probes
                                                                 if k in fact_values}})
    selected = _mode_selection(ctx)
    records: list[PhaseRec] = []
    by_id: dict[str, PhaseRec] = {}
    runnable = [p.id for p in rulebook.phases if selected.phases.get(p.id) is None]
    phases_by_id = {p.id: p for p in rulebook.phases}  # not rulebook.phase(): one scan per phase
    first_block: str | None = None  # what the first phase run in this mode that did not pass says
    for phase in rulebook.phases:
        record = _phase(ctx, phase, selected, by_id, first_block)
        # The next action is decided with the phase, before later phases read its status: a next
        # action that needs a value without one blocks the phase (docs/semantics.md).
        _next_action(ctx, record, runnable, selected, phases_by_id[phase.id])
        records.append(record)
        by_id[phase.id] = record
        if first_block is None and selected.phases.get(phase.id) is None:
            first_block = _blocks(phase.id, record, selected)
        phases_var[phase.id] = {"status": record["status"], "reason": record["reason"]}
    _settled_next_actions(records, runnable)
    exit_code = _exit_code(records, selected, fail_on_warn)
    verdict = _verdict(ctx, records, exit_code)
    backing = {pid for rec in records for chk in phase_checks(rec) for pid in chk["facts"]}
    backing |= {pid for d in derived for pid in d["facts"]}
    backing |= {pid for chk in verdict.get("conditions", []) for pid in chk["facts"]}
    # Provenance is attached by `with_provenance` from the caller's snapshot: the records stay
    # small to pass out of the guarded evaluation, and the provenance models are reused as they are.
    provenance = sorted(pid for pid in backing if pid in facts.facts)
    return {
        "generated_at": generated_at, "rulebook": rulebook_ref.model_dump(), "mode": mode, "inputs": dict(inputs),
        "vars": dict(rulebook.vars), "facts_sha256": facts.digest(), "derived": derived, "phases": records,
        "verdict": verdict, "exit_code": exit_code, "fail_on_warn": fail_on_warn,
        "waivers": waivers.report(rulebook) if waivers is not None else None,
        "provenance": provenance,
        **(notes or {})}


# --- mode selection ---------------------------------------------------------------------------

@dataclass
class Selection:
    phases: dict[str, str | None]  # phase id → None when selected, else the reason it is not
    checks: dict[str, CheckRec]


def _mode_selection(ctx: EvalContext) -> Selection:
    mode = ctx.rulebook.modes[ctx.mode]
    listed = {m.phase: m for m in mode.phases}
    out: dict[str, str | None] = {}
    checks: dict[str, CheckRec] = {}
    for phase in ctx.rulebook.phases:
        entry = listed.get(phase.id)
        if entry is None:
            out[phase.id] = f"outside mode {ctx.mode}"
            continue
        if entry.when is None:
            out[phase.id] = None
            continue
        cid = CheckId(phase.id, "mode_selection", ctx.mode)
        key = location_key(cid)
        outcome = _run_check(ctx, entry.when, key)
        checks[phase.id] = _record(ctx, cid.record_id, "mode_selection", entry.when, outcome, key)
        if outcome.result == "SATISFIED":
            out[phase.id] = None
        elif outcome.result == "UNSATISFIED":
            out[phase.id] = f"outside mode {ctx.mode}: {entry.when} is false"
        else:
            out[phase.id] = None  # cannot decide: run the phase, which then cannot be skipped silently
    return Selection(out, checks)


# --- one phase --------------------------------------------------------------------------------

def _phase(ctx: EvalContext, phase: Phase, sel: Selection, done: Mapping[str, PhaseRec],
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

    gate = _gate(ctx, phase, sel, done, first_block)
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
            msg = cond.message and _render_message(ctx, cond.message, rec, violations, cond.row)
            if not msg and violations is not None and outcome.result == "UNSATISFIED":
                msg = f"precondition {cond.id + ' ' if cond.id else ''}not met: " \
                      f"{_render_violations(violations, cond.row)}"
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
            rec["message"] = _render_message(ctx, stop.blocker, rec, violations, stop.row)
            if stop.id and _waive(ctx, phase.id, stop.id, rec):
                continue
            imposed: Status = _at_least_blocked(stop.status) if rec.get("_unavailable") else stop.status
            rec["outcome"] = imposed
            stopped = (imposed, f"stop condition {name!r} holds", rec["message"],
                       _check_next(ctx, stop.next, violations, rec, stop.row))
            break
        if outcome.result == "UNKNOWN":
            policy = _missing_policy(ctx, stop.on_missing, outcome)
            if policy != "UNKNOWN":
                rec["outcome"] = policy
                rec["message"] = f"cannot rule out stop condition {name!r}: {outcome.message}"
                stopped = (policy, f"stop condition {name!r} could not be evaluated",
                           rec["message"], _check_next(ctx, stop.next, None, rec))
                break

    # (severity, deciding record, its next action rendered with its violations bound, its status)
    worst: tuple[int, CheckRec, str | None, Status] | None = None
    for ev in phase.evidence:
        key = location_key(CheckId(phase.id, "evidence", ev.id))
        rec = _evidence(ctx, phase, ev, key)
        violations = rec.pop("_violations", None)
        own_next = _check_next(ctx, ev.next, violations, rec, ev.row) if rec["outcome"] is not None else None
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
        rec["_violations"] = violations  # taken back by _phase for the next action, never in the trace
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
            rec["message"] = _render_message(ctx, ev.message, rec, violations, ev.row)
            if rec.get("_unavailable"):
                rec["outcome"] = _at_least_blocked(ev.on_fail)
        elif violations is not None:
            rec["message"] = f"{ev.id}: {_render_violations(violations, ev.row)}"
        else:
            rec["message"] = f"check {ev.id} failed: {ev.condition}"
    elif outcome.result == "UNKNOWN":
        policy = _missing_policy(ctx, ev.on_missing, outcome)
        if policy != "UNKNOWN":
            rec["outcome"] = policy
            rec["message"] = f"evidence {ev.id} could not be established: {outcome.message}"
    return rec


def _render_violations(violations: list[Any], row: RowSpec | None = None) -> str:
    if row is not None:
        return bounded_text(rows_text(violations, row))
    return bounded_text("; ".join(render_value(v) for v in violations))


def _check_next(ctx: EvalContext, template: str | None, violations: list[Any] | None, rec: CheckRec,
                row: RowSpec | None = None) -> str | None:
    """A check's own next action, with its `violations` bound as in its message. One that needs a
    value without one makes the check impose BLOCKED at least, its message naming the value."""
    if not template:
        return None
    text, unavailable = render(ctx, template, violations, row)
    if unavailable and rec["outcome"] is not None:
        rec["outcome"] = _at_least_blocked(rec["outcome"])
        rec["message"] = f"{rec['message']} [its next action {_unavailable_note(unavailable)}]"
    return text


# --- templates (messages, next actions, verdict summaries) -------------------------------------

def render(ctx: EvalContext, template: str, violations: list[Any] | None = None,
           row: RowSpec | None = None) -> tuple[str, list[str]]:
    """A template's text, and one line per `${...}` that has no value (`expr: why`). The text shows
    such an expression as `<?expr: unavailable>`; the caller blocks on the list (docs/semantics.md,
    "Values a template needs"). `${violations}` of a check that declares `row:` shows each row as
    `file:line: text`, not as JSON."""
    parts: list[str] = []
    unavailable: list[str] = []
    for seg in split_template(template):
        if not seg.is_expr:
            parts.append(seg.text)
            continue
        expr = seg.text.strip()
        if row is not None and violations is not None and expr == "violations":
            parts.append(bounded_text(rows_text(violations, row)))
            continue
        try:
            found = _run_value(ctx, expr, f"template:{expr}", violations)
        except ExprError as exc:  # lint rejects these; guard so evaluation never crashes
            found_message: str | None = exc.message
        else:
            if found.ok:
                parts.append(bounded_text(render_value(found.value)))
                continue
            found_message = found.message
        parts.append(f"<?{expr}: unavailable>")
        unavailable.append(f"{expr}: {found_message or 'unavailable'}")
    return "".join(parts), unavailable


def _unavailable_note(unavailable: list[str]) -> str:
    return "needs a value that could not be computed: " + "; ".join(bounded_text(u) for u in unavailable)


def _render_message(ctx: EvalContext, template: str, rec: CheckRec, violations: list[Any] | None = None,
                    row: RowSpec | None = None) -> str:
    """A check's message; one that needs a value without one is marked on the record (the check
    then imposes BLOCKED at least) and says which value and why."""
    text, unavailable = render(ctx, template, violations, row)
    if not unavailable:
        return text
    rec["_unavailable"] = True
    return f"{text} [this message {_unavailable_note(unavailable)}]"


def _at_least_blocked(status: Status) -> Status:
    return status if SEVERITY.get(status, 0) >= SEVERITY["BLOCKED"] else "BLOCKED"


def _gate(ctx: EvalContext, phase: Phase, sel: Selection, done: Mapping[str, PhaseRec],
          first_block: str | None) -> str | None:
    """Why an earlier required phase keeps this one from starting, or None. `first_block` is what
    the first earlier phase that ran in this mode and did not pass says (kept by the caller as the
    phases are recorded, so sequential gating costs one look per phase, not one per earlier phase)."""
    if phase.requires is None:
        return None if ctx.rulebook.modes[ctx.mode].gating == "independent" else first_block
    for pid in phase.requires:
        if pid in done and (block := _blocks(pid, done[pid], sel)) is not None:
            return block
    return None


def _blocks(pid: str, rec: PhaseRec, sel: Selection) -> str | None:
    """How a recorded phase gates the phases that require it: None when it lets them start."""
    status, reason = rec["status"], rec["reason"]
    if status in PASSING:
        return None
    if status == "SKIPPED" and sel.phases.get(pid) is not None:
        return None  # deliberately not run in this mode; nothing to wait for
    if status == "SKIPPED":
        # Name the phase at the root of the chain, not the intermediate skip.
        return reason if reason.startswith("gated by ") else f"gated by {pid}=SKIPPED ({reason})"
    return f"gated by {pid}={status}"


def _missing_policy(ctx: EvalContext, policy: Any, outcome: CheckOutcome) -> MissingPolicy:
    if outcome.error:
        return "BLOCKED"  # an evaluation error is a defect, not an evidence gap
    mode = ctx.rulebook.modes[ctx.mode]
    return on_missing_for(policy, ctx.mode, mode.on_missing)


# --- after all phases -------------------------------------------------------------------------

def _next_action(ctx: EvalContext, rec: PhaseRec, runnable: list[str], sel: Selection, phase: Phase) -> None:
    """The phase's next action, unless its deciding check named one. A `next:` template that needs a
    value without one makes a phase that ran BLOCKED, through a `template` check naming the value:
    an agent must never act on an action with a hole in it."""
    for chk in phase_checks(rec):
        chk.pop("_unavailable", None)
    if rec["next_allowed_action"]:
        return
    template = phase.next.get(rec["status"])
    if not template:
        rec["next_allowed_action"] = _default_action(ctx, rec, runnable, sel)
        return
    text, unavailable = render(ctx, template)
    if unavailable and rec["status"] in ("PASS", "WARN", "FAIL"):
        cid = CheckId(phase.id, "template", f"next:{rec['status']}")
        key = location_key(cid)
        check = _record(ctx, cid.id, "template", template,
                        CheckOutcome("UNKNOWN", [], [], None), key)
        check["unknown"] = "missing"
        check["outcome"] = "BLOCKED"
        message = f"the {rec['status']} next action of {phase.id} {_unavailable_note(unavailable)}"
        check["message"] = message
        rec["next_action_check"] = check
        if rec["status"] != "PASS" and rec["blocker"]:
            rec["blockers"] = rec["blockers"] or [rec["blocker"]]
            rec["blockers"].append(message)
        rec["status"], rec["blocker"] = "BLOCKED", message
        rec["reason"] = f"{check['id']} needs a value that could not be computed"
        blocked = phase.next.get("BLOCKED")
        blocked_text, blocked_unavailable = render(ctx, blocked) if blocked else ("", [""])
        rec["next_allowed_action"] = blocked_text if not blocked_unavailable \
            else _default_action(ctx, rec, runnable, sel)
        return
    rec["next_allowed_action"] = text
    rec["_templated"] = True


def _settled_next_actions(records: list[PhaseRec], runnable: list[str]) -> None:
    """A passing phase whose next runnable phase passed too has nothing left to do: its own `next` text
    (written for the moment it is the last phase passed, "classify all 31 rows") would send an agent
    back to work already done. Its action becomes "none", naming the phase that carries on."""
    by_id = {r["phase"]: r for r in records}
    position = {pid: i for i, pid in enumerate(runnable)}  # not runnable.index(): one scan per phase
    for rec in records:
        pid = rec["phase"]
        if not rec.pop("_templated", False) or rec["status"] not in PASSING or pid not in position:
            continue
        following = position[pid] + 1
        if following < len(runnable) and by_id[runnable[following]]["status"] in PASSING:
            nxt = runnable[following]
            rec["next_allowed_action"] = f"none: {nxt} has passed too; see the first phase that has not"


def _default_action(ctx: EvalContext, rec: PhaseRec, runnable: list[str], sel: Selection) -> str:
    status, pid = rec["status"], rec["phase"]
    if status in PASSING:
        later = runnable[runnable.index(pid) + 1:] if pid in runnable else []
        caveat = " (after reading its warnings)" if status == "WARN" else ""
        return f"proceed to {later[0]}{caveat}" if later else f"none: mode {ctx.mode} is complete{caveat}"
    if status == "SKIPPED":
        if sel.phases.get(pid) is not None:
            return f"none in mode {ctx.mode}"
        return f"none until {rec['reason'].removeprefix('gated by ').split('=')[0].split(' ')[0]} passes"
    # The blocker has its own field; the action says what to do about it without repeating it.
    if status == "FAIL":
        return f"fix what {pid} reports, then evaluate again"
    if status == "STOPPED":
        return "stop here and report the decision the blocker asks for"
    if any(c["outcome"] == "FAIL" for c in phase_checks(rec)):
        return f"fix the failures {pid} reports first, then resolve its blocker and evaluate again"
    return f"resolve {pid}'s blocker, then evaluate again"


def _exit_code(records: list[PhaseRec], sel: Selection, fail_on_warn: bool = False) -> int:
    """From the first selected phase that did not pass: 1 FAIL, 2 BLOCKED or STOPPED; a WARN
    counts as a FAIL only with `--fail-on warn`."""
    for rec in records:
        status = rec["status"]
        if sel.phases.get(rec["phase"]) is not None or status in ("PASS", "SKIPPED"):
            continue
        if status == "WARN":
            if fail_on_warn:
                return EXIT_FAIL
            continue
        return EXIT_FAIL if status == "FAIL" else EXIT_BLOCKED
    return EXIT_OK


def _verdict(ctx: EvalContext, records: list[PhaseRec], exit_code: int) -> VerdictRec:
    tried: list[CheckRec] = []
    for verdict in ctx.rulebook.verdicts:
        key = location_key(CheckId(None, "verdict", verdict.id))
        outcome = _run_check(ctx, verdict.when, key)
        tried.append(_record(ctx, verdict.id, "verdict", verdict.when, outcome, key))
        if outcome.result == "SATISFIED":
            summary, unavailable = render(ctx, verdict.summary)
            if unavailable:
                # A verdict that cannot state itself is not given: the search goes on, and the
                # condition records why this one was passed over.
                tried[-1]["message"] = f"its summary {_unavailable_note(unavailable)}"
                continue
            return {"id": verdict.id, "summary": summary,
                    "expression": verdict.when, "conditions": tried}
    warned = [r["phase"] for r in records if r["status"] == "WARN"]
    if exit_code == EXIT_OK:
        summary = f"every phase of mode {ctx.mode} passed" + (
            f", with warnings in {', '.join(warned)}" if warned else "")
        return {"id": "complete", "summary": summary, "conditions": tried}
    first = next(r for r in records if r["status"] in ("FAIL", "BLOCKED", "STOPPED", "WARN"))
    return {"id": "incomplete", "summary": f"{first['phase']} is {first['status']}: {headline(first, phase_checks(first))}",
            "conditions": tried}

