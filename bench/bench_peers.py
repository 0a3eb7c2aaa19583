"""Peers benchmark: the same workloads in policyrun and in Rego (regorus, rego-cpp). Issue 24, item 8.

    pip install -e '.[bench]'      # opa-eval (regorus's Python binding) and regopy (rego-cpp)
    python bench/bench_peers.py [--repeat 5] [--rules 100 1000] [--rows 1000 10000 50000]

Workloads, each written once as a policyrun rulebook and once as a Rego module:
  rules N    N simple rules, rule k over fact k: `n >= 0 && name starts with 'fact' && size(tags) < 10`
             (every seventh fact fails the name test, so results are mixed)
  anti-join  the rows of a list of N whose path is absent from a list of N/2 (one derived value)
  flagship   derived values of rulebooks/upgrade-gpu-version.yaml over examples/planning-pass/facts.json

Results are asserted equal before anything is timed. Compile and evaluation (facts already
loaded) are timed separately. Compile is, for policyrun, load + static checks + the first
evaluation (its CEL compilation) less the fastest evaluation; for regorus, parsing the module and
the data; for rego-cpp, loading data and module and the first query less the fastest query.
Every engine runs once per round, rounds alternating; figures are min/median/max, with the ratio
of medians against policyrun (> 1: the peer is slower).

policyrun's evaluation is `engine.evaluate`: the whole trace, the fork guard and recorded reads
included, since that is what a user pays; the raw CEL runtime on the same compiled programs is
printed beside it as the floor.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from policyrun.evaluate.engine import evaluate, load_checked  # noqa: E402
from policyrun.language.expr import compile_condition, compile_expr, evaluate as cel_eval  # noqa: E402
from policyrun.facts import Fact, FactsSnapshot, Provenance, load_facts  # noqa: E402

try:
    import opa_eval  # regorus
    from regopy import Interpreter as RegoCpp
except ImportError as exc:  # pragma: no cover - bench-only dependencies
    raise SystemExit(f"{exc}: install the bench extra: pip install -e '.[bench]'") from None


def _prov(pid: str) -> Provenance:
    return Provenance(probe=pid, kind="const")


# ---------------------------------------------------------------- workloads


class Workload:
    """One workload: a rulebook + facts for policyrun, a Rego module + data for the peers, and how
    to read the same answer from each."""

    def __init__(self, name: str, rulebook: Path, mode: str, facts: FactsSnapshot, rego: str, data: dict[str, Any],
                 from_trace: Callable[[Any], Any], query: str, regocpp: bool = True) -> None:
        self.name, self.rulebook, self.mode, self.facts = name, rulebook, mode, facts
        self.rego, self.data, self.from_trace, self.query = rego, data, from_trace, query
        self.regocpp = regocpp  # False: too large for rego-cpp on this machine (see REGOCPP_MAX_ROWS)


def rules(n: int, tmp: Path) -> Workload:
    values = {f"f{i}": {"n": i, "name": ("other" if i % 7 == 3 else f"fact{i}"), "tags": ["a", "b"]} for i in range(n)}
    rb = {"policyrun": 1, "name": "peers", "vars": {"limit": 10}, "modes": {"m": {"phases": ["P"]}},
          "probes": {f"f{i}": {"uses": "const", "with": {"value": 0}} for i in range(n)},
          "phases": [{"id": "P", "evidence": [
              {"id": f"c{i}", "check": f"facts.f{i}.n >= 0 && facts.f{i}.name.startsWith('fact') && "
                                       f"size(facts.f{i}.tags) < vars.limit"} for i in range(n)]}]}
    path = tmp / f"rules{n}.yaml"
    path.write_text(yaml.safe_dump(rb, sort_keys=False))
    facts = FactsSnapshot(facts={k: Fact(value=v, provenance=_prov(k)) for k, v in values.items()})
    lines = ["package peers", "import rego.v1", "limit := 10"]
    for i in range(n):
        lines += [f"default c{i} := false",
                  f"c{i} if {{ data.facts.f{i}.n >= 0; startswith(data.facts.f{i}.name, \"fact\"); "
                  f"count(data.facts.f{i}.tags) < limit }}"]
    lines.append("results := {" + ", ".join(f'"c{i}": c{i}' for i in range(n)) + "}")

    def from_trace(trace: Any) -> dict[str, bool]:
        return {c.id: c.result == "SATISFIED" for p in trace.phases for c in p.checks()}
    return Workload(f"{n:,} simple rules", path, "m", facts, "\n".join(lines) + "\n", {"facts": values},
                    from_trace, "results")


# rego-cpp's anti-join took 0.4-1.5 s at 1,000 rows and was OOM-killed at 10,000 rows after
# growing past 23 GB (regopy 1.5.2): larger anti-joins leave it out.
REGOCPP_MAX_ROWS = 1000


def anti_join(n: int, tmp: Path) -> Workload:
    paths = [f"pkg/module_{i:06d}/impl.py" for i in range(n)]
    left = [{"path": p, "status": "AMD"[i % 3]} for i, p in enumerate(paths)]
    right = [{"path": p, "site": f"layer_{i % 97}.py"} for i, p in enumerate(reversed(paths)) if i % 2 == 0]
    rb = {"policyrun": 1, "name": "peers", "modes": {"m": {"phases": ["P"]}},
          "probes": {k: {"uses": "const", "with": {"value": 0}} for k in ("diff", "imports")},
          "derive": {"missing": {"value": "facts.diff.where_not('path', facts.imports.pluck('path'))"}},
          "phases": [{"id": "P", "evidence": [{"id": "some", "check": "size(derived.missing) > 0"}]}]}
    path = tmp / f"anti{n}.yaml"
    path.write_text(yaml.safe_dump(rb, sort_keys=False))
    facts = FactsSnapshot(facts={"diff": Fact(value=left, provenance=_prov("diff")),
                                 "imports": Fact(value=right, provenance=_prov("imports"))})
    rego = ("package peers\nimport rego.v1\n"
            "imported := {x.path | some x in data.facts.imports}\n"
            "missing := [r | some r in data.facts.diff; not imported[r.path]]\n")

    def from_trace(trace: Any) -> Any:
        # The trace summarises long values; the derived value itself is what is compared.
        return _derived_value(trace, "missing", facts, path)
    return Workload(f"anti-join {n:,} x {n // 2:,} rows", path, "m", facts, rego,
                    {"facts": {"diff": left, "imports": right}}, from_trace, "missing", regocpp=n <= REGOCPP_MAX_ROWS)


def _derived_value(trace: Any, name: str, facts: FactsSnapshot, path: Path) -> Any:
    rec = next(d for d in trace.derived if d.id == name)
    if isinstance(rec.value, list) or not isinstance(rec.value, dict) or "sha256" not in rec.value:
        return rec.value
    # Summarised in the trace (a length and a checksum): recompute the same expression once.
    rb = load_checked(path)
    expr = next(v for k, v in rb.model.derive.items() if k == name)
    out = cel_eval(compile_expr(expr.value), {"facts": facts.values(), "vars": dict(rb.model.vars)})
    assert out.ok, out.error
    return out.value


FLAGSHIP = ROOT / "rulebooks" / "upgrade-gpu-version.yaml"
FLAGSHIP_FACTS = ROOT / "examples" / "planning-pass" / "facts.json"
# Three of the flagship's derived values, the same values in Rego over the same facts and vars.
FLAGSHIP_DERIVED = ("identity_sources", "base_versions", "runtime_checks")
FLAGSHIP_REGO = """package peers
import rego.v1

