"""The located rows of a failing check: one SARIF result or GitHub annotation per row.

A check whose `row:` names a `file` field places each of its `violations` rows at that file (and
line); the rows come from the trace, as recorded (a list the trace summarised yields none).
"""

from __future__ import annotations

from dataclasses import dataclass

from policyrun.render.codelocations import CodeLocation, Resolver, row_location
from policyrun.trace.model import CheckRecord
from policyrun.language.violationrows import row_body, row_site

MAX_ROWS = 1000  # results per check: a report of more rows than this is read in the trace


@dataclass(frozen=True)
class RowSite:
    location: CodeLocation
    text: str  # the row's text without its location (its `message` field, or its other fields)


def located_rows(check: CheckRecord, resolver: Resolver) -> list[RowSite]:
    """The rows of the check that name a file, in order, resolved against the source root."""
    if check.row is None or check.row.file is None or not isinstance(check.violations, list):
        return []
    out = []
    for row in check.violations:
        site = row_site(row, check.row)
        if site is None:
            continue
        loc = row_location(resolver, list(check.facts), site, f"row of {check.id}")
        out.append(RowSite(loc, row_body(row, check.row)))
        if len(out) >= MAX_ROWS:
            break
    return out
