"""Collect a rulebook's probes on a GPU machine without the CLI, timed; write the facts snapshot.

    python bench/gpu_collect.py [RULEBOOK] [OUT.json] [--mode on-device] [--set python=/path/bin/python]
                                [--engine direct|collect] [--repeat N] [--floor]

Defaults: examples/gpu-probes.yaml, facts.json, its `on-device` mode. The `direct` engine (the
default) loads each probe kind from the registry, refuses one whose side effects the mode
does not permit, runs the rest in parallel threads and records per-probe timings; `collect`
uses `policyrun.collection.run.collect` (the engine the CLI uses) instead. Either way the output is a
normal facts snapshot: `policyrun evaluate RULEBOOK --mode MODE --facts OUT.json` reads it.

Prints one line per probe (ok / error code, seconds) and the whole collection's wall time.
With `--floor`, each of the N rounds first times `import torch` in the interpreter the rulebook
inspects (its `python` input, else this one), then the collection, alternating, and prints
min/median/max of both and the collection's ratio to that floor (issue 24, item 6: probes that
inspect one interpreter share one child, so the goal is collection within 1.2x of the import).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import yaml  # noqa: E402

from policyrun.language.interpolation import interpolate  # noqa: E402
from policyrun.facts import Fact, FactError, FactsSnapshot, Provenance, RepoState  # noqa: E402
from policyrun.model import Rulebook  # noqa: E402
from policyrun.probes import registry  # noqa: E402
from policyrun.probes.base import SIDE_EFFECTS, ProbeContext, ProbeError  # noqa: E402
from policyrun.probes.python.session import Interpreters  # noqa: E402


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _inputs(rulebook: Rulebook, given: list[str]) -> dict[str, Any]:
    values: dict[str, Any] = {name: spec.default for name, spec in rulebook.inputs.items()}
    for item in given:
        key, _, raw = item.partition("=")
        spec = rulebook.inputs.get(key)
        if spec is None:
            raise SystemExit(f"--set {key}: the rulebook declares no input {key!r}")
        values[key] = yaml.safe_load(raw) if spec.type in ("int", "bool", "list") else raw
    return values


def _run_one(pid: str, rulebook: Rulebook, mode: str, inputs: dict[str, Any], base_dir: Path,
             interpreters: Interpreters) -> Fact:
    spec = rulebook.probes[pid]
    started, t0 = _now(), time.perf_counter()

    def fact(value: Any = None, error: FactError | None = None, params: dict[str, Any] | None = None,
             commands: list[str] | None = None, sources: list[str] | None = None,
             repo: RepoState | None = None) -> Fact:
        prov = Provenance(probe=pid, kind=spec.uses, params=params or dict(spec.with_), commands=commands or [],
                          sources=sources or [], repo=repo, started_at=started, finished_at=_now(),
                          duration_s=round(time.perf_counter() - t0, 6), error=error)
        return Fact(value=None if error else value, error=error, provenance=prov)

    probe = registry.get(spec.uses)
    if probe is None:
        return fact(error=FactError(code="probe.unknown_kind", message=f"no probe kind {spec.uses!r}"))
    # The machine probes read no other facts, so inputs and vars are all interpolation needs here.
    params = interpolate(spec.with_, {"inputs": inputs, "vars": rulebook.vars, "mode": mode, "facts": {}})
    denied = sorted(e for e in probe.side_effects(params) if rulebook.modes[mode].permissions.get(e) is not True)
    if denied:
        return fact(params=params, error=FactError(
            code="refused.permission", message=f"needs permission {denied[0]!r} ({SIDE_EFFECTS.get(denied[0])}), "
                                               f"which mode {mode!r} does not grant"))
    try:
        result = probe.run(params, ProbeContext(base_dir=base_dir, timeout_s=spec.timeout_s, interpreters=interpreters))
    except ProbeError as exc:
        return fact(params=params, commands=exc.commands, error=FactError(code=exc.code, message=exc.message))
    except Exception as exc:  # noqa: BLE001 - a crash is a fact here too
        return fact(params=params, error=FactError(code="probe.crashed", message=f"{type(exc).__name__}: {exc}"))
    repo = RepoState(path=result.repo_path, head=result.repo_head) if result.repo_path else None
    return fact(value=result.value, params=params, commands=result.commands, sources=result.sources, repo=repo)


def collect_direct(rulebook: Rulebook, mode: str, inputs: dict[str, Any], base_dir: Path) -> FactsSnapshot:
    pids = [pid for pid, s in rulebook.probes.items() if s.modes is None or mode in s.modes]
    interpreters = Interpreters()  # as in collect: probes of one interpreter share one child
    try:
        with ThreadPoolExecutor(max_workers=max(1, len(pids)), thread_name_prefix="gpu-collect") as pool:
            futures = {pid: pool.submit(_run_one, pid, rulebook, mode, inputs, base_dir, interpreters) for pid in pids}
            facts = {pid: f.result() for pid, f in futures.items()}
    finally:
        interpreters.close()
    return FactsSnapshot(collected_at=_now(), rulebook=rulebook.name, mode=mode, facts=dict(sorted(facts.items())))


def collect_engine(rulebook: Rulebook, mode: str, inputs: dict[str, Any], base_dir: Path,
                   rulebook_dir: Path) -> FactsSnapshot:
    from policyrun.collection.run import collect

    return collect(rulebook, mode, inputs, base_dir=base_dir, rulebook_dir=rulebook_dir)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("rulebook", nargs="?", type=Path, default=ROOT / "examples" / "gpu-probes.yaml")
    ap.add_argument("output", nargs="?", type=Path, default=Path("facts.json"))
    ap.add_argument("--mode", default="on-device")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="set an input (repeatable)")
    ap.add_argument("--engine", choices=["direct", "collect"], default="direct")
    ap.add_argument("--repeat", type=int, default=1, help="collect N times; report each and the best")
    ap.add_argument("--floor", action="store_true",
                    help="alternate each collection with `import torch` in the inspected interpreter; print the ratio")
    args = ap.parse_args()

    rulebook = Rulebook.model_validate(yaml.safe_load(args.rulebook.read_text(encoding="utf-8")))
    if args.mode not in rulebook.modes:
        raise SystemExit(f"--mode {args.mode}: the rulebook's modes are {', '.join(rulebook.modes)}")
    inputs = _inputs(rulebook, args.set)
    base_dir = Path.cwd()
    times: list[float] = []
    floors: list[float] = []
    python = str(inputs.get("python") or sys.executable)
    snapshot: FactsSnapshot | None = None
    for _ in range(max(1, args.repeat)):
        if args.floor:
            t0 = time.perf_counter()
            subprocess.run([python, "-c", "import torch"], check=True, capture_output=True)
            floors.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        if args.engine == "direct":
            snapshot = collect_direct(rulebook, args.mode, inputs, base_dir)
        else:
            snapshot = collect_engine(rulebook, args.mode, inputs, base_dir, args.rulebook.resolve().parent)
        times.append(time.perf_counter() - t0)
    assert snapshot is not None
    args.output.write_text(snapshot.to_json(), encoding="utf-8")

    width = max(len(pid) for pid in snapshot.facts) if snapshot.facts else 0
    for pid, fact in snapshot.facts.items():
        status = "ok" if fact.ok else f"error {fact.error.code}" if fact.error else "?"
        dur = fact.provenance.duration_s
        print(f"{pid:<{width}}  {fact.provenance.kind:<17} {status:<34} {dur if dur is not None else 0:7.3f} s")
        if fact.error:
            print(f"{'':<{width}}  {fact.error.message}")
    errors = sum(1 for f in snapshot.facts.values() if not f.ok)
    shown = ", ".join(f"{t:.3f}" for t in times)
    print(f"collection ({args.engine}, mode {args.mode}): {min(times):.3f} s wall (runs: {shown}); "
          f"{len(snapshot.facts)} facts, {errors} errors → {args.output}")
    if floors:
        def spread(xs: list[float]) -> str:
            return f"{min(xs):.3f} / {statistics.median(xs):.3f} / {max(xs):.3f} s"

        print(f"{len(times)} alternating rounds, min/median/max: import torch ({python}) {spread(floors)}; "
              f"collection {spread(times)}; collection / import torch = "
              f"{statistics.median(times) / statistics.median(floors):.2f}x (medians)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
