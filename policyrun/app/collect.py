"""Collect: run a rulebook's probes for one mode and write the facts snapshot.

A probe that fails is recorded as an error fact, and the snapshot is written all the same; the
result then says the facts are incomplete (exit 2, like a BLOCKED phase). A probe that did not run
because an optional input is unset, or whose `when` is false, is no failure (docs/cli.md).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from policyrun.app.binding import RulebookRequest

if TYPE_CHECKING:
    from policyrun.app.access import PathCheck
    from policyrun.collection.progress import Progress
    from policyrun.facts import FactsSnapshot
    from policyrun.language.rulebook import LoadedRulebook


@dataclass(frozen=True)
class CollectRequest:
    rulebook: RulebookRequest = field(default_factory=RulebookRequest)
    only: frozenset[str] | None = None  # these probes and the probes their parameters read
    output: str | Path | None = None  # where the snapshot is written; None: the caller prints `text`
    host_label: str | None = None
    cluster: str | None = None  # `ray[=ADDRESS]`: host-scoped probes on every node of a Ray cluster
    progress: Progress | None = None


@dataclass(frozen=True)
class ProbeRun:
    """How one probe of a snapshot fared."""

    probe: str
    kind: str
    status: str  # ok, failed, or not_run (by the caller's or the rulebook's choice: an unset input, a false `when`)
    error_code: str | None
    error_message: str | None
    duration_s: float | None

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@dataclass(frozen=True)
class CollectResult:
    rb: LoadedRulebook
    mode: str
    inputs: dict[str, Any]
    facts: FactsSnapshot
    text: str  # the snapshot as written: secret inputs masked
    written: Path | None
    failed: list[str]  # probes that failed (`probe@host` in a cell)
    not_run: set[str]  # not run because an optional input is unset
    not_applicable: set[str]  # not run because their `when` is false (and what waits for them)
    seconds: float

    @property
    def exit_code(self) -> int:
        from policyrun.errors import EXIT_BLOCKED, EXIT_OK

        return EXIT_BLOCKED if self.failed else EXIT_OK

    def probes(self) -> list[ProbeRun]:
        return probe_runs(self.facts, self.not_run | self.not_applicable)


def collect(request: CollectRequest, access: PathCheck | None = None) -> CollectResult:
    from policyrun.app.binding import bind, check_path_inputs
    from policyrun.collection.params import NOT_APPLICABLE, unset_input_probes
    from policyrun.collection.plan import plan
    from policyrun.errors import UsageError
    from policyrun.facts import PER_HOST
    from policyrun.language.inputs import mask_snapshot

    started = time.perf_counter()
    if access is not None and request.output is not None:
        access.check(request.output, "out", write=True)
    bound = bind(request.rulebook, access)
    check_path_inputs(bound, access)
    rb, mode, inputs, only = bound.rb, bound.mode, bound.inputs, set(request.only) if request.only else None
    if request.cluster is not None and (request.host_label is not None or only is not None):
        raise UsageError("--cluster labels each node by its node id and collects every probe of the mode; "
                         "leave out --host-label and --only", code="U003")
    facts = gather(rb, mode, inputs, only=only, progress=request.progress, host_label=request.host_label,
                   cluster=request.cluster)
    text = mask_snapshot(facts, rb.model, inputs).to_json()
    written = None
    if request.output is not None:
        from policyrun.outfiles import write_file

        written = write_file(Path(request.output), text, code="U007", fix="choose another -o path")
    deps = plan(rb.model, mode, only).deps
    not_run = unset_input_probes(facts, deps)
    # A probe whose `when` is false (and what waits for it) was left out by the rulebook's choice.
    not_applicable = unset_input_probes(facts, deps, NOT_APPLICABLE) - not_run
    failed = sorted(pid for pid, fact in facts.facts.items()
                    if not fact.ok and pid not in not_run and pid not in not_applicable
                    and fact.error is not None and fact.error.code != PER_HOST)
    # In a cell, each host's failures are named by host (`probe@host`).
    failed += sorted(f"{pid}@{label}" for label, by_pid in (facts.by_host or {}).items()
                     for pid, fact in by_pid.items() if not fact.ok and pid not in not_run | not_applicable)
    return CollectResult(rb, mode, inputs, facts, text, written, failed, not_run, not_applicable,
                         time.perf_counter() - started)


def probe_runs(facts: FactsSnapshot, not_run: set[str] | frozenset[str] = frozenset()) -> list[ProbeRun]:
    """Each probe of the snapshot, in its order: ok, failed, or not run (`not_run`: by choice)."""
    out = []
    for pid, fact in facts.facts.items():
        err = fact.error
        status = "ok" if err is None else ("not_run" if pid in not_run else "failed")
        out.append(ProbeRun(pid, fact.provenance.kind, status, err.code if err else None, err.message if err else None,
                            fact.provenance.duration_s))
    return out


def gather(rb: LoadedRulebook, mode: str, inputs: dict[str, Any], *, only: set[str] | None = None,
           progress: Progress | None = None, host_label: str | None = None,
           cluster: str | None = None) -> FactsSnapshot:
    """The facts of `mode`'s probes (or of `only` and what they read), collected here, in the
    working directory (or on a Ray cluster), labelled with `host_label` when given."""
    from policyrun.evaluate.engine import check_locations

    rulebook_dir = rb.file_of(("schemas",)).parent
    if cluster is not None:
        from policyrun.collection.cluster import collect_cluster, parse_cluster

        return collect_cluster(rb.model, mode, inputs, address=parse_cluster(cluster), base_dir=Path.cwd(),
                               rulebook_dir=rulebook_dir, locations=check_locations(rb))
    from policyrun.collection.run import collect as run_probes

    label = None
    if host_label is not None:
        from policyrun.hosts import check_label

        label = check_label(host_label)
    facts = run_probes(rb.model, mode, inputs, base_dir=Path.cwd(), progress=progress, only=only,
                       rulebook_dir=rulebook_dir, locations=check_locations(rb))
    if label is not None:
        from policyrun.hosts import label_snapshot

        facts = label_snapshot(facts, rb.model, label)
    return facts


def load_snapshots(paths: list[Path]) -> FactsSnapshot:
    """Facts snapshots read and merged (a conflict between them is an error)."""
    from policyrun.facts import load_facts, merge_facts

    return merge_facts((str(p), load_facts(p)) for p in paths)
