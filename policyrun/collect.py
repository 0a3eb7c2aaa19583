"""Plan and run a rulebook's probes: a facts snapshot with provenance, never an exception from a probe.

Probes whose `with:` reads other facts (`${facts.x...}`, `${failed(facts.x)}`, or facts behind a
`${derived.y}`) wait for those probes; the rest run in parallel. Derived values in parameters are
computed by the derive stage (policyrun.derive: guarded, each once per collection). Whatever goes
wrong inside one probe (an expected ProbeError, a timeout, a crash, a refused permission) becomes
that probe's error fact and, through `dependency.failed`, its dependants' — the interpreter
treats those as missing, so they can never yield PASS.
"""

from __future__ import annotations

import heapq
import json
from collections import deque
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Protocol, TextIO

from policyrun.derive import Budget, Derivation, derive_for_params, graph_of
from policyrun.errors import UsageError
from policyrun import limits
from policyrun.expr import ExprError, InterpolationError, compile_condition, evaluate, interpolate
from policyrun.facts import Fact, FactError, FactsSnapshot, Provenance, RepoState, fact_code
from policyrun.model import ProbeSpec, Rulebook
from policyrun.probes import registry
from policyrun.probes.base import SIDE_EFFECTS, Probe, ProbeContext, ProbeError, ProbeResult
from policyrun.probes.python.session import Interpreters

MAX_WORKERS = 8  # probes mostly wait on subprocesses and files; more threads than cores is fine


def utc_now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


_INPUT_ONLY = re.compile(r"^\$\{\s*inputs\.([A-Za-z_][A-Za-z0-9_]*)\s*\}$")


def _unset_input(raw: Mapping[str, Any], shown: Mapping[str, Any]) -> tuple[str, str] | None:
    """A parameter that is exactly `${inputs.x}` for an optional input left unset: say so, rather
    than let the parameter schema complain that null is not a string."""
    for param, template in raw.items():
        m = _INPUT_ONLY.match(template) if isinstance(template, str) else None
        if m and shown.get(param) is None:
            return param, m.group(1)
    return None


NOT_APPLICABLE = "probe.not_applicable"  # the error code of a probe whose `when` is false


def _why(exc: InterpolationError | ExprError) -> str:
    expr = getattr(exc, "expression", "")
    return f"`${{{expr}}}` could not be evaluated: {exc.message}" if expr else exc.message


class _Status(Mapping[str, "str | None"]):
    """failed()/error_code() over the facts collected so far (elements of fan-outs too)."""

    def __init__(self, facts: Mapping[str, Fact]) -> None:
        self.facts = facts

    def __getitem__(self, name: str) -> str | None:
        return fact_code(self.facts, name)

    def __iter__(self) -> Any:
        return iter(self.facts)

    def __len__(self) -> int:
        return len(self.facts)


# --- planning -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Plan:
    """The probes to collect in one mode, what each one's parameters read, and what cannot run."""

    probes: dict[str, ProbeSpec]  # rulebook order
    deps: dict[str, frozenset[str]]  # probe id → probes (in this plan) whose facts its parameters read
    problems: dict[str, FactError]  # probes that fail before running, whatever the facts


