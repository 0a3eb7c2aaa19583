"""`policyrun schema rulebook|facts|trace`: print a JSON Schema."""

from __future__ import annotations

import argparse
import sys


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("schema", help="print the JSON Schema of rulebooks, facts, traces or waivers")
    p.add_argument("which", choices=["rulebook", "facts", "trace", "waivers"])
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from policyrun.schemas import schema_text

    sys.stdout.write(schema_text(args.which))
    return 0