pin_source(s) := concat(":", [s.file, format_int(s.line, 10)]) if s.line != null
pin_source(s) := s.file if s.line == null
constant_value(c) := c.value if c.value != null
constant_value(c) := c.source if c.value == null

pins := [{"kind": "pin", "source": pin_source(s), "value": s.version} |
    some s in data.facts.vllm_pins.sources; s.version != null]
constants := [{"kind": "constant", "source": c.site, "value": constant_value(c)} |
    some c in data.facts.version_constants.constants]
docs := [{"kind": "doc", "source": c.site, "value": c.release} |
    some c in data.facts.doc_claims.claims; c.scope in data.vars.gpu_claim_scopes]
identity_sources := array.concat(array.concat(pins, constants), docs)

base_all := array.concat(data.facts.base_pins.distinct,
    [c.value | some c in data.facts.base_constants.constants; c.value != null])
base_versions := [x | some i; x := base_all[i]; not x in array.slice(base_all, 0, i)]

runtime_checks := [r | some r in data.facts.version_constants.references;
    r.context in data.vars.runtime_check_contexts]

results := {"identity_sources": identity_sources, "base_versions": base_versions,
    "runtime_checks": runtime_checks}
"""


def flagship(tmp: Path) -> Workload:
    """The flagship's derived values, copied from its rulebook (so they stay what it ships), in a
    rulebook of their own over the planning example's real facts."""
    from policyrun.language.rulebook import load_rulebook

    source = load_rulebook(FLAGSHIP).model  # the overlay merged onto the generic rulebook it extends
    snap = load_facts(FLAGSHIP_FACTS)
    used = {"vllm_pins", "version_constants", "doc_claims", "base_pins", "base_constants"}
    variables = {k: source.vars[k] for k in ("gpu_claim_scopes", "runtime_check_contexts", "version_constant_names")}
    rb = {"policyrun": 1, "name": "peers", "vars": variables, "modes": {"m": {"phases": ["P"]}},
          "probes": {k: {"uses": "const", "with": {"value": 0}} for k in sorted(used)},
          "derive": {k: {"value": source.derive[k].value} for k in FLAGSHIP_DERIVED},
          "phases": [{"id": "P", "evidence": [{"id": "known", "check": "size(derived.identity_sources) > 0"}]}]}
    path = tmp / "flagship.yaml"
    path.write_text(yaml.safe_dump(rb, sort_keys=False))
    facts = FactsSnapshot(facts={k: f for k, f in snap.facts.items() if k in used})

    def from_trace(trace: Any) -> dict[str, Any]:
        return {k: _derived_value(trace, k, facts, path) for k in FLAGSHIP_DERIVED}
    return Workload("flagship: 3 derived values, planning-pass facts", path, "m", facts, FLAGSHIP_REGO,
                    {"facts": facts.values(), "vars": variables}, from_trace, "results")