def plan(rulebook: Rulebook, mode: str, only: set[str] | None = None) -> Plan:
    """Select the probes of `mode` (or `only` and what they read) and find what each one waits for."""
    in_mode = {pid: s for pid, s in rulebook.probes.items() if s.modes is None or mode in s.modes}
    graph = graph_of(rulebook)
    deps: dict[str, frozenset[str]] = {}
    problems: dict[str, FactError] = {}
    for pid in in_mode:
        params = graph.params[pid]
        # Everything the parameters need finished: facts they read or ask about, directly or
        # through derived values. Whether a missing one matters is decided when they are resolved
        # (a derived value may ask `failed(facts.x)` of a probe this mode does not collect).
        reads = params.waits_for
        unknown = sorted(r for r in reads if r not in rulebook.probes)
        outside = sorted(r for r in params.facts if r in rulebook.probes and r not in in_mode)
        problem = None
        if params.problem is not None:
            problem = FactError(code="params.interpolation", message=params.problem)
        elif unknown:
            problem = FactError(code="params.interpolation",
                                message=f"reads facts.{unknown[0]}, but the rulebook declares no probe {unknown[0]!r}")
        elif outside:
            problem = FactError(code="dependency.failed",
                                message=f"depends on probe {outside[0]!r}, which is not collected in mode {mode!r}")
        if problem:
            problems[pid] = problem
        deps[pid] = frozenset(r for r in reads if r in in_mode and r != pid)
        if pid in reads:
            problems[pid] = FactError(code="dependency.cycle", message=f"probe {pid!r} reads its own fact")
    selected = set(in_mode)
    if only is not None:
        _check_only(rulebook, mode, only, in_mode)
        selected, todo = set(), list(only)
        while todo:
            pid = todo.pop()
            if pid not in selected:
                selected.add(pid)
                todo.extend(deps[pid])
    for pid in _cycle_members(selected, deps):
        problems[pid] = FactError(code="dependency.cycle",
                                  message=f"probe {pid!r} is part of a dependency cycle: probes whose parameters "
                                          "read each other's facts")
    # A probe that fails before running waits for nothing.
    return Plan(probes={pid: s for pid, s in in_mode.items() if pid in selected},
                deps={pid: frozenset() if pid in problems else deps[pid] for pid in selected},
                problems={pid: p for pid, p in problems.items() if pid in selected})


def _check_only(rulebook: Rulebook, mode: str, only: set[str], in_mode: Mapping[str, ProbeSpec]) -> None:
    unknown = sorted(only - set(rulebook.probes))
    if unknown:
        raise UsageError(f"--only {unknown[0]}: the rulebook has no probe of that name; its probes are "
                         f"{', '.join(rulebook.probes) or '(none)'}", code="C001")
    outside = sorted(only - set(in_mode))
    if outside:
        raise UsageError(f"--only {outside[0]}: that probe is not collected in mode {mode!r} "
                         f"(its modes: {', '.join(rulebook.probes[outside[0]].modes or [])})", code="C001")


def _cycle_members(nodes: set[str], deps: Mapping[str, frozenset[str]]) -> set[str]:
    """Nodes that can reach themselves (Kahn's algorithm leaves cycles and what hangs off them)."""
    waiting = {n: set(deps[n]) & nodes for n in nodes}
    ready = [n for n, d in waiting.items() if not d]
    while ready:
        done = ready.pop()
        for n, d in waiting.items():
            if done in d:
                d.discard(done)
                if not d:
                    ready.append(n)
    stuck = {n for n, d in waiting.items() if d}

    def reaches_self(start: str) -> bool:
        seen, todo = set(), list(waiting[start])
        while todo:
            n = todo.pop()
            if n == start:
                return True
            if n not in seen:
                seen.add(n)
                todo.extend(waiting.get(n, ()))
        return False

    return {n for n in stuck if reaches_self(n)}


# --- progress -----------------------------------------------------------------------------------

class Progress(Protocol):
    def begin(self, total: int) -> None: ...
    def started(self, probe_id: str) -> None: ...
    def finished(self, probe_id: str, fact: Fact) -> None: ...
    def end(self) -> None: ...


def _outcome(fact: Fact) -> tuple[bool, str]:
    dur = fact.provenance.duration_s
    timing = f" {dur:.2f}s" if dur is not None else ""
    if fact.error is None:
        return True, f"ok{timing}"
    return False, f"error {fact.error.code}{timing}: {fact.error.message}"


class QuietProgress:
    """For library callers that want facts and nothing on the terminal."""

    def begin(self, total: int) -> None:
        pass

    def started(self, probe_id: str) -> None:
        pass

    def finished(self, probe_id: str, fact: Fact) -> None:
        pass

    def end(self) -> None:
        pass


