"""`policyrun diff OLD NEW`: compare two traces; exit 1 when anything changed."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("diff", help="compare two traces: changed statuses and checks",
                       description="Compare two traces (say, the old and the new rulebook evaluated against one "
                                   "facts snapshot): verdict, phase statuses, and check results, outcomes, "
                                   "expressions and values read, including added and removed phases and "
                                   "checks. Exit 0 when nothing changed, 1 when something did, 3 when a trace "
                                   "cannot be read.")
    p.add_argument("old", type=Path, metavar="OLD_TRACE")
    p.add_argument("new", type=Path, metavar="NEW_TRACE")
    p.add_argument("--json", action="store_true", help="print the differences as JSON")
    p.add_argument("--force", action="store_true",
                   help="compare traces that fail their consistency checks (hand-edited?)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from policyrun.app.diff import DiffRequest, diff
    from policyrun.render.diff import render_diff_json, render_diff_text

    result = diff(DiffRequest(args.old, args.new, force=args.force))
    sys.stdout.write(render_diff_json(result.diff) if args.json else render_diff_text(result.diff))
    return result.exit_code