# ---------------------------------------------------------------- engines


def policyrun_engine(w: Workload) -> tuple[float, Callable[[], Any], Callable[[], Any], Any]:
    t0 = time.perf_counter()
    rb = load_checked(w.rulebook)
    w.facts.digest()  # part of loading the facts, not of evaluation (cached per snapshot)
    first = evaluate(rb, mode=w.mode, inputs={}, facts=w.facts, timestamp=False)
    first_s = time.perf_counter() - t0  # the fastest evaluation is subtracted once timed
    variables = {"facts": w.facts.values(), "vars": dict(rb.model.vars), "inputs": {}, "mode": w.mode, "phases": {},
                 "derived": {}}
    programs = [compile_condition(e.check) for p in rb.model.phases for e in p.evidence]
    derived = [compile_expr(d.value) for d in rb.model.derive.values()]

    def raw() -> None:
        for c in derived:
            out = cel_eval(c, variables)
            assert out.ok, out.error
        for c in programs:
            cel_eval(c, variables)
    for k, c in zip(rb.model.derive, derived):  # in order: a derived value may read the ones before
        variables["derived"][k] = cel_eval(c, variables).value
    first_value = w.from_trace(first)
    return first_s, (lambda: evaluate(rb, mode=w.mode, inputs={}, facts=w.facts, timestamp=False)), raw, first_value


def regorus_engine(w: Workload, tmp: Path) -> tuple[float, Callable[[], Any], Any]:
    path = tmp / "policy.rego"
    path.write_text(w.rego)
    data = json.dumps(w.data)
    t0 = time.perf_counter()
    engine = opa_eval.OpaEval(str(path), data_json=data, query=f"data.peers.{w.query}")
    compile_s = time.perf_counter() - t0
    return compile_s, (lambda: engine.evaluate_parsed("{}")), engine.evaluate_parsed("{}")


def regocpp_engine(w: Workload) -> tuple[float, Callable[[], Any], Any]:
    t0 = time.perf_counter()
    rego = RegoCpp()
    rego.add_data(w.data)
    rego.add_module("peers", w.rego)
    query = f"x = data.peers.{w.query}"
    first = json.loads(str(rego.query(query)))["bindings"]["x"]
    first_s = time.perf_counter() - t0  # the fastest evaluation is subtracted once timed
    return first_s, (lambda: rego.query(query)), first


