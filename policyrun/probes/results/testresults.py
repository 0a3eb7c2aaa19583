"""The test results of any number of report files, gathered into the `tests.junit` fact value.

Totals, every skip with its reason, failures, errors, collection errors and skips, text cut at
TEXT_CAP; and pytest's text conventions both formats share (a skip's reason and place, the crash
line of a failure, the `E   ` line of a collection error). Kept apart from the two parsers
(policyrun.probes.results.junitxml, .reportlog): they read different files into the same value,
by the same rules.
"""

from __future__ import annotations

import ast
import re
from typing import Any

OUTCOMES = ("passed", "failed", "error", "skipped")
_PYTEST_LOCATION = re.compile(r"^(\S+):(\d+): ")  # "path/test_x.py:12: " before a skip reason in the text
# The crash location pytest prints last in a failure body: "tests/unit/test_x.py:90: AssertionError".
_CRASH_LINE = re.compile(r"^([^\s:][^:\n]*):(\d+): ([A-Za-z_][\w.]*)[ \t]*$", re.MULTILINE)
COMMIT_PROPERTY = "policyrun.commit"
COMMIT_CAP = 200  # characters kept of a recorded commit (it is a SHA; anything longer is shown cut)
TEXT_CAP = 64 * 1024  # characters kept of one message attribute or element body


def first_line(text: str | None) -> str | None:
    if not text:
        return None
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return None


def collection_message(text: str | None, attr: str | None) -> str | None:
    """The line that says why collection failed: pytest marks it with `E   `."""
    for line in (text or "").splitlines():
        if line.startswith("E "):
            return line[1:].strip()
    return first_line(text) or first_line(attr)


def crash_location(body: str | None) -> tuple[str | None, int | None]:
    """pytest ends a failure body with `path:line: ErrorType`; the last such line is where it failed."""
    last = None
    for last in _CRASH_LINE.finditer(body or ""):
        pass
    return (last.group(1), int(last.group(2))) if last else (None, None)


def _skip_tuple(body: str | None) -> tuple[str, int, str] | None:
    """pytest's body for a skip at collection: the repr of `(path, line, "Skipped: reason")`."""
    text = (body or "").strip()
    if not (text.startswith("(") and text.endswith(")")):
        return None
    try:
        value = ast.literal_eval(text)  # literals only: nothing in the report is ever run
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    if (isinstance(value, tuple) and len(value) == 3 and isinstance(value[0], str) and isinstance(value[1], int)
            and isinstance(value[2], str)):
        return value[0], value[1], strip_skipped(value[2])
    return None


def skip_reason(message: str | None, body: str | None) -> tuple[str, str | None, int | None]:
    """A skip's reason, file and line: the collection tuple in the body, else the message
    attribute (pytest writes the clean reason there), else the body without its `path:line: `."""
    found = _skip_tuple(body)
    if found:
        return found[2], found[0], found[1]
    first = first_line(body) or ""
    where = _PYTEST_LOCATION.match(first)
    file, line = (where.group(1), int(where.group(2))) if where else (None, None)
    if message is not None:
        return message, file, line
    return (first[where.end():] if where else first), file, line

def strip_skipped(text: str) -> str:
    return text[len("Skipped: "):] if text.startswith("Skipped: ") else text


class Results:
    """Accumulates testcases from any number of files into the fact value."""

    def __init__(self, per_test: bool) -> None:
        self.per_test = per_test
        self.tests: dict[str, dict[str, Any]] = {}
        self.counts = dict.fromkeys(("tests", "passed", "failed", "errors", "skipped", "xfailed",
                                     "collection_errors", "collection_skipped"), 0)
        self.duration = 0.0
        self.skips: list[dict[str, Any]] = []
        self.skip_reasons: dict[str, int] = {}
        self.failures: list[dict[str, Any]] = []
        self.errors: list[dict[str, Any]] = []
        self.collection_errors: list[dict[str, Any]] = []
        self.collection_skips: list[dict[str, Any]] = []
        self.truncated: list[dict[str, Any]] = []
        self.duplicates: list[str] = []
        self.suites: list[str] = []
        self.files: list[dict[str, Any]] = []
        self.seen: set[str] = set()
        self.file_commits: list[str] = []  # the file being parsed: its suites' recorded commits

    def failure(self, issue: dict[str, Any]) -> None:
        self.counts["failed"] += 1
        self.failures.append(issue)

    def error(self, issue: dict[str, Any], *, collection: bool) -> None:
        self.counts["errors"] += 1
        self.errors.append(issue)
        if collection:
            self.counts["collection_errors"] += 1
            self.collection_errors.append(issue)

    def skip(self, test_id: str, reason: str, mtype: str | None, *, xfail: bool, file: str | None,
             line: int | None, module: str | None) -> None:
        c = self.counts
        c["skipped"] += 1
        if xfail:
            c["xfailed"] += 1
        collection = module is not None
        self.skips.append({"id": test_id, "reason": reason, "kind": "xfail" if xfail else "skip", "type": mtype,
                           "collection": collection, "file": file, "line": line})
        self.skip_reasons[reason] = self.skip_reasons.get(reason, 0) + 1
        if module is not None:
            c["collection_skipped"] += 1
            self.collection_skips.append({"id": test_id, "module": module, "file": file, "line": line,
                                          "reason": reason})

    def add(self, test_id: str, outcome: str, duration: float, message: str | None, mtype: str | None,
            properties: dict[str, Any] | None, file: str | None, line: int | None, *, xfail: bool = False,
            collection: bool = False, where: tuple[str | None, int | None] = (None, None)) -> None:
        """One report-log test. `where` is the failure's crash location or the skip's place."""
        cut = message is not None and len(message) > TEXT_CAP
        if message is not None and cut:
            self.truncated.append({"id": test_id, "what": "message", "size": len(message)})
            message = message[:TEXT_CAP]
        self.counts["tests"] += 1
        self.duration += duration
        classname, _, name = test_id.rpartition("::")
        issue = {"id": test_id, "message": message, "type": mtype, "classname": classname or None, "name": name,
                 "file": where[0], "line": where[1], "truncated": cut}
        if outcome == "passed":
            self.counts["passed"] += 1
        elif outcome == "failed":
            self.failure(issue)
        elif outcome == "error":
            self.error(issue, collection=collection)
        else:
            self.skip(test_id, message or "", mtype, xfail=xfail, file=where[0], line=where[1],
                      module=test_id if collection else None)
        if test_id in self.seen:
            self.duplicates.append(test_id)
        else:
            self.seen.add(test_id)
        if self.per_test:
            self.tests[test_id] = {"outcome": outcome, "duration": duration, "message": message,
                                   "properties": properties, "file": file, "line": line}

    def value(self) -> dict[str, Any]:
        return {
            "totals": dict(self.counts),
            "duration": round(self.duration, 6),
            "tests": self.tests if self.per_test else None,
            "skips": self.skips,
            "skip_reasons": dict(sorted(self.skip_reasons.items())),
            "collection_skips": self.collection_skips,
            "failures": self.failures,
            "errors": self.errors,
            "collection_errors": self.collection_errors,
            "failed_ids": [f["id"] for f in self.failures],
            "error_ids": [e["id"] for e in self.errors],
            "truncated": self.truncated,
            "duplicates": sorted(set(self.duplicates)),
            "suites": self.suites,
            "files": self.files,
        }
