"""The trace's records as the evaluation builds them: typed dicts, validated into policyrun.trace.model once.

The interpreter and the derive stage build thousands of records per evaluation; building them as
plain dicts and validating the whole trace in one pass of pydantic's validator costs far less than
constructing models one by one (policyrun.evaluate.interpreter). These TypedDicts give those dicts their
shape, so a misspelt key or a wrong value type is a type error rather than a validation error at
the end of an evaluation. Each mirrors the model of the same name in policyrun.trace.model field for
field (tests/test_trace_records.py holds them together); keys starting with `_` are working notes
of the interpreter, removed before validation (the models forbid extra fields).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Literal, NotRequired, TypedDict

from policyrun.checkid import RecordKind
from policyrun.model import Status
from policyrun.trace.model import CHECK_FIELDS, CheckResult


class ReadRec(TypedDict):
    """policyrun.trace.model.Read."""

    path: str
    value: NotRequired[Any]
    missing: NotRequired[bool]
    error: NotRequired[str | None]


class SummaryRec(TypedDict):
    """A value too large for the trace: its type, length and sha256 (policyrun.evaluate.expreval.summarise)."""

    truncated: bool
    type: str
    length: int
    sha256: str | None


class CheckRec(TypedDict):
    """policyrun.trace.model.CheckRecord."""

    id: str
    kind: RecordKind
    expression: str
    result: CheckResult
    outcome: Status | None
    reads: list[ReadRec]
    facts: list[str]
    message: str | None
    location: str | None
    violations: NotRequired[Any]
    row: NotRequired[dict[str, Any] | None]
    unknown: NotRequired[Literal["missing", "deliberate", "error"]]
    waiver: NotRequired[dict[str, Any]]
    # Working notes, never in the trace:
    _violations: NotRequired[list[Any]]  # the whole list, for the check's next action
    _unavailable: NotRequired[bool]  # its message needed a value without one


class PhaseRec(TypedDict):
    """policyrun.trace.model.PhaseRecord."""

    phase: str
    title: str
    status: Status
    reason: str
    mode_check: CheckRec | None
    preconditions: list[CheckRec]
    stop_when: list[CheckRec]
    evidence: list[CheckRec]
    next_action_check: CheckRec | None
    blocker: str | None
    blockers: list[str]
    disabled: list[dict[str, str]]
    next_allowed_action: str
    location: str | None
    _templated: NotRequired[bool]  # its next action came from its own `next:` text


def phase_checks(rec: PhaseRec) -> Iterator[CheckRec]:
    """Every check of a phase record in evaluation order (policyrun.trace.model.PhaseRecord.checks)."""
    for name in CHECK_FIELDS:
        value = rec[name]  # type: ignore[literal-required]
        if isinstance(value, list):
            yield from value
        elif value is not None:
            yield value


class DerivedRec(TypedDict):
    """policyrun.trace.model.DerivedRecord."""

    id: str
    expression: str
    location: str | None
    value: NotRequired[Any]
    error: NotRequired[str | None]
    missing: NotRequired[bool]
    reads: NotRequired[list[ReadRec]]
    facts: NotRequired[list[str]]


class VerdictRec(TypedDict):
    """policyrun.trace.model.VerdictRecord."""

    id: str
    summary: str
    conditions: list[CheckRec]
    expression: NotRequired[str | None]
