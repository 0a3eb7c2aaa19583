"""A probe's parameters resolved: its `when`, its templates, its `for_each` elements and `key`s.

Templates read inputs, vars, the mode, facts and derived values; what cannot be resolved becomes
the error fact that says why (and which probes an unset input or a false `when` left out).

Separate from the scheduler because resolving is needed twice: while collecting (over the facts
finished so far) and when `evaluate --facts` replays a snapshot (over the snapshot's own facts,
policyrun.collection.stale) — one resolver, so the two can never disagree about a parameter.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from policyrun import limits
from policyrun.evaluate.derive import Budget, Derivation, derive_for_params, graph_of
from policyrun.language.expr import ExprError, compile_condition, evaluate
from policyrun.language.interpolation import InterpolationError, interpolate
from policyrun.facts import Fact, FactError, FactsSnapshot, Provenance, fact_code
from policyrun.model import ProbeSpec, Rulebook

_INPUT_ONLY = re.compile(r"^\$\{\s*inputs\.([A-Za-z_][A-Za-z0-9_]*)\s*\}$")


def _unset_input(raw: Mapping[str, Any], shown: Mapping[str, Any]) -> tuple[str, str] | None:
    """A parameter that is exactly `${inputs.x}` for an optional input left unset: say so, rather
    than let the parameter schema complain that null is not a string."""
    for param, template in raw.items():
        m = _INPUT_ONLY.match(template) if isinstance(template, str) else None
        if m and shown.get(param) is None:
            return param, m.group(1)
    return None


NOT_APPLICABLE = "probe.not_applicable"  # the error code of a probe whose `when` is false


def _why(exc: InterpolationError | ExprError) -> str:
    expr = getattr(exc, "expression", "")
    return f"`${{{expr}}}` could not be evaluated: {exc.message}" if expr else exc.message


class _Status(Mapping[str, "str | None"]):
    """failed()/error_code() over the facts collected so far (elements of fan-outs too)."""

    def __init__(self, facts: Mapping[str, Fact]) -> None:
        self.facts = facts

    def __getitem__(self, name: str) -> str | None:
        return fact_code(self.facts, name)

    def __iter__(self) -> Any:
        return iter(self.facts)

    def __len__(self) -> int:
        return len(self.facts)


def error_fact(pid: str, spec: ProbeSpec, code: str, message: str, params: Mapping[str, Any]) -> Fact:
    """The fact of a probe (or fan-out element) that did not run: its error, its parameters as recorded."""
    err = FactError(code=code, message=message)
    return Fact(error=err, provenance=Provenance(probe=pid, kind=spec.uses, params=dict(params), error=err))


class Resolver:
    """Parameters resolved over the facts known so far (`record` adds one), for one rulebook,
    mode and set of inputs."""

    def __init__(self, rulebook: Rulebook, mode: str, inputs: Mapping[str, Any],
                 locations: Mapping[str, str] | None = None) -> None:
        self.rulebook = rulebook
        self.mode = mode
        self.inputs = dict(inputs)
        self.locations = locations or {}
        # Derived values computed for parameters so far, each once: a value is computed only after
        # every probe it reads has finished, so it cannot change later in the collection.
        self.derived = Derivation({}, {}, 0.0, 0)
        self.budget = Budget()
        self.facts: dict[str, Fact] = {}
        self.values: dict[str, Any] = {}

    def record(self, pid: str, fact: Fact) -> None:
        self.facts[pid] = fact
        if fact.ok:
            self.values[pid] = fact.value

    def not_applicable(self, pid: str, spec: ProbeSpec) -> Fact | None:
        """The fact of a probe whose `when` (over inputs, vars and mode) is false, or that cannot be
        decided; None when it holds and the probe is collected."""
        assert spec.when is not None
        try:
            outcome = evaluate(compile_condition(spec.when), {"inputs": self.inputs, "vars": self.rulebook.vars,
                                                              "mode": self.mode, "facts": {}, "derived": {}})
        except ExprError as exc:
            return error_fact(pid, spec, "probe.when_error", f"`when` does not compile: {exc.message}", spec.with_)
        if not outcome.ok or not isinstance(outcome.value, bool):
            why = outcome.error or f"it gave {type(outcome.value).__name__}, not a bool"
            return error_fact(pid, spec, "probe.when_error", f"`when: {spec.when}` could not be decided: {why}; "
                                                             "the probe was not collected", spec.with_)
        if outcome.value:
            return None
        return error_fact(pid, spec, NOT_APPLICABLE, f"not collected: `when: {spec.when}` is false", spec.with_)

    def variables(self, pid: str) -> dict[str, Any] | tuple[str, str]:
        """The variables the probe's templates see (derived values they read computed now), or
        (error code, message) when a derived value they read has none."""
        variables = {"facts": self.values, "inputs": self.inputs, "vars": self.rulebook.vars, "mode": self.mode,
                     "derived": {}}
        wanted = graph_of(self.rulebook).params[pid].derived
        if wanted:
            self.derived = derive_for_params(self.rulebook, self.mode, self.inputs, self.facts, wanted,
                                             known=self.derived, budget=self.budget, locations=self.locations)
            for did in sorted(wanted):
                if did in self.derived.errors:
                    return ("dependency.failed", f"reads derived.{did}, which has no value: "
                                                 f"{self.derived.errors[did]}")
            variables["derived"] = {did: self.derived.values[did] for did in wanted}
        return variables

    def interpolate(self, raw: Any, variables: Mapping[str, Any]) -> Any:
        """`raw` with its templates resolved (raises InterpolationError/ExprError)."""
        from policyrun.language.functions.factstatus import fact_status

        with fact_status(_Status(self.facts)):
            return interpolate(raw, variables)

    def resolve(self, pid: str, spec: ProbeSpec, item: tuple[Any] | None = None
                ) -> dict[str, Any] | tuple[str, str, Mapping[str, Any]]:
        """The probe's parameters after interpolation over the facts collected so far (for one
        element of a fan-out, with `item` bound), or (error code, message, parameters to record)
        when they cannot be resolved. `evaluate --facts` calls this too, to check that a snapshot
        was collected with these parameters."""
        raw = spec.with_
        variables = self.variables(pid)
        if isinstance(variables, tuple):
            return (*variables, raw)
        if item is not None:
            variables = {**variables, "item": item[0]}
        try:
            shown = self.interpolate(raw, variables)
        except (InterpolationError, ExprError) as exc:
            return ("params.interpolation", _why(exc), raw)
        unset = _unset_input(raw, shown)
        if unset is not None:
            param, name = unset
            return ("params.missing_input", f"parameter {param!r} comes from input {name!r}, which is not set; "
                                            f"pass --set {name}=...", shown)
        return dict(shown)

    def elements(self, pid: str, spec: ProbeSpec) -> list[tuple[str, Any]] | tuple[str, str]:
        """The fan-out's elements as (key, item), in for_each order, or (error code, message) when
        for_each or a key cannot be resolved, or keys repeat."""
        assert spec.for_each is not None
        variables = self.variables(pid)
        if isinstance(variables, tuple):
            return variables
        where = self.locations.get(f"probe.{pid}.for_each")
        at = f" (for_each at {where})" if where else ""
        try:
            items = self.interpolate(spec.for_each, variables)
        except (InterpolationError, ExprError) as exc:
            return "params.interpolation", f"for_each: {_why(exc)}"
        if not isinstance(items, list):
            return "fanout.not_a_list", f"for_each gave {type(items).__name__}, not a list{at}"
        if len(items) > limits.FANOUT_ELEMENTS:
            return "fanout.too_many", (f"for_each gave {len(items)} elements; the limit is {limits.FANOUT_ELEMENTS} "
                                       f"(limits.FANOUT_ELEMENTS){at}: split the probe or narrow the list")
        key_at = self.locations.get(f"probe.{pid}.key") or where
        out: list[tuple[str, Any]] = []
        first: dict[str, int] = {}
        for i, item in enumerate(items):
            if spec.key is not None:
                try:
                    key = self.interpolate(spec.key, {**variables, "item": item})
                except (InterpolationError, ExprError) as exc:
                    return "fanout.key", f"the key of element {i} could not be resolved: {_why(exc)}" + \
                        (f" (key at {key_at})" if key_at else "")
            else:
                key = item
            if not isinstance(key, str):
                fix = "give `key:` a string" if spec.key is not None else "declare `key:`, e.g. key: ${item.name}"
                return "fanout.key", (f"the key of element {i} is {type(key).__name__}, not a string: {fix}"
                                      + (f" (at {key_at})" if key_at else ""))
            if key in first:
                return "fanout.duplicate_key", (f"elements {first[key]} and {i} have the same key {key!r}"
                                                + (f" (key at {key_at})" if key_at else "")
                                                + "; each element needs its own key")
            first[key] = i
            out.append((key, item))
        return out


def unset_input_probes(facts: FactsSnapshot, deps: Mapping[str, frozenset[str]],
                       code: str = "params.missing_input") -> set[str]:
    """Probes that did not run because a parameter reads an optional input that was not set
    (`params.missing_input`), and probes that failed only because they wait for one. The rulebook
    made them depend on that input, so their absence is a choice of the command line, not a
    failure of collection (`collect` exits 0 for them; docs/cli.md). With `code` NOT_APPLICABLE:
    the probes whose `when` is false, and those that wait for one."""
    unset: dict[str, bool] = {}
    for start in facts.facts:  # depth first over the dependencies, without recursion (long chains)
        stack, visiting = [start], {start}
        while stack:
            pid = stack[-1]
            error = facts.facts[pid].error
            if pid in unset or error is None or error.code != "dependency.failed":
                unset.setdefault(pid, error is not None and error.code == code)
                stack.pop()
                continue
            failing = [d for d in sorted(deps.get(pid, ())) if d in facts.facts and not facts.facts[d].ok]
            pending = [d for d in failing if d not in unset and d not in visiting]
            if pending:
                stack.extend(pending)
                visiting.update(pending)
                continue
            unset[pid] = bool(failing) and all(unset.get(d, False) for d in failing)
            stack.pop()
    return {pid for pid, yes in unset.items() if yes}

