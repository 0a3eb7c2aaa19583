"""`policyrun eval EXPR --facts F`: a CEL expression's value over a facts snapshot.

For exploring facts while writing rules. The expression is evaluated exactly as a rulebook's
derived value is — same compiler, same reads, same fail-closed rules (a read of a missing or
failed fact gives no value and says which fact and why), same time and memory guard — with the
rulebook's `vars` and `derive` values when `--rulebook` is given.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from policyrun.errors import Location, UsageError

EVAL_ID = "__eval__"  # the expression's slot among the derived values (not a valid rulebook id)


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("eval", help="print a CEL expression's value over a facts snapshot",
                       description="Evaluate EXPR (CEL over facts, inputs, vars, mode and derived) against "
                                   "--facts and print its value as JSON. With --rulebook, its vars and derived "
                                   "values are available and inputs are checked against its declarations. "
                                   "Exit 0 with a value, 1 when there is none (a missing fact, an evaluation "
                                   "error: the message says which), 3 on an expression or usage error.")
    p.add_argument("expression", metavar="EXPR", help="a CEL expression, e.g. 'facts.pins.distinct'")
    p.add_argument("--facts", action="append", type=Path, default=[], metavar="FILE", required=True,
                   help="facts snapshot (repeatable; merged as evaluate merges them)")
    p.add_argument("--rulebook", "-r", metavar="RULEBOOK", help="rulebook path or shipped name, for vars and derive")
    p.add_argument("--mode", "-m", help="the `mode` variable (with --rulebook: a mode it declares)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="sets",
                   help="set an input (repeatable)")
    p.add_argument("--inputs", type=Path, metavar="FILE", help="YAML or JSON file of inputs")
    p.add_argument("--json", action="store_true",
                   help="print {expression, ok, value, error, reads, facts} as JSON")
    p.set_defaults(func=run)


def _caret(source: str, line: int, column: int) -> str:
    from policyrun.expr import caret

    return "\n" + caret(source, line, column)


def compile_or_explain(source: str) -> Any:
    """The compiled expression, or a usage error pointing at the offending character."""
    from policyrun.expr import ExprError, compile_expr

    try:
        return compile_expr(source)
    except ExprError as exc:
        raise UsageError(exc.message + _caret(source, exc.line, exc.column), code=exc.code,
                         location=Location("<expression>", exc.line, exc.column)) from None


def _context(args: argparse.Namespace) -> tuple[Any, str, dict[str, Any]]:
    """(rulebook model, mode, inputs) from --rulebook/--mode/--inputs/--set."""
    from policyrun.model import Rulebook

    if args.rulebook:
        from policyrun.engine import load_checked
        from policyrun.inputs import resolve_inputs, select_mode

        rb = load_checked(args.rulebook)
        return rb.model, select_mode(rb.model, args.mode), resolve_inputs(rb.model, args.sets, args.inputs)
    from policyrun.inputs import parse_sets

    inputs: dict[str, Any] = {}
    if args.inputs is not None:
        from policyrun.errors import PolicyrunError
        from policyrun.yamlsource import load_yaml_file

        try:
            data, _ = load_yaml_file(args.inputs)
        except PolicyrunError as exc:
            raise UsageError(exc.message, code=exc.code, location=exc.location) from None
        if data is not None and not isinstance(data, dict):
            raise UsageError("an inputs file is a mapping of input name to value", code="U006",
                             location=Location(str(args.inputs), 1, 1))
        inputs.update(data or {})
    inputs.update(parse_sets(args.sets))  # strings: without a rulebook there are no declared types
    empty = Rulebook.model_construct(policyrun=1, name="eval", version="0", inputs={}, vars={}, probes={},
                                     derive={}, modes={}, phases=[], verdicts=[])
    return empty, args.mode or "", inputs


def evaluate_expression(source: str, rulebook: Any, mode: str, inputs: dict[str, Any], facts: Any
                        ) -> dict[str, Any]:
    """The expression's value (and what it read) over `facts`, as a derived value of `rulebook`."""
    from policyrun.functions.factstatus import fact_status
    from policyrun.guard import run_guarded
    from policyrun.derive import derive_values
    from policyrun.expreval import EvalContext, fact_status_of
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


def run(args: argparse.Namespace) -> int:
    from policyrun.errors import terminal_text
    from policyrun.facts import load_facts, merge_facts

    compile_or_explain(args.expression)  # before any file is read: the cheapest error first
    facts = merge_facts((str(p), load_facts(p)) for p in args.facts)
    rulebook, mode, inputs = _context(args)
    result = evaluate_expression(args.expression, rulebook, mode, inputs, facts)
    from policyrun.inputs import mask_trace_record
    from policyrun.safetext import json_controls

    # A secret input's text is masked in what is printed, as in a trace; the expression saw it.
    result = mask_trace_record({**result, "inputs": {}}, rulebook, inputs)
    del result["inputs"]

    # Values come from facts: the JSON printed is the same value, inert on a terminal and in a CI log.
    if args.json:
        sys.stdout.write(json_controls(json.dumps(result, indent=2, ensure_ascii=False, default=str)) + "\n")
    elif result["ok"]:
        sys.stdout.write(json_controls(json.dumps(result["value"], indent=2, ensure_ascii=False, default=str)) + "\n")
    if not result["ok"]:
        missing = [r for r in result["reads"] if r.get("missing")]
        lines = [f"policyrun: no value: {result['error']}"]
        lines += [f"  {r['path']}: {r.get('error') or 'missing'}" for r in missing]
        sys.stderr.write(terminal_text("\n".join(lines)) + "\n")
        return 1
    return 0
