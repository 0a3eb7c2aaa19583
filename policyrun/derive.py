"""Derived values: one dependency graph per rulebook, one function that computes them, always guarded.

Two stages ask for derived values: collection, for a probe whose parameters read `derived.x`, and
evaluation, for the checks. Both call `derive_values`, which runs only under the guard
(policyrun.guard: per-expression time limit, memory limit) and within one total budget for all
derived values together (limits.DERIVED_SECONDS, limits.DERIVED_BYTES). Collection reaches it
through `derive_for_params`, which forks the guarded child itself; evaluation already runs in one.

The value is recorded once: evaluation recomputes every derived value from the facts (a snapshot
holds raw facts only, so replay and tests stay honest), and a probe whose parameters read a value
that evaluation could not compute is treated as failed (`tainted`): its fact was collected with
an input the trace says does not exist, so no check may pass on it. docs/semantics.md has the rules.

The graph (`graph_of`) is computed once per rulebook and serves collection (what a probe waits
for), evaluation (the order) and lint (cycles): a derived value that asks about a probe only with
`failed(facts.x)` / `error_code(facts.x)` needs that probe finished, failed or not, not its value.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from policyrun import limits
from policyrun.errors import PolicyrunError
from policyrun.expr import ExprError, compile_expr, guard_installed, template_exprs
from policyrun.expreval import EvalContext, Rec, run_value, summarise_sized
from policyrun.facts import FactsSnapshot
from policyrun.functions.factstatus import fact_status
from policyrun.guard import expression_limit, guarded_available, run_guarded
from policyrun.model import Rulebook

# --- the graph ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ParamReads:
    """What one probe's parameters read."""

    facts: frozenset[str]  # probe ids whose values they read directly (`${facts.x...}`)
    status: frozenset[str]  # probe ids they ask about directly (`${failed(facts.x)}`)
    derived: frozenset[str]  # derived ids they read directly
    closure: frozenset[str]  # those derived ids and every derived value they read, transitively
    waits_for: frozenset[str]  # every probe that must have finished first (directly or for `closure`)
    problem: str | None = None  # why the parameters cannot be resolved whatever the facts


@dataclass(frozen=True)
class DeriveGraph:
    order: tuple[str, ...]  # derived ids, each after everything it reads (through probes too)
    reads: Mapping[str, frozenset[str]]  # derived id → derived ids its expression reads
    facts: Mapping[str, frozenset[str]]  # derived id → probe ids whose values it reads
    status: Mapping[str, frozenset[str]]  # derived id → probe ids it asks failed()/error_code() about
    params: Mapping[str, ParamReads]  # probe id → what its parameters read

    def closure(self, names: Iterable[str]) -> frozenset[str]:
        """`names` (derived ids) and every derived value they read, transitively."""
        out: set[str] = set()
        todo = [n for n in names if n in self.reads]
        while todo:
            did = todo.pop()
            if did not in out:
                out.add(did)
                todo.extend(self.reads[did])
        return frozenset(out)

    def probes_behind(self, derived: Iterable[str]) -> frozenset[str]:
        """Probes whose facts (values or status) these derived values read."""
        out: set[str] = set()
        for did in derived:
            out |= self.facts.get(did, frozenset()) | self.status.get(did, frozenset())
        return frozenset(out)

    def tainted(self, errors: Mapping[str, str], present: Iterable[str]) -> dict[str, str]:
        """Probes (among `present`, the facts that hold a value) whose parameters read a derived value
        in `errors`, directly, through other derived values, or through the facts of a probe that is
        itself tainted: probe id → why its fact cannot be trusted."""
        out: dict[str, str] = {}
        if not errors:
            return out
        candidates = [pid for pid in present if pid in self.params and self.params[pid].closure]
        changed = True
        while changed:  # a probe's parameters may read a tainted probe's fact: to a fixed point
            changed = False
            for pid in candidates:
                if pid in out:
                    continue
                reads = self.params[pid]
                bad = sorted(reads.closure & set(errors))
                if bad:
                    out[pid] = (f"its parameters read derived.{bad[0]}, which this evaluation could not compute "
                                f"({errors[bad[0]]})")
                    changed = True
                    continue
                upstream = sorted((reads.waits_for & set(out)) - {pid})
                if upstream:
                    out[pid] = f"its parameters read facts.{upstream[0]}, which cannot be trusted: {out[upstream[0]]}"
                    changed = True
        return out


def _compiled_reads(source: str) -> tuple[frozenset[str], frozenset[str], frozenset[str], bool] | None:
    """(facts read, facts asked about, derived read, reads every fact) or None when it does not compile."""
    try:
        c = compile_expr(source)
    except ExprError:
        return None
    return c.fact_ids(), c.fact_status, c.derived, c.reads_all_facts


_GRAPHS: dict[int, tuple[Rulebook, DeriveGraph]] = {}


