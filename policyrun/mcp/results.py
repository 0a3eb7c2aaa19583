"""What each MCP tool answers: JSON shapes with a schema (the tools' `outputSchema`).

Every result carries `exit_code` with the CLI's meaning (docs/cli.md) and, when the call itself
was wrong (exit 3) or policyrun failed (exit 4), `error` instead of a traceback. Fields other than
those two have defaults so that an error result is valid against the same schema.

Models that show a record of the trace (a verdict, a phase, a check, a value read) are views of
that record (policyrun.trace.model): each names its record in `TRACE_RECORDS`, takes the record's own
field names, and is built from a record by `of`, which copies every field the two share; the
fields only a view has (a large read's `truncated`, a check's `probes`) are listed in
`VIEW_ONLY`. tests/test_mcp_results.py holds each view to its record, so a field renamed in the
trace cannot silently vanish from the MCP answers.
"""

from __future__ import annotations

from typing import Any, Self

from pydantic import BaseModel, Field

from policyrun.errors import Finding, PolicyrunError
from policyrun.trace.model import CheckRecord, PhaseRecord, Read, VerdictRecord


class Located(BaseModel):
    code: str
    message: str
    file: str | None = None
    line: int | None = Field(default=None, description="1-based")
    column: int | None = Field(default=None, description="1-based")


class FindingOut(Located):
    severity: str = Field(description="error or warning")
    node: str = Field(default="", description="The rulebook node, e.g. `phases → X → evidence[2] → check`.")

    @classmethod
    def of(cls, f: Finding) -> FindingOut:
        loc = f.location
        # An expression error's excerpt (the expression, a `^` under the column) ends the message.
        message = f"{f.message}\n{f.excerpt}" if f.excerpt else f.message
        return cls(code=f.code, message=message, file=loc.file, line=loc.line or None, column=loc.column or None,
                   severity=f.severity, node=f.node)


class ErrorOut(Located):
    """A usage error (exit 3) located at file:line:column where policyrun knows it, or an internal
    error (exit 4, code `internal`) with the path of a log holding the details."""

    findings: list[FindingOut] = Field(default_factory=list,
                                       description="For a rulebook with errors: every error finding.")

    @classmethod
    def of(cls, exc: PolicyrunError) -> ErrorOut:
        ordered = sorted(exc.findings, key=Finding.sort_key)
        # A rulebook refused for its lint errors has no location of its own: point at the first.
        loc = exc.location or (ordered[0].location if ordered else None)
        return cls(code=exc.code, message=exc.message, file=loc.file if loc else None,
                   line=(loc.line or None) if loc else None, column=(loc.column or None) if loc else None,
                   findings=[FindingOut.of(f) for f in ordered])


class ToolResult(BaseModel):
    exit_code: int = Field(description="As the CLI: 0 ok, 1 FAIL (lint: an error finding), 2 BLOCKED or STOPPED, "
                                       "3 usage/rulebook/input error (see `error`), 4 internal error.")
    error: ErrorOut | None = Field(default=None, description="Set when exit_code is 3 or 4.")


class LintResult(ToolResult):
    files: list[str] = Field(default_factory=list, description="Rulebook files checked.")
    errors: int = 0
    warnings: int = 0
    findings: list[FindingOut] = Field(default_factory=list, description="Sorted by file, line, column.")


class RulebookResult(ToolResult):
    """Which file was used, so an agent never takes a file of the checkout for a shipped rulebook."""

    rulebook: str = Field(default="", description="The file used: `<shipped>/NAME.yaml` for a shipped rulebook, "
                                                  "else its path (`./x`, `dir/x.yaml`).")
    rulebook_shipped: bool = Field(default=False, description="True only for a rulebook shipped with policyrun.")
    rulebook_sha256: str = Field(default="", description="sha256 of the rulebook file's bytes.")


class RecordView(BaseModel):
    """A view of one trace record: the fields it shares with the record, copied by `of`."""

    @classmethod
    def of(cls, record: Any, **given: Any) -> Self:
        """The view of `record`; `given` are the fields computed for the view (its own, or a
        shared one shown as another view, such as a check's reads)."""
        shared = {name: getattr(record, name) for name in cls.model_fields
                  if name not in given and hasattr(record, name)}
        return cls(**shared, **given)


class VerdictOut(RecordView):
    id: str
    summary: str = ""


class PhaseOut(RecordView):
    phase: str
    title: str = ""
    status: str = Field(description="PASS, WARN, FAIL, BLOCKED, STOPPED or SKIPPED.")
    reason: str = ""
    blocker: str | None = None
    blockers: list[str] = Field(default_factory=list, description="Every check's blocker when several imposed a "
                                                                  "status.")
    next_allowed_action: str = Field(description="The one action the workflow allows next for this phase.")


class FactErrorOut(BaseModel):
    code: str = Field(description="Stable cause, e.g. file.not_found, git.unknown_ref, refused.permission.")
    message: str


class ProbeOutcome(BaseModel):
    probe: str
    kind: str
    ok: bool
    error: FactErrorOut | None = Field(default=None, description="Why the fact could not be collected.")
    duration_s: float | None = None


