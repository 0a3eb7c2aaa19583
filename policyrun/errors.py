"""Errors and findings, each with a location a person can jump to.

One base error (`PolicyrunError`) carries a stable code, a message that says what to do, and
optionally a `Location`; the CLI renders it once, at the boundary, and maps it to an exit code.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Literal

Severity = Literal["error", "warning"]

# Exit codes are part of the CLI contract (docs/cli.md).
EXIT_OK = 0
EXIT_FAIL = 1
EXIT_BLOCKED = 2
EXIT_USAGE = 3
EXIT_INTERNAL = 4


@dataclass(frozen=True, order=True)
class Location:
    """A position in a file; line and column are 1-based (0: the whole file, the whole line).

    Its one text form is `file:line:column`, or the file alone when there is no line; traces and
    reports carry that text and `Location.parse` reads it back.
    """

    file: str
    line: int = 0
    column: int = 0

    def __str__(self) -> str:
        if self.line:
            return f"{self.file}:{self.line}:{self.column}"
        return self.file

    @classmethod
    def parse(cls, text: str) -> Location:
        """The Location `str` wrote. Only the last two `:`-separated parts are a position, so a
        file name may hold colons (`C:\\rb.yaml:3:1`, `a:b.yaml:3:1`); text that does not end in
        `:line:column` with a line is a file alone (`C:\\rb.yaml`, `notes:12`)."""
        head, sep, col = text.rpartition(":")
        file, sep2, line = head.rpartition(":")
        if sep and sep2 and _number(line) and _number(col) and int(line) > 0:
            return cls(file, int(line), int(col))
        return cls(text)


def _number(text: str) -> bool:
    # ASCII digits only: str.isdigit() takes '²' and other digits int() refuses.
    return text.isascii() and text.isdigit()


def display_path(path: str | os.PathLike[str]) -> str:
    """A path as people read it: bytes that are not UTF-8 (a file name from another locale, which
    Python holds as lone surrogates) shown as `\\xff` escapes instead of failing to print."""
    text = os.fspath(path)
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def terminal_text(text: str) -> str:
    """Text for a person's screen: control and bidi characters as visible escapes (see
    policyrun.safetext), bytes of non-UTF-8 file names as `\\xff`."""
    from policyrun.safetext import escape_controls

    return escape_controls(display_path(text))


@dataclass(frozen=True)
class Finding:
    """One lint finding or load error."""

    code: str
    message: str
    location: Location
    severity: Severity = "error"
    # Path to the node inside the document ("phases → FREEZE_IDENTITY → evidence[2] → check").
    node: str = ""
    # Lines shown under the message in text output: an expression with a `^` under the column.
    excerpt: str = ""

    def sort_key(self) -> tuple[str, int, int, str, str]:
        loc = self.location
        return (loc.file, loc.line, loc.column, self.code, self.message)

    def render(self) -> str:
        where = f" (at {self.node})" if self.node else ""
        below = f"\n{self.excerpt}" if self.excerpt else ""
        return terminal_text(f"{self.location}: {self.code} {self.message}{where}{below}")


class PolicyrunError(Exception):
    """An error caused by the user's input; rendered without a traceback."""

    exit_code = EXIT_USAGE

    def __init__(self, message: str, *, code: str = "E000", location: Location | None = None,
                 findings: list[Finding] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code
        self.location = location
        self.findings: list[Finding] = findings or []

    def render(self) -> str:
        if self.findings:
            return "\n".join(f.render() for f in sorted(self.findings, key=Finding.sort_key))
        prefix = f"{self.location}: " if self.location else ""
        return terminal_text(f"{prefix}{self.code} {self.message}")


class UsageError(PolicyrunError):
    """Bad command-line usage or inputs (exit 3)."""


class RulebookError(PolicyrunError):
    """A rulebook that cannot be loaded or compiled (exit 3)."""


@dataclass
class FindingSink:
    """Collects findings; callers sort and render them once."""

    findings: list[Finding] = field(default_factory=list)

    def add(self, code: str, message: str, location: Location, *, severity: Severity = "error",
            node: str = "", excerpt: str = "") -> None:
        self.findings.append(Finding(code, message, location, severity, node, excerpt))
