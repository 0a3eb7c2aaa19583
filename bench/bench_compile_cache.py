"""Compile cache benchmark: what a run pays to get a rulebook's expressions compiled. Issue 24, item 5.

    python bench/bench_compile_cache.py [--rules 1000] [--repeat 5]

Each round starts three fresh interpreters on the same N-rule rulebook (bench_peers' simple rules)
and times, inside each, `load_checked` and the first evaluation of the facts:
  cold      no disk cache at all (POLICYRUN_NO_CACHE=1): lint and every expression compiled
  lint      the lint cache warm, the compile cache empty: every expression compiled
  warm      both warm: the compiled expressions loaded from the compile cache (policyrun.language.compilecache)
Also timed in each: the fastest of three further evaluations, which the first one is compared with
(the first evaluation less that is what compiling cost it). Rounds alternate; min / median / max.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = """
import json, sys, time
sys.path.insert(0, {root!r})
sys.path.insert(0, {bench!r})
from pathlib import Path
import bench_peers
from policyrun.evaluate.engine import evaluate, load_checked
w = bench_peers.rules({n}, Path({tmp!r}))
t0 = time.perf_counter()
rb = load_checked(w.rulebook)
t1 = time.perf_counter()
evaluate(rb, mode="m", inputs={{}}, facts=w.facts, timestamp=False)
t2 = time.perf_counter()
later = []
for _ in range(3):
    t = time.perf_counter()
    evaluate(rb, mode="m", inputs={{}}, facts=w.facts, timestamp=False)
    later.append(time.perf_counter() - t)
print(json.dumps({{"load": t1 - t0, "first": t2 - t1, "eval": min(later)}}))
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rules", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-compile-"))
    cache = tmp / "cache"
    code = CHILD.format(root=str(ROOT), bench=str(ROOT / "bench"), n=args.rules, tmp=str(tmp))
    env = {**os.environ, "POLICYRUN_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT)}
    env.pop("POLICYRUN_NO_CACHE", None)

    def run(extra: dict[str, str]) -> dict[str, float]:
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env={**env, **extra})
        if proc.returncode != 0:
            raise SystemExit(proc.stderr)
        out: dict[str, float] = json.loads(proc.stdout.strip().splitlines()[-1])
        return out

    run({})  # fills both caches once
    results: dict[str, list[dict[str, float]]] = {"cold": [], "lint": [], "warm": []}
    try:
        for _ in range(args.repeat):
            results["cold"].append(run({"POLICYRUN_NO_CACHE": "1"}))
            shutil.rmtree(cache / "compiled", ignore_errors=True)
            results["lint"].append(run({}))  # and stores the compile cache again for the next
            results["warm"].append(run({}))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{args.rules:,} simple rules, {args.repeat} alternating rounds; ms min / median / max")
    print("| caches | load_checked | first evaluation | later evaluation | compile (load + first - later) |")
    print("|---|---:|---:|---:|---:|")
    base = statistics.median(r["load"] + r["first"] - r["eval"] for r in results["cold"])
    for name, rows in results.items():
        cols = []
        for key in ("load", "first", "eval"):
            ts = [r[key] * 1e3 for r in rows]
            cols.append(f"{min(ts):.1f} / {statistics.median(ts):.1f} / {max(ts):.1f}")
        comp = [(r["load"] + r["first"] - r["eval"]) for r in rows]
        med = statistics.median(comp)
        cols.append(f"{min(comp) * 1e3:.1f} / {med * 1e3:.1f} / {max(comp) * 1e3:.1f} ({med / base:.2f}x cold)")
        print(f"| {name} | " + " | ".join(cols) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
