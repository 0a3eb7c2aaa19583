"""GitHub Actions workflow commands (`::error file=...,line=...::message`) for lint findings and traces.

Printed to a step's stdout, each line becomes an annotation on the file and line it names, in the
run's summary and on the pull request's *Files changed* view. Values are escaped as the runner
expects (actions/toolkit `command.ts`): `%`, CR and LF in the message; also `:` and `,` in
properties. That escaping is also what keeps a fact value from starting a workflow command of its
own: no newline reaches the log unescaped.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from policyrun.checkid import check_label
from policyrun.errors import Finding
from policyrun.lintcodes import describe
from policyrun.render.codelocations import CodeLocation, Resolver, check_locations, failing_checks
from policyrun.render.rowsites import located_rows
from policyrun.safetext import visible_controls
from policyrun.trace.model import CheckRecord, PhaseRecord, Trace

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
        props.append(f"title={escape_property(visible_controls(title))}")
    head = f"::{level} {','.join(props)}" if props else f"::{level}"
    return f"{head}::{escape_data(visible_controls(message))}"


def _workspace_path(file: str) -> str:
    """Annotations name files relative to the repository root, where the step runs."""
    path = Path(file)
    if path.is_absolute():
        rel = os.path.relpath(path, Path.cwd())
        if not rel.startswith(".."):
            path = Path(rel)
    return path.as_posix()


def render_lint_github(findings: Iterable[Finding]) -> str:
    """One `::error`/`::warning` per lint finding, at its rulebook line."""
    lines = []
    for f in sorted(findings, key=Finding.sort_key):
        text = f"{f.message} (at {f.node})" if f.node else f.message
        lines.append(command(f.severity, text, file=_workspace_path(f.location.file), line=f.location.line,
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


def _label(loc: CodeLocation) -> str:
    if loc.in_source_root:
        return loc.text()
    return f"{loc.text()} (in {loc.base})" if loc.base else loc.text()


def _check_message(phase: PhaseRecord, check: CheckRecord, others: list[CodeLocation]) -> str:
    lines = [f"{phase.phase} is {phase.status}: {check.message or phase.blocker or phase.reason}",
             f"{check_label(check.kind, check.id)} ({check.result}): {check.expression}"]
    if others:
        lines.append("code: " + ", ".join(_label(loc) for loc in others[:10])
                     + (f" and {len(others) - 10} more" if len(others) > 10 else ""))
    lines.append(f"next allowed action: {phase.next_allowed_action}")
    return "\n".join(lines)


def render_trace_github(trace: Trace, *, base_dir: Path | None = None) -> str:
    """One annotation per failing check of every FAIL, BLOCKED, STOPPED (error) or WARN (warning)
    phase, at the first code location the check read, else at the check's rulebook line. A check
    whose `row:` names a file has one annotation per row in the repository instead (and its own as
    well when some row is not there)."""
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
            rows = [r for r in located_rows(check, resolver) if r.location.in_source_root]
            for row in rows:  # a check whose `row:` names a file: one annotation per row, at the row
                lines.append(command(level, f"{phase.phase} is {phase.status}: {check.id}: {row.text}\n"
                                            f"next allowed action: {phase.next_allowed_action}",
                                     file=row.location.path, line=row.location.line,
                                     title=f"{trace.rulebook.name} {phase.phase} {phase.status}: {check.id}"))
            if rows and isinstance(check.violations, list) and len(rows) == len(check.violations):
                continue  # every row has its annotation; the check's own would repeat them
            locations = check_locations(trace, check, resolver)
            at = _annotation_at(locations, resolver.rulebook(check.location) or resolver.rulebook(phase.location))
            message = _check_message(phase, check, [x for x in locations if x != at])
            lines.append(command(level, message, file=at.path if at else None, line=at.line if at else 0,
                                 col=at.column if at else 0,
                                 title=f"{trace.rulebook.name} {phase.phase} {phase.status}: {check.id}"))
    return "".join(line + "\n" for line in lines)
