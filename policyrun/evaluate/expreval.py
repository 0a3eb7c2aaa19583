"""One rulebook expression over facts: what it read, its result, or why it has none. Pure: no I/O.

The interpreter (phases, checks, verdicts) and the derive stage (derived values, for evaluation
and for collection alike) both evaluate expressions through these functions, so a missing fact, a
refused expression and a summarised value mean the same thing wherever an expression runs.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from policyrun import limits
from policyrun.checkid import RecordKind, part_key
from policyrun.language.expr import Compiled, ExprError, compile_condition, compile_expr, evaluate, is_missing, lookup
from policyrun.facts import FactsSnapshot, fact_code, host_read_error
from policyrun.model import Rulebook
from policyrun.trace.model import CheckResult
from policyrun.trace.records import CheckRec, ReadRec, SummaryRec


_MAX_READ_BYTES = limits.TRACE_VALUE_BYTES  # larger values are summarised in the trace; facts_sha256 pins them
# Roots whose value changes while phases are evaluated, so expressions reading them are bound
# per evaluation instead of through the shared activation.
_LIVE_ROOTS = frozenset({"phases", "violations"})


@dataclass
class EvalContext:
    rulebook: Rulebook
    mode: str
    inputs: Mapping[str, Any]
    facts: FactsSnapshot
    locations: Mapping[str, str] = field(default_factory=dict)  # node key → "file:line:col"
    variables: dict[str, Any] = field(default_factory=dict)
    derived_errors: dict[str, str] = field(default_factory=dict)  # derived id → why it has no value
    derived_facts: dict[str, list[str]] = field(default_factory=dict)  # derived id → probe ids behind it
    derived_defects: set[str] = field(default_factory=set)  # derived ids without a value because of an error
    activation: Any = None
    waivers: Any = None  # policyrun.language.waivers.Waivers, with --waivers
    # path → read record: facts, inputs, vars and derived values do not change during the phases,
    # so a path read by many checks is looked up and summarised once.
    read_cache: dict[str, ReadRec] = field(default_factory=dict)
    # Evaluation only: probe id → why its fact is treated as failed although it holds a value (its
    # parameters read a derived value this evaluation could not compute; policyrun.evaluate.derive).
    tainted: dict[str, str] | None = None


@dataclass
class CheckOutcome:
    result: CheckResult
    reads: list[ReadRec]
    facts: list[str]
    message: str | None
    error: bool = False  # an evaluation error (not a missing fact): never tolerated as UNKNOWN
    deliberate: bool = False  # the expression called unknown('why'): UNKNOWN by the rulebook's own decision


@dataclass
class ValueOutcome:
    """A value expression's result (derived values, violations)."""

    value: Any
    reads: list[ReadRec]
    facts: list[str]
    message: str | None = None  # why there is no value
    error: bool = False

    @property
    def ok(self) -> bool:
        return self.message is None


class fact_status_of(Mapping[str, "str | None"]):
    """What failed()/error_code() answer: a fact's error code, None when it was collected. A view,
    so an evaluation does not walk a large snapshot to build it."""

    def __init__(self, facts: FactsSnapshot) -> None:
        self.facts = facts.facts
        self.tainted: dict[str, str] = {}  # filled by the derive stage (policyrun.evaluate.derive)

    def __getitem__(self, name: str) -> str | None:
        if name.partition("[")[0] in self.tainted:
            return TAINTED
        return fact_code(self.facts, name)

    def message(self, name: str) -> str | None:
        """error_message() (policyrun.language.functions.factstatus): the failed fact's recorded message."""
        if name in self.tainted:
            return self.tainted[name]
        fact = self.facts.get(name)
        error = fact.error if fact is not None else None
        return error.message if error is not None else None

    def __iter__(self) -> Any:
        return iter(self.facts)

    def __len__(self) -> int:
        return len(self.facts)


TAINTED = "dependency.failed"  # the error code of a fact whose parameters read a derived value without one


# --- expressions ------------------------------------------------------------------------------

