"""Time the tests.junit probe on a generated 100,000-testcase JUnit file.

    .venv/bin/python bench/bench_junit.py [--tests 100000] [--repeat 3] [--keep FILE]

Prints the probe's best time, a baseline measured in the same run (a plain
`xml.etree.ElementTree.parse` of the same file, which builds the whole tree and extracts
nothing), and their ratio. Target: at most 1.5 s for 100,000 tests on a 2-core machine.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path
from xml.sax.saxutils import quoteattr

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from policyrun.probes.base import ProbeContext  # noqa: E402
from policyrun.probes.results.junit import JunitProbe  # noqa: E402
sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/timing.py, also when imported by tests
from timing import best_of  # noqa: E402

SKIP_REASONS = ["requires 4 GPUs", "DBO unsupported on NPU", "needs flash-attn 3", "slow: run with --slow"]


def generate(path: Path, n: int, seed: int = 7) -> None:
    """pytest-shaped output: 85% pass, 7% skip, 3% xfail, 3% fail, 2% error, some properties."""
    rnd = random.Random(seed)
    with path.open("w", encoding="utf-8") as f:
        f.write('<?xml version="1.0" encoding="utf-8"?>\n<testsuites name="pytest tests">'
                f'<testsuite name="pytest" errors="0" failures="0" skipped="0" tests="{n}" time="1.0" '
                'timestamp="2025-01-01T00:00:00" hostname="bench">')
        for i in range(n):
            mod, cls = f"tests.kernels.test_mod{i // 1000}", f"TestGroup{i % 7}"
            attrs = f'classname="{mod}.{cls}" name="test_case_{i}[bf16-{i % 4}]" time="{rnd.random() / 50:.3f}"'
            r = rnd.random()
            if r < 0.85:
                if i % 50 == 0:
                    f.write(f'<testcase {attrs}><properties><property name="gpu" value="{i % 8}" />'
                            '</properties></testcase>')
                else:
                    f.write(f"<testcase {attrs} />")
            elif r < 0.92:
                reason = rnd.choice(SKIP_REASONS)
                f.write(f'<testcase {attrs}><skipped type="pytest.skip" message={quoteattr(reason)}>'
                        f"/src/tests/kernels/test_mod.py:{i % 300}: {reason}</skipped></testcase>")
            elif r < 0.95:
                f.write(f'<testcase {attrs}><skipped type="pytest.xfail" message="known issue #{i % 13}" />'
                        "</testcase>")
            elif r < 0.98:
                f.write(f'<testcase {attrs}><failure message="AssertionError: mismatch at index {i}&#10;'
                        f'assert 0.12 == 0.13">def test():\n&gt;   assert close(a, b)\nE   AssertionError\n'
                        "</failure><system-out>captured stdout line\n</system-out></testcase>")
            else:
                f.write(f'<testcase {attrs}><error message="failed on setup with &quot;RuntimeError: '
                        f'CUDA out of memory&quot;">fixture traceback\nE   RuntimeError</error></testcase>')
        f.write("</testsuite></testsuites>\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tests", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--keep", type=Path, help="write the generated file here instead of a temp dir")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = args.keep or Path(tmp) / "junit-bench.xml"
        generate(path, args.tests)
        size_mb = path.stat().st_size / 1e6
        probe, ctx = JunitProbe(), ProbeContext(base_dir=path.parent, timeout_s=600)
        value = probe.run({"path": str(path)}, ctx).value
        assert value["totals"]["tests"] == args.tests, value["totals"]
        t_probe = best_of(lambda: probe.run({"path": str(path)}, ctx), args.repeat)
        t_base = best_of(lambda: ET.parse(path), args.repeat)
    print(f"file: {args.tests} testcases, {size_mb:.1f} MB; totals {value['totals']}")
    print(f"tests.junit probe:   {t_probe:.3f} s  (best of {args.repeat}; target <= 1.5 s)")
    print(f"baseline ET.parse:   {t_base:.3f} s  (whole tree, no extraction)")
    print(f"ratio probe/baseline: {t_probe / t_base:.2f}x")
    return 0 if t_probe <= 1.5 else 1


if __name__ == "__main__":
    raise SystemExit(main())