class LineProgress(QuietProgress):
    """One line per finished probe: quiet enough for CI logs."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def finished(self, probe_id: str, fact: Fact) -> None:
        from policyrun.errors import terminal_text

        print(terminal_text(f"collect: {probe_id} {_outcome(fact)[1]}"), file=self.stream, flush=True)


class RichProgress:
    """A live bar naming the probes in flight; finished probes scroll above it."""

    def __init__(self, stream: TextIO) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        self.bar = Progress(SpinnerColumn(), TextColumn("collect"), BarColumn(), MofNCompleteColumn(),
                            TimeElapsedColumn(), TextColumn("{task.description}"),
                            console=Console(file=stream), transient=True)
        self.running: list[str] = []
        self.task: Any = None

    def begin(self, total: int) -> None:
        self.task = self.bar.add_task("", total=total)
        self.bar.start()

    def _show(self) -> None:
        self.bar.update(self.task, description=", ".join(self.running[:4]) + (" …" if len(self.running) > 4 else ""))

    def started(self, probe_id: str) -> None:
        self.running.append(probe_id)
        self._show()

    def finished(self, probe_id: str, fact: Fact) -> None:
        if probe_id in self.running:
            self.running.remove(probe_id)
        ok, text = _outcome(fact)
        from rich.markup import escape

        self.bar.console.print(f"[{'green' if ok else 'red'}]{'✓' if ok else '✗'}[/] {escape(probe_id)} "
                               f"{escape(text)}", highlight=False)
        self.bar.advance(self.task)
        self._show()

    def end(self) -> None:
        self.bar.stop()


def make_progress(stream: TextIO | None = None) -> Progress:
    """A live display on a terminal; plain lines when not a TTY or under CI."""
    stream = stream or sys.stderr
    if stream.isatty() and not os.environ.get("CI"):
        return RichProgress(stream)
    return LineProgress(stream)


# --- execution ----------------------------------------------------------------------------------

class _Timeout(Exception):
    pass


def _call_with_timeout(fn: Callable[[], Any], timeout_s: float, name: str) -> Any:
    """Run `fn` in a daemon thread: a probe that never returns cannot hang collect or the exit."""
    outcome: list[tuple[bool, Any]] = []

    def target() -> None:
        try:
            outcome.append((True, fn()))
        except BaseException as exc:  # handed to the caller, who records it as the fact's error
            outcome.append((False, exc))

    thread = threading.Thread(target=target, name=f"probe:{name}", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        raise _Timeout
    ok, value = outcome[0]
    if not ok:
        raise value
    return value


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


def _error_fact(pid: str, spec: ProbeSpec, code: str, message: str, params: Mapping[str, Any]) -> Fact:
    err = FactError(code=code, message=message)
    return Fact(error=err, provenance=Provenance(probe=pid, kind=spec.uses, params=dict(params), error=err))


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
        self.locations = locations or {}
        # Derived values computed for parameters so far, each once: a value is computed only after
        # every probe it reads has finished, so it cannot change later in the collection.
        self.derived = Derivation({}, {}, 0.0, 0)
        self.budget = Budget()
        self.mode = mode
        self.permissions = rulebook.modes[mode].permissions
        self.inputs = dict(inputs)
        self.base_dir = base_dir
        self.rulebook_dir = rulebook_dir or base_dir
        self.progress = progress
        self.facts: dict[str, Fact] = {}
        self.values: dict[str, Any] = {}
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
        return self.facts

    def record(self, pid: str, fact: Fact, waiting: dict[str, set[str]],
               dependants: Mapping[str, list[str]]) -> list[str]:
        self.facts[pid] = fact
        if fact.ok:
            self.values[pid] = fact.value
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
            skip = self.not_applicable(pid, spec)
            if skip is not None:
                return skip
        if pid in the_plan.problems:
            problem = the_plan.problems[pid]
            return _error_fact(pid, spec, problem.code, problem.message, raw)
        for dep in sorted(the_plan.deps[pid] & graph_of(self.rulebook).params[pid].facts):
            err = self.facts[dep].error
            if err is not None and err.code == NOT_APPLICABLE:
                # What only a probe the rulebook chose not to collect could tell is not applicable either.
                return _error_fact(pid, spec, NOT_APPLICABLE,
                                   f"not collected: depends on probe {dep!r}, which is not applicable", raw)
            if err is not None:
                return _error_fact(pid, spec, "dependency.failed",
                                   f"depends on probe {dep!r}, which failed ({err.code})", raw)
        probe = registry.get(spec.uses)
        if probe is None:
            return _error_fact(pid, spec, "probe.unknown_kind", f"no probe kind {spec.uses!r} is registered; "
                                                                "`policyrun probes` lists the kinds", raw)
        if spec.for_each is not None:
            return self.fan_out(pid, spec, probe)
        shown_or_error = self.resolve(pid, spec)
        if isinstance(shown_or_error, tuple):
            code, message, params_shown = shown_or_error
            return _error_fact(pid, spec, code, message, params_shown)
        return self.job(pid, spec, probe, shown_or_error)

    def job(self, pid: str, spec: ProbeSpec, probe: Probe, shown: dict[str, Any]) -> _Job | Fact:
        """The job for resolved parameters, or the error fact when they or their side effects are refused."""
        try:
            params = self.attach_schemas(probe, shown)
            invalid = self.validate(probe, params)
            if invalid:
                return _error_fact(pid, spec, "params.invalid", invalid, shown)
            effects = probe.side_effects(params)
        except Exception as exc:  # a plugin's broken schema or side_effects must not stop collection
            return _error_fact(pid, spec, "probe.crashed", f"{type(exc).__name__}: {exc}", shown)
        denied = sorted(e for e in effects if self.permissions.get(e) is not True)
        if denied:
            what = SIDE_EFFECTS.get(denied[0], denied[0])
            return _error_fact(pid, spec, "refused.permission",
                               f"needs permission {denied[0]!r} ({what}), which mode {self.mode!r} does not grant; "
                               f"run it in a mode whose permissions set {denied[0]}: true", shown)
        return _Job(probe, params, shown)

    def not_applicable(self, pid: str, spec: ProbeSpec) -> Fact | None:
        """The fact of a probe whose `when` (over inputs, vars and mode) is false, or that cannot be
        decided; None when it holds and the probe is collected."""
        assert spec.when is not None
        try:
            outcome = evaluate(compile_condition(spec.when), {"inputs": self.inputs, "vars": self.rulebook.vars,
                                                              "mode": self.mode, "facts": {}, "derived": {}})
        except ExprError as exc:
            return _error_fact(pid, spec, "probe.when_error", f"`when` does not compile: {exc.message}", spec.with_)
        if not outcome.ok or not isinstance(outcome.value, bool):
            why = outcome.error or f"it gave {type(outcome.value).__name__}, not a bool"
            return _error_fact(pid, spec, "probe.when_error", f"`when: {spec.when}` could not be decided: {why}; "
                                                              "the probe was not collected", spec.with_)
        if outcome.value:
            return None
        return _error_fact(pid, spec, NOT_APPLICABLE, f"not collected: `when: {spec.when}` is false", spec.with_)

    def variables(self, pid: str) -> dict[str, Any] | tuple[str, str]:
        """The variables the probe's templates see (derived values they read computed now), or
        (error code, message) when a derived value they read has none."""
        variables = {"facts": self.values, "inputs": self.inputs, "vars": self.rulebook.vars, "mode": self.mode,
                     "derived": {}}
        wanted = graph_of(self.rulebook).params[pid].derived
        if wanted:
            self.derived = derive_for_params(self.rulebook, self.mode, self.inputs, self.facts, wanted,
                                             known=self.derived, budget=self.budget, locations=self.locations)
            for did in sorted(wanted):
                if did in self.derived.errors:
                    return ("dependency.failed", f"reads derived.{did}, which has no value: "
                                                 f"{self.derived.errors[did]}")
            variables["derived"] = {did: self.derived.values[did] for did in wanted}
        return variables

    def interpolate(self, raw: Any, variables: Mapping[str, Any]) -> Any:
        """`raw` with its templates resolved (raises InterpolationError/ExprError)."""
        from policyrun.functions.factstatus import fact_status

        with fact_status(_Status(self.facts)):
            return interpolate(raw, variables)

    def resolve(self, pid: str, spec: ProbeSpec, item: tuple[Any] | None = None
                ) -> dict[str, Any] | tuple[str, str, Mapping[str, Any]]:
        """The probe's parameters after interpolation over the facts collected so far (for one
        element of a fan-out, with `item` bound), or (error code, message, parameters to record)
        when they cannot be resolved. `evaluate --facts` calls this too, to check that a snapshot
        was collected with these parameters."""
        raw = spec.with_
        variables = self.variables(pid)
        if isinstance(variables, tuple):
            return (*variables, raw)
        if item is not None:
            variables = {**variables, "item": item[0]}
        try:
            shown = self.interpolate(raw, variables)
        except (InterpolationError, ExprError) as exc:
            return ("params.interpolation", _why(exc), raw)
        unset = _unset_input(raw, shown)
        if unset is not None:
            param, name = unset
            return ("params.missing_input", f"parameter {param!r} comes from input {name!r}, which is not set; "
                                            f"pass --set {name}=...", shown)
        return dict(shown)

    def elements(self, pid: str, spec: ProbeSpec) -> list[tuple[str, Any]] | tuple[str, str]:
        """The fan-out's elements as (key, item), in for_each order, or (error code, message) when
        for_each or a key cannot be resolved, or keys repeat."""
        assert spec.for_each is not None
        variables = self.variables(pid)
        if isinstance(variables, tuple):
            return variables
        where = self.locations.get(f"probe.{pid}.for_each")
        at = f" (for_each at {where})" if where else ""
        try:
            items = self.interpolate(spec.for_each, variables)
        except (InterpolationError, ExprError) as exc:
            return "params.interpolation", f"for_each: {_why(exc)}"
        if not isinstance(items, list):
            return "fanout.not_a_list", f"for_each gave {type(items).__name__}, not a list{at}"
        if len(items) > limits.FANOUT_ELEMENTS:
            return "fanout.too_many", (f"for_each gave {len(items)} elements; the limit is {limits.FANOUT_ELEMENTS} "
                                       f"(limits.FANOUT_ELEMENTS){at}: split the probe or narrow the list")
        key_at = self.locations.get(f"probe.{pid}.key") or where
        out: list[tuple[str, Any]] = []
        first: dict[str, int] = {}
        for i, item in enumerate(items):
            if spec.key is not None:
                try:
                    key = self.interpolate(spec.key, {**variables, "item": item})
                except (InterpolationError, ExprError) as exc:
                    return "fanout.key", f"the key of element {i} could not be resolved: {_why(exc)}" + \
                        (f" (key at {key_at})" if key_at else "")
            else:
                key = item
            if not isinstance(key, str):
                fix = "give `key:` a string" if spec.key is not None else "declare `key:`, e.g. key: ${item.name}"
                return "fanout.key", (f"the key of element {i} is {type(key).__name__}, not a string: {fix}"
                                      + (f" (at {key_at})" if key_at else ""))
            if key in first:
                return "fanout.duplicate_key", (f"elements {first[key]} and {i} have the same key {key!r}"
                                                + (f" (key at {key_at})" if key_at else "")
                                                + "; each element needs its own key")
            first[key] = i
            out.append((key, item))
        return out

    def fan_out(self, pid: str, spec: ProbeSpec, probe: Probe) -> _FanOut | Fact:
        """One job per element of `for_each` (elements whose parameters cannot be resolved or are
        refused are done at once, with their error), or the probe's error fact."""
        found = self.elements(pid, spec)
        if isinstance(found, tuple):
            return _error_fact(pid, spec, found[0], found[1], spec.with_)
        fanout = _FanOut([key for key, _ in found], {}, started_at=utc_now(), t0=time.perf_counter())
        for key, item in found:
            resolved = self.resolve(pid, spec, (item,))
            job = _error_fact(pid, spec, *resolved) if isinstance(resolved, tuple) else \
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
            result = _call_with_timeout(lambda: job.probe.run(job.params, ctx), spec.timeout_s, pid)
            if not isinstance(result, ProbeResult):
                raise TypeError(f"run() returned {type(result).__name__}, not a ProbeResult")
            json.dumps(result.value, allow_nan=False)  # facts files are JSON; find out now, not at write
            if _depth(result.value) > _FACT_DEPTH:
                raise ValueError(f"the fact nests deeper than {_FACT_DEPTH} levels, which a facts file may not "
                                 "hold; this is a probe defect")
            error = None
        except _Timeout:
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


