"""Which phases run: the mode's selection, and gating by the earlier phases a phase requires.

A phase outside the mode, or whose mode `when` is false, is SKIPPED; one that requires an earlier
phase waits until it passes. Kept apart from one phase's checks (policyrun.evaluate.phase): these
decide whether a phase starts at all, and the exit code and default next actions
(policyrun.evaluate.settle) read the same selection.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from policyrun.checkid import CheckId, location_key
from policyrun.evaluate.expreval import EvalContext
from policyrun.evaluate.expreval import record_check as _record
from policyrun.evaluate.expreval import run_check as _run_check
from policyrun.model import PASSING, Phase
from policyrun.trace.records import CheckRec, PhaseRec


@dataclass
class Selection:
    phases: dict[str, str | None]  # phase id → None when selected, else the reason it is not
    checks: dict[str, CheckRec]


def mode_selection(ctx: EvalContext) -> Selection:
    mode = ctx.rulebook.modes[ctx.mode]
    listed = {m.phase: m for m in mode.phases}
    out: dict[str, str | None] = {}
    checks: dict[str, CheckRec] = {}
    for phase in ctx.rulebook.phases:
        entry = listed.get(phase.id)
        if entry is None:
            out[phase.id] = f"outside mode {ctx.mode}"
            continue
        if entry.when is None:
            out[phase.id] = None
            continue
        cid = CheckId(phase.id, "mode_selection", ctx.mode)
        key = location_key(cid)
        outcome = _run_check(ctx, entry.when, key)
        checks[phase.id] = _record(ctx, cid.record_id, "mode_selection", entry.when, outcome, key)
        if outcome.result == "SATISFIED":
            out[phase.id] = None
        elif outcome.result == "UNSATISFIED":
            out[phase.id] = f"outside mode {ctx.mode}: {entry.when} is false"
        else:
            out[phase.id] = None  # cannot decide: run the phase, which then cannot be skipped silently
    return Selection(out, checks)


def gated_by(ctx: EvalContext, phase: Phase, sel: Selection, done: Mapping[str, PhaseRec],
          first_block: str | None) -> str | None:
    """Why an earlier required phase keeps this one from starting, or None. `first_block` is what
    the first earlier phase that ran in this mode and did not pass says (kept by the caller as the
    phases are recorded, so sequential gating costs one look per phase, not one per earlier phase)."""
    if phase.requires is None:
        return None if ctx.rulebook.modes[ctx.mode].gating == "independent" else first_block
    for pid in phase.requires:
        if pid in done and (block := blocks(pid, done[pid], sel)) is not None:
            return block
    return None


def blocks(pid: str, rec: PhaseRec, sel: Selection) -> str | None:
    """How a recorded phase gates the phases that require it: None when it lets them start."""
    status, reason = rec["status"], rec["reason"]
    if status in PASSING:
        return None
    if status == "SKIPPED" and sel.phases.get(pid) is not None:
        return None  # deliberately not run in this mode; nothing to wait for
    if status == "SKIPPED":
        # Name the phase at the root of the chain, not the intermediate skip.
        return reason if reason.startswith("gated by ") else f"gated by {pid}=SKIPPED ({reason})"
    return f"gated by {pid}={status}"
