"""Load-time consistency checks for a trace: a hand-edited trace is refused, not rendered.

The interpreter writes traces that satisfy every rule below; a trace that breaks one was changed
after the fact (or by a broken tool), and a report of it would be a report of something that
never happened. `load_trace` refuses such a trace (T005, listing every inconsistency); `report`,
`explain` and `diff` render it anyway with `--force`, under a banner.

The rules (docs/security.md repeats them):
1. phase ids are unique;
2. a check imposes a status only from a result that can: evidence and preconditions when
   UNSATISFIED or UNKNOWN, stop conditions when SATISFIED or UNKNOWN, mode selection and template
   checks when UNKNOWN; NOT_APPLICABLE and NOT_EVALUATED never;
3. no check imposes a status more severe than its phase's (STOPPED > BLOCKED > FAIL > WARN > PASS,
   SKIPPED): a PASS phase has no check that imposed FAIL;
4. a WARN, FAIL, BLOCKED or STOPPED phase has a check that imposed exactly that status, and a blocker;
5. the exit code agrees with the statuses: 0 only when no phase is FAIL, BLOCKED or STOPPED; 1 only
   when some phase is FAIL (or WARN under --fail-on warn); 2 only when some phase is BLOCKED or
   STOPPED; nothing else.

They catch careless or partial edits, not forgery: a trace rewritten consistently passes. To know
that a verdict is genuine, evaluate again from the facts (`evaluate --facts`) and `diff` the traces.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from policyrun.errors import Location, UsageError
from policyrun.model import SEVERITY

if TYPE_CHECKING:  # trace.load_trace calls this module: the model is only named here
    from policyrun.trace.model import Trace

FAILING = ("FAIL", "BLOCKED", "STOPPED")
# Results from which each kind of check may impose a status (rule 2).
_MAY_IMPOSE = {"evidence": {"UNSATISFIED", "UNKNOWN"}, "precondition": {"UNSATISFIED", "UNKNOWN"},
               "stop_when": {"SATISFIED", "UNKNOWN"}, "mode_selection": {"UNKNOWN"}, "template": {"UNKNOWN"}}


def inconsistencies(trace: Trace) -> list[str]:
    """Every rule the trace breaks, one line each, in phase order."""
    problems: list[str] = []
    seen: set[str] = set()
    for phase in trace.phases:
        name = phase.phase
        if name in seen:
            problems.append(f"phase {name} appears twice")
        seen.add(name)
        imposed = [c for c in phase.checks() if c.outcome is not None]
        for check in imposed:
            allowed = _MAY_IMPOSE.get(check.kind)
            if allowed is not None and check.result not in allowed:
                problems.append(f"{name}: {check.kind} {check.id} is {check.result} but imposed {check.outcome}")
            if SEVERITY.get(check.outcome or "", 0) > SEVERITY.get(phase.status, 0):
                problems.append(f"{name} is {phase.status} but {check.kind} {check.id} imposed {check.outcome}")
        if phase.status in (*FAILING, "WARN"):
            if not any(c.outcome == phase.status for c in imposed):
                problems.append(f"{name} is {phase.status} but no check imposed {phase.status}")
            if not phase.blocker:
                problems.append(f"{name} is {phase.status} but records no blocker")
    problems += _exit_code_problems(trace)
    return problems


def _exit_code_problems(trace: Trace) -> list[str]:
    failing = [p for p in trace.phases if p.status in FAILING]
    code = trace.exit_code
    if code == 0 and failing:
        return [f"exit_code 0 but phase {failing[0].phase} is {failing[0].status}"]
    if code == 1 and not any(p.status == "FAIL" for p in failing) and not (
            trace.fail_on_warn and any(p.status == "WARN" for p in trace.phases)):
        return ["exit_code 1 but no phase is FAIL (nor WARN under --fail-on warn)"]
    if code == 2 and not any(p.status in ("BLOCKED", "STOPPED") for p in failing):
        return ["exit_code 2 but no phase is BLOCKED or STOPPED"]
    if code not in (0, 1, 2):
        return [f"exit_code {code} is not a verdict's exit code (0, 1 or 2)"]
    return []


def refuse_inconsistent(trace: Trace, path: Path) -> None:
    """Raise T005 listing every inconsistency, if there is any."""
    problems = inconsistencies(trace)
    if problems:
        listed = "\n".join(f"  - {p}" for p in problems)
        raise UsageError(f"trace is inconsistent ({len(problems)} problem(s)); was it edited by hand?\n{listed}\n"
                         "evaluate again to get a genuine trace, or pass --force to render this one under a "
                         "warning banner", code="T005", location=Location(str(path)))


def banner_lines(problems: list[str]) -> list[str]:
    return ["INCONSISTENT TRACE: rendered with --force; its statuses disagree with its own checks, so do "
            "not rely on this report:", *(f"  - {p}" for p in problems)]
