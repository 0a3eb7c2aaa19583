"""Evaluate: facts (replayed from snapshots, or collected now) → a trace, written with its reports.

Everything the caller could get wrong (the rulebook, the mode, inputs, report formats and their
options, waivers, the baseline) is checked before any probe runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from policyrun.app.binding import RulebookRequest

if TYPE_CHECKING:
    from policyrun.app.access import PathCheck
    from policyrun.collection.progress import Progress
    from policyrun.facts import FactsSnapshot
    from policyrun.language.rulebook import LoadedRulebook
    from policyrun.trace.model import Trace

DEFAULT_OUT = Path(".policyrun")


@dataclass(frozen=True)
class EvaluateRequest:
    rulebook: RulebookRequest = field(default_factory=RulebookRequest)
    # Paths as the caller wrote them (a refusal quotes them).
    facts_files: tuple[str | Path, ...] = ()  # replayed (merged); none: the probes collect now
    out_dir: str | Path = DEFAULT_OUT  # trace.json, reports, values/, manifest.json
    formats: tuple[str, ...] = ()  # each may list several, comma-separated
    junit_include_outside_mode: bool = False
    sarif_located_only: bool = False
    waivers: Path | None = None
    as_of: str | None = None  # YYYY-MM-DD the waivers are checked against
    baseline: Path | None = None  # an earlier evaluation's out folder
    fail_on_warn: bool = False
    allow_stale_facts: bool = False
    keep_facts: bool = False  # also write the snapshot evaluated over as facts.json
    timestamp: bool = True
    progress: Progress | None = None


@dataclass(frozen=True)
class EvaluateResult:
    rb: LoadedRulebook
    mode: str
    inputs: dict[str, Any]
    facts: FactsSnapshot
    collected: bool  # the probes ran in this call (else the facts files were replayed)
    trace: Trace
    written: list[Path]  # every file written (trace, reports, manifest)

    @property
    def exit_code(self) -> int:
        return self.trace.exit_code


def evaluate(request: EvaluateRequest, access: PathCheck | None = None) -> EvaluateResult:
    from policyrun.app.binding import bind, check_path_inputs
    from policyrun.app.collect import gather, load_snapshots
    from policyrun.app.report import report_options
    from policyrun.evaluate.engine import evaluate as run_evaluation
    from policyrun.render import check_formats, rulebook_context, write_run
    from policyrun.render.templatefiles import rulebook_templates

    if access is not None:
        access.check(request.out_dir, "out_dir", write=True)
        for p in request.facts_files:
            access.check(p, "facts_files")
    bound = bind(request.rulebook, access)
    rb, mode, inputs = bound.rb, bound.mode, bound.inputs
    if not request.facts_files:
        check_path_inputs(bound, access)
    templates = rulebook_templates(rb.model, rb.file_of(("report",))) if any(request.formats) else None
    formats = check_formats(request.formats, templates)  # before any probe runs
    options = report_options(formats, junit_include_outside_mode=request.junit_include_outside_mode,
                             sarif_located_only=request.sarif_located_only, fix="add {fmt} to --format")
    waivers = load_waivers(request.waivers, request.as_of)  # checked before any probe runs
    baseline = None
    if request.baseline is not None:
        from policyrun.evaluate.baseline import load_baseline

        baseline = load_baseline(request.baseline)  # checked before any probe runs
    notes: dict[str, object] = {}
    if request.facts_files:
        facts = load_snapshots([Path(p) for p in request.facts_files])
        notes = check_snapshot(rb, mode, inputs, facts, allow=request.allow_stale_facts)
    else:
        facts = gather(rb, mode, inputs, progress=request.progress)
    kept = None
    if request.keep_facts:
        # Evaluated over the snapshot exactly as written (secret inputs masked, as `collect -o` writes
        # it; keys in the file's order), so the trace's facts_sha256 is the kept file's digest and a
        # later --baseline or verify can check one against the other.
        from policyrun.facts import FactsSnapshot
        from policyrun.language.inputs import mask_snapshot

        kept = mask_snapshot(facts, rb.model, inputs).to_json()
        facts = FactsSnapshot.model_validate_json(kept)
    from policyrun.evaluate.tracevalues import VALUES, index_text, keeping_values

    # Values the trace summarises are kept whole in OUT/values/, by checksum (policyrun.evaluate.tracevalues).
    out_dir = Path(request.out_dir)
    values = out_dir / VALUES
    with keeping_values(values):
        trace = run_evaluation(rb, mode=mode, inputs=inputs, facts=facts, timestamp=request.timestamp, notes=notes,
                               fail_on_warn=request.fail_on_warn, waivers=waivers, baseline=baseline)
    index = index_text(trace, values)
    if index is not None:
        values.mkdir(parents=True, exist_ok=True)  # it holds index.json even when nothing fit
    # Rendered first, then written atomically under the folder's lock (policyrun.outfiles).
    written = write_run(trace, formats, out_dir, rulebook_templates=templates, options=options,
                        context=rulebook_context(rb.model),
                        extra={**({"facts.json": kept} if kept is not None else {}),
                               **({f"{VALUES}/index.json": index} if index is not None else {})})
    return EvaluateResult(rb, mode, inputs, facts, not request.facts_files, trace, written)


def check_snapshot(rb: LoadedRulebook, mode: str, inputs: dict[str, Any], facts: FactsSnapshot, *,
                   allow: bool) -> dict[str, object]:
    """Refuse facts this rulebook would not have collected (another probe kind, other parameters):
    replaying them would evaluate a different question than the one the trace claims to answer."""
    from policyrun.collection.stale import stale_facts
    from policyrun.evaluate.engine import check_locations
    from policyrun.errors import UsageError

    stale = stale_facts(rb.model, mode, inputs, facts, check_locations(rb))
    if not stale:
        return {}
    if allow:
        return {"stale_facts": stale}
    lines = "\n".join(f"  {s['probe']}: {s['reason']}" for s in stale[:10])
    more = f"\n  ... and {len(stale) - 10} more" if len(stale) > 10 else ""
    raise UsageError(f"the facts do not match rulebook {rb.display} in mode {mode} with these inputs "
                     f"({len(stale)} probe(s)):\n{lines}{more}\ncollect them again with `policyrun collect`, "
                     "or pass --allow-stale-facts to evaluate them anyway (the trace records it)", code="F005")


def load_waivers(path: Path | None, as_of: str | None) -> Any:
    """The waivers file, checked (policyrun.language.waivers.Waivers), or None without one."""
    from policyrun.errors import UsageError

    if path is None:
        if as_of is not None:
            raise UsageError("--as-of applies to --waivers", code="U003")
        return None
    from datetime import UTC, date, datetime

    from policyrun.errors import Location
    from policyrun.language.waivers import Waivers, as_of_refusal, file_sha256, load_waivers_file

    today = datetime.now(UTC).date()
    if as_of is None:
        day = today
    else:
        try:
            day = date.fromisoformat(as_of)
        except ValueError:
            raise UsageError(f"--as-of expects YYYY-MM-DD, got {as_of!r}", code="U003") from None
    parsed, sources, issued_at = load_waivers_file(path)
    # A past --as-of would apply a waiver that has expired: bounded by the file's date (waivers.py).
    refusal = as_of_refusal(day, today, parsed.issued) if as_of is not None else None
    if refusal is not None:
        raise UsageError(refusal, code="U003", location=issued_at or Location(str(path), 1, 1))
    return Waivers(list(parsed.waivers), sources, as_of=day, as_of_given=as_of is not None, file=str(path),
                   sha256=file_sha256(path))
