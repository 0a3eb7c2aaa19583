"""Scaling benchmark: does any cost grow faster than the input? (issue 24, item 2)

    python bench/bench_scaling.py [--quick] [--repeat 5] [--no-repo]

For each workload, times a series of sizes (every size once per round, rounds alternating, so a
burst of load on a shared machine touches all sizes alike), then fits log(time) against log(size)
and prints the slope: 1.0 is linear, 2.0 quadratic. A slope above 1.15 is flagged. The fit uses
the sizes from the third smallest up, where fixed costs (start-up, binding, the trace envelope)
no longer dominate, and the last step (the two largest sizes) on its own; the larger of the two is
the workload's slope. All per-size figures are printed as min/median/max.

Workloads:
  digest   FactsSnapshot.digest() of one fact holding N rows           (1k → 1M rows)
  facts    FactsSnapshot.digest() of N facts                            (1k → 100k facts)
  checks   engine evaluate() of N checks, one probe each (compiled)     (10 → 20,000 checks)
  join     an inner join and an anti-join of N and N/2 rows in CEL   (1k → 1M rows)
  repo     collect() of git.diff + search.regex on an N-file repository (2k → 20k files)
"""

from __future__ import annotations

import argparse
import gc
import math
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from policyrun.evaluate.engine import evaluate, load_checked  # noqa: E402
from policyrun.language.expr import compile_expr, evaluate as cel_eval  # noqa: E402
from policyrun.facts import Fact, FactsSnapshot, Provenance  # noqa: E402

LIMIT = 1.15


def slope(sizes: list[int], times: list[float]) -> float:
    xs = [math.log(s) for s in sizes]
    ys = [math.log(max(t, 1e-9)) for t in times]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)


def measure(name: str, sizes: list[int], setup: Callable[[int], Callable[[], object]], repeat: int) -> float:
    """Build every size, then time them round-robin `repeat` times; print and return the slope."""
    runs = {n: setup(n) for n in sizes}
    for fn in runs.values():
        fn()  # warm-up: compilation, caches, page cache
    times: dict[int, list[float]] = {n: [] for n in sizes}
    gc.disable()  # a collection landing in one run would be noise, not scaling
    try:
        for _ in range(repeat):
            for n, fn in runs.items():
                t0 = time.perf_counter()
                fn()
                times[n].append(time.perf_counter() - t0)
                gc.collect()
    finally:
        gc.enable()
    print(f"\n{name}")
    for n in sizes:
        ts = times[n]
        print(f"  {n:>9,}  min {min(ts) * 1e3:9.2f} ms  median {statistics.median(ts) * 1e3:9.2f} ms"
              f"  max {max(ts) * 1e3:9.2f} ms  per item {min(ts) / n * 1e6:8.3f} µs")
    fit = sizes[2:] if len(sizes) > 3 else sizes
    s = slope(fit, [min(times[n]) for n in fit])
    # The last step alone as well: a fixed cost at the small sizes can hide a bend at the top.
    last = slope(sizes[-2:], [min(times[n]) for n in sizes[-2:]])
    worst = max(s, last)
    flag = "  <-- ABOVE 1.15" if worst > LIMIT else ""
    print(f"  log-log slope ({fit[0]:,} → {fit[-1]:,}, min times): {s:.2f};"
          f" last step ({sizes[-2]:,} → {sizes[-1]:,}): {last:.2f}{flag}")
    return worst


def _prov(pid: str) -> Provenance:
    return Provenance(probe=pid, kind="const", started_at="2026-01-01T00:00:00Z", duration_s=0.1)


def digest_rows(n: int) -> Callable[[], object]:
    rows = [{"name": f"pkg{i}", "version": f"1.{i % 97}.{i}", "ok": i % 3 == 0} for i in range(n)]
    snap = FactsSnapshot(facts={"rows": Fact(value=rows, provenance=_prov("rows"))})
    # digest() caches on the snapshot; time the computation, not the cache.
    return lambda: (snap.__dict__.pop("_digest", None), snap.digest())


def digest_facts(n: int) -> Callable[[], object]:
    snap = FactsSnapshot(facts={f"f{i}": Fact(value={"n": i, "tags": ["a", "b"]}, provenance=_prov(f"f{i}"))
                                for i in range(n)})
    return lambda: (snap.__dict__.pop("_digest", None), snap.digest())


