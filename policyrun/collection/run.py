"""Run a plan's probes: a facts snapshot with provenance, never an exception from a probe.

Probes whose `with:` reads other facts (`${facts.x...}`, `${failed(facts.x)}`, or facts behind a
`${derived.y}`) wait for those probes; the rest run in parallel, on a pool whose ready probes
start longest chain first, and a `for_each` fan-out a pool's worth of elements at a time. Whatever
goes wrong inside one probe (an expected ProbeError, a timeout, a crash, a refused permission)
becomes that probe's error fact and, through `dependency.failed`, its dependants' — the
interpreter treats those as missing, so they can never yield PASS.

This module is the scheduler and the probe call; what runs is planned in
policyrun.collection.plan, parameters are resolved in policyrun.collection.params (derived values
by the derive stage, policyrun.evaluate.derive: guarded, each once per collection), time limits kept by
policyrun.collection.timeout, and progress shown by policyrun.collection.progress.
"""

from __future__ import annotations

import heapq
import json
from collections import deque
import time
from collections.abc import Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from policyrun.collection.params import NOT_APPLICABLE, Resolver, error_fact
from policyrun.collection.plan import Plan, plan
from policyrun.collection.progress import Progress, QuietProgress
from policyrun.collection.timeout import Timeout, call_with_timeout
from policyrun.evaluate.derive import graph_of
from policyrun.errors import UsageError
from policyrun.facts import Fact, FactError, FactsSnapshot, Provenance, RepoState
from policyrun.model import ProbeSpec, Rulebook
from policyrun.probes import registry
from policyrun.probes.base import SIDE_EFFECTS, Probe, ProbeContext, ProbeError, ProbeResult
from policyrun.probes.python.session import Interpreters

MAX_WORKERS = 8  # probes mostly wait on subprocesses and files; more threads than cores is fine


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


@dataclass(frozen=True)
class _Job:
    probe: Probe
    params: dict[str, Any]  # what the probe receives
    shown: dict[str, Any]  # what provenance records: parameters after interpolation


@dataclass
class _FanOut:
    """A probe with `for_each` in flight: one job per element not yet run, the facts of those done
    (elements that failed before running are done at once), the keys in for_each order."""

    keys: list[str]
    jobs: dict[str, _Job]
    done: dict[str, Fact] = field(default_factory=dict)
    started_at: str = ""
    t0: float = 0.0

    @property
    def complete(self) -> bool:
        return len(self.done) == len(self.keys)

    def fact(self, pid: str, spec: ProbeSpec) -> Fact:
        """The probe's fact: the values of the elements collected without error, by key, and every
        element's provenance (with its error). Keys sorted, so a replayed snapshot reads the same."""
        keys = sorted(self.keys)
        value = {k: self.done[k].value for k in keys if self.done[k].ok}
        provenance = Provenance(probe=pid, kind=spec.uses, params=dict(spec.with_), started_at=self.started_at,
                                finished_at=utc_now(), duration_s=round(time.perf_counter() - self.t0, 6),
                                elements={k: self.done[k].provenance for k in keys})
        return Fact(value=value, provenance=provenance)


def _chain_lengths(deps: Mapping[str, frozenset[str]], dependants: Mapping[str, list[str]]) -> dict[str, int]:
    """For each probe, the number of probes on the longest chain that waits for it (0: none).
    Computed sinks first, without recursion (a plan may be a chain of thousands of probes)."""
    remaining = {pid: len(ds) for pid, ds in dependants.items()}
    length = dict.fromkeys(dependants, 0)
    ready = [pid for pid, n in remaining.items() if n == 0]
    while ready:
        pid = ready.pop()
        for upstream in deps[pid]:
            length[upstream] = max(length[upstream], length[pid] + 1)
            remaining[upstream] -= 1
            if remaining[upstream] == 0:
                ready.append(upstream)
    return length