def _prepare(ctx: EvalContext, source: str, key: str, condition: bool
             ) -> tuple[Compiled | None, list[ReadRec], list[str], tuple[str, bool] | None]:
    """Compile and read: (compiled, reads, fact ids, (why there is no result, is_error) or None)."""
    try:
        compiled = compile_condition(source) if condition else compile_expr(source)
    except ExprError as exc:  # lint rejects these; guard so evaluation never crashes
        return None, [], [], (f"expression error: {exc.message}", True)
    cache = ctx.read_cache if ctx.activation is not None else {}
    reads = []
    missing = []
    for path, parts in zip(compiled.reads, compiled.read_parts):
        rec = cache.get(path)
        if rec is None:
            rec = _read(ctx, path, parts)
            if parts[0] not in _LIVE_ROOTS:
                cache[path] = rec
        reads.append(rec)
        if "missing" in rec:
            missing.append(rec)
    # A probe asked about with failed()/error_code() backs the check too: its provenance (and error)
    # is what the answer rests on, so the trace keeps it and `explain` can show it.
    fact_ids = compiled.sorted_facts if not compiled.derived else \
        sorted(compiled.fact_ids() | compiled.fact_status
               | {p for d in compiled.derived for p in ctx.derived_facts.get(d, [])})
    # A presence test of a whole fact (`has(facts.x)`), or of one element of a fan-out
    # (`has(facts.p.k)`), must not turn a failed probe or element into false: failed(facts.x) is
    # the way to ask. Other missing reads are decided by evaluation (below).
    if missing and any(r["path"].split(".")[1] in compiled.strict_facts for r in missing
                       if r["path"].startswith("facts.")) \
            or (missing and compiled.strict_elements and any(
                rec.get("missing") and tuple(parts[1:3]) in compiled.strict_elements
                for rec, parts in zip(reads, compiled.read_parts) if parts[0] == "facts" and len(parts) == 3)):
        return compiled, reads, fact_ids, (_missing_message(missing), False)
    return compiled, reads, fact_ids, None


def _missing_message(missing: list[ReadRec]) -> str:
    """One line per missing fact or derived value, however many of its fields are read."""
    by_root: dict[str, str] = {}
    for r in missing:
        root = ".".join(r["path"].split(".")[:2])
        by_root.setdefault(root, r.get("error") or "not collected")
    return "missing fact " + "; ".join(f"{root}: {err}" for root, err in by_root.items())


def _defect(ctx: EvalContext, missing: list[ReadRec]) -> bool:
    """Whether a missing read is a derived value that has none because of an evaluation error or a
    bound (not a missing fact): then what reads it is an evaluation error too, which no mode's
    on_missing tolerates."""
    return any(r["path"].startswith("derived.") and r["path"].split(".")[1] in ctx.derived_defects for r in missing)


def _eval(ctx: EvalContext, compiled: Compiled, violations: list[Any] | None) -> Any:
    if compiled.roots & _LIVE_ROOTS:
        variables = ctx.variables if violations is None else {**ctx.variables, "violations": violations}
        return evaluate(compiled, variables)
    return evaluate(compiled, ctx.variables, ctx.activation)


def _failed_elements(ctx: EvalContext, reads: Sequence[ReadRec]) -> str:
    """For a missing key: the failed elements of the fan-out facts read, since a key a check could
    not find in a fan-out's map is most often an element whose run failed."""
    notes = []
    for pid in dict.fromkeys(r["path"].split(".")[1] for r in reads if r["path"].startswith("facts.")
                             and r["path"].count(".") >= 1):
        fact = ctx.facts.facts.get(pid)
        elements = fact.provenance.elements if fact is not None else None
        failed = [(k, e.error) for k, e in (elements or {}).items() if e.error is not None]
        if failed:
            shown = "; ".join(f"{k!r} {err.code}: {err.message}" for k, err in failed[:3])
            more = f"; {len(failed) - 3} more" if len(failed) > 3 else ""
            notes.append(f"facts.{pid} has failed elements: {shown}{more}")
    return f" ({'; '.join(notes)})" if notes else ""


