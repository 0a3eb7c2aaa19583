"""`policyrun test [PATH ...]`: run rulebook test cases; report coverage of checks."""

from __future__ import annotations

import argparse
import sys


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("test", help="run a rulebook's own test cases, with coverage",
                       description="Run *.test.yaml files (folders are searched recursively; default: "
                                   "rulebooks/). Exit 0 when every case passes (and coverage is at least "
                                   "--min-coverage), 1 otherwise, 3 when a file cannot be loaded.")
    p.add_argument("paths", nargs="*", default=["rulebooks"], metavar="PATH")
    p.add_argument("--min-coverage", type=float, default=0.0, metavar="PERCENT",
                   help="fail when fewer checks than this were made both true and false")
    p.add_argument("--verbose", "-v", action="store_true", help="list every check's coverage")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from policyrun.errors import terminal_text
    from policyrun.ruletest import Coverage, discover, run_suite

    coverage = Coverage()
    failed = total = 0
    out = sys.stdout
    for path in discover(args.paths):
        for result in run_suite(path, coverage):
            total += 1
            if result.ok:
                out.write(terminal_text(f"PASS {path}: {result.case.name}") + "\n")
                continue
            failed += 1
            out.write(terminal_text(f"FAIL {path}: {result.case.name}") + "\n")
            for line in result.failures:
                out.write(terminal_text(f"     {line}") + "\n")
    uncovered = sorted(k for k in coverage.seen if not coverage.covered(k))
    for key in (sorted(coverage.seen) if args.verbose else uncovered):
        got = ", ".join(sorted(coverage.seen[key])) or "never evaluated"
        mark = "covered  " if coverage.covered(key) else "uncovered"
        out.write(f"  {mark} {key}: {got}\n")
    out.write(f"{total - failed} passed, {failed} failed; expression coverage {coverage.percent:.1f}% "
              f"({len(coverage.seen) - len(uncovered)}/{len(coverage.seen)} conditions made both true and false, "
              "derived values computed)\n")
    if failed:
        return 1
    if coverage.percent + 1e-9 < args.min_coverage:
        out.write(f"coverage {coverage.percent:.1f}% is below --min-coverage {args.min_coverage:g}%\n")
        return 1
    return 0
