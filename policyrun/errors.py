"""Errors and findings, each with a location a person can jump to.

One base error (`PolicyrunError`) carries a stable code, a message that says what to do, and
optionally a `Location`; the CLI renders it once, at the boundary, and maps it to an exit code.
"""

from __future__ import annotations

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
    """A position in a file; line and column are 1-based."""

    file: str
    line: int = 0
    column: int = 0

    def __str__(self) -> str:
        if self.line:
            return f"{self.file}:{self.line}:{self.column}"
        return self.file


@dataclass(frozen=True)
class Finding:
    """One lint finding or load error."""

    code: str
    message: str
    location: Location
    severity: Severity = "error"
    # Path to the node inside the document ("phases → FREEZE_IDENTITY → evidence[2] → check").
    node: str = ""

    def sort_key(self) -> tuple[str, int, int, str, str]:
        loc = self.location
        return (loc.file, loc.line, loc.column, self.code, self.message)

    def render(self) -> str:
        where = f" (at {self.node})" if self.node else ""
        return f"{self.location}: {self.code} {self.message}{where}"


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
        return f"{prefix}{self.code} {self.message}"


class UsageError(PolicyrunError):
    """Bad command-line usage or inputs (exit 3)."""


class RulebookError(PolicyrunError):
    """A rulebook that cannot be loaded or compiled (exit 3)."""


@dataclass
class FindingSink:
    """Collects findings; callers sort and render them once."""

    findings: list[Finding] = field(default_factory=list)

    def add(self, code: str, message: str, location: Location, *, severity: Severity = "error",
            node: str = "") -> None:
        self.findings.append(Finding(code, message, location, severity, node))