def unset_input_probes(facts: FactsSnapshot, deps: Mapping[str, frozenset[str]],
                       code: str = "params.missing_input") -> set[str]:
    """Probes that did not run because a parameter reads an optional input that was not set
    (`params.missing_input`), and probes that failed only because they wait for one. The rulebook
    made them depend on that input, so their absence is a choice of the command line, not a
    failure of collection (`collect` exits 0 for them; docs/cli.md). With `code` NOT_APPLICABLE:
    the probes whose `when` is false, and those that wait for one."""
    unset: dict[str, bool] = {}
    for start in facts.facts:  # depth first over the dependencies, without recursion (long chains)
        stack, visiting = [start], {start}
        while stack:
            pid = stack[-1]
            error = facts.facts[pid].error
            if pid in unset or error is None or error.code != "dependency.failed":
                unset.setdefault(pid, error is not None and error.code == code)
                stack.pop()
                continue
            failing = [d for d in sorted(deps.get(pid, ())) if d in facts.facts and not facts.facts[d].ok]
            pending = [d for d in failing if d not in unset and d not in visiting]
            if pending:
                stack.extend(pending)
                visiting.update(pending)
                continue
            unset[pid] = bool(failing) and all(unset.get(d, False) for d in failing)
            stack.pop()
    return {pid for pid, yes in unset.items() if yes}


