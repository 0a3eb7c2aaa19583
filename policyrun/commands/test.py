"""`policyrun test [PATH ...]`: run rulebook test cases; report coverage of checks."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from policyrun.audit.ruletest import CaseResult
    from policyrun.audit.testreport import Outcome

FORMATS = ("text", "json", "junit")


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("test", help="run a rulebook's own test cases, with coverage",
                       description="Run *.test.yaml files (folders are searched recursively; default: "
                                   "rulebooks/). Exit 0 when every case passes (and coverage is at least "
                                   "--min-coverage), 1 otherwise, 3 when a file cannot be loaded or -k selects "
                                   "no case.")
    p.add_argument("paths", nargs="*", default=["rulebooks"], metavar="PATH")
    p.add_argument("-k", dest="select", metavar="EXPR",
                   help="run only the cases whose names match: text a name contains (any case), combined "
                        "with not, and, or and parentheses, e.g. -k 'final and not lessons'; coverage then "
                        "counts the selected cases only")
    p.add_argument("--format", choices=FORMATS, default="text",
                   help="text (default); json: every case's file, name, status and message, and the coverage; "
                        "junit: JUnit XML of the cases for CI")
    p.add_argument("--min-coverage", type=float, default=0.0, metavar="PERCENT",
                   help="fail when fewer checks than this were made both true and false")
    p.add_argument("--verbose", "-v", action="store_true", help="list every check's coverage (text format)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from policyrun.app.ruletests import RuleTestRequest, run_tests
    from policyrun.audit.testreport import render_json, render_junit

    # Text is streamed file by file; json and junit are written whole.
    outcome = run_tests(RuleTestRequest(tuple(args.paths), args.select, args.min_coverage),
                        on_suite=_write_cases if args.format == "text" else None)
    if args.format == "json":
        sys.stdout.write(render_json(outcome))
    elif args.format == "junit":
        sys.stdout.write(render_junit(outcome))
    else:
        _write_summary(outcome, verbose=args.verbose)
    return outcome.exit_code


def _write_cases(results: Sequence[CaseResult]) -> None:
    from policyrun.errors import terminal_text

    out = sys.stdout
    for result in results:
        out.write(terminal_text(f"{'PASS' if result.ok else 'FAIL'} {result.suite}: {result.case.name}") + "\n")
        for line in result.failures:
            out.write(terminal_text(f"     {line}") + "\n")
    out.flush()


def _write_summary(outcome: Outcome, *, verbose: bool) -> None:
    coverage = outcome.coverage
    out = sys.stdout
    uncovered = sorted(k for k in coverage.seen if not coverage.covered(k))
    for key in (sorted(coverage.seen) if verbose else uncovered):
        got = ", ".join(sorted(coverage.seen[key])) or "never evaluated"
        covered = coverage.covered(key)
        mark = "covered  " if covered else "uncovered"
        # What a case still has to produce, so the author knows which case to write.
        todo = "" if covered else f"; missing: {coverage.missing_text(key)}"
        out.write(f"  {mark} {key}: {got}{todo}\n")
    passed = len(outcome.results) - outcome.failed
    left_out = f", {outcome.deselected} deselected by -k" if outcome.deselected else ""
    out.write(f"{passed} passed, {outcome.failed} failed{left_out}; expression coverage {coverage.percent:.1f}% "
              f"({len(coverage.seen) - len(uncovered)}/{len(coverage.seen)} conditions made both true and false, "
              "derived values computed)\n")
    if not outcome.failed and not outcome.coverage_ok:
        out.write(f"coverage {coverage.percent:.1f}% is below --min-coverage {outcome.min_coverage:g}%\n")