# ---------------------------------------------------------------- timing


def timed(fns: dict[str, Callable[[], Any]], repeat: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeat):
        for name, fn in fns.items():
            gc.collect()
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    return times


def run(w: Workload, tmp: Path, repeat: int, medians: dict[str, dict[str, float]] | None = None) -> list[str]:
    p_compile, p_eval, p_raw, p_value = policyrun_engine(w)
    r_compile, r_eval, r_value = regorus_engine(w, tmp)
    assert r_value == p_value, f"{w.name}: regorus differs from policyrun"
    engines = {"policyrun": p_eval, "raw CEL": p_raw, "regorus": r_eval}
    c_compile = 0.0
    if w.regocpp:
        c_compile, engines["rego-cpp"], c_value = regocpp_engine(w)
        assert c_value == p_value, f"{w.name}: rego-cpp differs from policyrun"
    times = timed(engines, repeat)
    base = statistics.median(times["policyrun"])
    if medians is not None:
        medians[w.name] = {name: statistics.median(ts) for name, ts in times.items()}
        medians[w.name + " min"] = {name: min(ts) for name, ts in times.items()}
    # policyrun and rego-cpp compile on first use: their compile time is the first run less the
    # fastest evaluation. regorus parses the module and the data when it is constructed.
    compiles = {"policyrun": p_compile - min(times["policyrun"]), "raw CEL": None, "regorus": r_compile,
                "rego-cpp": c_compile - min(times.get("rego-cpp", [0.0]))}
    rows = []
    for name, ts in times.items():
        med = statistics.median(ts)
        comp = compiles[name]
        rows.append(f"| {w.name} | {name} | {'—' if comp is None else f'{comp * 1e3:.1f}'} | "
                    f"{min(ts) * 1e3:.2f} / {med * 1e3:.2f} / {max(ts) * 1e3:.2f} | {med / base:.2f} |")
    if not w.regocpp:
        rows.append(f"| {w.name} | rego-cpp | — | not run: > {REGOCPP_MAX_ROWS:,} rows (OOM at 10,000) | — |")
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--rules", type=int, nargs="*", default=[1, 100, 1000])
    ap.add_argument("--rows", type=int, nargs="*", default=[1000, 10000, 50000])
    args = ap.parse_args()
    print("| workload | engine | compile ms | evaluation ms min / median / max | eval median vs policyrun |")
    print("|---|---|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        workloads = ([rules(n, tmp) for n in args.rules] + [anti_join(n, tmp) for n in args.rows]
                     + [flagship(tmp)])
        medians: dict[str, dict[str, float]] = {}
        for w in workloads:
            for row in run(w, tmp, args.repeat, medians):
                print(row, flush=True)
    _per_check(args.rules, medians)
    return 0


def _per_check(sizes: list[int], medians: dict[str, dict[str, float]]) -> None:
    """Fixed cost per evaluation (the 1-rule workload) and the marginal cost per rule between two
    sizes of the rules workload, for policyrun and for the raw CEL runtime, from the minima and the
    medians above (on a loaded machine the minima are the steadier)."""
    for stat in ("min", "median"):
        suffix = " min" if stat == "min" else ""
        named = {n: medians[f"{n:,} simple rules{suffix}"] for n in sorted(sizes)
                 if f"{n:,} simple rules{suffix}" in medians}
        if 1 in named:
            print(f"\n{stat}: fixed cost of a 1-rule evaluation: policyrun {named[1]['policyrun'] * 1e3:.2f} ms, "
                  f"raw CEL {named[1]['raw CEL'] * 1e3:.3f} ms, regorus {named[1]['regorus'] * 1e3:.3f} ms")
        ns = sorted(named)
        for small, large in zip(ns, ns[1:]):
            per = {e: (named[large][e] - named[small][e]) / (large - small) * 1e6
                   for e in ("policyrun", "raw CEL", "regorus")}
            print(f"{stat}: per rule, {small:,} → {large:,} rules: policyrun {per['policyrun']:.1f} µs, "
                  f"raw CEL {per['raw CEL']:.1f} µs (ratio {per['policyrun'] / per['raw CEL']:.2f}x), "
                  f"regorus {per['regorus']:.1f} µs")

if __name__ == "__main__":
    raise SystemExit(main())
