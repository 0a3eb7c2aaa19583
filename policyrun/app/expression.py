"""One CEL expression's value over a facts snapshot (`policyrun eval`, evidence skeletons).

The expression is evaluated exactly as a rulebook's derived value is — same compiler, same reads,
same fail-closed rules (a read of a missing or failed fact gives no value and says which fact and
why), same time and memory guard — with the rulebook's `vars` and `derive` values when one is given.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

EVAL_ID = "__eval__"  # the expression's slot among the derived values (not a valid rulebook id)


@dataclass(frozen=True)
class EvalRequest:
    expression: str
    facts_files: tuple[Path, ...]
    rulebook: str | None = None  # for its vars and derived values, and to check inputs
    mode: str | None = None
    sets: tuple[str, ...] = ()
    inputs_file: Path | None = None


@dataclass(frozen=True)
class EvalResult:
    expression: str
    mode: str
    ok: bool  # a value; else `error` says why there is none
    value: Any
    error: str | None
    reads: list[dict[str, Any]]
    facts: list[str]

    @property
    def exit_code(self) -> int:
        return 0 if self.ok else 1

    def as_json(self) -> dict[str, Any]:
        return {"expression": self.expression, "mode": self.mode, "ok": self.ok, "value": self.value,
                "error": self.error, "reads": self.reads, "facts": self.facts}


def evaluate_request(request: EvalRequest) -> EvalResult:
    """The expression's value; a secret input's text is masked in the result, as in a trace (the
    expression saw it)."""
    from policyrun.app.collect import load_snapshots
    from policyrun.language.inputs import mask_trace_record

    compile_or_explain(request.expression)  # before any file is read: the cheapest error first
    facts = load_snapshots(list(request.facts_files))
    rulebook, mode, inputs = _context(request)
    result = evaluate_expression(request.expression, rulebook, mode, inputs, facts)
    masked = mask_trace_record({**result, "inputs": {}}, rulebook, inputs)
    del masked["inputs"]
    return EvalResult(**masked)


def _caret(source: str, line: int, column: int) -> str:
    from policyrun.language.expr import caret

    return "\n" + caret(source, line, column)


def compile_or_explain(source: str) -> Any:
    """The compiled expression, or a usage error pointing at the offending character."""
    from policyrun.errors import Location, UsageError
    from policyrun.language.expr import ExprError, compile_expr

    try:
        return compile_expr(source)
    except ExprError as exc:
        raise UsageError(exc.message + _caret(source, exc.line, exc.column), code=exc.code,
                         location=Location("<expression>", exc.line, exc.column)) from None


def _context(request: EvalRequest) -> tuple[Any, str, dict[str, Any]]:
    """(rulebook model, mode, inputs): the rulebook's when one is given, else an empty one."""
    from policyrun.errors import Location, UsageError
    from policyrun.model import Rulebook

    if request.rulebook:
        from policyrun.app.binding import RulebookRequest, bind

        bound = bind(RulebookRequest(request.rulebook, request.mode, request.sets, request.inputs_file))
        return bound.rb.model, bound.mode, bound.inputs
    from policyrun.language.inputs import parse_sets

    inputs: dict[str, Any] = {}
    if request.inputs_file is not None:
        from policyrun.errors import PolicyrunError
        from policyrun.yamlsource import load_yaml_file

        try:
            data, _ = load_yaml_file(request.inputs_file)
        except PolicyrunError as exc:
            raise UsageError(exc.message, code=exc.code, location=exc.location) from None
        if data is not None and not isinstance(data, dict):
            raise UsageError("an inputs file is a mapping of input name to value", code="U006",
                             location=Location(str(request.inputs_file), 1, 1))
        inputs.update(data or {})
    inputs.update(parse_sets(request.sets))  # strings: without a rulebook there are no declared types
    empty = Rulebook.model_construct(policyrun=1, name="eval", version="0", inputs={}, vars={}, probes={},
                                     derive={}, modes={}, phases=[], verdicts=[])
    return empty, request.mode or "", inputs


def evaluate_expression(source: str, rulebook: Any, mode: str, inputs: dict[str, Any], facts: Any
                        ) -> dict[str, Any]:
    """The expression's value (and what it read) over `facts`, as a derived value of `rulebook`."""
    from policyrun.evaluate.derive import derive_values
    from policyrun.errors import Location, UsageError
    from policyrun.evaluate.expreval import EvalContext, fact_status_of
    from policyrun.language.functions.factstatus import fact_status
    from policyrun.language.guard import run_guarded
    from policyrun.model import Derived

    compiled = compile_or_explain(source)
    unknown = sorted(compiled.derived - set(rulebook.derive))
    if unknown:
        import difflib

        hint = difflib.get_close_matches(unknown[0], list(rulebook.derive), n=1)
        line, column = compiled.column_of(f"derived.{unknown[0]}") or (1, 1)
        known = f"; did you mean {hint[0]!r}?" if hint else (
            f"; derived values: {', '.join(rulebook.derive)}" if rulebook.derive else
            " (derived values come from a rulebook: pass --rulebook)")
        raise UsageError(f"reads derived.{unknown[0]}, which is not declared{known}" + _caret(source, line, column),
                         code="L022", location=Location("<expression>", line, column))
    spec = Derived.model_construct(value=source, description="", modes=None)
    model = rulebook.model_copy(update={"derive": {**rulebook.derive, EVAL_ID: spec}})

    def run() -> dict[str, Any]:
        status = fact_status_of(facts)
        ctx = EvalContext(model, mode, inputs, facts, tainted=status.tainted)  # as evaluate computes them
        ctx.variables = {"facts": facts.values(), "inputs": dict(inputs), "vars": dict(model.vars), "mode": mode,
                         "phases": {}, "derived": {}}
        with fact_status(status):
            records = derive_values(ctx)
        record = next(r for r in records if r["id"] == EVAL_ID)
        ok = record["error"] is None
        return {"expression": source, "mode": mode, "ok": ok,
                "value": ctx.variables["derived"].get(EVAL_ID) if ok else None,
                "error": record["error"], "reads": record["reads"], "facts": record["facts"]}

    facts.values()  # computed before the guard forks, as evaluate does
    return run_guarded(run)