def _failure(ctx: EvalContext, key: str, outcome: Any, reads: Sequence[ReadRec] = ()) -> tuple[str, bool]:
    """(message, is_error) for a failed evaluation. A bound that was hit is one line naming the
    rulebook location, never the expression itself."""
    if outcome.kind == "missing_key":
        return f"missing value: {outcome.error}{_failed_elements(ctx, reads)}", False
    if outcome.kind == "unknown":
        return outcome.error or "unknown", False
    where = ctx.locations.get(part_key(key, "check")) or ctx.locations.get(key)
    if outcome.kind in ("budget", "limit"):
        return (f"the expression at {where} {outcome.error}" if where else f"the expression {outcome.error}"), True
    return f"evaluation error: {outcome.error}", True


def run_check(ctx: EvalContext, source: str, key: str, violations: list[Any] | None = None) -> CheckOutcome:
    compiled, reads, fact_ids, stop = _prepare(ctx, source, key, condition=True)
    if stop is not None or compiled is None:
        message, error = stop or ("expression error", True)
        return CheckOutcome("UNKNOWN", reads, fact_ids, message, error=error)
    outcome = _eval(ctx, compiled, violations)
    if not outcome.ok:
        # Missing facts are absent from the binding, so a decision that needed one fails to
        # evaluate: fail closed, naming the missing facts. A decision that did not need them (the
        # other branch of ?:, a side of && or || that decided alone) stands.
        missing = [r for r in reads if r.get("missing")]
        if missing and outcome.kind in ("missing_key", "error"):
            return CheckOutcome("UNKNOWN", reads, fact_ids, _missing_message(missing), error=_defect(ctx, missing))
        message, error = _failure(ctx, key, outcome, reads)
        return CheckOutcome("UNKNOWN", reads, fact_ids, message, error=error, deliberate=outcome.kind == "unknown")
    if not isinstance(outcome.value, bool):
        return CheckOutcome("UNKNOWN", reads, fact_ids,
                            f"evaluation error: condition produced {type(outcome.value).__name__}, not a bool",
                            error=True)
    return CheckOutcome("SATISFIED" if outcome.value else "UNSATISFIED", reads, fact_ids, None)


def run_value(ctx: EvalContext, source: str, key: str, violations: list[Any] | None = None) -> ValueOutcome:
    compiled, reads, fact_ids, stop = _prepare(ctx, source, key, condition=False)
    if stop is not None or compiled is None:
        message, error = stop or ("expression error", True)
        return ValueOutcome(None, reads, fact_ids, message, error)
    # Derived values are computed before the shared activation exists (it holds them).
    outcome = evaluate(compiled, ctx.variables) if ctx.activation is None else _eval(ctx, compiled, violations)
    if not outcome.ok:
        missing = [r for r in reads if r.get("missing")]
        if missing and outcome.kind in ("missing_key", "error"):
            return ValueOutcome(None, reads, fact_ids, _missing_message(missing), _defect(ctx, missing))
        message, error = _failure(ctx, key, outcome, reads)
        return ValueOutcome(None, reads, fact_ids, message, error)
    return ValueOutcome(outcome.value, reads, fact_ids)


def _read(ctx: EvalContext, path: str, parts: tuple[str, ...]) -> ReadRec:
    if parts[0] == "facts" and len(parts) > 1:
        fact = ctx.facts.facts.get(parts[1])
        if fact is None:
            return {"path": path, "missing": True, "error": "not collected"}
        if fact.error is not None:
            return {"path": path, "missing": True, "error": f"{fact.error.code}: {fact.error.message}"}
        if ctx.tainted and parts[1] in ctx.tainted:
            return {"path": path, "missing": True, "error": f"{TAINTED}: {ctx.tainted[parts[1]]}"}
        elements = fact.provenance.elements
        if elements is not None and len(parts) > 2:
            # One element of a fan-out: its own error, or a key for_each did not give.
            element = elements.get(parts[2])
            if element is None:
                return {"path": path, "missing": True, "error": f"not collected: for_each gave no element {parts[2]!r}"}
            if element.error is not None:
                return {"path": path, "missing": True, "error": f"{element.error.code}: {element.error.message}"}
    elif parts[0] == "hosts" and len(parts) > 1 and parts[1] not in ctx.variables.get("hosts", {}):
        return {"path": path, "missing": True, "error": host_read_error(ctx.facts, parts[1])}
    elif parts[0] == "derived" and len(parts) > 1 and parts[1] in ctx.derived_errors:
        return {"path": path, "missing": True, "error": ctx.derived_errors[parts[1]]}
    elif parts[0] == "phases" and len(parts) > 1 and parts[1] not in ctx.variables["phases"]:
        return {"path": path, "missing": True, "error": "phase not evaluated yet"}
    value = lookup(ctx.variables, parts)
    if is_missing(value):
        # A field absent inside a collected fact: not an error of collection, let CEL decide
        # (`has()` and optional chaining may handle it); record that it is absent.
        return {"path": path, "error": "absent"}
    kind = type(value)
    if kind is str:
        return {"path": path, "value": value if len(value) + 2 <= _MAX_READ_BYTES else summarise(value)}
    if kind is not list and kind is not dict:  # a number, bool or null: as it is
        return {"path": path, "value": value}
    return {"path": path, "value": summarise(value)}


