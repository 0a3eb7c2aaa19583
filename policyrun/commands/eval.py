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


def run(args: argparse.Namespace) -> int:
    from policyrun.app.expression import EvalRequest, evaluate_request
    from policyrun.errors import terminal_text
    from policyrun.safetext import json_controls

    result = evaluate_request(EvalRequest(args.expression, tuple(args.facts), rulebook=args.rulebook, mode=args.mode,
                                          sets=tuple(args.sets), inputs_file=args.inputs))
    # Values come from facts: the JSON printed is the same value, inert on a terminal and in a CI log.
    if args.json:
        sys.stdout.write(json_controls(json.dumps(result.as_json(), indent=2, ensure_ascii=False, default=str)) + "\n")
    elif result.ok:
        sys.stdout.write(json_controls(json.dumps(result.value, indent=2, ensure_ascii=False, default=str)) + "\n")
    if not result.ok:
        missing = [r for r in result.reads if r.get("missing")]
        lines = [f"policyrun: no value: {result.error}"]
        lines += [f"  {r['path']}: {r.get('error') or 'missing'}" for r in missing]
        sys.stderr.write(terminal_text("\n".join(lines)) + "\n")
    return result.exit_code
