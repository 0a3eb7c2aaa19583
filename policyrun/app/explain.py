"""Explain: why each phase of a saved trace got its status, as text and as the records behind it.
A filter over the trace; nothing is evaluated again."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from policyrun.app.access import PathCheck
    from policyrun.trace.model import CheckRecord, PhaseRecord, Trace


@dataclass(frozen=True)
class ExplainRequest:
    trace: str | Path  # as the caller wrote it (a refusal quotes it)
    phase: str | None = None  # only this phase (T004 when the trace has none of that name)
    failures_only: bool = False  # only FAIL, BLOCKED and STOPPED phases, and their decisive checks
    force: bool = False  # explain a trace that contradicts its own checks, under a banner


@dataclass(frozen=True)
class PhaseChecks:
    phase: PhaseRecord
    checks: list[CheckRecord]  # those the text explains


@dataclass(frozen=True)
class ExplainResult:
    trace: Trace  # with the values it summarises read whole from values/ beside it
    text: str  # what `policyrun explain` prints (the banner first, when forced over inconsistencies)
    phases: list[PhaseChecks]  # the selection the text makes, as records
    inconsistencies: list[str]  # with force: what the trace contradicts


def explain(request: ExplainRequest, access: PathCheck | None = None) -> ExplainResult:
    from policyrun.errors import terminal_text
    from policyrun.render.explain import render_explain
    from policyrun.render.view import FAILING, is_decisive
    from policyrun.trace.consistency import banner_lines, inconsistencies
    from policyrun.evaluate.tracevalues import load_trace_values

    if access is not None:
        access.check(request.trace, "trace")
    trace = load_trace_values(Path(request.trace), force=request.force)  # summarised values whole, from values/
    text = render_explain(trace, phase=request.phase, failures=request.failures_only)  # T004: an unknown phase
    problems = inconsistencies(trace) if request.force else []
    if problems:
        text = terminal_text("\n".join(banner_lines(problems))) + "\n\n" + text
    # The same selection render_explain makes, as records.
    chosen = [p for p in trace.phases if request.phase is None or p.phase == request.phase]
    if request.failures_only:
        chosen = [p for p in chosen if p.status in FAILING]
    phases = [PhaseChecks(p, [c for c in p.checks() if not request.failures_only or is_decisive(c)])
              for p in chosen]
    return ExplainResult(trace, text, phases, problems)
