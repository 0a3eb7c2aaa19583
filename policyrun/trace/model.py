"""The verdict trace: what auditors read, and what every report renders.

Every consumer (`explain`, reports, JUnit, `diff`, coverage in `policyrun test`) reads this and
never evaluates again. It is byte-for-byte deterministic for the same rulebook, inputs and facts
apart from `generated_at`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator
from pydantic.dataclasses import dataclass

from policyrun.checkid import RecordKind
from policyrun.facts import Provenance
from policyrun.model import RowSpec, Status

# 2: a phase's checks in fields of their own (docs/semantics.md, "Trace format 2"); format 1 is
# still read (policyrun.traceformat1 converts it on load).
TRACE_FORMAT = 2

CheckKind = RecordKind  # one list of kinds, policyrun.checkid's
CheckResult = Literal["SATISFIED", "UNSATISFIED", "UNKNOWN", "NOT_APPLICABLE", "NOT_EVALUATED"]

_FROZEN = ConfigDict(frozen=True, extra="forbid")
_RECORD = ConfigDict(extra="forbid")  # for the frozen dataclasses below


# Reads and check records are frozen dataclasses, not BaseModels: a trace holds thousands of
# them, and pydantic builds dataclass instances about three times faster than model instances,
# which is most of the per-check cost of an evaluation. They validate the same way.
@dataclass(frozen=True, slots=True, config=_RECORD)
class Read:
    """One value a check read: its path, and the value or why it was unavailable."""

    path: str
    value: Any = None
    missing: bool = False
    error: str | None = Field(default=None, description="The fact's collection error, when it has one.")


@dataclass(frozen=True, slots=True, config=_RECORD)
class CheckRecord:
    id: str
    kind: CheckKind
    expression: str
    result: CheckResult
    # For evidence: SATISFIED → PASS-compatible; UNSATISFIED → `on_fail`; UNKNOWN → `on_missing`.
    # `outcome` is the status this check imposed on the phase (null when it imposed none).
    outcome: Status | None = None
    reads: list[Read] = Field(default_factory=list)
    facts: list[str] = Field(default_factory=list, description="Probe ids whose provenance backs this check.")
    message: str | None = Field(default=None, description="For people: the blocker this check imposes, or why its "
                                                          "result is UNKNOWN.")
    violations: Any = Field(default=None, description="The check's `violations` list (summarised when large).")
    # Written only for a check that declares `row:`, so traces of rulebooks without rows are unchanged.
    row: RowSpec | None = Field(default=None, exclude_if=lambda v: v is None,
                                description="The fields of the violations' rows, and which locate a row, as the "
                                            "check's `row:` declares them.")
    unknown: Literal["missing", "deliberate", "error"] | None = Field(
        default=None, description="Why an UNKNOWN result is unknown: a missing fact or value, the rulebook's own "
                                  "unknown('why'), or an evaluation error.")
    waiver: dict[str, Any] | None = Field(default=None, description="The waiver that kept this failing check from "
                                                                    "imposing a status (owner, reason, expires, ticket, "
                                                                    "source): WAIVED.")
    location: str | None = Field(default=None, description="Rulebook file:line:col of the check.")


class DerivedRecord(BaseModel):
    """A `derive` value as this evaluation computed it."""

    model_config = _FROZEN

    id: str
    expression: str
    value: Any = Field(default=None, description="The value (summarised with its sha256 when large).")
    error: str | None = Field(default=None, description="Why there is no value.")
    missing: bool = Field(default=False, description="No value because a fact it reads is missing (not a defect).")
    reads: list[Read] = Field(default_factory=list)
    facts: list[str] = Field(default_factory=list, description="Probe ids the value depends on, transitively.")
    location: str | None = None


def waiver_text(waiver: dict[str, Any]) -> str:
    """A check's waiver as every report shows it: `owner, until YYYY-MM-DD: reason (ticket)`."""
    ticket = waiver.get("ticket")
    return (f"{waiver.get('owner')}, until {waiver.get('expires')}: {waiver.get('reason')}"
            + (f" ({ticket})" if ticket else ""))


class StaleFact(BaseModel):
    model_config = _FROZEN

    probe: str
    reason: str


