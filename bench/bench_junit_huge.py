"""Time the tests.junit probe on JUnit files holding one huge token (an attribute, a body, a
comment), to show the cost is linear in its size (it was quadratic: 100 MB took 18 s).

    .venv/bin/python bench/bench_junit_huge.py [--sizes 32,64,128] [--repeat 1]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from policyrun.probes.base import ProbeContext  # noqa: E402
from policyrun.probes.results.junit import JunitProbe  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from timing import best_of  # noqa: E402

SHAPES = {
    "attribute": ('<testcase classname="m" name="t"><failure message="', '"/></testcase>'),
    "body": ('<testcase classname="m" name="t"><failure>', "</failure></testcase>"),
    "comment": ("<!--", '--><testcase classname="m" name="t"/>'),
}


def generate(path: Path, shape: str, mb: int) -> None:
    before, after = SHAPES[shape]
    chunk = "x" * (1 << 20)
    with path.open("w") as f:
        f.write(f'<?xml version="1.0" encoding="utf-8"?><testsuite name="s">{before}')
        for _ in range(mb):
            f.write(chunk)
        f.write(f"{after}</testsuite>")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="32,64,128", help="MB, comma-separated")
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args()
    probe = JunitProbe()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "huge.xml"
        for shape in SHAPES:
            for mb in (int(x) for x in args.sizes.split(",")):
                generate(path, shape, mb)
                ctx = ProbeContext(base_dir=path.parent, timeout_s=600)
                seconds = best_of(lambda: probe.run({"path": str(path)}, ctx), args.repeat)
                cut = probe.run({"path": str(path)}, ctx).value["truncated"]
                print(f"{shape:9} {mb:4d} MB  {seconds:6.2f} s  truncated: {[c['what'] for c in cut]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
