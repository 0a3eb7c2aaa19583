"""One identity for a rulebook's checks, from the rulebook to every report.

A check is named by the phase it belongs to, its kind and its id: `CheckId("GATE", "evidence",
"unit_passed")`. Its one text form (`str`) is the key `policyrun test` reports coverage under and
`CheckId.parse` reads back:

    GATE/evidence/unit_passed       a phase's precondition, stop condition, evidence or template
    mode/MODE/GATE                  whether mode MODE runs phase GATE (its `when`)
    verdict/ID   derive/ID          a verdict's condition, a derived value

Every other way a check is named comes from here too, so no report builds or splits the text
itself: `check_label` (`evidence unit_passed`: explain, JUnit, annotations, SARIF), `in_phase` and
`split_in_phase` (`GATE.unit_passed`: waivers, test files), `phase_rule_id` (a phase's SARIF rule).
`rulebook_checks` lists the checks a rulebook declares, each with its node in the document and
the key its location is looked up under during evaluation (the interpreter builds the same keys;
tests/test_checkid.py checks that every check it records is located).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

from policyrun.model import Rulebook
from policyrun.yamlsource import NodePath

# The one list of check kinds. A trace records the first six (policyrun.trace.model.CheckRecord.kind);
# a derived value is a check too (`policyrun test` covers it) but the trace records it apart.
RecordKind = Literal["precondition", "stop_when", "evidence", "mode_selection", "verdict", "template"]
CheckKind = RecordKind | Literal["derive"]
PHASE_KINDS: tuple[CheckKind, ...] = ("precondition", "stop_when", "evidence", "template")
_RULEBOOK_KINDS: tuple[CheckKind, ...] = ("verdict", "derive")


@dataclass(frozen=True, order=True)
class CheckId:
    """A check: `phase` is None for verdicts and derived values; for a mode selection `id` is the
    mode's name (the phase's `when` in that mode)."""

    phase: str | None
    kind: CheckKind
    id: str

    def __post_init__(self) -> None:
        if (self.phase is None) != (self.kind in _RULEBOOK_KINDS):
            raise ValueError(f"a {self.kind} check {'has no' if self.kind in _RULEBOOK_KINDS else 'names its'} phase")

    def __str__(self) -> str:
        if self.kind == "mode_selection":
            return f"mode/{self.id}/{self.phase}"
        if self.phase is None:
            return f"{self.kind}/{self.id}"
        return f"{self.phase}/{self.kind}/{self.id}"

    @classmethod
    def parse(cls, text: str) -> CheckId:
        """The value `str` wrote; ValueError for anything else. One text is two checks: a phase
        named `mode` and a mode named like a kind (`mode/evidence/X`); it reads as the phase's."""
        parts = text.split("/")
        if not all(parts):
            raise ValueError(f"{text!r} names no check: an empty part")
        if len(parts) == 2 and parts[0] in _RULEBOOK_KINDS:
            return cls(None, parts[0], parts[1])
        if len(parts) == 3 and parts[1] in PHASE_KINDS:
            return cls(parts[0], parts[1], parts[2])
        if len(parts) == 3 and parts[0] == "mode":
            return cls(parts[2], "mode_selection", parts[1])
        raise ValueError(f"{text!r} names no check (PHASE/KIND/ID, mode/MODE/PHASE, verdict/ID or derive/ID)")

    @classmethod
    def of_record(cls, phase: str | None, kind: str, record_id: str, mode: str) -> CheckId:
        """The check a trace record is about: its phase (None for a verdict condition), the
        record's kind and id, and the trace's mode (a mode selection's record id names the phase)."""
        if kind == "mode_selection":
            return cls(phase, "mode_selection", mode)
        return cls(phase, kind, record_id)  # type: ignore[arg-type]

    @classmethod
    def listed(cls, phase: str, kind: CheckKind, declared: str | None, index: int) -> CheckId:
        """A precondition or stop condition: its own id, or for one without, its place in its list
        (`precondition[0]`), as the trace records it."""
        return cls(phase, kind, declared or f"{kind}[{index}]")

    @property
    def record_id(self) -> str:
        """The id the trace records the check under."""
        return f"mode.{self.phase}" if self.kind == "mode_selection" else self.id

    @property
    def label(self) -> str:
        """How a report names the check within its phase: `evidence unit_passed`."""
        return check_label(self.kind, self.record_id)

    @property
    def in_phase(self) -> str:
        """`PHASE.id`, as a waiver or a test case names the check."""
        return in_phase(self.phase, self.id) if self.phase is not None else self.id