def stale_facts(rulebook: Rulebook, mode: str, inputs: Mapping[str, Any], facts: FactsSnapshot,
                locations: Mapping[str, str] | None = None) -> list[dict[str, str]]:
    """Facts in a snapshot that this rulebook, mode and these inputs would not have collected:
    another probe kind, or other parameters (re-resolved from the rulebook over the snapshot's own
    facts, so a fact whose parameters read another fact is checked against that fact's value).
    `evaluate --facts` refuses a snapshot with any (unless --allow-stale-facts)."""
    if mode not in rulebook.modes:
        return []
    from policyrun.inputs import secret_inputs, secret_texts

    texts = secret_texts(secret_inputs(rulebook, inputs))
    state = _Collection(rulebook, mode, inputs, Path.cwd(), None, QuietProgress(), locations)
    state.facts = dict(facts.facts)
    state.values = facts.values()
    out: list[dict[str, str]] = []
    for pid, spec in plan(rulebook, mode).probes.items():
        fact = facts.facts.get(pid)
        if fact is None:
            continue
        prov = fact.provenance
        if prov.kind != spec.uses:
            out.append({"probe": pid, "reason": f"collected by probe kind {prov.kind!r}; the rulebook's probe "
                                                f"{pid!r} uses {spec.uses!r}"})
            continue
        if spec.when is not None:
            skip = state.not_applicable(pid, spec)
            now = skip is not None and skip.error is not None and skip.error.code == NOT_APPLICABLE
            was = fact.error is not None and fact.error.code == NOT_APPLICABLE
            if now != was:
                out.append({"probe": pid, "reason": f"`when: {spec.when}` is {'false' if now else 'true'} with these "
                                                    f"inputs, but the snapshot {'holds' if now else 'lacks'} its fact"
                                                    + ("" if now else " (it was not applicable when collected)")})
                continue
            if skip is not None:
                continue
        if spec.for_each is not None:
            out += [{"probe": pid, "reason": r} for r in _stale_elements(state, pid, spec, fact, texts)]
            continue
        resolved = state.resolve(pid, spec)
        if isinstance(resolved, tuple):
            if fact.error is None:
                out.append({"probe": pid, "reason": f"holds a value, but its parameters cannot be resolved from "
                                                    f"this snapshot and these inputs ({resolved[1]})"})
            continue
        if fact.error is not None and prov.params == dict(spec.with_):
            continue  # failed before its parameters were resolved; nothing to compare
        differs = _params_differ(prov.params, resolved, texts)
        if differs:
            out.append({"probe": pid, "reason": f"collected with other parameters ({differs})"})
    return out


