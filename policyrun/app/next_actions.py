"""Next actions: per phase of a saved trace, its status and the one action the workflow allows
next; and the one to take now."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from policyrun.app.access import PathCheck
    from policyrun.trace.model import PhaseRecord, Trace


@dataclass(frozen=True)
class NextActionsRequest:
    trace: str | Path  # as the caller wrote it (a refusal quotes it)
    force: bool = False  # read a trace that contradicts its own checks (reported in the result)


@dataclass(frozen=True)
class NextActionsResult:
    trace: Trace
    phases: list[PhaseRecord]  # every phase, in workflow order
    now: PhaseRecord | None  # the first FAIL, BLOCKED or STOPPED phase, else the last phase that ran
    inconsistencies: list[str]  # with force: what the trace contradicts; do not act on such a trace


def next_actions(request: NextActionsRequest, access: PathCheck | None = None) -> NextActionsResult:
    from policyrun.render.view import FAILING
    from policyrun.trace.model import load_trace
    from policyrun.trace.consistency import inconsistencies

    if access is not None:
        access.check(request.trace, "trace")
    trace = load_trace(Path(request.trace), force=request.force)
    phases = list(trace.phases)
    ran = [p for p in phases if p.status != "SKIPPED"]
    now = next((p for p in phases if p.status in FAILING), ran[-1] if ran else None)
    return NextActionsResult(trace, phases, now, inconsistencies(trace) if request.force else [])
