"""Write the trace of every rulebook test case, to compare a rulebook rewrite case by case.

    python bench/suite_traces.py OUT_DIR [PATH ...]      (default PATH: rulebooks/)
    python bench/compare_traces.py BEFORE_DIR AFTER_DIR

Each case's trace is written to OUT_DIR/<test file stem>/<case index>/trace.json (no timestamp),
so two runs, before and after a rewrite, pair up by case for bench/compare_traces.py.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from policyrun.audit.ruletest import Coverage, discover, run_suite


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("paths", nargs="*", default=["rulebooks"])
    args = parser.parse_args(argv)
    written = 0
    for suite in discover(args.paths):
        for i, result in enumerate(run_suite(suite, Coverage())):
            if result.trace is None:
                continue
            target = args.out / suite.name.removesuffix(".test.yaml") / f"{i:03d}" / "trace.json"
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(result.trace.to_json())
            written += 1
    print(f"{written} trace(s) written under {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
