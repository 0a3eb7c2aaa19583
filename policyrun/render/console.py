"""The verdict on a terminal: a rich table on a TTY, aligned plain text otherwise.

rich is imported only on the TTY path: CI logs and pipes get plain text, and the CLI does not pay
rich's import time for them.
"""

from __future__ import annotations

from policyrun.model import worst_status

import sys
from typing import TextIO

from policyrun.trace.headline import headline
from policyrun.safetext import escape_ci_commands, escape_controls, json_controls
from policyrun.trace.model import PhaseRecord, Trace

_STYLES = {"PASS": "bold green", "WARN": "bold yellow", "FAIL": "bold red", "BLOCKED": "bold dark_orange", "STOPPED": "bold magenta",
           "SKIPPED": "dim"}


def verdict_line(trace: Trace) -> str:
    summary = f" — {trace.verdict.summary}" if trace.verdict.summary else ""
    return escape_controls(f"verdict: {trace.verdict.id}{summary} (exit {trace.exit_code})")


def phase_headline(phase: PhaseRecord) -> str:
    """The REASON column: the blocker, with a BLOCKED or STOPPED phase's FAILs first
    (policyrun.trace.headline, which also writes the `incomplete` verdict's summary)."""
    return headline({"status": phase.status, "blocker": phase.blocker, "reason": phase.reason},
                    [{"outcome": c.outcome, "message": c.message} for c in phase.checks()])


def _rows(trace: Trace) -> list[tuple[str, str, str, str]]:
    # Blockers and reasons quote facts: escape terminal controls before they reach the screen.
    return [(escape_controls(p.phase), p.status, escape_controls(phase_headline(p)),
             escape_controls(p.next_allowed_action)) for p in trace.phases]


def plain_table(trace: Trace, reason_width: int = 64) -> str:
    """Aligned columns; a long reason wraps within its column so the next action stays aligned."""
    import textwrap

    header = ("PHASE", "STATUS", "REASON / BLOCKER", "NEXT ACTION")
    rows = [header, *_rows(trace)]
    w0 = max(len(r[0]) for r in rows)
    w1 = max(len(r[1]) for r in rows)
    w2 = min(max(len(r[2]) for r in rows), reason_width)
    lines = []
    for phase, status, why, nxt in rows:
        wrapped = textwrap.wrap(why, w2, break_long_words=False, break_on_hyphens=False) or [""]
        lines.append(f"{phase:<{w0}}  {status:<{w1}}  {wrapped[0]:<{w2}}  {nxt}".rstrip())
        lines.extend(f"{'':<{w0}}  {'':<{w1}}  {more}".rstrip() for more in wrapped[1:])
    # Wrapping can put a `::` that was inside a reason at the start of a line of its own (after
    # the indent, which CI runners trim): break CI log commands in the table as printed.
    return escape_ci_commands("\n".join(lines) + "\n")


def _rich_table(trace: Trace, stream: TextIO) -> None:
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    title = escape_controls(f"{trace.rulebook.name} {trace.rulebook.version} · mode {trace.mode}")
    table = Table(title=Text(title), title_justify="left")
    table.add_column("Phase", no_wrap=True)
    table.add_column("Status", no_wrap=True)
    table.add_column("Reason / blocker", overflow="fold")
    table.add_column("Next allowed action", overflow="fold")
    for phase, status, why, nxt in _rows(trace):
        # Text, not markup strings: blockers come from facts and may contain [brackets].
        table.add_row(Text(phase), Text(status, style=_STYLES[status]), Text(why), Text(nxt))
    console = Console(file=stream, highlight=False)
    console.print(Text(escape_controls(trace.rulebook.identity())))
    console.print(table)
    console.print(verdict_line(trace), style=_STYLES.get(_worst(trace), ""), markup=False)


def _worst(trace: Trace) -> str:
    statuses = {p.status for p in trace.phases}
    return worst_status(statuses)


def print_trace(trace: Trace, *, stream: TextIO | None = None, quiet: bool = False, as_json: bool = False) -> None:
    """Print a trace for people (table), scripts (`as_json`) or logs (`quiet`: the verdict only)."""
    out = stream or sys.stdout
    if as_json:
        out.write(json_controls(trace.to_json()))
    elif quiet:
        out.write(verdict_line(trace) + "\n")
    elif out.isatty():
        _rich_table(trace, out)
    else:
        out.write(escape_controls(trace.rulebook.identity()) + "\n")
        out.write(plain_table(trace))
        out.write(verdict_line(trace) + "\n")
