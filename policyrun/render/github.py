"""GitHub Actions workflow commands (`::error file=...,line=...::message`) for lint findings and traces.

Printed to a step's stdout, each line becomes an annotation on the file and line it names, in the
run's summary and on the pull request's *Files changed* view. Values are escaped as the runner
expects (actions/toolkit `command.ts`): `%`, CR and LF in the message; also `:` and `,` in
properties. That escaping is also what keeps a fact value from starting a workflow command of its
own: no newline reaches the log unescaped.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from policyrun.errors import Finding
from policyrun.lintcodes import describe
from policyrun.render.codelocations import CodeLocation, Resolver, check_locations, failing_checks
from policyrun.render.safetext import escape_controls
from policyrun.trace import CheckRecord, PhaseRecord, Trace

_LEVELS = {"FAIL": "error", "BLOCKED": "error", "STOPPED": "error", "WARN": "warning"}


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def command(level: str, message: str, *, file: str | None = None, line: int = 0, col: int = 0,
            title: str | None = None) -> str:
    props: list[str] = []
    if file:
        props.append(f"file={escape_property(file)}")
        if line > 0:
            props.append(f"line={line}")
            if col > 0:
                props.append(f"col={col}")
    if title:
        props.append(f"title={escape_property(escape_controls(title))}")
    head = f"::{level} {','.join(props)}" if props else f"::{level}"
    return f"{head}::{escape_data(escape_controls(message))}"


def render_lint_github(findings: Iterable[Finding]) -> str:
    """One `::error`/`::warning` per lint finding, at its rulebook line."""
    lines = []
    for f in sorted(findings, key=Finding.sort_key):
        text = f"{f.message} (at {f.node})" if f.node else f.message
        lines.append(command(f.severity, text, file=Path(f.location.file).as_posix(), line=f.location.line,
                             col=f.location.column, title=f"{f.code} {describe(f.code).short}"))
    return "".join(line + "\n" for line in lines)


def _annotation_at(locations: list[CodeLocation], fallback: CodeLocation | None) -> CodeLocation | None:
    """The first code location inside the source root, else the rulebook line (when that is a file
    of the repository: a shipped rulebook is not)."""
    for loc in locations:
        if loc.in_source_root:
            return loc
    if fallback is not None and fallback.in_source_root:
        return fallback
    return None


def _check_message(phase: PhaseRecord, check: CheckRecord, locations: list[CodeLocation]) -> str:
    lines = [f"{phase.phase} is {phase.status}: {check.message or phase.blocker or phase.reason}",
             f"{check.kind} {check.id} ({check.result}): {check.expression}"]
    if len(locations) > 1:
        lines.append("also: " + ", ".join(loc.text() for loc in locations[1:10])
                     + (f" and {len(locations) - 10} more" if len(locations) > 10 else ""))
    lines.append(f"next allowed action: {phase.next_allowed_action}")
    return "\n".join(lines)


def render_trace_github(trace: Trace, *, base_dir: Path | None = None) -> str:
    """One annotation per failing check of every FAIL, BLOCKED, STOPPED (error) or WARN (warning)
    phase, at the first code location the check read, else at the check's rulebook line."""
    resolver = Resolver(trace, base_dir)
    lines = []
    for phase in trace.phases:
        level = _LEVELS.get(phase.status)
        if level is None:
            continue
        checks = failing_checks(phase)
        if not checks:
            at = _annotation_at([], resolver.rulebook(phase.location))
            lines.append(command(level, f"{phase.phase} is {phase.status}: {phase.blocker or phase.reason}\n"
                                        f"next allowed action: {phase.next_allowed_action}",
                                 file=at.path if at else None, line=at.line if at else 0,
                                 col=at.column if at else 0, title=f"{trace.rulebook.name} {phase.phase}"))
            continue
        for check in checks:
            locations = check_locations(trace, check, resolver)
            at = _annotation_at(locations, resolver.rulebook(check.location) or resolver.rulebook(phase.location))
            message = _check_message(phase, check, [at, *(x for x in locations if x != at)] if at else locations)
            lines.append(command(level, message, file=at.path if at else None, line=at.line if at else 0,
                                 col=at.column if at else 0,
                                 title=f"{trace.rulebook.name} {phase.phase} {phase.status}: {check.id}"))
    return "".join(line + "\n" for line in lines)