class PhaseRecord(BaseModel):
    """A phase's status and its checks, each kind in the field named for the rulebook key that
    declares it; `checks()` gives them all in the order they were evaluated."""

    model_config = _FROZEN

    phase: str
    title: str = ""
    status: Status
    reason: str
    mode_check: CheckRecord | None = Field(default=None, description="The mode's `when` for this phase (kind "
                                                                     "mode_selection), when it has one.")
    preconditions: list[CheckRecord] = Field(default_factory=list, description="Preconditions evaluated, in order "
                                                                               "(up to the first that does not hold).")
    stop_when: list[CheckRecord] = Field(default_factory=list, description="Stop conditions evaluated, in order "
                                                                           "(up to the first that holds).")
    evidence: list[CheckRecord] = Field(default_factory=list, description="The phase's evidence checks.")
    next_action_check: CheckRecord | None = Field(
        default=None, description="The phase's `next:` text, when it needed a value without one (kind template): "
                                  "it blocked the phase.")
    blocker: str | None = None
    disabled: list[dict[str, str]] = Field(default_factory=list,
                                           description="Checks an overlay disabled, with the reason.")
    blockers: list[str] = Field(default_factory=list, description="Every check's blocker when more than one check "
                                                                  "imposed a status (the first is `blocker`'s).")
    next_allowed_action: str
    location: str | None = None

    @model_validator(mode="after")
    def _each_field_holds_its_kind(self) -> PhaseRecord:
        for name, kind in CHECK_FIELDS.items():
            value = getattr(self, name)
            for check in value if isinstance(value, list) else [value] if value is not None else []:
                if check.kind != kind:
                    raise ValueError(f"`{name}` holds a {check.kind} check ({check.id}); it holds {kind} checks only")
        return self

    def checks(self) -> Iterator[CheckRecord]:
        """Every check of the phase in evaluation order: mode selection, preconditions, stop
        conditions, evidence, the next action's (format 1's `evidence` list)."""
        for name in CHECK_FIELDS:
            value = getattr(self, name)
            if isinstance(value, list):
                yield from value
            elif value is not None:
                yield value


# Each of a phase's check fields, the kind of check it holds, in evaluation order (format 1 kept
# them all in `evidence`, told apart by `kind`).
CHECK_FIELDS: dict[str, CheckKind] = {"mode_check": "mode_selection", "preconditions": "precondition",
                                      "stop_when": "stop_when", "evidence": "evidence",
                                      "next_action_check": "template"}


def upgrade_format1(data: Any) -> Any:
    """A format-1 trace's data as format 2 (any other data as it is): each phase's checks moved
    out of `evidence` into the field of their kind, in the same order. Nothing else changed
    between the formats, so the result validates as a `Trace` and is what this policyrun would
    have written."""
    if not isinstance(data, dict) or not isinstance(data.get("phases"), list):
        return data
    version = data.get("policyrun_trace")
    if version is None:  # the file may omit its format: format 1 unless a phase has a field of format 2
        fields2 = set(CHECK_FIELDS) - {"evidence"}
        version = 2 if any(isinstance(p, dict) and fields2 & p.keys() for p in data["phases"]) else 1
    if type(version) is not int or version != 1:
        return data
    phases = []
    for phase in data["phases"]:
        if not isinstance(phase, dict) or not isinstance(phase.get("evidence"), list):
            phases.append(phase)
            continue
        moved: dict[str, Any] = {"mode_check": None, "preconditions": [], "stop_when": [], "evidence": [],
                                 "next_action_check": None}
        singles = [c for c in phase["evidence"] if isinstance(c, dict) and c.get("kind") in ("mode_selection", "template")]
        for check in phase["evidence"]:
            field = next((f for f, k in CHECK_FIELDS.items() if isinstance(check, dict) and check.get("kind") == k),
                         "evidence")  # an unknown kind stays where it was, for validation to name
            if isinstance(moved[field], list):
                moved[field].append(check)
            elif sum(c.get("kind") == check["kind"] for c in singles) == 1:
                moved[field] = check
            else:
                moved["evidence"].append(check)  # two of a kind a phase has one of: refused by validation
        at = list(phase).index("evidence")
        items = list(phase.items())
        phases.append({**dict(items[:at]), **moved, **dict(items[at + 1:])})
    return {**data, "policyrun_trace": TRACE_FORMAT, "phases": phases}


class LayerRef(BaseModel):
    model_config = _FROZEN

    name: str
    path: str
    sha256: str


class RulebookRef(BaseModel):
    model_config = _FROZEN

    name: str
    version: str
    sha256: str
    path: str | None = Field(default=None, description="The file that was used: `<shipped>/NAME.yaml` for a shipped "
                                                     "rulebook, else a path (`./x`, `dir/x.yaml`) as given.")
    chain: list[LayerRef] = Field(default_factory=list, description="An overlay's files, base first (this one last).")

    @property
    def shipped(self) -> bool:
        return (self.path or "").startswith("<shipped>/")

    def identity(self) -> str:
        """One line naming the file that was used and its sha256, which every output shows, so a
        rulebook read from the working directory is never taken for a shipped one."""
        origin = "shipped" if self.shipped else "a file, not a shipped rulebook" if self.path else "path not recorded"
        return f"rulebook {self.path or self.name} ({origin}; {self.name} {self.version}) sha256 {self.sha256}"