def checks(n: int, tmp: Path) -> Callable[[], object]:
    import yaml

    from bench_engine import make_facts, make_rulebook

    per_phase = 10
    path = tmp / f"checks{n}.yaml"
    path.write_text(yaml.safe_dump(make_rulebook(max(1, n // per_phase), min(n, per_phase)), sort_keys=False))
    rb = load_checked(path)
    facts = make_facts(n)
    facts.digest()  # cached per snapshot: its scaling is measured on its own above

    def run() -> None:
        trace = evaluate(rb, mode="m", inputs={}, facts=facts, timestamp=False)
        assert trace.exit_code == 0, trace.verdict
    return run


def join(n: int, expression: str) -> Callable[[], object]:
    paths = [f"pkg/module_{i:07d}/impl.py" for i in range(n)]
    left = [{"path": p, "status": "AMD"[i % 3]} for i, p in enumerate(paths)]
    right = [{"path": p, "site": f"layer_{i % 97}.py"} for i, p in enumerate(reversed(paths)) if i % 2 == 0]
    variables: dict[str, Any] = {"facts": {"diff": left, "imports": right}}
    program = compile_expr(expression)

    def run() -> None:
        outcome = cel_eval(program, variables)
        assert outcome.ok, outcome.error
    return run


def python_join(n: int) -> Callable[[], object]:
    """The same inner join as plain Python dicts: the memory hierarchy's own slope, the floor the
    CEL joins are compared with (a slope both share is caches, not an algorithm)."""
    paths = [f"pkg/module_{i:07d}/impl.py" for i in range(n)]
    left = [{"path": p, "status": "AMD"[i % 3]} for i, p in enumerate(paths)]
    right = [{"path": p, "site": f"layer_{i % 97}.py"} for i, p in enumerate(reversed(paths)) if i % 2 == 0]

    def run() -> None:
        index = {row["path"]: row for row in right}
        [{"left": row, "right": index[row["path"]]} for row in left if row["path"] in index]
    return run


def repo(n: int, tmp: Path) -> Callable[[], object]:
    from bench_repo import generate, rulebook

    from policyrun.collection.run import collect

    root = tmp / f"repo{n}"
    generate(root, n)
    rb = rulebook(root)
    return lambda: collect(rb, "m", {}, base_dir=root)


INNER = "facts.diff.inner_join('path', facts.imports, 'path')"
# An anti-join: the left rows whose key is absent on the right.
ANTI = "facts.diff.where_not('path', facts.imports.pluck('path'))"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="smaller top sizes (a few seconds per workload)")
    ap.add_argument("--million", action="store_true", help="joins up to 1M rows (several GB, minutes)")
    ap.add_argument("--only", nargs="*", choices=("digest", "facts", "checks", "join", "repo"),
                    help="run only these workloads")
    ap.add_argument("--no-repo", action="store_true", help="skip the repository workload (git, slow to build)")
    args = ap.parse_args()
    big = not args.quick
    only = set(args.only or ("digest", "facts", "checks", "join", "repo")) - ({"repo"} if args.no_repo else set())
    slopes: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        if "digest" in only:
            slopes["digest rows"] = measure("facts digest, one fact of N rows", [1_000, 3_000, 10_000, 100_000,
                                        *([1_000_000] if big else [300_000])], digest_rows, args.repeat)
        if "facts" in only:
            slopes["digest facts"] = measure("facts digest, N facts", [1_000, 3_000, 10_000, 30_000,
                                         *([100_000] if big else [])], digest_facts, args.repeat)
        if "checks" in only:
            slopes["checks"] = measure("evaluate, N checks (compiled)", [10, 100, 1_000, 5_000,
                                   *([20_000] if big else [])], lambda n: checks(n, tmp), args.repeat)
        if "join" in only:
            join_sizes = [1_000, 10_000, 100_000, 300_000, *([1_000_000] if args.million else [])]
            slopes["inner join"] = measure("CEL inner_join of N x N/2 rows", join_sizes,
                                       lambda n: join(n, INNER), args.repeat)
            slopes["anti-join"] = measure("CEL anti-join (where_not + pluck) of N x N/2 rows", join_sizes,
                                        lambda n: join(n, ANTI), args.repeat)
            slopes["python dict join (floor)"] = measure("plain Python dict inner join of N x N/2 rows (floor)",
                                                     join_sizes, python_join, args.repeat)
        if "repo" in only:
            slopes["repo"] = measure("collect git.diff + 3 search.regex, N-file repository",
                                     [2_000, 4_000, 10_000, *([20_000] if big else [])],
                                     lambda n: repo(n, tmp), args.repeat)
    print("\nslopes: " + ", ".join(f"{k} {v:.2f}" for k, v in slopes.items()))
    over = [k for k, v in slopes.items() if v > LIMIT]
    print(f"above {LIMIT}: {', '.join(over) if over else 'none'}")
    floor = slopes.get("python dict join (floor)", 0.0)
    for k in ("inner join", "anti-join") if "join" in only else ():
        print(f"{k}: slope {slopes[k]:.2f} against {floor:.2f} for the plain Python join on the same rows"
              f" (excess {slopes[k] - floor:+.2f})")
    return 1 if over else 0


if __name__ == "__main__":
    raise SystemExit(main())
