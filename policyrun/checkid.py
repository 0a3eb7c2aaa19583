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

CheckKind = Literal["precondition", "stop_when", "evidence", "template", "mode_selection", "verdict", "derive"]
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


def rulebook_checks(rulebook: Rulebook) -> Iterator[RulebookCheck]:
    """Every check a rulebook declares, in document order: mode selections, derived values, each
    phase's preconditions, stop conditions and evidence, the verdicts."""
    for name, mode in rulebook.modes.items():
        for i, entry in enumerate(mode.phases):
            yield RulebookCheck(CheckId(entry.phase, "mode_selection", name), ("modes", name, "phases", i),
                                f"modes.{name}.{entry.phase}.when", entry)
    for did, derived in rulebook.derive.items():
        yield RulebookCheck(CheckId(None, "derive", did), ("derive", did, "value"), f"derive.{did}", derived)
    for i, phase in enumerate(rulebook.phases):
        base: NodePath = ("phases", i)
        for j, cond in enumerate(phase.preconditions):
            yield RulebookCheck(CheckId(phase.id, "precondition", cond.id or f"precondition[{j}]"),
                                (*base, "preconditions", j), f"phase.{phase.id}.preconditions.{j}", cond)
        for j, stop in enumerate(phase.stop_when):
            yield RulebookCheck(CheckId(phase.id, "stop_when", stop.id or f"stop_when[{j}]"),
                                (*base, "stop_when", j), f"phase.{phase.id}.stop_when.{j}", stop)
        for j, ev in enumerate(phase.evidence):
            yield RulebookCheck(CheckId(phase.id, "evidence", ev.id), (*base, "evidence", j),
                                f"phase.{phase.id}.evidence.{ev.id}", ev)
    for i, verdict in enumerate(rulebook.verdicts):
        yield RulebookCheck(CheckId(None, "verdict", verdict.id), ("verdicts", i, "when"), f"verdict.{verdict.id}",
                            verdict)