class FactsUsed(BaseModel):
    source: str = Field(description="`collected` (probes ran in this call) or `files` (facts_files replayed).")
    files: list[str] = Field(default_factory=list)
    count: int = 0
    failed: list[ProbeOutcome] = Field(default_factory=list, description="Facts that could not be collected; "
                                                                        "checks reading them are never PASS.")
    stale: list[dict[str, str]] = Field(default_factory=list,
                                        description="With allow_stale_facts: facts collected with other parameters.")


class EvaluateResult(RulebookResult):
    mode: str = ""
    verdict: VerdictOut | None = None
    phases: list[PhaseOut] = Field(default_factory=list)
    trace_path: str | None = Field(default=None, description="The trace written; pass it to explain / next_actions.")
    written: list[str] = Field(default_factory=list, description="Every file written (trace, reports, manifest).")
    facts: FactsUsed | None = None
    seconds: float = Field(default=0.0, description="Wall time of the call, collection included.")


class ReadOut(RecordView):
    path: str
    value: Any = None
    missing: bool = False
    error: str | None = None
    truncated: bool = Field(default=False, description="The value was large: `value` holds the start of its JSON "
                                                       "text; the trace has all of it.")


class CheckOut(RecordView):
    id: str
    kind: str
    result: str = Field(description="SATISFIED, UNSATISFIED, UNKNOWN, NOT_APPLICABLE or NOT_EVALUATED.")
    outcome: str | None = Field(default=None, description="The status this check imposed on the phase, if any.")
    expression: str
    message: str | None = None
    location: str | None = Field(default=None, description="Rulebook file:line:col of the check.")
    reads: list[ReadOut] = Field(default_factory=list)
    probes: list[str] = Field(default_factory=list, description="Probe ids whose facts back this check.")


class ExplainedPhase(PhaseOut):
    location: str | None = None
    checks: list[CheckOut] = Field(default_factory=list)


class ExplainResult(RulebookResult):
    text: str = Field(default="", description="The explanation `policyrun explain` prints.")
    verdict: VerdictOut | None = None
    trace_exit_code: int | None = Field(default=None, description="The evaluation's exit code recorded in the trace.")
    phases: list[ExplainedPhase] = Field(default_factory=list)
    inconsistencies: list[str] = Field(default_factory=list, description="With force: what the trace contradicts.")


class NextAction(RecordView):
    phase: str
    title: str = ""
    status: str
    next_allowed_action: str
    blocker: str | None = None


class NextActionsResult(RulebookResult):
    mode: str = ""
    verdict: VerdictOut | None = None
    trace_exit_code: int | None = Field(default=None, description="The evaluation's exit code recorded in the trace.")
    now: NextAction | None = Field(default=None, description="What to do now: the first FAIL, BLOCKED or STOPPED "
                                                             "phase, else the last phase that ran.")
    phases: list[NextAction] = Field(default_factory=list, description="Every phase, in workflow order.")
    inconsistencies: list[str] = Field(default_factory=list, description="With force: what the trace contradicts; "
                                                                        "do not act on such a trace.")


class ParamOut(BaseModel):
    name: str
    type: str
    required: bool
    default: Any = None
    description: str = ""


class FieldOut(BaseModel):
    name: str
    type: str
    description: str = ""


class ProbeKindOut(BaseModel):
    kind: str
    summary: str
    side_effects: list[str]
    params: list[ParamOut]
    facts_shape: str = Field(description="A one-line picture of the fact, e.g. `{sha, ref, kind}`.")
    fact_fields: list[FieldOut] = Field(default_factory=list)
    params_schema: dict[str, Any] | None = Field(default=None, description="Only when one kind was asked for.")
    fact_schema: dict[str, Any] | None = Field(default=None, description="Only when one kind was asked for.")


class ProbesResult(ToolResult):
    kinds: list[ProbeKindOut] = Field(default_factory=list)


class CollectResult(RulebookResult):
    mode: str = ""
    facts_path: str | None = Field(default=None, description="The facts snapshot written; pass it to evaluate's "
                                                             "facts_files.")
    count: int = 0
    errors: int = 0
    probes: list[ProbeOutcome] = Field(default_factory=list)
    seconds: float = 0.0


# Each view of a trace record, the record it shows, and the fields only the view has.
TRACE_RECORDS: dict[type[RecordView], type[Any]] = {
    VerdictOut: VerdictRecord, PhaseOut: PhaseRecord, ExplainedPhase: PhaseRecord, NextAction: PhaseRecord,
    CheckOut: CheckRecord, ReadOut: Read,
}
VIEW_ONLY: dict[type[RecordView], frozenset[str]] = {
    ReadOut: frozenset({"truncated"}),  # the start of a large value's JSON: the trace keeps all of it
    CheckOut: frozenset({"probes"}),  # the probes behind a check: its facts, then the probes its reads name
    ExplainedPhase: frozenset({"checks"}),  # the checks explained: a selection of PhaseRecord.checks()
}
