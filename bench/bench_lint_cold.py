"""Cold lint against the import floor (issue 24, item 3: goal cold lint <= 1.5x the floor).

    python bench/bench_lint_cold.py [--repeat 5] [RULEBOOK]

Times, alternating, `--repeat` rounds of:
  floor  python -c "import yaml, jsonschema, pydantic"   (the dependencies lint cannot avoid)
  cold   python -m policyrun lint RULEBOOK, its cache in a new empty POLICYRUN_CACHE_DIR
  warm   the same with the cache written by a previous run
  help   python -m policyrun --help                       (CLI start to first output)
  small  python -m policyrun lint on a one-phase rulebook, cache empty (CLI start to a lint's output)
and prints min/median/max wall and CPU (user + sys of the child) and the ratios of medians. Then
one cold run under `-X importtime` lists the modules imported at top level that cost >= 10 ms
cumulative: what lint would gain by deferring them.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FLOOR = [sys.executable, "-c", "import yaml, jsonschema, pydantic"]
SMALL = """\
policyrun: 1
name: small
inputs:
  target: {type: string, default: main}
modes:
  check: {phases: [A]}
phases:
  - id: A
    evidence:
      - {id: target_set, check: "inputs.target != ''"}
"""


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stdout}{proc.stderr}")
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("rulebook", nargs="?", default=str(ROOT / "rulebooks" / "upgrade-gpu-version.yaml"))
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    # As installed by pip: bytecode compiled (a sandbox may set PYTHONDONTWRITEBYTECODE).
    base = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "POLICYRUN_CACHE_DIR")}
    lint = [sys.executable, "-m", "policyrun", "lint", args.rulebook]
    results: dict[str, list[tuple[float, float]]] = {"floor": [], "cold": [], "warm": [], "help": [], "small": []}
    with tempfile.TemporaryDirectory() as tmp:
        small = Path(tmp) / "small.yaml"
        small.write_text(SMALL, encoding="utf-8")
        warm_env = {**base, "POLICYRUN_CACHE_DIR": str(Path(tmp) / "warm")}
        timed(lint, warm_env)  # writes __pycache__ and the warm cache
        for i in range(args.repeat):
            results["floor"].append(timed(FLOOR, base))
            results["cold"].append(timed(lint, {**base, "POLICYRUN_CACHE_DIR": str(Path(tmp) / f"cold{i}")}))
            results["warm"].append(timed(lint, warm_env))
            results["help"].append(timed([sys.executable, "-m", "policyrun", "--help"], base))
            results["small"].append(timed([sys.executable, "-m", "policyrun", "lint", str(small)],
                                          {**base, "POLICYRUN_CACHE_DIR": str(Path(tmp) / f"small{i}")}))
        env = {**base, "POLICYRUN_CACHE_DIR": str(Path(tmp) / "importtime")}
        proc = subprocess.run([sys.executable, "-X", "importtime", *lint[1:]], env=env, capture_output=True, text=True)
    floor_wall = statistics.median(w for w, _ in results["floor"])
    floor_cpu = statistics.median(c for _, c in results["floor"])
    print(f"lint {args.rulebook}; {args.repeat} alternating rounds; nproc {os.cpu_count()}, "
          f"load average {os.getloadavg()[0]:.2f}")
    for name, runs in results.items():
        walls, cpus = [w for w, _ in runs], [c for _, c in runs]
        print(f"  {name:5}  wall min/median/max {min(walls) * 1e3:6.0f} / {statistics.median(walls) * 1e3:6.0f} / "
              f"{max(walls) * 1e3:6.0f} ms  ({statistics.median(walls) / floor_wall:4.2f}x floor)   "
              f"cpu median {statistics.median(cpus) * 1e3:6.0f} ms ({statistics.median(cpus) / floor_cpu:4.2f}x)")
    top = []
    for line in proc.stderr.splitlines():
        parts = line.split("|")
        if len(parts) == 3 and parts[1].strip().isdigit() and not parts[2].startswith("  "):
            top.append((int(parts[1]), parts[2].strip()))
    print("top-level imports of a cold lint >= 10 ms cumulative:")
    for us, name in sorted(top, reverse=True):
        if us >= 10_000:
            print(f"  {us / 1e3:7.1f} ms  {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