def graph_of(rulebook: Rulebook) -> DeriveGraph:
    """The rulebook's dependency graph of derived values and probe parameters, built once per
    rulebook (rulebooks are frozen, so the graph cannot go stale)."""
    cached = _GRAPHS.get(id(rulebook))
    if cached is not None and cached[0] is rulebook:
        return cached[1]
    graph = _build(rulebook)
    if len(_GRAPHS) >= 16:  # tests and `eval` build many rulebooks; keep the last few
        _GRAPHS.pop(next(iter(_GRAPHS)))
    _GRAPHS[id(rulebook)] = (rulebook, graph)
    return graph


def _build(rulebook: Rulebook) -> DeriveGraph:
    reads: dict[str, frozenset[str]] = {}
    facts: dict[str, frozenset[str]] = {}
    status: dict[str, frozenset[str]] = {}
    for did, spec in rulebook.derive.items():
        found = _compiled_reads(spec.value)
        f, s, d, _ = found or (frozenset(), frozenset(), frozenset(), False)
        reads[did] = frozenset(x for x in d if x in rulebook.derive)
        facts[did], status[did] = f, s
    partial = DeriveGraph((), reads, facts, status, {})
    params: dict[str, ParamReads] = {}
    for pid, probe in rulebook.probes.items():
        params[pid] = _param_reads(probe.templates(), partial)
    graph = DeriveGraph((), reads, facts, status, params)
    return DeriveGraph(_order(rulebook, graph), reads, facts, status, params)


def _param_reads(raw: Any, graph: DeriveGraph) -> ParamReads:
    f: set[str] = set()
    s: set[str] = set()
    d: set[str] = set()
    problem = None
    for text, _ in template_exprs(raw):
        source = text.strip()
        try:
            compiled = compile_expr(source)
        except ExprError as exc:
            problem = problem or f"`${{{source}}}`: {exc.message}"
            continue
        if compiled.reads_all_facts:
            problem = problem or f"`${{{source}}}` reads every fact; name the one it needs (facts.<id>)"
        f |= compiled.fact_ids()
        s |= compiled.fact_status
        d |= compiled.derived
    closure = graph.closure(d)
    return ParamReads(frozenset(f), frozenset(s), frozenset(d), closure,
                      frozenset(f | s | graph.probes_behind(closure)), problem)


def _order(rulebook: Rulebook, graph: DeriveGraph) -> tuple[str, ...]:
    """Derived ids in dependency order over the joint graph (a derived value reading a probe whose
    parameters read another derived value comes after that one), depth first in rulebook order.
    Iterative: a rulebook may chain thousands of values. Lint rejects cycles; one here is cut."""
    order: list[str] = []
    state: dict[tuple[str, str], int] = {}

    def edges(node: tuple[str, str]) -> list[tuple[str, str]]:
        kind, name = node
        if kind == "d":
            return [("d", x) for x in sorted(graph.reads[name])] + \
                [("p", x) for x in sorted(graph.facts[name] | graph.status[name]) if x in graph.params]
        reads = graph.params[name]
        return [("d", x) for x in sorted(reads.derived) if x in graph.reads] + \
            [("p", x) for x in sorted(reads.facts | reads.status) if x in graph.params]

    for did in rulebook.derive:
        start = ("d", did)
        if state.get(start):
            continue
        state[start] = 1
        stack = [(start, iter(edges(start)))]
        while stack:
            node, pending = stack[-1]
            nxt = next((n for n in pending if not state.get(n)), None)
            if nxt is not None:
                state[nxt] = 1
                stack.append((nxt, iter(edges(nxt))))
                continue
            stack.pop()
            state[node] = 2
            if node[0] == "d":
                order.append(node[1])
    return tuple(order)


# --- computing ----------------------------------------------------------------------------------

@dataclass
class Budget:
    """What the derived values of one evaluation (or one collection) may still spend, together."""

    seconds: float = field(default_factory=lambda: limits.DERIVED_SECONDS)
    bytes: int = field(default_factory=lambda: limits.DERIVED_BYTES)
    spent_s: float = 0.0
    used_bytes: int = 0


def derive_values(ctx: EvalContext, only: Iterable[str] | None = None, budget: Budget | None = None) -> list[Rec]:
    """Compute derived values in dependency order into ctx.variables["derived"] (the reasons for
    those without one into ctx.derived_errors); one trace record each. The only function that
    computes a derived value, for collection and evaluation alike; it refuses to run outside the
    guard. A value whose expression reads a missing fact (or a derived value without one) has no
    value either; nor has one that would take the derived values past their total budget."""
    _require_guard()
    graph = graph_of(ctx.rulebook)
    budget = budget if budget is not None else Budget()
    wanted = None if only is None else set(only)
    records: list[Rec] = []
    values = ctx.variables["derived"]
    for did in graph.order:
        if wanted is not None and did not in wanted:
            continue
        spec = ctx.rulebook.derive[did]
        key = f"derive.{did}"
        where = ctx.locations.get(key)
        rec: Rec = {"id": did, "expression": spec.value, "location": where}
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
            outcome_reads: list[Rec] = []
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
