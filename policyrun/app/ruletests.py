"""A rulebook's own tests: the cases of *.test.yaml files, run with the coverage of their checks
(the runner is policyrun.audit.ruletest; this selects the cases and gathers the outcome)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from policyrun.audit.ruletest import CaseResult
    from policyrun.audit.testreport import Outcome


@dataclass(frozen=True)
class RuleTestRequest:
    paths: tuple[str, ...] = ("rulebooks",)  # files, or folders searched recursively
    select: str | None = None  # `-k`: text case names contain, with not, and, or and parentheses
    min_coverage: float = 0.0  # percent of conditions made both true and false


def run_tests(request: RuleTestRequest, on_suite: Callable[[Sequence[CaseResult]], None] | None = None) -> Outcome:
    """Every selected case, file by file (`on_suite` hears each file's results as it finishes);
    U010 when `select` leaves no case to run."""
    from policyrun.audit.casefilter import parse
    from policyrun.errors import UsageError
    from policyrun.audit.ruletest import Coverage, Selection, discover, run_suite
    from policyrun.audit.testreport import Outcome

    selection = Selection(parse(request.select)) if request.select is not None else None
    coverage = Coverage()
    results: list[CaseResult] = []
    for path in discover(list(request.paths)):
        found = run_suite(path, coverage, selection)
        results.extend(found)
        if on_suite is not None:
            on_suite(found)
    if selection is not None and not results:
        raise UsageError(f"-k {request.select!r} selects none of the {selection.deselected} case(s) in "
                         f"{', '.join(request.paths)}; give text that case names contain", code="U010")
    return Outcome(results, coverage, request.min_coverage, selection.deselected if selection else 0)
