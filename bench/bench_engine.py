"""Engine benchmark: evaluation cost per check and `lint` wall time.

Targets (issue "Core engine"): a rulebook of 2,000 checks over a 50,000-fact snapshot evaluates
in under 1 s, at most 50 µs per check after compilation; `policyrun lint` of a 100-phase
rulebook takes at most 0.5 s wall including interpreter start-up.

Baselines measured in the same run: the raw CEL runtime evaluating the same compiled programs
with the same bindings (the floor policyrun adds its bookkeeping to), and a bare
`python -c pass` start-up for lint.

    python bench/bench_engine.py
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's policyrun, not an installed one
from policyrun.evaluate.engine import evaluate, load_checked  # noqa: E402
from policyrun.language.expr import compile_condition, evaluate as cel_eval  # noqa: E402
from policyrun.facts import Fact, FactsSnapshot, Provenance  # noqa: E402
sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/timing.py, also when imported by tests
from timing import best_of  # noqa: E402

N_FACTS = 50_000
N_PHASES = 100
CHECKS_PER_PHASE = 20  # 2,000 checks


def make_rulebook(phases: int, checks: int, probes: int | None = None) -> dict:
    """`phases` × `checks` distinct conditions; check k reads probe k % `probes` (default: one
    probe per check)."""
    n_probes = probes or phases * checks
    return {
        "policyrun": 1, "name": "bench", "vars": {"limit": 10},
        "modes": {"m": {"phases": [f"P{i}" for i in range(phases)]}},
        "probes": {f"f{i}": {"uses": "const", "with": {"value": i}} for i in range(n_probes)},
        "phases": [{
            "id": f"P{i}",
            "evidence": [{"id": f"c{j}",
                          "check": f"facts.f{(i * checks + j) % n_probes}.n >= {i * checks + j} - {i * checks + j}"
                                   f" && facts.f{(i * checks + j) % n_probes}.name.startsWith('fact')"
                                   f" && size(facts.f{(i * checks + j) % n_probes}.tags) < vars.limit"}
                         for j in range(checks)],
        } for i in range(phases)],
    }


def make_facts(n: int) -> FactsSnapshot:
    return FactsSnapshot(facts={f"f{i}": Fact(value={"n": i, "name": f"fact{i}", "tags": ["a", "b"]},
                                              provenance=Provenance(probe=f"f{i}", kind="const"))
                                for i in range(n)})


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.yaml"
        path.write_text(yaml.safe_dump(make_rulebook(N_PHASES, CHECKS_PER_PHASE), sort_keys=False))
        t0 = time.perf_counter()
        rb = load_checked(path)
        t_load = time.perf_counter() - t0
        facts = make_facts(N_FACTS)
        n_checks = sum(len(p.evidence) for p in rb.model.phases)

        # Compilation happens once per expression (cached); the first evaluation pays it.
        t0 = time.perf_counter()
        trace = evaluate(rb, mode="m", inputs={}, facts=facts, timestamp=False)
        t_first = time.perf_counter() - t0
        assert trace.exit_code == 0, trace.verdict
        t_eval = best_of(lambda: evaluate(rb, mode="m", inputs={}, facts=facts, timestamp=False))

        # Marginal cost per check: the same facts with a tenth of the checks, so fixed costs
        # (binding 50,000 facts, the trace envelope) cancel out.
        small_path = Path(tmp) / "small.yaml"
        small_path.write_text(yaml.safe_dump(make_rulebook(N_PHASES // 10, CHECKS_PER_PHASE), sort_keys=False))
        small = load_checked(small_path)
        evaluate(small, mode="m", inputs={}, facts=facts, timestamp=False)
        t_small = best_of(lambda: evaluate(small, mode="m", inputs={}, facts=facts, timestamp=False))
        n_small = sum(len(p.evidence) for p in small.model.phases)

        variables = {"facts": facts.values(), "vars": dict(rb.model.vars), "inputs": {}, "mode": "m", "phases": {}}
        programs = [compile_condition(e.check) for p in rb.model.phases for e in p.evidence]
        t_raw = best_of(lambda: [cel_eval(c, variables) for c in programs])

        # Lint of a 100-phase rulebook in a fresh interpreter: 5 checks per phase and 100 probes,
        # the flagship rulebook's density (13 phases, ~60 checks, ~50 probes) scaled up.
        lint_path = Path(tmp) / "lint100.yaml"
        lint_path.write_text(yaml.safe_dump(make_rulebook(100, 5, probes=100), sort_keys=False))
        cmd = [sys.executable, "-m", "policyrun", "lint", str(lint_path)]
        # As installed by pip: bytecode compiled. A first run writes __pycache__ even where the
        # environment sets PYTHONDONTWRITEBYTECODE (as some sandboxes do), so the timed runs do
        # not pay for compiling policyrun's sources.
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        subprocess.run(cmd, capture_output=True, env=env)
        lint_times = []
        for _ in range(5):
            t = time.perf_counter()
            proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
            lint_times.append(time.perf_counter() - t)
            assert proc.returncode == 0, proc.stdout + proc.stderr
        startup = best_of(lambda: subprocess.run([sys.executable, "-c", "pass"]), repeat=5)
        imports = subprocess.run([sys.executable, "-c", "import sys, policyrun.cli; sys.argv=['x','lint','"
                                  + str(lint_path) + "']; policyrun.cli.main(sys.argv[1:]); "
                                  "print(sorted(m for m in sys.modules if m.split('.')[0] in "
                                  "('git','pynvml','jinja2','rich')))"], capture_output=True, text=True)

    per_check = (t_eval - t_small) / (n_checks - n_small) * 1e6
    raw_per_check = t_raw / n_checks * 1e6
    print(f"rulebook: {N_PHASES} phases, {n_checks} checks; facts: {N_FACTS}")
    print(f"load + static checks:            {t_load * 1e3:8.1f} ms")
    print(f"first evaluation (compiles):     {t_first * 1e3:8.1f} ms")
    print(f"evaluation (compiled, best of 5): {t_eval * 1e3:8.1f} ms   target < 1000 ms")
    print(f"fixed cost per evaluation:       {(t_small - per_check * n_small / 1e6) * 1e3:8.1f} ms   (binding facts, trace envelope)")
    print(f"per check, policyrun (marginal): {per_check:8.1f} µs   target <= 50 µs")
    print(f"per check, raw CEL baseline:     {raw_per_check:8.1f} µs   ratio {per_check / raw_per_check:.2f}x")
    print(f"lint 100 phases (wall, median):  {statistics.median(lint_times) * 1e3:8.1f} ms   target <= 500 ms")
    print(f"python start-up baseline:        {startup * 1e3:8.1f} ms   ratio {statistics.median(lint_times) / startup:.1f}x")
    print(f"heavy modules imported by lint:  {imports.stdout.strip().splitlines()[-1] if imports.stdout.strip() else imports.stderr[-300:]}")


if __name__ == "__main__":
    main()
