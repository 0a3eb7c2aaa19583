"""The shape of a rulebook's test file (`*.test.yaml`): a suite of cases, each with facts, inputs,
a mode and what to expect.

Reading a test file is lint's business as well as `policyrun test`'s, and lint sits below the
engine that runs a suite; so the file's model lives here, apart from running it (ruletest).
"""

from __future__ import annotations

from datetime import date
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from policyrun.model import Status

_STRICT = ConfigDict(frozen=True, extra="forbid")


def _without_extensions(data: Any) -> Any:
    """A mapping without its `x-` keys: they hold YAML anchors (`x-base: &base {...}`) that cases
    reuse with `<<: *base` or `*base`, and mean nothing to policyrun (as in Compose files)."""
    if isinstance(data, dict):
        return {k: v for k, v in data.items() if not (isinstance(k, str) and k.startswith("x-"))}
    return data


class Expect(BaseModel):
    model_config = _STRICT

    phases: dict[str, Status] = Field(default_factory=dict, description="Phase → status (a subset is fine).")
    verdict: str | None = None
    verdict_summary: str | None = Field(default=None, description="Text the verdict's summary contains.")
    exit_code: int | None = None
    blockers: dict[str, str] = Field(default_factory=dict, description="Phase → text the blocker contains.")
    next: dict[str, str] = Field(default_factory=dict,
                                 description="Phase → text its next allowed action contains.")
    messages: dict[str, str] = Field(
        default_factory=dict, description="`PHASE.check_id` → text that check's message contains (any check, "
                                          "not only the one that decided the phase).")
    checks: dict[str, str] = Field(default_factory=dict,
                                   description="`PHASE.check_id` → result (SATISFIED, UNSATISFIED, UNKNOWN, ...).")
    derived: dict[str, Any] = Field(default_factory=dict, description="Derived id → its exact value.")
    waived: list[str] = Field(default_factory=list,
                              description="`PHASE.check_id`s a waiver applied to (the case's `waivers` file).")
    waiver_warnings: list[str] = Field(default_factory=list,
                                       description="Texts, each contained in some waiver warning (no effect).")


class Case(BaseModel):
    model_config = _STRICT

    name: str
    mode: str
    inputs: dict[str, Any] = Field(default_factory=dict)
    facts: dict[str, Any] = Field(default_factory=dict,
                                  description="Inline facts by probe id; `{__error__: code}` for a failed probe "
                                              "(or, inside a fan-out's map, a failed element).")
    facts_files: list[str] = Field(default_factory=list, description="Snapshot files, relative to the test file, "
                                                                     "stacked after the suite's: a later file's "
                                                                     "fact replaces an earlier one's.")
    hosts: dict[str, dict[str, Any]] = Field(
        default_factory=dict, description="Host label → inline host-scoped facts by probe id (`{__error__: code}` "
                                          "for a failed one): a cell, read through `hosts.<probe>`. With one host, "
                                          "its facts are also `facts.<probe>`, as in a snapshot of one labelled host.")
    merge: bool | list[str] = Field(
        default=False, description="How inline facts meet the snapshot facts of the same id: false (default) "
                                   "replaces the fact; true merges every inline fact into it, a list merges "
                                   "those probe ids only (JSON Merge Patch, RFC 7386: objects merge key by key, "
                                   "null removes a key, anything else replaces).")
    waivers: str | None = Field(default=None, description="A waivers file, relative to the test file.")
    as_of: date | None = Field(default=None, description="The date waivers are checked against (required with "
                                                         "`waivers`, so the case does not change with the calendar).")
    expect: Expect

    @model_validator(mode="before")
    @classmethod
    def _extensions(cls, data: Any) -> Any:
        return _without_extensions(data)

    def merges(self, pid: str) -> bool:
        return self.merge is True or (isinstance(self.merge, list) and pid in self.merge)

    @model_validator(mode="after")
    def _dated(self) -> Case:
        if self.waivers is not None and self.as_of is None:
            raise ValueError("a case with `waivers` needs `as_of: YYYY-MM-DD`")
        return self


class Suite(BaseModel):
    model_config = _STRICT

    policyrun_test: Literal[1] = 1
    rulebook: str = Field(description="A rulebook path relative to this file (`./x`, `x.yaml`), or a shipped name.")
    facts_files: list[str] = Field(default_factory=list, description="Snapshots shared by every case, stacked in "
                                                                     "order (a later file's fact replaces an "
                                                                     "earlier one's).")
    cases: list[Case]

    @model_validator(mode="before")
    @classmethod
    def _extensions(cls, data: Any) -> Any:
        return _without_extensions(data)