def _params_differ(collected: Mapping[str, Any], resolved: Mapping[str, Any], texts: Any) -> str | None:
    """How recorded parameters differ from the ones resolved now (None when they do not). A
    snapshot is written with secret inputs masked (inputs.mask_snapshot): compared masked."""
    from policyrun.masking import redact_tree

    resolved = redact_tree(resolved, texts, exact=texts)
    collected = redact_tree(collected, texts, exact=texts)
    if _canonical(collected) == _canonical(resolved):
        return None
    diffs = _param_differences(_without_nulls(collected), _without_nulls(resolved), "")
    return ", ".join(diffs[:3]) + (f", and {len(diffs) - 3} more" if len(diffs) > 3 else "")


def _stale_elements(state: _Collection, pid: str, spec: ProbeSpec, fact: Fact, texts: Any) -> list[str]:
    """How a fan-out's recorded elements differ from what for_each gives now: other keys, or an
    element collected with other parameters."""
    if fact.error is not None:
        return []  # the fan-out failed as a whole before its elements were resolved: nothing to compare
    recorded = fact.provenance.elements or {}
    found = state.elements(pid, spec)
    if isinstance(found, tuple):
        return [f"holds a value, but its elements cannot be resolved from this snapshot and these inputs "
                f"({found[1]})"]
    keys = [key for key, _ in found]
    if sorted(keys) != sorted(recorded):
        extra, lacking = sorted(set(recorded) - set(keys)), sorted(set(keys) - set(recorded))
        return [f"collected for other elements of for_each (" + "; ".join(
            part for part in (f"not expected: {', '.join(map(repr, extra[:5]))}" if extra else "",
                              f"not collected: {', '.join(map(repr, lacking[:5]))}" if lacking else "") if part) + ")"]
    out = []
    for key, item in found:
        element = recorded[key]
        resolved = state.resolve(pid, spec, (item,))
        if isinstance(resolved, tuple):
            if element.error is None:
                out.append(f"element {key!r} holds a value, but its parameters cannot be resolved ({resolved[1]})")
            continue
        if element.error is not None and element.params == dict(spec.with_):
            continue
        differs = _params_differ(element.params, resolved, texts)
        if differs:
            out.append(f"element {key!r} was collected with other parameters ({differs})")
    return out