def check_label(kind: str, record_id: str) -> str:
    """How a report names a recorded check within its phase (explain, JUnit, annotations, SARIF):
    its kind and the id its trace record carries, `evidence unit_passed`."""
    return f"{kind} {record_id}"


def in_phase(phase: str, check: str) -> str:
    """`PHASE.id`: a check named without its kind, as waivers and test files write it."""
    return f"{phase}.{check}"


def split_in_phase(text: str) -> tuple[str, str]:
    """(phase, check id) of a `PHASE.id` reference (`in_phase`); phase ids hold no '.', so the
    first one splits."""
    phase, _, check = text.partition(".")
    return phase, check


def phase_rule_id(rulebook: str, phase: str) -> str:
    """The id of the rule a phase is in SARIF: one rule per phase of a rulebook."""
    return f"{rulebook}/{phase}"


@dataclass(frozen=True)
class RulebookCheck:
    """A check as the rulebook declares it: where it is (`node`), the key its location is looked
    up under while evaluating (`key`), and its declaration (`spec`)."""

    id: CheckId
    node: NodePath
    key: str
    spec: Any


def location_key(check: CheckId, index: int | None = None) -> str:
    """The key a check's location is looked up under while evaluating (policyrun.evaluate.engine.
    check_locations builds the table from `rulebook_checks`, whose keys come from here). A
    precondition or stop condition is keyed by its `index` in its list, for it may have no id; a
    `template` check (`next:STATUS`) by the status whose `next:` text it is."""
    if check.kind == "mode_selection":
        return f"modes.{check.id}.{check.phase}.when"
    if check.phase is None:
        return f"{check.kind}.{check.id}"
    if check.kind in ("precondition", "stop_when"):
        if index is None:
            raise ValueError(f"a {check.kind} is located by its index in its list")
        return f"{phase_key(check.phase)}.{_LISTS[check.kind]}.{index}"
    if check.kind == "template":
        return f"{phase_key(check.phase)}.next.{check.id.removeprefix('next:')}"
    return f"{phase_key(check.phase)}.{check.kind}.{check.id}"


_LISTS = {"precondition": "preconditions", "stop_when": "stop_when"}  # the rulebook keys of those lists


def phase_key(phase: str) -> str:
    """The key a phase's own location is looked up under."""
    return f"phase.{phase}"


def part_key(key: str, part: str) -> str:
    """The key of one part of a check (`check`, `violations`, `applies_when`) under its check's key."""
    return f"{key}.{part}"


def rulebook_checks(rulebook: Rulebook) -> Iterator[RulebookCheck]:
    """Every check a rulebook declares, in document order: mode selections, derived values, each
    phase's preconditions, stop conditions and evidence, the verdicts."""
    for name, mode in rulebook.modes.items():
        for i, entry in enumerate(mode.phases):
            cid = CheckId(entry.phase, "mode_selection", name)
            yield RulebookCheck(cid, ("modes", name, "phases", i), location_key(cid), entry)
    for did, derived in rulebook.derive.items():
        cid = CheckId(None, "derive", did)
        yield RulebookCheck(cid, ("derive", did, "value"), location_key(cid), derived)
    for i, phase in enumerate(rulebook.phases):
        base: NodePath = ("phases", i)
        for j, cond in enumerate(phase.preconditions):
            cid = CheckId.listed(phase.id, "precondition", cond.id, j)
            yield RulebookCheck(cid, (*base, "preconditions", j), location_key(cid, j), cond)
        for j, stop in enumerate(phase.stop_when):
            cid = CheckId.listed(phase.id, "stop_when", stop.id, j)
            yield RulebookCheck(cid, (*base, "stop_when", j), location_key(cid, j), stop)
        for j, ev in enumerate(phase.evidence):
            cid = CheckId(phase.id, "evidence", ev.id)
            yield RulebookCheck(cid, (*base, "evidence", j), location_key(cid), ev)
    for i, verdict in enumerate(rulebook.verdicts):
        cid = CheckId(None, "verdict", verdict.id)
        yield RulebookCheck(cid, ("verdicts", i, "when"), location_key(cid), verdict)
