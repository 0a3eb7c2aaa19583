"""Derived values: one dependency graph per rulebook, one function that computes them, always guarded.

Two stages ask for derived values: collection, for a probe whose parameters read `derived.x`, and
evaluation, for the checks. Both call `derive_values`, which runs only under the guard
(policyrun.language.guard: per-expression time limit, memory limit) and within one total budget for all
derived values together (limits.DERIVED_SECONDS, limits.DERIVED_BYTES). Collection reaches it
through `derive_for_params`, which forks the guarded child itself; evaluation already runs in one.

The value is recorded once: evaluation recomputes every derived value from the facts (a snapshot
holds raw facts only, so replay and tests stay honest), and a probe whose parameters read a value
that evaluation could not compute is treated as failed (`tainted`): its fact was collected with
an input the trace says does not exist, so no check may pass on it. docs/semantics.md has the rules.

The graph (`graph_of`, policyrun.language.derivegraph) is computed once per rulebook and serves collection
(what a probe waits for), evaluation (the order) and lint (cycles): a derived value that asks
about a probe only with `failed(facts.x)` / `error_code(facts.x)` needs that probe finished,
failed or not, not its value.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from policyrun import limits
from policyrun.checkid import CheckId, location_key
from policyrun.language.derivegraph import DeriveGraph
from policyrun.language.derivegraph import graph_of as graph_of  # collection and tests read the graph from here too
from policyrun.errors import PolicyrunError
from policyrun.language.expr import guard_installed
from policyrun.evaluate.expreval import EvalContext, run_value, summarise_sized
from policyrun.trace.records import DerivedRec, ReadRec
from policyrun.facts import FactsSnapshot
from policyrun.language.functions import import_runtime
from policyrun.language.functions.factstatus import fact_status
from policyrun.language.guard import expression_limit, guarded_available, run_guarded
from policyrun.model import Rulebook

# --- computing ----------------------------------------------------------------------------------

import_runtime()  # every evaluation computes derived values in a forked child: import once, here


@dataclass
class Budget:
    """What the derived values of one evaluation (or one collection) may still spend, together."""

    seconds: float = field(default_factory=lambda: limits.DERIVED_SECONDS)
    bytes: int = field(default_factory=lambda: limits.DERIVED_BYTES)
    spent_s: float = 0.0
    used_bytes: int = 0


def derive_values(ctx: EvalContext, only: Iterable[str] | None = None, budget: Budget | None = None) -> list[DerivedRec]:
    """Compute derived values in dependency order into ctx.variables["derived"] (the reasons for
    those without one into ctx.derived_errors); one trace record each. The only function that
    computes a derived value, for collection and evaluation alike; it refuses to run outside the
    guard. A value whose expression reads a missing fact (or a derived value without one) has no
    value either; nor has one that would take the derived values past their total budget."""
    _require_guard()
    graph = graph_of(ctx.rulebook)
    budget = budget if budget is not None else Budget()
    wanted = None if only is None else set(only)
    records: list[DerivedRec] = []
    values = ctx.variables["derived"]
    for did in graph.order:
        if wanted is not None and did not in wanted:
            continue
        spec = ctx.rulebook.derive[did]
        key = location_key(CheckId(None, "derive", did))
        where = ctx.locations.get(key)
        rec: DerivedRec = {"id": did, "expression": spec.value, "location": where}
        if spec.modes is not None and ctx.mode not in spec.modes:
            ctx.derived_errors[did] = f"not derived in mode {ctx.mode} (its modes: {', '.join(spec.modes)})"
            records.append({**rec, "value": None, "error": ctx.derived_errors[did], "missing": True,
                            "reads": [], "facts": []})
            _taint(ctx, graph)
            continue
        backing = {p for d in graph.reads[did] for p in ctx.derived_facts.get(d, [])}
        if budget.spent_s >= budget.seconds:
            error = (f"the derived value at {where or key} was not computed: the derived values used up their "
                     f"total time budget of {budget.seconds:g}s")
            outcome_reads: list[ReadRec] = []
            ctx.derived_facts[did] = sorted(backing | graph.facts[did])
            ctx.derived_errors[did] = error
            ctx.derived_defects.add(did)
            records.append({**rec, "value": None, "error": error, "missing": False, "reads": outcome_reads,
                            "facts": ctx.derived_facts[did]})
            _taint(ctx, graph)
            continue
        started = time.monotonic()
        outcome = run_value(ctx, spec.value, key)
        budget.spent_s += time.monotonic() - started
        facts = sorted(set(outcome.facts) | backing)
        ctx.derived_facts[did] = facts
        if outcome.ok:
            shown, size = summarise_sized(outcome.value)
            if budget.used_bytes + size <= budget.bytes:
                budget.used_bytes += size
                values[did] = outcome.value
                records.append({**rec, "value": shown, "error": None, "missing": False,
                                "reads": outcome.reads, "facts": facts})
                continue
            outcome.message = (f"the value of the derived value at {where or key} would take the derived values "
                               f"past their total size budget of {_mib(budget.bytes)} (counted as JSON text)")
            outcome.error = True
        ctx.derived_errors[did] = _cut(outcome.message or "could not be computed")
        if outcome.error:
            ctx.derived_defects.add(did)
        records.append({**rec, "value": None, "error": ctx.derived_errors[did], "missing": not outcome.error,
                        "reads": outcome.reads, "facts": facts})
        _taint(ctx, graph)
    return records


_ERROR_CHARS = 2000  # a chain of derived values repeats each one's reason: keep it a readable size


def _cut(reason: str) -> str:
    return reason if len(reason) <= _ERROR_CHARS else reason[:_ERROR_CHARS] + "… (cut)"


def _mib(n: int) -> str:
    return f"{n / limits.MIB:g} MiB" if n >= limits.MIB else f"{n} bytes"


def _require_guard() -> None:
    if guarded_available() and not guard_installed():
        raise PolicyrunError("a derived value was about to be computed outside the guard; this is a policyrun "
                             "defect, please report it", code="G003")


def _taint(ctx: EvalContext, graph: DeriveGraph) -> None:
    """After a derived value failed: the facts whose probes' parameters read it are failed too
    (ctx.tainted), and taken out of the facts expressions see."""
    if ctx.tainted is None:
        return  # collection: a probe that reads it has not run, and fails on the error itself
    facts = ctx.facts.facts
    present = [pid for pid, fact in facts.items() if fact.error is None and pid not in ctx.tainted]
    found = graph.tainted(ctx.derived_errors, present)
    if not found:
        return
    ctx.tainted.update(found)
    ctx.variables["facts"] = {k: v for k, v in ctx.variables["facts"].items() if k not in ctx.tainted}
    ctx.read_cache.clear()


# --- collection's entry -------------------------------------------------------------------------

@dataclass
class Derivation:
    """Derived values computed for collection (picklable: it comes back from the guarded child)."""

    values: dict[str, Any]
    errors: dict[str, str]
    spent_s: float
    used_bytes: int


def derive_for_params(rulebook: Rulebook, mode: str, inputs: Mapping[str, Any], facts: Mapping[str, Any],
                      wanted: Iterable[str], *, known: Derivation, budget: Budget,
                      locations: Mapping[str, str] | None = None) -> Derivation:
    """The derived values `wanted` (and what they read) over the facts collected so far, under the
    guard, reusing those already in `known`; what they spent is charged to `budget`."""
    todo = graph_of(rulebook).closure(wanted) - set(known.values) - set(known.errors)
    if not todo:
        return known
    status = {pid: (f.error.code if f.error is not None else None) for pid, f in facts.items()}
    values = {pid: f.value for pid, f in facts.items() if f.error is None}

    def compute() -> Derivation:
        ctx = EvalContext(rulebook, mode, inputs, FactsSnapshot.model_construct(facts=dict(facts)),
                          locations or {})
        ctx.variables = {"facts": values, "inputs": dict(inputs), "vars": dict(rulebook.vars), "mode": mode,
                         "phases": {}, "derived": dict(known.values)}
        ctx.derived_errors = dict(known.errors)
        mine = Budget(budget.seconds, budget.bytes, budget.spent_s, budget.used_bytes)
        with fact_status(status):
            derive_values(ctx, only=todo, budget=mine)
        return Derivation({d: v for d, v in ctx.variables["derived"].items() if d in todo},
                          {d: e for d, e in ctx.derived_errors.items() if d in todo},
                          mine.spent_s, mine.used_bytes)

    try:
        if guarded_available() and not guard_installed():
            # The budget left, plus one expression running to its own limit, plus slack for the fork.
            deadline = max(budget.seconds - budget.spent_s, 0.0) + expression_limit() + 10.0
            found = run_guarded(compute, deadline_s=deadline)
        else:
            found = compute()
    except PolicyrunError as exc:  # the guard refused the whole computation (G002, G004)
        found = Derivation({}, dict.fromkeys(todo, exc.message), budget.spent_s, budget.used_bytes)
    budget.spent_s, budget.used_bytes = found.spent_s, found.used_bytes
    return Derivation({**known.values, **found.values}, {**known.errors, **found.errors},
                      found.spent_s, found.used_bytes)
