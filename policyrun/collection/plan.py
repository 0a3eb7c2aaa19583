"""Which probes one collection runs, and what each one waits for: the plan, before anything runs.

Separate from running them because `collect`, `collect --cluster`, `evaluate --facts` (stale
facts) and the application layer (which probes an unset input left out) all need the same plan,
and because planning is pure: a rulebook and a mode in, a graph out, no probe touched.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from policyrun.evaluate.derive import graph_of
from policyrun.errors import UsageError
from policyrun.facts import FactError
from policyrun.model import ProbeSpec, Rulebook


@dataclass(frozen=True)
class Plan:
    """The probes to collect in one mode, what each one's parameters read, and what cannot run."""

    probes: dict[str, ProbeSpec]  # rulebook order
    deps: dict[str, frozenset[str]]  # probe id → probes (in this plan) whose facts its parameters read
    problems: dict[str, FactError]  # probes that fail before running, whatever the facts


def plan(rulebook: Rulebook, mode: str, only: set[str] | None = None) -> Plan:
    """Select the probes of `mode` (or `only` and what they read) and find what each one waits for."""
    in_mode = {pid: s for pid, s in rulebook.probes.items() if s.modes is None or mode in s.modes}
    graph = graph_of(rulebook)
    deps: dict[str, frozenset[str]] = {}
    problems: dict[str, FactError] = {}
    for pid in in_mode:
        params = graph.params[pid]
        # Everything the parameters need finished: facts they read or ask about, directly or
        # through derived values. Whether a missing one matters is decided when they are resolved
        # (a derived value may ask `failed(facts.x)` of a probe this mode does not collect).
        reads = params.waits_for
        unknown = sorted(r for r in reads if r not in rulebook.probes)
        outside = sorted(r for r in params.facts if r in rulebook.probes and r not in in_mode)
        problem = None
        if params.problem is not None:
            problem = FactError(code="params.interpolation", message=params.problem)
        elif unknown:
            problem = FactError(code="params.interpolation",
                                message=f"reads facts.{unknown[0]}, but the rulebook declares no probe {unknown[0]!r}")
        elif outside:
            problem = FactError(code="dependency.failed",
                                message=f"depends on probe {outside[0]!r}, which is not collected in mode {mode!r}")
        if problem:
            problems[pid] = problem
        deps[pid] = frozenset(r for r in reads if r in in_mode and r != pid)
        if pid in reads:
            problems[pid] = FactError(code="dependency.cycle", message=f"probe {pid!r} reads its own fact")
    selected = set(in_mode)
    if only is not None:
        _check_only(rulebook, mode, only, in_mode)
        selected, todo = set(), list(only)
        while todo:
            pid = todo.pop()
            if pid not in selected:
                selected.add(pid)
                todo.extend(deps[pid])
    for pid in _cycle_members(selected, deps):
        problems[pid] = FactError(code="dependency.cycle",
                                  message=f"probe {pid!r} is part of a dependency cycle: probes whose parameters "
                                          "read each other's facts")
    # A probe that fails before running waits for nothing.
    return Plan(probes={pid: s for pid, s in in_mode.items() if pid in selected},
                deps={pid: frozenset() if pid in problems else deps[pid] for pid in selected},
                problems={pid: p for pid, p in problems.items() if pid in selected})


def _check_only(rulebook: Rulebook, mode: str, only: set[str], in_mode: Mapping[str, ProbeSpec]) -> None:
    unknown = sorted(only - set(rulebook.probes))
    if unknown:
        raise UsageError(f"--only {unknown[0]}: the rulebook has no probe of that name; its probes are "
                         f"{', '.join(rulebook.probes) or '(none)'}", code="C001")
    outside = sorted(only - set(in_mode))
    if outside:
        raise UsageError(f"--only {outside[0]}: that probe is not collected in mode {mode!r} "
                         f"(its modes: {', '.join(rulebook.probes[outside[0]].modes or [])})", code="C001")


def _cycle_members(nodes: set[str], deps: Mapping[str, frozenset[str]]) -> set[str]:
    """Nodes that can reach themselves (Kahn's algorithm leaves cycles and what hangs off them)."""
    waiting = {n: set(deps[n]) & nodes for n in nodes}
    ready = [n for n, d in waiting.items() if not d]
    while ready:
        done = ready.pop()
        for n, d in waiting.items():
            if done in d:
                d.discard(done)
                if not d:
                    ready.append(n)
    stuck = {n for n, d in waiting.items() if d}

    def reaches_self(start: str) -> bool:
        seen, todo = set(), list(waiting[start])
        while todo:
            n = todo.pop()
            if n == start:
                return True
            if n not in seen:
                seen.add(n)
                todo.extend(waiting.get(n, ()))
        return False

    return {n for n in stuck if reaches_self(n)}