class _Collection:
    """The state of one `collect()` call."""

    def __init__(self, rulebook: Rulebook, mode: str, inputs: Mapping[str, Any], base_dir: Path,
                 rulebook_dir: Path | None, progress: Progress, locations: Mapping[str, str] | None = None) -> None:
        self.rulebook = rulebook
        self.mode = mode
        self.permissions = rulebook.modes[mode].permissions
        # Parameters are resolved over the facts finished so far, which the resolver keeps.
        self.resolver = Resolver(rulebook, mode, inputs, locations)
        self.base_dir = base_dir
        self.rulebook_dir = rulebook_dir or base_dir
        self.progress = progress
        self.validators: dict[str, Any] = {}
        # python.stack and python.modules of one interpreter ask one child (one `import torch`).
        self.interpreters = Interpreters()

    def run(self, the_plan: Plan) -> dict[str, Fact]:
        waiting = {pid: set(d) for pid, d in the_plan.deps.items()}
        dependants: dict[str, list[str]] = {pid: [] for pid in the_plan.probes}
        for pid, ds in the_plan.deps.items():
            for d in ds:
                dependants[d].append(pid)
        # Probes are Python work under one interpreter lock more than they are waiting: run as many
        # at once as there are cores to use (plus the ones waiting on subprocesses), and among the
        # ready ones start those with the longest chain of probes behind them first, so a long
        # dependency chain (identity -> resolved revision -> import resolution) is not starved by
        # probes nothing waits for.
        order = {pid: i for i, pid in enumerate(the_plan.probes)}
        depth = _chain_lengths(the_plan.deps, dependants)
        ready: list[tuple[int, int, str]] = []
        for pid in the_plan.probes:
            if not waiting[pid]:
                heapq.heappush(ready, (-depth[pid], order[pid], pid))
        # A future runs one probe, or one element of a fan-out probe: (probe id, element key or "").
        running: dict[Future[Fact], tuple[str, str]] = {}
        # Elements of fan-outs waiting for a worker. A fan-out of thousands of elements is queued
        # here and run a pool's worth at a time: never a thread per element.
        elements: deque[tuple[str, str]] = deque()
        fanouts: dict[str, _FanOut] = {}
        fanning = any(spec.for_each is not None for spec in the_plan.probes.values())
        workers = MAX_WORKERS if fanning else max(1, min(MAX_WORKERS, len(the_plan.probes)))
        pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="policyrun-collect")
        self.progress.begin(len(the_plan.probes))

        def release(pids: list[str]) -> None:
            for d in pids:
                heapq.heappush(ready, (-depth[d], order[d], d))

        def finish(pid: str) -> None:
            fanout = fanouts.pop(pid)
            release(self.record(pid, fanout.fact(pid, the_plan.probes[pid]), waiting, dependants))

        try:
            while ready or running or elements:
                while (ready or elements) and len(running) < workers:
                    if not ready:  # probes first: a fan-out's elements must not starve a dependency chain
                        pid, key = elements.popleft()
                        element = fanouts[pid].jobs.pop(key)
                        running[pool.submit(self.execute, pid, the_plan.probes[pid], element)] = (pid, key)
                        continue
                    pid = heapq.heappop(ready)[2]
                    job = self.prepare(pid, the_plan)
                    if isinstance(job, Fact):
                        release(self.record(pid, job, waiting, dependants))
                    elif isinstance(job, _FanOut):
                        self.progress.started(pid)
                        fanouts[pid] = job
                        elements.extend((pid, key) for key in job.jobs)
                        if job.complete:
                            finish(pid)
                    else:
                        self.progress.started(pid)
                        running[pool.submit(self.execute, pid, the_plan.probes[pid], job)] = (pid, "")
                if running:
                    done, _ = wait(running, return_when=FIRST_COMPLETED)
                    for future in sorted(done, key=lambda f: running[f]):
                        pid, key = running.pop(future)
                        if pid not in fanouts:
                            release(self.record(pid, future.result(), waiting, dependants))
                            continue
                        fanouts[pid].done[key] = future.result()
                        if fanouts[pid].complete:
                            finish(pid)
        finally:
            pool.shutdown(wait=False, cancel_futures=True)
            self.interpreters.close()
            self.progress.end()
        return self.resolver.facts

    def record(self, pid: str, fact: Fact, waiting: dict[str, set[str]],
               dependants: Mapping[str, list[str]]) -> list[str]:
        self.resolver.record(pid, fact)
        self.progress.finished(pid, fact)
        ready = []
        for d in dependants[pid]:
            waiting[d].discard(pid)
            if not waiting[d]:
                ready.append(d)
        return ready

    def prepare(self, pid: str, the_plan: Plan) -> _Job | _FanOut | Fact:
        """Everything before running, on the scheduling thread: a job (one per element for a
        fan-out), or the error fact instead."""
        spec = the_plan.probes[pid]
        raw = spec.with_
        if spec.when is not None:
            skip = self.resolver.not_applicable(pid, spec)
            if skip is not None:
                return skip
        if pid in the_plan.problems:
            problem = the_plan.problems[pid]
            return error_fact(pid, spec, problem.code, problem.message, raw)
        for dep in sorted(the_plan.deps[pid] & graph_of(self.rulebook).params[pid].facts):
            err = self.resolver.facts[dep].error
            if err is not None and err.code == NOT_APPLICABLE:
                # What only a probe the rulebook chose not to collect could tell is not applicable either.
                return error_fact(pid, spec, NOT_APPLICABLE,
                                  f"not collected: depends on probe {dep!r}, which is not applicable", raw)
            if err is not None:
                return error_fact(pid, spec, "dependency.failed",
                                  f"depends on probe {dep!r}, which failed ({err.code})", raw)
        probe = registry.get(spec.uses)
        if probe is None:
            return error_fact(pid, spec, "probe.unknown_kind", f"no probe kind {spec.uses!r} is registered; "
                                                               "`policyrun probes` lists the kinds", raw)
        if spec.for_each is not None:
            return self.fan_out(pid, spec, probe)
        shown_or_error = self.resolver.resolve(pid, spec)
        if isinstance(shown_or_error, tuple):
            code, message, params_shown = shown_or_error
            return error_fact(pid, spec, code, message, params_shown)
        return self.job(pid, spec, probe, shown_or_error)

    def job(self, pid: str, spec: ProbeSpec, probe: Probe, shown: dict[str, Any]) -> _Job | Fact:
        """The job for resolved parameters, or the error fact when they or their side effects are refused."""
        try:
            params = self.attach_schemas(probe, shown)
            invalid = self.validate(probe, params)
            if invalid:
                return error_fact(pid, spec, "params.invalid", invalid, shown)
            effects = probe.side_effects(params)
        except Exception as exc:  # a plugin's broken schema or side_effects must not stop collection
            return error_fact(pid, spec, "probe.crashed", f"{type(exc).__name__}: {exc}", shown)
        denied = sorted(e for e in effects if self.permissions.get(e) is not True)
        if denied:
            what = SIDE_EFFECTS.get(denied[0], denied[0])
            return error_fact(pid, spec, "refused.permission",
                              f"needs permission {denied[0]!r} ({what}), which mode {self.mode!r} does not grant; "
                              f"run it in a mode whose permissions set {denied[0]}: true", shown)
        return _Job(probe, params, shown)

    def fan_out(self, pid: str, spec: ProbeSpec, probe: Probe) -> _FanOut | Fact:
        """One job per element of `for_each` (elements whose parameters cannot be resolved or are
        refused are done at once, with their error), or the probe's error fact."""
        found = self.resolver.elements(pid, spec)
        if isinstance(found, tuple):
            return error_fact(pid, spec, found[0], found[1], spec.with_)
        fanout = _FanOut([key for key, _ in found], {}, started_at=utc_now(), t0=time.perf_counter())
        for key, item in found:
            resolved = self.resolver.resolve(pid, spec, (item,))
            job = error_fact(pid, spec, *resolved) if isinstance(resolved, tuple) else \
                self.job(pid, spec, probe, resolved)
            if isinstance(job, Fact):
                fanout.done[key] = job
            else:
                fanout.jobs[key] = job
        return fanout

    def attach_schemas(self, probe: Probe, params: dict[str, Any]) -> dict[str, Any]:
        """Replace a schema parameter naming a rulebook `schemas:` entry by the entry; anchor paths."""
        out = params
        for name in getattr(probe, "schema_params", ()):
            value = params.get(name)
            if isinstance(value, str):
                value = self.rulebook.schemas.get(value, value)
                if isinstance(value, str):
                    value = str(self.rulebook_dir / value)
                out = {**out, name: value}
        return out

    def validate(self, probe: Probe, params: Mapping[str, Any]) -> str | None:
        import jsonschema

        validator = self.validators.get(probe.kind)
        if validator is None:
            validator = self.validators[probe.kind] = jsonschema.Draft202012Validator(probe.params_schema)
        error = jsonschema.exceptions.best_match(validator.iter_errors(dict(params)))
        if error is None:
            return None
        where = ".".join(str(p) for p in error.absolute_path)
        return f"{'parameter ' + where if where else 'parameters'}: {error.message} (`policyrun probes " \
               f"{probe.kind}` lists its parameters)"

    def execute(self, pid: str, spec: ProbeSpec, job: _Job) -> Fact:
        """Run one probe (on a pool thread) and always return a fact."""
        started, t0 = utc_now(), time.perf_counter()
        ctx = ProbeContext(base_dir=self.base_dir, timeout_s=spec.timeout_s, interpreters=self.interpreters)
        result: ProbeResult | None = None
        commands: list[str] = []
        try:
            result = call_with_timeout(lambda: job.probe.run(job.params, ctx), spec.timeout_s, pid)
            if not isinstance(result, ProbeResult):
                raise TypeError(f"run() returned {type(result).__name__}, not a ProbeResult")
            json.dumps(result.value, allow_nan=False)  # facts files are JSON; find out now, not at write
            if _depth(result.value) > _FACT_DEPTH:
                raise ValueError(f"the fact nests deeper than {_FACT_DEPTH} levels, which a facts file may not "
                                 "hold; this is a probe defect")
            error = None
        except Timeout:
            error = FactError(code="probe.timeout", message=f"did not finish within {spec.timeout_s:g}s; raise "
                                                            "the probe's timeout_s or find what it waits on")
        except ProbeError as exc:
            error, commands = FactError(code=exc.code, message=exc.message), exc.commands
        except BaseException as exc:  # noqa: BLE001 — a crashing probe is a fact, never a traceback
            error = FactError(code="probe.crashed", message=f"{type(exc).__name__}: {exc}")
        if error is not None:
            result = None
        provenance = Provenance(
            probe=pid, kind=spec.uses, params=job.shown,
            commands=result.commands if result else commands,
            repo=RepoState(path=result.repo_path, head=result.repo_head) if result and result.repo_path else None,
            sources=result.sources if result else [], started_at=started, finished_at=utc_now(),
            duration_s=round(time.perf_counter() - t0, 6), error=error)
        return Fact(value=result.value if result else None, error=error, provenance=provenance)


