"""`policyrun evidence`: the evidence files a rulebook asks people to write — their schemas, a
prefilled skeleton, and a check of a file against its schema (policyrun.app.evidence)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from policyrun.errors import EXIT_OK, UsageError


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("evidence", help="print evidence schemas, write a prefilled skeleton, check a file",
                       description="The evidence files (attestations) RULEBOOK asks for. Without --schema: list "
                                   "them (schema, file, skeleton). With --schema NAME: print its JSON Schema; "
                                   "with --check FILE, validate FILE against it (exit 0 valid, 1 with every "
                                   "problem at file:line:col); with --skeleton, write the file prefilled from "
                                   "the facts (collected now, or --facts), to complete where it says TODO (the "
                                   "schema refuses TODO, so an unfinished skeleton never passes). Exit 3 on a "
                                   "usage or rulebook error.")
    from policyrun.commands.evaluate import add_rulebook_args

    add_rulebook_args(p)
    p.add_argument("--schema", metavar="NAME", help="an evidence schema of the rulebook (`schemas:`)")
    action = p.add_mutually_exclusive_group()
    action.add_argument("--check", type=Path, metavar="FILE", help="validate FILE against the schema")
    action.add_argument("--skeleton", action="store_true",
                        help="write the schema's prefilled skeleton (YAML) to stdout or -o")
    p.add_argument("--facts", action="append", type=Path, default=[], metavar="FILE",
                   help="with --skeleton: a facts snapshot (repeatable) instead of collecting")
    p.add_argument("--output", "-o", type=Path, metavar="FILE", help="with --skeleton: write here, not to stdout")
    p.add_argument("--force", action="store_true", help="with -o: replace an existing file")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from policyrun.app.evidence import SkeletonRequest, check_file, listing, resolve_schema, skeleton
    from policyrun.commands.evaluate import rulebook_request
    from policyrun.evaluate.engine import load_checked
    from policyrun.errors import terminal_text

    rb = load_checked(args.rulebook)
    if args.schema is None:
        if args.check or args.skeleton:
            raise UsageError("--check and --skeleton need --schema NAME", code="U003")
        sys.stdout.write(listing(rb, args.rulebook or rb.display))
        return EXIT_OK
    schema = resolve_schema(rb, args.schema)
    if args.check:
        checked = check_file(schema, args.check, args.schema)
        shown = str(args.check)
        if not checked.problems:
            sys.stdout.write(terminal_text(f"{shown}: matches schema `{args.schema}`") + "\n")
        for problem in checked.problems:
            sys.stdout.write(terminal_text(problem) + "\n")
        if checked.problems:
            sys.stdout.write(terminal_text(f"{shown}: {len(checked.problems)} problem(s) against schema "
                                           f"`{args.schema}`") + "\n")
        return checked.exit_code
    if args.skeleton:
        text = skeleton(rb, SkeletonRequest(rulebook_request(args), args.schema, tuple(args.facts), args.output,
                                            force=args.force), schema)
        if args.output is None:
            sys.stdout.write(text)
        else:
            sys.stderr.write(f"wrote {args.output}: the `{args.schema}` skeleton; replace every TODO\n")
        return EXIT_OK
    sys.stdout.write(json.dumps(schema, indent=2, ensure_ascii=False) + "\n")
    return EXIT_OK
