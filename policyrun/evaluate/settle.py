"""What the evaluation settles on once phases are decided: next actions, the exit code, the verdict.

Each phase's next allowed action is its `next:` template, or a default that says what to do; a
passing phase's action says "none" once the phase after it has passed too. Kept apart from the
phase rules (policyrun.evaluate.phase): these read decided phases and never change a check's
outcome, except that a next action with a hole in it blocks its phase (docs/semantics.md, "Values
a template needs").
"""

from __future__ import annotations

from policyrun.checkid import CheckId, location_key
from policyrun.errors import EXIT_BLOCKED, EXIT_FAIL, EXIT_OK
from policyrun.evaluate.expreval import CheckOutcome, EvalContext
from policyrun.evaluate.expreval import record_check as _record
from policyrun.evaluate.expreval import run_check as _run_check
from policyrun.evaluate.gating import Selection
from policyrun.evaluate.templates import render, unavailable_note
from policyrun.model import PASSING, Phase
from policyrun.trace.headline import headline
from policyrun.trace.records import CheckRec, PhaseRec, VerdictRec, phase_checks


def next_action(ctx: EvalContext, rec: PhaseRec, runnable: list[str], sel: Selection, phase: Phase) -> None:
    """The phase's next action, unless its deciding check named one. A `next:` template that needs a
    value without one makes a phase that ran BLOCKED, through a `template` check naming the value:
    an agent must never act on an action with a hole in it."""
    for chk in phase_checks(rec):
        chk.pop("_unavailable", None)
    if rec["next_allowed_action"]:
        return
    template = phase.next.get(rec["status"])
    if not template:
        rec["next_allowed_action"] = _default_action(ctx, rec, runnable, sel)
        return
    text, unavailable = render(ctx, template)
    if unavailable and rec["status"] in ("PASS", "WARN", "FAIL"):
        cid = CheckId(phase.id, "template", f"next:{rec['status']}")
        key = location_key(cid)
        check = _record(ctx, cid.id, "template", template,
                        CheckOutcome("UNKNOWN", [], [], None), key)
        check["unknown"] = "missing"
        check["outcome"] = "BLOCKED"
        message = f"the {rec['status']} next action of {phase.id} {unavailable_note(unavailable)}"
        check["message"] = message
        rec["next_action_check"] = check
        if rec["status"] != "PASS" and rec["blocker"]:
            rec["blockers"] = rec["blockers"] or [rec["blocker"]]
            rec["blockers"].append(message)
        rec["status"], rec["blocker"] = "BLOCKED", message
        rec["reason"] = f"{check['id']} needs a value that could not be computed"
        blocked = phase.next.get("BLOCKED")
        blocked_text, blocked_unavailable = render(ctx, blocked) if blocked else ("", [""])
        rec["next_allowed_action"] = blocked_text if not blocked_unavailable \
            else _default_action(ctx, rec, runnable, sel)
        return
    rec["next_allowed_action"] = text
    rec["_templated"] = True


def settle_next_actions(records: list[PhaseRec], runnable: list[str]) -> None:
    """A passing phase whose next runnable phase passed too has nothing left to do: its own `next` text
    (written for the moment it is the last phase passed, "classify all 31 rows") would send an agent
    back to work already done. Its action becomes "none", naming the phase that carries on."""
    by_id = {r["phase"]: r for r in records}
    position = {pid: i for i, pid in enumerate(runnable)}  # not runnable.index(): one scan per phase
    for rec in records:
        pid = rec["phase"]
        if not rec.pop("_templated", False) or rec["status"] not in PASSING or pid not in position:
            continue
        following = position[pid] + 1
        if following < len(runnable) and by_id[runnable[following]]["status"] in PASSING:
            nxt = runnable[following]
            rec["next_allowed_action"] = f"none: {nxt} has passed too; see the first phase that has not"


def _default_action(ctx: EvalContext, rec: PhaseRec, runnable: list[str], sel: Selection) -> str:
    status, pid = rec["status"], rec["phase"]
    if status in PASSING:
        later = runnable[runnable.index(pid) + 1:] if pid in runnable else []
        caveat = " (after reading its warnings)" if status == "WARN" else ""
        return f"proceed to {later[0]}{caveat}" if later else f"none: mode {ctx.mode} is complete{caveat}"
    if status == "SKIPPED":
        if sel.phases.get(pid) is not None:
            return f"none in mode {ctx.mode}"
        return f"none until {rec['reason'].removeprefix('gated by ').split('=')[0].split(' ')[0]} passes"
    # The blocker has its own field; the action says what to do about it without repeating it.
    if status == "FAIL":
        return f"fix what {pid} reports, then evaluate again"
    if status == "STOPPED":
        return "stop here and report the decision the blocker asks for"
    if any(c["outcome"] == "FAIL" for c in phase_checks(rec)):
        return f"fix the failures {pid} reports first, then resolve its blocker and evaluate again"
    return f"resolve {pid}'s blocker, then evaluate again"


def exit_code_of(records: list[PhaseRec], sel: Selection, fail_on_warn: bool = False) -> int:
    """From the first selected phase that did not pass: 1 FAIL, 2 BLOCKED or STOPPED; a WARN
    counts as a FAIL only with `--fail-on warn`."""
    for rec in records:
        status = rec["status"]
        if sel.phases.get(rec["phase"]) is not None or status in ("PASS", "SKIPPED"):
            continue
        if status == "WARN":
            if fail_on_warn:
                return EXIT_FAIL
            continue
        return EXIT_FAIL if status == "FAIL" else EXIT_BLOCKED
    return EXIT_OK


def verdict_of(ctx: EvalContext, records: list[PhaseRec], exit_code: int) -> VerdictRec:
    tried: list[CheckRec] = []
    for verdict in ctx.rulebook.verdicts:
        key = location_key(CheckId(None, "verdict", verdict.id))
        outcome = _run_check(ctx, verdict.when, key)
        tried.append(_record(ctx, verdict.id, "verdict", verdict.when, outcome, key))
        if outcome.result == "SATISFIED":
            summary, unavailable = render(ctx, verdict.summary)
            if unavailable:
                # A verdict that cannot state itself is not given: the search goes on, and the
                # condition records why this one was passed over.
                tried[-1]["message"] = f"its summary {unavailable_note(unavailable)}"
                continue
            return {"id": verdict.id, "summary": summary,
                    "expression": verdict.when, "conditions": tried}
    warned = [r["phase"] for r in records if r["status"] == "WARN"]
    if exit_code == EXIT_OK:
        summary = f"every phase of mode {ctx.mode} passed" + (
            f", with warnings in {', '.join(warned)}" if warned else "")
        return {"id": "complete", "summary": summary, "conditions": tried}
    first = next(r for r in records if r["status"] in ("FAIL", "BLOCKED", "STOPPED", "WARN"))
    return {"id": "incomplete", "summary": f"{first['phase']} is {first['status']}: {headline(first, phase_checks(first))}",
            "conditions": tried}