# A fact value must fit a facts file (limits.FACTS_DEPTH, less the snapshot's own levels).
_FACT_DEPTH = 120


def _depth(value: Any, limit: int = _FACT_DEPTH + 1) -> int:
    """How deep a JSON value nests (stopping once past `limit`), without recursion."""
    deepest, stack = 1, [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return depth
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
        if children:
            deepest = max(deepest, depth + 1)  # a scalar inside counts as a level, as in the facts file
        for child in children:  # only containers go on the stack: facts hold far more scalars
            if isinstance(child, (dict, list)):
                stack.append((child, depth + 1))
    return deepest


def collect(rulebook: Rulebook, mode: str, inputs: Mapping[str, Any], *, base_dir: Path,
            progress: Progress | None = None, only: set[str] | None = None,
            rulebook_dir: Path | None = None, locations: Mapping[str, str] | None = None) -> FactsSnapshot:
    """Collect the facts of `mode`'s probes (or of `only` and what they depend on).

    `base_dir` anchors relative paths in parameters; `rulebook_dir` anchors schema file paths;
    `locations` (engine.check_locations) lets an error in a derived value name its rulebook line.
    """
    if mode not in rulebook.modes:
        raise UsageError(f"mode {mode!r} is not defined; the rulebook's modes are {', '.join(rulebook.modes)}",
                         code="C002")
    the_plan = plan(rulebook, mode, only)
    state = _Collection(rulebook, mode, inputs, base_dir, rulebook_dir, progress or QuietProgress(), locations)
    facts = state.run(the_plan)
    return FactsSnapshot(collected_at=utc_now(), rulebook=rulebook.name, mode=mode, facts=dict(sorted(facts.items())))
