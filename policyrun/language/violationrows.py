"""Violations as rows: maps with the fields a check's `row:` declares (docs/language.md, "Rows").

Evaluation refuses a list whose rows do not have the declared fields (`row_problem`: fail closed,
an evaluation error); messages render rows as `file:line: text` (`rows_text`) instead of a map's
JSON; SARIF and GitHub annotations place each row at its file and line (`row_site`).
"""

from __future__ import annotations

from typing import Any

from policyrun.errors import Location
from policyrun.language.interpolation import render_value
from policyrun.language.functions.base import show
from policyrun.model import RowSpec


def row_problem(rows: list[Any], spec: RowSpec) -> str | None:
    """Why the list is not rows of the declared fields, naming the first row at fault; None when it is."""
    for i, row in enumerate(rows):
        if not isinstance(row, dict):
            return (f"violations[{i}] is {show(row)}, not a row: `row:` declares maps with the fields "
                    f"{', '.join(spec.fields)}")
        missing = [name for name in spec.fields if name not in row]
        if missing:
            return (f"violations[{i}] has no field {missing[0]!r}; `row:` declares the fields "
                    f"{', '.join(spec.fields)}")
        if spec.file is not None and row[spec.file] is not None and not isinstance(row[spec.file], str):
            return f"violations[{i}].{spec.file} is {show(row[spec.file])}, not a file path (a string) or null"
        if spec.line is not None and row[spec.line] is not None and \
                (not isinstance(row[spec.line], int) or isinstance(row[spec.line], bool)):
            return f"violations[{i}].{spec.line} is {show(row[spec.line])}, not a line number (an int) or null"
    return None


def row_site(row: Any, spec: RowSpec) -> Location | None:
    """Where a row that names a file is (line 0 when it names no line), else None."""
    if spec.file is None or not isinstance(row, dict):
        return None
    file = row.get(spec.file)
    if not isinstance(file, str) or not file:
        return None
    line = row.get(spec.line) if spec.line is not None else None
    return Location(file, line if isinstance(line, int) and not isinstance(line, bool) and line > 0 else 0)


def row_body(row: dict[str, Any], spec: RowSpec) -> str:
    """A row's text without its location: its `message` field, else its other fields as `name=value`."""
    if spec.message is not None:
        return render_value(row.get(spec.message))
    rest = [name for name in spec.fields if name not in (spec.file, spec.line)]
    return ", ".join(f"{name}={render_value(row.get(name))}" for name in rest)


def row_text(row: Any, spec: RowSpec) -> str:
    """`file:line: text` (or `file: text`, or the text alone when the row names no file)."""
    if not isinstance(row, dict):
        return render_value(row)
    body = row_body(row, spec)
    site = row_site(row, spec)
    if site is None:
        return body
    where = f"{site.file}:{site.line}" if site.line else site.file  # no column: rows name lines
    return f"{where}: {body}" if body else where


def rows_text(rows: list[Any], spec: RowSpec) -> str:
    return "; ".join(row_text(row, spec) for row in rows)
