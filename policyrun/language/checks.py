"""Static checks of a loaded rulebook: everything `lint` reports and `evaluate` refuses to run.

Each finding has a stable code (docs/lint.md lists them), a message that says what to do, and
the file:line:col of the node at fault (for expressions, the column inside the expression).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from policyrun.language.derivegraph import graph_of
from policyrun.errors import Finding, FindingSink
from policyrun.language.expr import Compiled, ExprError, caret, compile_condition, compile_expr
from policyrun.language.interpolation import split_template
from policyrun.language.rulebook import LoadedRulebook, node_path_text
from policyrun.yamlsource import NodePath


@dataclass(frozen=True)
class ExprSite:
    source: str  # the expression text
    path: NodePath  # YAML node holding it
    offset: int  # offset of the expression inside the node's string (templates)
    condition: bool  # must be a bool
    phase_index: int | None  # phase that owns it (for `phases.X` ordering), None for verdicts
    violations: bool = False  # may read `violations` (an evidence with a violations list)
    derived: str | None = None  # the derive id when this is a derived value's expression
    item: bool = False  # may read `item` (the `with:` and `key:` of a probe with `for_each`)
    probe_when: bool = False  # a probe's `when`: decided before collection, over inputs, vars and mode
    row: tuple[str, ...] | None = None  # the fields of `violations` rows, when the check declares `row:`


_SITES: list[tuple[LoadedRulebook, list[ExprSite]]] = []


def expression_sites(rb: LoadedRulebook) -> Iterator[ExprSite]:
    """Every CEL expression in the rulebook: conditions and `${...}` inside templates. Four lint
    passes walk them: listed once per rulebook (the last one), not split out of templates again."""
    if not _SITES or _SITES[0][0] is not rb:
        _SITES[:] = [(rb, list(_expression_sites(rb)))]
    return iter(_SITES[0][1])


def _expression_sites(rb: LoadedRulebook) -> Iterator[ExprSite]:
    model = rb.model
    styles = rb.source.styles

    def conditions(value: str, path: NodePath, phase: int | None, violations: bool = False,
                   row: Any = None) -> Iterator[ExprSite]:
        yield ExprSite(value, path, 0, True, phase, violations, row=_fields(row))

    def templates(value: Any, path: NodePath, phase: int | None, violations: bool = False,
                  item: bool = False, row: Any = None) -> Iterator[ExprSite]:
        if isinstance(value, str):
            if "${" not in value:
                return
            try:
                segments = split_template(value)
            except ExprError as exc:
                yield ExprSite("", path, exc.column - 1, False, phase)  # reported as X004 below
                return
            for seg in segments:
                if seg.is_expr:
                    yield ExprSite(seg.text, path, seg.offset, False, phase, violations, item=item,
                                   row=_fields(row))
        elif isinstance(value, dict):
            for k, v in value.items():
                yield from templates(v, (*path, k), phase, violations, item, row)
        elif isinstance(value, list):
            for i, v in enumerate(value):
                yield from templates(v, (*path, i), phase, violations, item, row)

    for did, spec in model.derive.items():
        yield ExprSite(spec.value, ("derive", did, "value"), 0, False, None, derived=did)

    for name, mode in model.modes.items():
        for i, entry in enumerate(mode.phases):
            if entry.when is not None:
                yield from conditions(entry.when, ("modes", name, "phases", i, "when"), None)
    for pid, probe in model.probes.items():
        fans = probe.for_each is not None
        yield from templates(probe.with_, ("probes", pid, "with"), None, item=fans)
        if probe.for_each is not None:
            yield from templates(probe.for_each, ("probes", pid, "for_each"), None)
        if probe.key is not None:
            yield from templates(probe.key, ("probes", pid, "key"), None, item=True)
        if probe.when is not None:
            yield ExprSite(probe.when, ("probes", pid, "when"), 0, True, None, probe_when=True)
    for pi, phase in enumerate(model.phases):
        base: NodePath = ("phases", pi)
        for j, cond in enumerate(phase.preconditions):
            short = (*base, "preconditions", j) in styles
            listed = cond.violations is not None
            if cond.violations is not None:
                yield ExprSite(cond.violations, (*base, "preconditions", j, "violations"), 0, False, pi)
            if cond.check is not None:
                yield from conditions(cond.check, (*base, "preconditions", j) if short
                                      else (*base, "preconditions", j, "check"), pi, listed, cond.row)
            if cond.message:
                yield from templates(cond.message, (*base, "preconditions", j, "message"), pi, listed,
                                     row=cond.row)
        for j, stop in enumerate(phase.stop_when):
            listed = stop.violations is not None
            if stop.violations is not None:
                yield ExprSite(stop.violations, (*base, "stop_when", j, "violations"), 0, False, pi)
            if stop.when is not None:
                yield from conditions(stop.when, (*base, "stop_when", j, "when"), pi, listed, stop.row)
            yield from templates(stop.blocker, (*base, "stop_when", j, "blocker"), pi, listed, row=stop.row)
            if stop.next:
                yield from templates(stop.next, (*base, "stop_when", j, "next"), pi, listed, row=stop.row)
        for j, ev in enumerate(phase.evidence):
            has_violations = ev.violations is not None
            if ev.violations is not None:
                yield ExprSite(ev.violations, (*base, "evidence", j, "violations"), 0, False, pi)
            if ev.check is not None:
                yield from conditions(ev.check, (*base, "evidence", j, "check"), pi, has_violations, ev.row)
            if ev.applies_when:
                yield from conditions(ev.applies_when, (*base, "evidence", j, "applies_when"), pi)
            if ev.message:
                yield from templates(ev.message, (*base, "evidence", j, "message"), pi, has_violations, row=ev.row)
            if ev.next:
                yield from templates(ev.next, (*base, "evidence", j, "next"), pi, has_violations, row=ev.row)
        for status, text in phase.next.items():
            yield from templates(text, (*base, "next", status), pi)
    for vi, verdict in enumerate(model.verdicts):
        yield from conditions(verdict.when, ("verdicts", vi, "when"), None)
        yield from templates(verdict.summary, ("verdicts", vi, "summary"), None)


def _fields(row: Any) -> tuple[str, ...] | None:
    return tuple(row.fields) if row is not None else None


def check_rulebook(rb: LoadedRulebook) -> list[Finding]:
    sink = FindingSink()
    _check_ids(rb, sink)
    _check_modes(rb, sink)
    _check_requires(rb, sink)
    _check_expressions(rb, sink)
    _check_probe_graph(rb, sink)
    _check_inputs(rb, sink)
    _check_report(rb, sink)
    return sink.findings


def _check_report(rb: LoadedRulebook, sink: FindingSink) -> None:
    """`report.hardware_phases` decides every report's readiness: a misspelt id would silently
    count a GPU gate as shared code."""
    if rb.model.report is None:
        return
    ids = [p.id for p in rb.model.phases]
    for i, pid in enumerate(rb.model.report.hardware_phases):
        if pid not in ids:
            _add(sink, rb, "L004", f"report.hardware_phases names unknown phase {pid!r}{_hint(pid, ids)}",
                 ("report", "hardware_phases", i))


def _add(sink: FindingSink, rb: LoadedRulebook, code: str, message: str, path: NodePath, *,
         key: bool = False, severity: str = "error") -> None:
    sink.add(code, message, rb.locate(path, key=key), severity=severity,  # type: ignore[arg-type]
             node=node_path_text(path))


def _hint(name: str, options: list[str]) -> str:
    m = difflib.get_close_matches(name, options, n=1)
    return f"; did you mean {m[0]!r}?" if m else ""


def _check_ids(rb: LoadedRulebook, sink: FindingSink) -> None:
    seen: dict[str, int] = {}
    for i, phase in enumerate(rb.model.phases):
        if phase.id in seen:
            _add(sink, rb, "L005", f"duplicate phase id {phase.id!r} (also phases[{seen[phase.id]}])",
                 ("phases", i, "id"))
        seen.setdefault(phase.id, i)
        ev_seen: set[str] = set()
        for j, ev in enumerate(phase.evidence):
            if ev.id in ev_seen:
                _add(sink, rb, "L006", f"duplicate evidence id {ev.id!r} in phase {phase.id}",
                     ("phases", i, "evidence", j, "id"))
            ev_seen.add(ev.id)
        for j, stop in enumerate(phase.stop_when):
            if stop.id and stop.id in ev_seen:
                _add(sink, rb, "L006", f"duplicate check id {stop.id!r} in phase {phase.id}",
                     ("phases", i, "stop_when", j, "id"))
            if stop.id:
                ev_seen.add(stop.id)
    verdict_ids: set[str] = set()
    for i, verdict in enumerate(rb.model.verdicts):
        if verdict.id in verdict_ids:
            _add(sink, rb, "L005", f"duplicate verdict id {verdict.id!r}", ("verdicts", i, "id"))
        verdict_ids.add(verdict.id)


def _check_modes(rb: LoadedRulebook, sink: FindingSink) -> None:
    phase_ids = [p.id for p in rb.model.phases]
    reached: set[str] = set()
    for name, mode in rb.model.modes.items():
        listed: set[str] = set()
        order: list[int] = []
        for i, entry in enumerate(mode.phases):
            path = ("modes", name, "phases", i)
            if entry.phase not in phase_ids:
                _add(sink, rb, "L007", f"mode {name!r} lists phase {entry.phase!r}, which does not exist"
                     f"{_hint(entry.phase, phase_ids)}", path)
                continue
            if entry.phase in listed:
                _add(sink, rb, "L017", f"mode {name!r} lists phase {entry.phase!r} twice", path)
            listed.add(entry.phase)
            order.append(phase_ids.index(entry.phase))
        if order != sorted(order):
            _add(sink, rb, "L018", f"mode {name!r} lists phases out of rulebook order; phases always run "
                 "in the order of `phases`", ("modes", name, "phases"), severity="warning")
        reached |= listed
        for perm in mode.permissions:
            from policyrun.probes.base import SIDE_EFFECTS
            if perm not in SIDE_EFFECTS:
                hint = _hint(perm, list(SIDE_EFFECTS)) or f"; known: {', '.join(SIDE_EFFECTS)}"
                _add(sink, rb, "L019", f"unknown permission {perm!r}{hint}", ("modes", name, "permissions", perm), key=True)
    for i, phase in enumerate(rb.model.phases):
        if phase.id not in reached:
            _add(sink, rb, "L009", f"no mode runs phase {phase.id!r}; add it to a mode or remove it",
                 ("phases", i, "id"))
        for j, ev in enumerate(phase.evidence):
            _check_mode_keys(rb, sink, ev.on_missing, ("phases", i, "evidence", j, "on_missing"))
        for j, stop in enumerate(phase.stop_when):
            _check_mode_keys(rb, sink, stop.on_missing, ("phases", i, "stop_when", j, "on_missing"))
    for pid, probe in rb.model.probes.items():
        for k, mode_name in enumerate(probe.modes or []):
            if mode_name not in rb.model.modes:
                _add(sink, rb, "L013", f"probe {pid!r} names unknown mode {mode_name!r}"
                     f"{_hint(mode_name, list(rb.model.modes))}", ("probes", pid, "modes", k))


def _check_mode_keys(rb: LoadedRulebook, sink: FindingSink, policy: Any, path: NodePath) -> None:
    if isinstance(policy, dict):
        for key in policy:
            if key != "default" and key not in rb.model.modes:
                _add(sink, rb, "L014", f"on_missing names unknown mode {key!r}{_hint(key, list(rb.model.modes))}",
                     (*path, key), key=True)


def _check_requires(rb: LoadedRulebook, sink: FindingSink) -> None:
    ids = [p.id for p in rb.model.phases]
    graph: dict[str, list[str]] = {}
    for i, phase in enumerate(rb.model.phases):
        graph[phase.id] = []
        for j, req in enumerate(phase.requires or []):
            path = ("phases", i, "requires", j)
            if req not in ids:
                _add(sink, rb, "L004", f"phase {phase.id} requires unknown phase {req!r}{_hint(req, ids)}", path)
            elif req == phase.id:
                _add(sink, rb, "L008", f"phase {phase.id} requires itself", path)
            else:
                graph[phase.id].append(req)
                if ids.index(req) > i:
                    _add(sink, rb, "L008", f"phase {phase.id} requires {req}, which comes later; a phase can "
                         "only require earlier phases (reorder `phases`)", path)
    cycle = _find_cycle(graph)
    if cycle:
        first = ids.index(cycle[0])
        _add(sink, rb, "L008", f"`requires` cycle: {' → '.join(cycle)}", ("phases", first, "requires"))


def _find_cycle(graph: dict[str, list[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in graph.get(node, []):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if state.get(nxt) is None and (found := visit(nxt)):
                return found
        state[node] = 2
        stack.pop()
        return None

    for node in graph:
        if node not in state and (found := visit(node)):
            return found
    return None


def _check_expressions(rb: LoadedRulebook, sink: FindingSink) -> None:
    model = rb.model
    phase_ids = [p.id for p in model.phases]
    used_probes: set[str] = set()
    used_derived: set[str] = set()
    for site in expression_sites(rb):
        text = rb.source.styles.get(site.path)
        if not site.source.strip():
            where = rb.source.locate_in_scalar(site.path, 1, site.offset + 1) if text is not None \
                else rb.locate(site.path)
            sink.add("X004", "empty or unterminated `${...}`", where, node=node_path_text(site.path))
            continue
        try:
            compiled: Compiled = compile_condition(site.source) if site.condition else compile_expr(site.source.strip())
        except ExprError as exc:
            lead = len(site.source) - len(site.source.lstrip()) if not site.condition else 0
            line, col = exc.line, exc.column + (lead if exc.line == 1 else 0)
            where = _position(rb, site, line, col)
            # The expression, with a `^` under the column, is shown under the message (text output).
            shown = site.source if site.condition else site.source.strip()
            sink.add(exc.code, exc.message, where, node=node_path_text(site.path),
                     excerpt=caret(shown, exc.line, exc.column))
            continue
        for probe in sorted(compiled.fact_status):
            used_probes.add(probe)
            if probe not in model.probes:
                _ref(rb, sink, site, f"facts.{probe}", "L003", f"asks about facts.{probe}, but no probe {probe!r} is "
                     f"declared{_hint(probe, list(model.probes))}")
        if "item" in compiled.roots and not site.item:
            _ref(rb, sink, site, "item", "L041", "reads `item`, which only the `with:` and `key:` of a probe with "
                 "`for_each` can read (it is the element that run is for)")
        if site.probe_when:
            late = sorted(r for r in compiled.roots & {"facts", "derived", "phases", "hosts"}) or \
                (["facts"] if compiled.fact_status else [])
            if late:
                _ref(rb, sink, site, late[0], "L040", f"a probe's `when` reads {late[0]}, but it is decided before "
                     "collection: it may read only inputs, vars and mode (to skip a check on a fact, use the "
                     "check's applies_when)")
        if "baseline" in compiled.roots and site.path[:1] == ("probes",):
            _ref(rb, sink, site, "baseline", "L043", "a probe reads `baseline`, but probes run before any evaluation "
                 "and `baseline` (an earlier evaluation, `evaluate --baseline DIR`) is bound only for derived values, "
                 "checks, messages and verdicts; read it there")
        for probe, key in sorted(compiled.element_status):
            spec = model.probes.get(probe)
            if spec is not None and spec.for_each is None:
                _ref(rb, sink, site, f"facts.{probe}", "L042", f"asks about element {key!r} of facts.{probe}, but "
                     f"probe {probe!r} has no for_each; ask about the whole fact: failed(facts.{probe})")
        if "violations" in compiled.roots and not site.violations:
            _ref(rb, sink, site, "violations", "L023", "reads `violations`, which only the check, message, blocker "
                 "or next action of an evidence, precondition or stop condition with a `violations:` list can "
                 "read")
        if site.row is not None and "violations" in compiled.roots:
            _check_row_fields(rb, sink, site, compiled)
        if site.derived is not None and "phases" in compiled.roots:
            _ref(rb, sink, site, "phases", "L020", "derived values cannot read phases (they are computed from "
                 "facts before any phase is decided)")
        for read in compiled.reads:
            parts = read.split(".")
            root = parts[0]
            name = parts[1] if len(parts) > 1 else None
            if name is None:
                continue
            if root == "facts":
                used_probes.add(name)
                if name not in model.probes:
                    _ref(rb, sink, site, read, "L003", f"reads facts.{name}, but no probe {name!r} is declared"
                         f"{_hint(name, list(model.probes))}")
            elif root == "hosts":
                used_probes.add(name)
                if name not in model.probes:
                    _ref(rb, sink, site, read, "L003", f"reads hosts.{name}, but no probe {name!r} is declared"
                         f"{_hint(name, list(model.probes))}")
            elif root == "inputs" and name not in model.inputs:
                _ref(rb, sink, site, read, "L001", f"reads undeclared input {name!r}{_hint(name, list(model.inputs))}")
            elif root == "vars" and name not in model.vars:
                _ref(rb, sink, site, read, "L002", f"reads undeclared var {name!r}{_hint(name, list(model.vars))}")
            elif root == "derived":
                used_derived.add(name)
                if name not in model.derive:
                    _ref(rb, sink, site, read, "L022", f"reads derived.{name}, but no derived value {name!r} is "
                         f"declared under `derive`{_hint(name, list(model.derive))}")
            elif root == "phases":
                if name not in phase_ids:
                    _ref(rb, sink, site, read, "L004", f"reads unknown phase {name!r}{_hint(name, phase_ids)}")
                elif site.phase_index is not None and phase_ids.index(name) >= site.phase_index:
                    _ref(rb, sink, site, read, "L004", f"reads phases.{name}, which is not decided yet at this "
                         "point (only earlier phases can be read)")
    for pid in model.probes:
        if pid not in used_probes:
            _add(sink, rb, "L010", f"probe {pid!r} is collected but no check reads facts.{pid}",
                 ("probes", pid), key=True, severity="warning")
    for did in model.derive:
        if did not in used_derived:
            _add(sink, rb, "L025", f"derived value {did!r} is computed but nothing reads derived.{did}",
                 ("derive", did), key=True, severity="warning")


def _check_row_fields(rb: LoadedRulebook, sink: FindingSink, site: ExprSite, compiled: Compiled) -> None:
    """L045: a field of a `violations` row that the check's `row:` does not declare, where the
    syntax tree shows it (`violations[0].x`, `violations.map(r, r.x)`): evaluation would refuse
    no row for it, and the field would read as missing."""
    from policyrun.language.typecheck import check_expression, rows_schema

    assert site.row is not None
    lead = len(site.source) - len(site.source.lstrip()) if not site.condition else 0
    for found in check_expression(compiled, {}, {"violations": rows_schema(site.row)}):
        where = _position(rb, site, found.line, found.column + (lead if found.line == 1 else 0))
        detail = found.message if "did you mean" in found.message else found.message.split("; ")[0]
        sink.add("L045", f"{detail} (the check's `row:` declares the fields {', '.join(site.row)}: read one of "
                 "them, or declare the field)", where, node=node_path_text(site.path))


def _position(rb: LoadedRulebook, site: ExprSite, line: int, col: int) -> Any:
    if line == 1:
        return rb.source.locate_in_scalar(site.path, 1, site.offset + col)
    return rb.source.locate_in_scalar(site.path, line, col)


def _ref(rb: LoadedRulebook, sink: FindingSink, site: ExprSite, read: str, code: str, message: str) -> None:
    """A finding at the position where the expression reads `read` (from the syntax tree)."""
    text = site.source if site.condition else site.source.strip()
    lead = len(site.source) - len(site.source.lstrip()) if not site.condition else 0
    try:
        at = compile_expr(text).column_of(read)
    except ExprError:
        at = None
    if at is None:
        where = rb.locate(site.path)
    else:
        line, col = at
        where = _position(rb, site, line, col + (lead if line == 1 else 0))
    sink.add(code, message, where, node=node_path_text(site.path))


def _check_probe_graph(rb: LoadedRulebook, sink: FindingSink) -> None:
    """Probes and derived values form one dependency graph: a probe's parameters may read facts
    and derived values, a derived value reads facts and other derived values. A cycle cannot be
    collected or computed."""
    model = rb.model
    # The edges come from the one graph collection and evaluation use (policyrun.language.derivegraph): a
    # probe's parameters wait for the facts they read or ask about with failed(), directly or
    # through derived values.
    deps = graph_of(model)
    graph: dict[str, list[str]] = {}
    for pid, params in deps.params.items():
        graph[f"facts.{pid}"] = [f"facts.{d}" for d in sorted(params.facts | params.status) if d in model.probes] + \
            [f"derived.{d}" for d in sorted(params.derived) if d in model.derive]
    for did, reads in deps.reads.items():
        graph[f"derived.{did}"] = [f"derived.{d}" for d in sorted(reads)] + \
            [f"facts.{d}" for d in sorted(deps.facts[did] | deps.status[did]) if d in model.probes]
    for site in expression_sites(rb):
        if site.path[:1] != ("probes",) or site.probe_when or not site.source.strip():
            continue  # a probe's `when` is checked with the expressions (L040)
        try:
            compiled = compile_expr(site.source.strip())
        except ExprError:
            continue
        if "phases" in compiled.roots:
            _add(sink, rb, "L020", "probe parameters cannot read phases (facts are collected before any "
                 "phase is decided)", site.path)
        spec = model.probes[str(site.path[1])]
        if spec.uses == "const" and (compiled.fact_ids() or compiled.reads_all_facts):
            _add(sink, rb, "L026", f"const probe {site.path[1]!r} computes a value from facts; move it to "
                 "`derive:` (read as derived.<id>) so it is recomputed from the facts at every evaluation "
                 "and replay, instead of frozen into the snapshot", ("probes", site.path[1]), key=True,
                 severity="warning")
    cycle = _find_cycle(graph)
    if cycle:
        text = " → ".join(cycle)
        if cycle[0].startswith("derived."):
            _add(sink, rb, "L024", f"derived values depend on each other in a cycle: {text}",
                 ("derive", cycle[0].split(".", 1)[1]), key=True)
        else:
            _add(sink, rb, "L021", f"probes depend on each other in a cycle: {text}",
                 ("probes", cycle[0].split(".", 1)[1]), key=True)
    for did, derived in model.derive.items():
        for k, mode_name in enumerate(derived.modes or []):
            if mode_name not in model.modes:
                _add(sink, rb, "L013", f"derived value {did!r} names unknown mode {mode_name!r}"
                     f"{_hint(mode_name, list(model.modes))}", ("derive", did, "modes", k))


def _check_inputs(rb: LoadedRulebook, sink: FindingSink) -> None:
    from policyrun.errors import UsageError
    from policyrun.language.inputs import coerce

    for name, spec in rb.model.inputs.items():
        if spec.default is not None:
            try:
                coerce(name, spec, spec.default, from_text=False)
            except UsageError as exc:
                _add(sink, rb, "L015", f"default does not match the input's type: {exc.message}",
                     ("inputs", name, "default"))
            if spec.required:
                _add(sink, rb, "L016", f"input {name!r} is required and has a default; drop one",
                     ("inputs", name), key=True, severity="warning")
