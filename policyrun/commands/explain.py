"""`policyrun explain TRACE`: why each phase got its status, read from a saved trace."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("explain", help="explain why each phase of a trace got its status",
                       description="For each phase: its status and reason, the checks that decided it, the "
                                   "values they read and where those came from (probe kind, command, file). "
                                   "A filter over the trace; nothing is evaluated again. Exit 0, or 3 when "
                                   "the trace cannot be read.")
    p.add_argument("trace", type=Path, metavar="TRACE", help="a trace.json written by `policyrun evaluate`")
    p.add_argument("--phase", metavar="ID", help="explain only this phase")
    p.add_argument("--failures", action="store_true",
                   help="only FAIL, BLOCKED and STOPPED phases, and in them only checks that were not "
                        "SATISFIED or NOT_APPLICABLE")
    p.add_argument("--force", action="store_true",
                   help="explain a trace that fails its consistency checks (hand-edited?) under a warning banner")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from policyrun.app.explain import ExplainRequest, explain

    result = explain(ExplainRequest(args.trace, phase=args.phase, failures_only=args.failures, force=args.force))
    if result.inconsistencies:
        sys.stderr.write(f"policyrun: warning: INCONSISTENT TRACE explained with --force "
                         f"({len(result.inconsistencies)} problem(s))\n")
    sys.stdout.write(result.text)
    return 0
