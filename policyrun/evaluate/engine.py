"""Glue between a loaded rulebook and the pure interpreter: refuse a rulebook with errors,
map check positions for the trace, and build the rulebook reference auditors see."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from policyrun.checkid import part_key, phase_key, rulebook_checks
from policyrun.errors import RulebookError
from policyrun.facts import FactsSnapshot
from policyrun.evaluate.interpreter import evaluate_records, with_provenance
from policyrun.language.rulebook import LoadedRulebook, load_rulebook
from policyrun.trace.model import LayerRef, RulebookRef, Trace


def load_checked(ref: str | Path | None) -> LoadedRulebook:
    """Load a rulebook and refuse it when static checks find errors (warnings pass)."""
    rb = load_rulebook(ref)
    from policyrun.language import compilecache
    from policyrun.language import lintcache
    from policyrun.language.lint import findings_for, lint_dependencies

    # Before lint, whose compilations load them too.
    stored = compilecache.preload(rb.path)
    findings = lintcache.lookup(rb.path)
    if findings is None:
        findings = findings_for(rb)
        lintcache.store(rb.path, findings, lint_dependencies(rb))
    if not stored and not any(f.severity == "error" for f in findings):
        from policyrun.language.checks import expression_sites

        # Compiled here, before the guard's child is forked, so the child inherits them too.
        compilecache.store(rb.path, [s.source if s.condition else s.source.strip() for s in expression_sites(rb)])
    errors = [f for f in findings if f.severity == "error"]
    if errors:
        raise RulebookError(f"rulebook has {len(errors)} error(s); run `policyrun lint {rb.display}`",
                            code=errors[0].code, findings=errors)
    return rb


def check_locations(rb: LoadedRulebook) -> dict[str, str]:
    """Interpreter location keys → "file:line:col" for phases and their checks (computed once
    per loaded rulebook). The trace records locations as text (Location's one text form)."""
    cached = rb.__dict__.get("_locations")
    if cached is not None:
        return cached  # type: ignore[no-any-return]
    out: dict[str, str] = {}
    for i, phase in enumerate(rb.model.phases):
        out[phase_key(phase.id)] = str(rb.locate(("phases", i)))
    for check in rulebook_checks(rb.model):
        out[check.key] = str(rb.locate(check.node))
        if check.id.kind == "evidence":
            for part in ("check", "violations", "applies_when"):
                if getattr(check.spec, part) is not None:
                    out[part_key(check.key, part)] = str(rb.locate((*check.node, part)))
    for pid, spec in rb.model.probes.items():
        for part in ("for_each", "key"):  # a fan-out's errors name them
            if getattr(spec, part) is not None:
                out[f"probe.{pid}.{part}"] = str(rb.locate(("probes", pid, part)))
    object.__setattr__(rb, "_locations", out)
    return out


def now_utc() -> str:
    return datetime.now(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def rulebook_ref(rb: LoadedRulebook) -> RulebookRef:
    """How the trace (and every output) names a loaded rulebook: its file, sha256 and chain."""
    return RulebookRef(name=rb.model.name, version=rb.model.version, sha256=rb.sha256, path=rb.display,
                       chain=[LayerRef(name=c.name, path=c.path, sha256=c.sha256) for c in rb.chain]
                       if len(rb.chain) > 1 else [])


@dataclass(frozen=True)
class Run:
    """One evaluation's arguments beside the rulebook."""

    mode: str
    inputs: dict[str, Any]
    facts: FactsSnapshot
    notes: dict[str, Any] | None = None
    fail_on_warn: bool = False
    waivers: Any = None
    baseline: Any = None  # policyrun.evaluate.baseline.Baseline: an earlier evaluation (`--baseline DIR`)


def evaluate(rb: LoadedRulebook, *, mode: str, inputs: dict[str, Any], facts: FactsSnapshot,
             timestamp: bool = True, notes: dict[str, Any] | None = None, fail_on_warn: bool = False,
             waivers: Any = None, baseline: Any = None) -> Trace:
    """Evaluate with every expression bounded in time and the whole in memory (policyrun.language.guard)."""
    return evaluate_all(rb, [Run(mode, inputs, facts, notes, fail_on_warn, waivers, baseline)],
                        timestamp=timestamp)[0]


def evaluate_all(rb: LoadedRulebook, runs: Sequence[Run], *, timestamp: bool = True) -> list[Trace]:
    """Evaluate several runs of one rulebook in one guarded child (`policyrun test`'s cases): one
    fork, and each expression compiled once, where a child per run paid both every time (most of
    the time of a test suite). If the guard refused an expression, that refusal would hold for
    every run, including runs whose facts do not make it slow: then each run is evaluated again on
    its own, so every trace is the one `evaluate` gives."""
    from policyrun.evaluate.guardworker import run_shared

    ref = rulebook_ref(rb)
    locations = check_locations(rb)
    stamp = now_utc() if timestamp else None
    for run in runs:
        # Computed before the guard's child is forked and cached on the snapshot, so the child
        # reads them instead of computing them again.
        run.facts.values()
        run.facts.digest()
    # The rulebook, its locations and the facts are passed to the guard's child by reference (it
    # holds them from its fork): an evaluation of the same rulebook over the same facts sends only
    # the small arguments, and the child's compiled expressions are reused.
    shared = [rb.model, locations, *(r.facts for r in runs), *(r.waivers for r in runs if r.waivers is not None),
              *(r.baseline for r in runs if r.baseline is not None)]
    done, refused = run_shared(_records, rb.model, ref, locations, stamp, list(runs), shared=shared)
    if refused and len(runs) > 1:
        done = [run_shared(_records, rb.model, ref, locations, stamp, [run], shared=shared)[0][0] for run in runs]
    from policyrun.language.inputs import mask_trace_record

    from policyrun.evidencekinds import evidence_files

    who = run_record() if timestamp else None
    for rec, run in zip(done, runs, strict=True):
        rec["evidence_files"] = evidence_files(run.facts, rec["provenance"])
        if run.baseline is not None:
            rec["baseline"] = run.baseline.record
        if who is not None:
            rec["run"] = who
    # Secret inputs are masked in what is written, after evaluation saw their real values.
    return [Trace.model_validate(mask_trace_record(with_provenance(rec, run.facts), rb.model, run.inputs))
            for rec, run in zip(done, runs)]


def _records(model: Any, ref: RulebookRef, locations: dict[str, str], stamp: str | None,
             batch: Sequence[Run]) -> tuple[list[dict[str, Any]], bool]:
    """The trace records of `batch` (in the guard's child), and whether the guard refused an
    expression while computing them."""
    from policyrun.language import expr

    before = expr.refusals()
    out = [evaluate_records(model, mode=r.mode, inputs=r.inputs, facts=r.facts, rulebook_ref=ref,
                            locations=locations, generated_at=stamp, notes=r.notes,
                            fail_on_warn=r.fail_on_warn, waivers=r.waivers,
                            baseline=r.baseline.variable if r.baseline is not None else None)
           for r in batch]
    return out, expr.refusals() > before


def run_record() -> dict[str, Any]:
    """Who evaluated, where, with which policyrun and Python: for an auditor, beside `generated_at`."""
    import getpass
    import platform
    import socket

    from policyrun import __version__

    try:
        user: str | None = getpass.getuser()
    except (KeyError, OSError):  # no name for this uid (a bare container)
        user = None
    return {"user": user, "hostname": socket.gethostname() or None, "policyrun_version": __version__,
            "python_version": platform.python_version(), "platform": platform.platform()}
