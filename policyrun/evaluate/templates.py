"""The text of messages, next actions and verdict summaries: `${...}` templates over the evaluation.

A check whose text needs a value that has none imposes BLOCKED at least: an agent must never act
on a text with a hole in it. Kept apart from the phase rules (policyrun.evaluate.phase): one
phase's checks, the next actions and the verdict (policyrun.evaluate.settle) all state themselves
through these.
"""

from __future__ import annotations

from typing import Any

from policyrun.evaluate.expreval import EvalContext
from policyrun.evaluate.expreval import run_value as _run_value
from policyrun.language.expr import ExprError
from policyrun.language.interpolation import bounded_text, render_value, split_template
from policyrun.language.violationrows import rows_text
from policyrun.model import SEVERITY, RowSpec, Status
from policyrun.trace.records import CheckRec


def render(ctx: EvalContext, template: str, violations: list[Any] | None = None,
           row: RowSpec | None = None) -> tuple[str, list[str]]:
    """A template's text, and one line per `${...}` that has no value (`expr: why`). The text shows
    such an expression as `<?expr: unavailable>`; the caller blocks on the list (docs/semantics.md,
    "Values a template needs"). `${violations}` of a check that declares `row:` shows each row as
    `file:line: text`, not as JSON."""
    parts: list[str] = []
    unavailable: list[str] = []
    for seg in split_template(template):
        if not seg.is_expr:
            parts.append(seg.text)
            continue
        expr = seg.text.strip()
        if row is not None and violations is not None and expr == "violations":
            parts.append(bounded_text(rows_text(violations, row)))
            continue
        try:
            found = _run_value(ctx, expr, f"template:{expr}", violations)
        except ExprError as exc:  # lint rejects these; guard so evaluation never crashes
            found_message: str | None = exc.message
        else:
            if found.ok:
                parts.append(bounded_text(render_value(found.value)))
                continue
            found_message = found.message
        parts.append(f"<?{expr}: unavailable>")
        unavailable.append(f"{expr}: {found_message or 'unavailable'}")
    return "".join(parts), unavailable


def unavailable_note(unavailable: list[str]) -> str:
    return "needs a value that could not be computed: " + "; ".join(bounded_text(u) for u in unavailable)


def render_message(ctx: EvalContext, template: str, rec: CheckRec, violations: list[Any] | None = None,
                    row: RowSpec | None = None) -> str:
    """A check's message; one that needs a value without one is marked on the record (the check
    then imposes BLOCKED at least) and says which value and why."""
    text, unavailable = render(ctx, template, violations, row)
    if not unavailable:
        return text
    rec["_unavailable"] = True
    return f"{text} [this message {unavailable_note(unavailable)}]"


def at_least_blocked(status: Status) -> Status:
    return status if SEVERITY.get(status, 0) >= SEVERITY["BLOCKED"] else "BLOCKED"



def render_violations(violations: list[Any], row: RowSpec | None = None) -> str:
    if row is not None:
        return bounded_text(rows_text(violations, row))
    return bounded_text("; ".join(render_value(v) for v in violations))


def check_next(ctx: EvalContext, template: str | None, violations: list[Any] | None, rec: CheckRec,
                row: RowSpec | None = None) -> str | None:
    """A check's own next action, with its `violations` bound as in its message. One that needs a
    value without one makes the check impose BLOCKED at least, its message naming the value."""
    if not template:
        return None
    text, unavailable = render(ctx, template, violations, row)
    if unavailable and rec["outcome"] is not None:
        rec["outcome"] = at_least_blocked(rec["outcome"])
        rec["message"] = f"{rec['message']} [its next action {unavailable_note(unavailable)}]"
    return text
