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

This module is the loop over phases and the trace it returns; the stages it runs are apart:
which phases run (policyrun.evaluate.gating), one phase (.phase), the text of messages and next
actions (.templates), and what is settled once phases are decided (.settle).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policyrun.evaluate.derive import Budget, derive_values
from policyrun.evaluate.expreval import EvalContext, fact_status_of
from policyrun.evaluate.gating import blocks, mode_selection
from policyrun.evaluate.phase import run_phase
from policyrun.evaluate.settle import exit_code_of, next_action, settle_next_actions, verdict_of
from policyrun.facts import FactsSnapshot
from policyrun.gcpause import gc_paused
from policyrun.language.expr import make_activation
from policyrun.language.functions.factstatus import fact_status
from policyrun.model import Rulebook
from policyrun.trace.model import RulebookRef, Trace
from policyrun.trace.records import PhaseRec, phase_checks


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
    selected = mode_selection(ctx)
    records: list[PhaseRec] = []
    by_id: dict[str, PhaseRec] = {}
    runnable = [p.id for p in rulebook.phases if selected.phases.get(p.id) is None]
    phases_by_id = {p.id: p for p in rulebook.phases}  # not rulebook.phase(): one scan per phase
    first_block: str | None = None  # what the first phase run in this mode that did not pass says
    for phase in rulebook.phases:
        record = run_phase(ctx, phase, selected, by_id, first_block)
        # The next action is decided with the phase, before later phases read its status: a next
        # action that needs a value without one blocks the phase (docs/semantics.md).
        next_action(ctx, record, runnable, selected, phases_by_id[phase.id])
        records.append(record)
        by_id[phase.id] = record
        if first_block is None and selected.phases.get(phase.id) is None:
            first_block = blocks(phase.id, record, selected)
        phases_var[phase.id] = {"status": record["status"], "reason": record["reason"]}
    settle_next_actions(records, runnable)
    exit_code = exit_code_of(records, selected, fail_on_warn)
    verdict = verdict_of(ctx, records, exit_code)
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