_ABSENT_PARAM = object()


def _param_differences(collected: Any, expected: Any, path: str) -> list[str]:
    """Where two parameter values differ, down to the innermost key or item (`paths[2]`,
    `headers.Accept`), so a long list or nested map shows what changed, not two cut-off texts."""
    if _canonical(collected) == _canonical(expected):
        return []
    if isinstance(collected, dict) and isinstance(expected, dict):
        return [d for k in sorted(set(collected) | set(expected), key=str)
                for d in _param_differences(collected.get(k, _ABSENT_PARAM), expected.get(k, _ABSENT_PARAM),
                                            f"{path}.{k}" if path else str(k))]
    if isinstance(collected, list) and isinstance(expected, list):
        if len(collected) == len(expected):
            return [d for i, (a, b) in enumerate(zip(collected, expected))
                    for d in _param_differences(a, b, f"{path}[{i}]")]
        have, want = {_canonical(v) for v in collected}, {_canonical(v) for v in expected}
        added = [_short(v) for v in expected if _canonical(v) not in have][:3]
        dropped = [_short(v) for v in collected if _canonical(v) not in want][:3]
        detail = "; ".join(part for part in (f"expected adds {', '.join(added)}" if added else "",
                                             f"expected lacks {', '.join(dropped)}" if dropped else "") if part)
        return [f"{path}: collected {len(collected)} items, expected {len(expected)}"
                + (f" ({detail})" if detail else "")]
    return [f"{path}: collected {_shown_param(collected)}, expected {_shown_param(expected)}"]


def _shown_param(value: Any) -> str:
    return "nothing" if value is _ABSENT_PARAM else _short(value)


def _canonical(value: Any) -> str:
    return json.dumps(_without_nulls(value), sort_keys=True, ensure_ascii=False, default=str)


def _without_nulls(value: Any) -> Any:
    """Snapshots are written without null values (FactsSnapshot.to_json), so a parameter that
    resolved to null and one that is absent are the same parameter."""
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def _short(value: Any) -> str:
    text = _canonical(value)
    return text if len(text) <= 80 else text[:77] + "..."