class EvidenceFile(BaseModel):
    """A file a supplied fact was read from (policyrun.evidencekinds), as its probe recorded it."""

    model_config = _FROZEN

    probe: str
    kind: str
    path: str
    sha256: str
    author: str | None = Field(default=None, description="Who the document says wrote or vouched for it "
                                                         "(`author:`, `reviewer:`, ... as `key: value`).")


class RunRecord(BaseModel):
    """Who ran the evaluation, where, with what: recorded with `generated_at` (not with
    --no-timestamp), and like it never compared by `verify` or `diff`."""

    model_config = _FROZEN

    user: str | None = None
    hostname: str | None = None
    policyrun_version: str
    python_version: str
    platform: str


class BaselineRef(BaseModel):
    model_config = _FROZEN

    path: str = Field(description="The baseline's trace.json, as given.")
    sha256: str = Field(description="sha256 of that trace.json.")
    facts_sha256: str | None = Field(default=None, description="sha256 of the baseline's facts.json file, when "
                                                               "the folder kept one (`--keep-facts`).")
    verdict: str
    mode: str


class VerdictRecord(BaseModel):
    model_config = _FROZEN

    id: str
    summary: str = ""
    expression: str | None = None
    conditions: list[CheckRecord] = Field(default_factory=list, description="Verdict conditions tried, in order.")


class Trace(BaseModel):
    model_config = _FROZEN

    policyrun_trace: int = TRACE_FORMAT
    generated_at: str | None = Field(default=None, description="UTC timestamp; with `run`, the only "
                                                                  "non-deterministic fields.")
    run: RunRecord | None = Field(default=None, description="Who ran it, where, with which policyrun and "
                                                            "Python (absent with --no-timestamp).")
    rulebook: RulebookRef
    mode: str
    inputs: dict[str, Any]
    vars: dict[str, Any] = Field(default_factory=dict)
    facts_sha256: str
    waivers: dict[str, Any] | None = Field(default=None, description="With --waivers: the date they were "
                                                                     "checked against, and a warning per waiver "
                                                                     "that had no effect.")
    stale_facts: list[StaleFact] = Field(
        default_factory=list, description="Facts evaluated although collected with other parameters "
                                          "(`--allow-stale-facts`).")
    baseline: BaselineRef | None = Field(default=None, description="With --baseline: the earlier evaluation "
                                                                  "the checks could read as `baseline`.")
    derived: list[DerivedRecord] = Field(default_factory=list)
    phases: list[PhaseRecord]
    verdict: VerdictRecord
    exit_code: int = Field(description="0 all required phases PASS (or WARN), 1 FAIL (or WARN with --fail-on "
                                       "warn), 2 BLOCKED or STOPPED.")
    fail_on_warn: bool = Field(default=False, description="Evaluated with --fail-on warn.")
    provenance: dict[str, Provenance] = Field(default_factory=dict,
                                              description="Provenance of every fact a check read, by probe id.")
    evidence_files: list[EvidenceFile] = Field(
        default_factory=list, description="Every file a supplied fact a check read came from, with its sha256 "
                                          "(attestations, JUnit and results files).")

    def to_json(self) -> str:
        # `baseline` only when there was one: traces of runs without --baseline stay as they were.
        data = self.model_dump(mode="json", exclude={"baseline"} if self.baseline is None else None)
        return json.dumps(data, indent=2, ensure_ascii=False) + "\n"

    def phase(self, phase_id: str) -> PhaseRecord | None:
        return next((p for p in self.phases if p.phase == phase_id), None)


def load_trace(path: Path, *, force: bool = False) -> Trace:
    """A trace file; refused (T005) when its statuses contradict its own checks, unless `force`."""
    return read_trace(path, force=force)[0]


def read_trace(path: Path, *, force: bool = False) -> tuple[Trace, int]:
    """`load_trace`, and the format the file was written in: a format-1 trace is read as format 2,
    and an auditor comparing it should be told so (`verify` says it)."""
    from policyrun import limits
    from policyrun.jsonfile import load_json_model
    from policyrun.trace.consistency import refuse_inconsistent

    upgraded: list[bool] = []

    def upgrade(data: Any) -> Any:
        out = upgrade_format1(data)
        upgraded.append(out is not data)  # upgrade_format1 returns other data as it is
        return out

    trace = load_json_model(path, Trace, what="trace", code="T", max_bytes=limits.TRACE_BYTES,
                            max_depth=limits.TRACE_DEPTH, hint="pass a trace.json written by `policyrun evaluate` (trace formats 1 "
                                                            "and 2 are read)", upgrade=upgrade)
    if not force:
        refuse_inconsistent(trace, path)
    return trace, 1 if any(upgraded) else TRACE_FORMAT
