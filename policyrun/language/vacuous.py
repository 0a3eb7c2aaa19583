"""Lint L030: a phase whose checks on test results pass when no test ran.

`facts.unit.totals.failed == 0` holds for a report of zero tests (`<testsuites/>`, a run that
collected nothing, a wrong path matching an old empty file), so a gate written that way certifies
work nobody tested. Rather than guess from field names, each probe kind that reads results says
what its fact is for input holding none (`empty_value(params)`, tests.junit has one), and the
phase's own conditions are evaluated against it:

- a condition that reads the probe only through something lint cannot compute (another fact, a
  derived value, an input without a default) counts as a guard: lint warns only when sure;
- the phase is flagged when some evidence reading the probe is satisfied, no evidence reading it
  fails, no stop condition reading it fires and no precondition reading it fails, here or in a
  phase it requires.

The expressions run under the evaluation guard (policyrun.language.guard), with tighter limits.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from policyrun.errors import Finding, FindingSink
from policyrun.language.expr import ExprError, compile_condition, compile_expr, evaluate
from policyrun.language.rulebook import LoadedRulebook, node_path_text
from policyrun.yamlsource import NodePath

_SATISFIED, _FAILS, _UNKNOWN = "satisfied", "fails", "unknown"  # what an evidence does on the empty fact


def vacuous_findings(rb: LoadedRulebook) -> list[Finding]:
    from policyrun.language.interpolation import has_template
    from policyrun.probes.declared import declarations

    model = rb.model
    kinds = declarations() if model.probes else {}
    empty: dict[str, Any] = {}
    for pid, spec in model.probes.items():
        value_of = getattr(kinds.get(spec.uses), "empty_value", None)
        if value_of is not None:
            empty[pid] = value_of({k: v for k, v in spec.with_.items() if not has_template(v)})
    if not empty:
        return []
    from policyrun.errors import PolicyrunError
    from policyrun.language.guard import run_guarded

    # The rulebook's expressions run here, at lint time: under the same guard as an evaluation (a
    # derived value that doubles a string thirty times must not hang or exhaust lint), with
    # tighter limits, since on an empty report every honest expression is instant. An expression
    # refused by the guard is one lint cannot compute: it counts as a guard, so no warning.
    try:
        return run_guarded(lambda: _analyse(rb, empty), seconds=LINT_EXPRESSION_SECONDS, memory=LINT_MEMORY_BYTES)
    except PolicyrunError:
        return []


LINT_EXPRESSION_SECONDS = 2.0
LINT_MEMORY_BYTES = 1 << 30


def _analyse(rb: LoadedRulebook, empty: Mapping[str, Any]) -> list[Finding]:
    model = rb.model
    derived_reads = _probes_read_by_derived(rb)
    inputs = {name: spec.default for name, spec in model.inputs.items() if spec.default is not None}
    sink = FindingSink()
    for pid, value in empty.items():
        variables = {"facts": {pid: value}, "vars": dict(model.vars), "inputs": inputs}
        variables["derived"] = _derived(rb, variables)
        guarded: set[int] = set()
        for pi, phase in enumerate(model.phases):
            satisfied: list[tuple[NodePath, str]] = []
            guard = False
            for path, sources, role in _conditions(phase, ("phases", pi)):
                if not any(pid in _probes(s, derived_reads) for s in sources if s):
                    continue
                result = _evidence(sources, variables) if role == "evidence" else _other(sources, role, variables)
                if result == _SATISFIED:
                    satisfied.append((path, sources[1] if path[-1] == "violations" else sources[2]))
                elif result is not None:
                    guard = True
            if guard:
                guarded.add(pi)
            elif satisfied and not _required(model, pi) & guarded:
                path, source = satisfied[0]
                sink.add("L030", _message(phase.id, pid, source, path[-1] == "violations"), rb.locate(path),
                         severity="warning", node=node_path_text(path))
    return sink.findings


def _message(phase: str, pid: str, source: str, violations: bool) -> str:
    what = "finds nothing" if violations else "holds"
    return (f"phase {phase} passes when facts.{pid} holds no test at all: `{' '.join(source.split())}` {what} for "
            "an empty report, and no check of the phase (or of a phase it requires) asks that tests ran; add "
            f"`&& facts.{pid}.totals.tests > 0`, or an evidence `facts.{pid}.totals.passed > 0`")


def _conditions(phase: Any, base: NodePath) -> Iterator[tuple[NodePath, tuple[str, ...], str]]:
    """(node, expressions, role) for every condition of a phase; an evidence's expressions are
    (applies_when or "", violations or "", check)."""
    for j, cond in enumerate(phase.preconditions):
        yield (*base, "preconditions", j), (cond.violations or "", cond.condition), "precondition"
    for j, stop in enumerate(phase.stop_when):
        yield (*base, "stop_when", j, "when" if stop.when is not None else "violations"), \
            (stop.violations or "", stop.condition), "stop"
    for j, ev in enumerate(phase.evidence):
        node: NodePath = (*base, "evidence", j, "check" if ev.check is not None else "violations")
        yield node, (ev.applies_when or "", ev.violations or "", ev.condition), "evidence"


def _value(source: str, variables: Mapping[str, Any], *, condition: bool = True) -> Any:
    """The expression's value on the empty fact, or None when lint cannot compute it."""
    try:
        outcome = evaluate(compile_condition(source) if condition else compile_expr(source), variables)
    except ExprError:
        return None
    return outcome.value if outcome.error is None else None


