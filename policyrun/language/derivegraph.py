"""The dependency graph of a rulebook's derived values and probe parameters.

Built once per rulebook and read by collection (what a probe waits for), evaluation (the order
of derived values) and lint (cycles). It sits below all three, apart from the derive stage that
computes values (policyrun.evaluate.derive), so `lint` compiles expressions without importing evaluation.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from policyrun.language.expr import ExprError, compile_expr
from policyrun.language.interpolation import template_exprs

if TYPE_CHECKING:
    from policyrun.model import Rulebook


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