_CONTAINERS = (list, dict)
_SHORT = 256  # a flat container of at most 64 items none longer than this is kept without measuring


def summarise(value: Any) -> Any:
    """The value as the trace records it: as it is up to limits.TRACE_VALUE_BYTES of JSON, else its
    type, length and sha256. Strings count too, and so does nesting deeper than a facts file may
    hold, so whatever `evaluate` writes, `report`, `explain` and `verify` read."""
    return summarise_sized(value)[0]


def summarise_sized(value: Any) -> tuple[Any, int]:
    """`summarise(value)` and the value's size as JSON text (estimated for scalars and small flat
    containers, measured otherwise): the derive stage charges it to its budget without a second
    pass over the value."""
    kind = type(value)
    if kind is str:
        size = len(value) + 2
        return (value if size <= _MAX_READ_BYTES else _summary("str", len(value), value)), size
    if kind is not list and kind is not dict:
        return value, 8
    items = value.values() if kind is dict else value
    if len(value) <= 64 and not any(type(v) in _CONTAINERS or (type(v) is str and len(v) > _SHORT) for v in items) \
            and (kind is list or not any(type(k) is str and len(k) > _SHORT for k in value)):
        # small and flat: cheaper to keep than to measure exactly
        size = 2 + sum(len(v) + 3 if type(v) is str else 9 for v in items)
        return value, size + (sum(len(k) + 4 if type(k) is str else 9 for k in value) if kind is dict else 0)
    try:
        text = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    except (RecursionError, ValueError, TypeError):  # nests past what the encoder follows
        return {"truncated": True, "type": kind.__name__, "length": len(value), "sha256": None}, 1 << 62
    if len(text) <= _MAX_READ_BYTES and not _too_deep(value, text):
        return value, len(text)
    return _summary(kind.__name__, len(value), text), len(text)


def _too_deep(value: Any, text: str) -> bool:
    # Each level needs an opening bracket: count them (C speed) before walking the levels.
    if text.count("[") + text.count("{") <= limits.FACTS_DEPTH:
        return False
    return limits.depth_exceeds(value, limits.FACTS_DEPTH)


# Set by `evaluate --out` (policyrun.evaluate.tracevalues.keeping_values): told each value the trace
# summarises, with the text its checksum is taken over, so the whole value is kept beside the trace.
on_summary: Callable[[str, str, str], None] | None = None


def _summary(type_name: str, length: int, text: str) -> SummaryRec:
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
    if on_summary is not None:
        on_summary(digest, type_name, text)
    return {"truncated": True, "type": type_name, "length": length, "sha256": digest}


def record_check(ctx: EvalContext, check_id: str, kind: RecordKind, expression: str, outcome: CheckOutcome,
            loc_key: str) -> CheckRec:
    rec: CheckRec = {"id": check_id, "kind": kind, "expression": expression, "result": outcome.result, "outcome": None,
           "reads": outcome.reads, "facts": outcome.facts, "message": outcome.message,
           "location": ctx.locations.get(loc_key)}
    if outcome.result == "UNKNOWN":
        rec["unknown"] = "deliberate" if outcome.deliberate else ("error" if outcome.error else "missing")
    return rec