def _evidence(sources: tuple[str, ...], variables: Mapping[str, Any]) -> str | None:
    applies_when, violations, check = sources
    if applies_when:
        applies = _value(applies_when, variables)
        if applies is False:
            return None  # NOT_APPLICABLE: neither passes nor guards
        if applies is not True:
            return _UNKNOWN
    if violations:
        found = _value(violations, variables, condition=False)
        if not isinstance(found, list):
            return _UNKNOWN
        variables = {**variables, "violations": found}
    value = _value(check, variables)
    return _SATISFIED if value is True else (_FAILS if value is False else _UNKNOWN)


def _other(sources: tuple[str, ...], role: str, variables: Mapping[str, Any]) -> str | None:
    """A precondition or stop condition ((violations or "", condition)): None when it lets the
    phase pass on the empty fact."""
    violations, source = sources
    if violations:
        found = _value(violations, variables, condition=False)
        if not isinstance(found, list):
            return _FAILS
        variables = {**variables, "violations": found}
    value = _value(source, variables)
    if value is (role == "precondition"):
        return None
    return _FAILS


def _derived(rb: LoadedRulebook, variables: Mapping[str, Any]) -> dict[str, Any]:
    """The derived values computable from the empty fact alone (the others stay absent, so what
    reads them is unknown). One pass per level of dependency between derived values."""
    values: dict[str, Any] = {}
    todo = dict(rb.model.derive)
    while todo:
        done = {}
        for did, spec in todo.items():
            value = _value(spec.value, {**variables, "derived": values}, condition=False)
            if value is not None:
                done[did] = value
        if not done:
            break
        values.update(done)
        todo = {k: v for k, v in todo.items() if k not in done}
    return values


def _probes(source: str, derived_reads: Mapping[str, frozenset[str]]) -> frozenset[str]:
    try:
        compiled = compile_expr(source)
    except ExprError:
        return frozenset()
    found = set(compiled.facts) | set(compiled.fact_status)
    for did in compiled.derived:
        found |= derived_reads.get(did, frozenset())
    return frozenset(found)


def _probes_read_by_derived(rb: LoadedRulebook) -> dict[str, frozenset[str]]:
    """Derived value → the probes it reads, directly or through other derived values."""
    direct: dict[str, tuple[frozenset[str], frozenset[str]]] = {}
    for did, spec in rb.model.derive.items():
        try:
            compiled = compile_expr(spec.value)
        except ExprError:
            continue
        direct[did] = (compiled.facts, compiled.derived)
    out: dict[str, frozenset[str]] = {}
    for did in direct:
        seen, todo, probes = {did}, [did], set[str]()
        while todo:
            facts, derived = direct.get(todo.pop(), (frozenset(), frozenset()))
            probes |= facts
            todo.extend(d for d in derived if d not in seen)
            seen |= derived
        out[did] = frozenset(probes)
    return out


def _required(model: Any, index: int) -> set[int]:
    """The phases `index` requires, transitively (default: every earlier phase)."""
    ids = {p.id: i for i, p in enumerate(model.phases)}
    out: set[int] = set()
    todo = [index]
    while todo:
        phase = model.phases[todo.pop()]
        names = phase.requires if phase.requires is not None else [p.id for p in model.phases[:ids[phase.id]]]
        for name in names:
            i = ids.get(name)
            if i is not None and i not in out:
                out.add(i)
                todo.append(i)
    return out
