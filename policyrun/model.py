"""The rulebook language as frozen pydantic models.

The models validate shape only. Cross-references (modes naming phases, checks naming probes)
and expressions are checked by `policyrun.language.rulebook`/`policyrun.language.lint`, which know positions.
Short forms that people write (a precondition as a bare string, a mode phase as a bare id) are
normalised here so everything downstream sees one shape.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

Status = Literal["PASS", "WARN", "FAIL", "BLOCKED", "STOPPED", "SKIPPED"]
STATUSES: tuple[str, ...] = ("PASS", "WARN", "FAIL", "BLOCKED", "STOPPED", "SKIPPED")
# How bad a status is, for "worst" summaries (docs/semantics.md: STOPPED > BLOCKED > FAIL > WARN).
SEVERITY: dict[str, int] = {"PASS": 0, "SKIPPED": 0, "WARN": 1, "FAIL": 2, "BLOCKED": 3, "STOPPED": 4}
# Statuses that let later phases start (a warning is reported, not a stop).
PASSING: tuple[str, ...] = ("PASS", "WARN")


def worst_status(statuses: Iterable[str]) -> str:
    """The most severe of the statuses; PASS when none is FAIL, BLOCKED or STOPPED."""
    worst = max(statuses, key=lambda s: SEVERITY.get(s, 0), default="PASS")
    return worst if SEVERITY.get(worst, 0) else "PASS"
FailStatus = Literal["WARN", "FAIL", "BLOCKED", "STOPPED"]
StopStatus = Literal["FAIL", "BLOCKED", "STOPPED"]
# What a check whose facts are missing becomes: UNKNOWN is tolerated (an evidence gap that is
# recorded but does not stop PASS); the other values decide the phase status.
MissingPolicy = Literal["UNKNOWN", "WARN", "FAIL", "BLOCKED", "STOPPED"]
InputType = Literal["string", "path", "int", "number", "bool", "list", "enum"]
Gating = Literal["sequential", "independent"]

Identifier = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]
ModeName = Annotated[str, Field(pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")]
Expression = Annotated[str, Field(min_length=1, description="A CEL expression over facts, inputs, vars, mode, phases.")]

_STRICT = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


class InputSpec(BaseModel):
    model_config = _STRICT

    type: InputType = "string"
    required: bool = False
    default: Any = None
    values: list[str] | None = Field(default=None, description="The allowed values of an `enum` input.")
    env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
                            description="Environment variable that supplies the value when no --set or "
                                        "inputs file does (before `default`).")
    secret: bool = Field(default=False, description="The value is a credential: expressions see it, but the "
                                                    "trace, reports, console and error messages show `***`. An "
                                                    "input with `env:` is also masked when the variable's name "
                                                    "or value looks secret.")
    description: str = ""
    aliases: list[Identifier] = Field(
        default_factory=list, description="Other names --set, inputs files, test cases and MCP accept for this "
                                          "input (a renamed input keeps its old name working); the trace records "
                                          "the declared name.")

    @model_validator(mode="after")
    def _enum_values(self) -> InputSpec:
        if self.type == "enum" and not self.values:
            raise ValueError("an enum input lists its allowed `values`")
        if self.type != "enum" and self.values is not None:
            raise ValueError("`values` is only for inputs of type enum")
        return self


class ModePhase(BaseModel):
    """A phase a mode runs; `when` (CEL over inputs and vars) selects it per evaluation."""

    model_config = _STRICT

    phase: Identifier
    when: Expression | None = None


class Mode(BaseModel):
    model_config = _STRICT

    description: str = ""
    phases: list[ModePhase]
    permissions: dict[str, bool] = Field(default_factory=dict,
                                         description="Side effects the mode allows, e.g. gpu_context, write_repos.")
    on_missing: MissingPolicy = Field(default="BLOCKED",
                                      description="Default for checks whose facts are missing in this mode.")
    waivers: Literal["all", "none"] | list[Identifier] = Field(
        default="all", description="Phases whose checks a waivers file may waive in this mode: all, none, or a "
                                   "list of phase ids (docs/waivers.md).")
    gating: Gating = Field(default="sequential",
                           description="sequential: a phase that did not pass keeps every later phase from "
                                       "starting; independent: phases gate only through explicit `requires` "
                                       "(checklists that report every failure at once).")

    @field_validator("phases", mode="before")
    @classmethod
    def _short_phases(cls, v: Any) -> Any:
        if isinstance(v, list):
            return [{"phase": p} if isinstance(p, str) else p for p in v]
        return v


_ONE_TEMPLATE = r"^\s*\$\{[\s\S]*\}\s*$"


class ProbeSpec(BaseModel):
    model_config = _STRICT

    uses: str = Field(description="A registered probe kind; `policyrun probes` lists them.")
    with_: dict[str, Any] = Field(default_factory=dict, alias="with")
    modes: list[str] | None = Field(default=None, description="Collect only in these modes (default: all).")
    when: Expression | None = Field(
        default=None, description="A CEL condition over inputs, vars and mode, decided before collection: when "
                                  "false the probe is not collected (error code probe.not_applicable).")
    for_each: str | None = Field(
        default=None, pattern=_ONE_TEMPLATE,
        description="`${...}` giving a list: the probe runs once per element (bound as `item` in `with:` and "
                    "`key:`), and its fact is a map from each element's key to its value.")
    key: str | None = Field(
        default=None, description="With for_each: the key of an element's value, e.g. `${item.name}` (default: "
                                  "the element itself, which must then be a string).")
    timeout_s: float = Field(default=60.0, gt=0)
    scope: Literal["host", "run"] | None = Field(
        default=None, description="`host`: the fact describes the host it is collected on (labelled by host; "
                                  "collected on every node by `collect --cluster`); `run`: it describes the run "
                                  "(collected once). Default: the probe kind's own scope (GPU, stack, process, "
                                  "environment and command probes are `host`).")
    description: str = ""

    @model_validator(mode="after")
    def _key_needs_for_each(self) -> ProbeSpec:
        if self.key is not None and self.for_each is None:
            raise ValueError("`key` names the key of each element of a `for_each`; add `for_each` or remove `key`")
        return self

    def templates(self) -> dict[str, Any]:
        """Every field whose `${...}` templates are resolved at collection (what the probe waits for)."""
        out: dict[str, Any] = {"with": self.with_}
        if self.for_each is not None:
            out["for_each"] = self.for_each
        if self.key is not None:
            out["key"] = self.key
        return out


class RowSpec(BaseModel):
    """The fields of every `violations` row, declared once (docs/language.md, "Rows"): lint rejects a
    read of a field the row does not declare, evaluation refuses a row without a declared field
    (fail closed), and reports place each row at its file and line."""

    model_config = _STRICT

    fields: list[Identifier] = Field(min_length=1, description="The fields every row (a map) has.")
    file: Identifier | None = Field(default=None, description="The field holding the file a row is about (a "
                                                              "path relative to the repository the facts read).")
    line: Identifier | None = Field(default=None, description="The field holding the row's 1-based line in "
                                                              "`file` (an int, or null).")
    message: Identifier | None = Field(default=None, description="The field holding the row's text; default: the "
                                                                 "other fields as `name=value`.")

    @model_validator(mode="after")
    def _declared(self) -> RowSpec:
        if len(set(self.fields)) != len(self.fields):
            raise ValueError("row `fields` lists a field twice")
        for role in ("file", "line", "message"):
            name = getattr(self, role)
            if name is not None and name not in self.fields:
                raise ValueError(f"row `{role}: {name}` names a field that `fields` does not list")
        if self.line is not None and self.file is None:
            raise ValueError("row `line` needs `file` (a line is a line of a file)")
        return self


def _rows_need_violations(row: RowSpec | None, violations: str | None) -> None:
    if row is not None and violations is None:
        raise ValueError("`row` declares the fields of `violations` rows; add `violations`")


def _one_of(first: str, second: str) -> dict[str, Any]:
    """The schema of a check that needs at least one of two keys (editors flag neither)."""
    return {"anyOf": [{"required": [first]}, {"required": [second]}]}


class Condition(BaseModel):
    """A precondition; a bare string is shorthand for `{check: ...}`."""

    model_config = ConfigDict(**_STRICT, json_schema_extra=_one_of("check", "violations"))

    id: Identifier | None = None
    check: Expression | None = Field(
        default=None, description="A bool CEL condition; default `size(violations) == 0` when `violations` is given.")
    violations: Expression | None = Field(
        default=None, description="A CEL list of what keeps the phase from starting (empty when the precondition "
                                  "is met); `check` and `message` read it as `violations`.")
    row: RowSpec | None = Field(default=None, description="The fields of each violation when they are rows (maps).")
    message: str | None = Field(default=None, description="Blocker text when the precondition is not met; may "
                                                          "use ${...}.")

    @model_validator(mode="after")
    def _check_or_violations(self) -> Condition:
        if self.check is None and self.violations is None:
            raise ValueError("a precondition needs `check` (a bool condition) or `violations` (a list of what "
                             "keeps the phase from starting)")
        _rows_need_violations(self.row, self.violations)
        return self

    @property
    def condition(self) -> str:
        """The condition that decides it (the default one when only violations are given)."""
        return self.check if self.check is not None else DEFAULT_VIOLATIONS_CHECK


OnMissing = MissingPolicy | dict[str, MissingPolicy]


class Evidence(BaseModel):
    model_config = ConfigDict(**_STRICT, json_schema_extra=_one_of("check", "violations"))

    id: Identifier
    description: str = ""
    check: Expression | None = Field(
        default=None, description="A bool CEL condition; default `size(violations) == 0` when `violations` is given.")
    violations: Expression | None = Field(
        default=None, description="A CEL list of what is wrong (empty when the evidence holds); checks and messages "
                                  "read it as `violations`.")
    row: RowSpec | None = Field(default=None, description="The fields of each violation when they are rows (maps).")
    applies_when: Expression | None = None
    on_fail: FailStatus = "FAIL"
    on_missing: OnMissing | None = Field(default=None, description="A status, or one per mode; default: the mode's.")
    message: str | None = Field(default=None, description="Blocker text when the check fails; may use ${...}.")
    next: str | None = Field(default=None, description="The next allowed action when this check decides the "
                                                       "phase's status; default: the phase's `next`.")

    @model_validator(mode="after")
    def _check_or_violations(self) -> Evidence:
        if self.check is None and self.violations is None:
            raise ValueError("evidence needs `check` (a bool condition) or `violations` (a list of what is wrong)")
        _rows_need_violations(self.row, self.violations)
        return self

    @property
    def condition(self) -> str:
        """The condition that decides the check (the default one when only violations are given)."""
        return self.check if self.check is not None else DEFAULT_VIOLATIONS_CHECK


DEFAULT_VIOLATIONS_CHECK = "size(violations) == 0"
DEFAULT_VIOLATIONS_WHEN = "size(violations) > 0"


class StopCondition(BaseModel):
    model_config = ConfigDict(**_STRICT, json_schema_extra=_one_of("when", "violations"))

    id: Identifier | None = None
    when: Expression | None = Field(
        default=None, description="A bool CEL condition: the phase stops when it holds; default "
                                  "`size(violations) > 0` when `violations` is given.")
    violations: Expression | None = Field(
        default=None, description="A CEL list of what stops the phase (empty when nothing does); `when`, `blocker` "
                                  "and `next` read it as `violations`.")
    row: RowSpec | None = Field(default=None, description="The fields of each violation when they are rows (maps).")
    status: StopStatus = "STOPPED"
    blocker: str
    on_missing: OnMissing | None = None
    next: str | None = Field(default=None, description="The next allowed action when this condition holds; "
                                                       "default: the phase's `next`.")

    @model_validator(mode="after")
    def _when_or_violations(self) -> StopCondition:
        if self.when is None and self.violations is None:
            raise ValueError("a stop condition needs `when` (a bool condition) or `violations` (a list of what "
                             "stops the phase)")
        _rows_need_violations(self.row, self.violations)
        return self

    @property
    def condition(self) -> str:
        """The condition that decides it (the default one when only violations are given)."""
        return self.when if self.when is not None else DEFAULT_VIOLATIONS_WHEN


class Derived(BaseModel):
    """A named value computed from facts at evaluation time, read in CEL as `derived.<id>`."""

    model_config = _STRICT

    value: Expression = Field(description="A CEL expression over facts, inputs, vars, mode and other derived values.")
    description: str = ""
    modes: list[str] | None = Field(default=None, description="Compute only in these modes (default: all).")


class Disabled(BaseModel):
    """A check an overlay removed, and why (kept so the trace shows it)."""

    model_config = _STRICT

    id: str
    reason: str = Field(min_length=1)


class Phase(BaseModel):
    model_config = _STRICT

    id: Identifier
    title: str = ""
    description: str = ""
    requires: list[Identifier] | None = Field(
        default=None, description="Earlier phases that must PASS; default: every earlier phase of the mode.")
    preconditions: list[Condition] = Field(default_factory=list)
    stop_when: list[StopCondition] = Field(default_factory=list)
    evidence: list[Evidence] = Field(default_factory=list)
    next: dict[Status, str] = Field(default_factory=dict)
    references: list[str] = Field(default_factory=list)
    disabled: list[Disabled] = Field(default_factory=list,
                                     description="Checks an overlay disabled (`disable: [{id, reason}]`).")

    @field_validator("preconditions", mode="before")
    @classmethod
    def _short_conditions(cls, v: Any) -> Any:
        if isinstance(v, list):
            return [{"check": c} if isinstance(c, str) else c for c in v]
        return v


class Verdict(BaseModel):
    model_config = _STRICT

    id: Identifier
    when: Expression
    summary: str = ""


class ReportSpec(BaseModel):
    model_config = _STRICT

    templates: dict[str, str] = Field(default_factory=dict,
                                      description="Report name → Jinja2 template path, relative to the rulebook.")
    template: str | None = Field(default=None, description="Shorthand for templates.md.")
    hardware_phases: list[Identifier] = Field(
        default_factory=list, description="Phases whose PASS is a claim about hardware (GPU gates): the readiness "
                                          "section of every report counts these, and only these, as "
                                          "hardware-validated. Default: phases that read GPU facts.")


class Rulebook(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True,
                              json_schema_extra={"title": "policyrun rulebook"})

    policyrun: Literal[1] = Field(description="Rulebook format version.")
    extends: str | None = Field(default=None, description="An overlay's base: a shipped rulebook name or a path "
                                                          "relative to this file (docs/overlays.md).")
    name: ModeName
    version: str = "0"
    description: str = ""
    references: list[str] = Field(default_factory=list)
    inputs: dict[Identifier, InputSpec] = Field(default_factory=dict)
    vars: dict[Identifier, Any] = Field(default_factory=dict)
    schemas: dict[Identifier, dict[str, Any] | str] = Field(
        default_factory=dict, description="JSON Schemas for attestation files, inline or a path.")
    modes: dict[ModeName, Mode]
    probes: dict[Identifier, ProbeSpec] = Field(default_factory=dict)
    derive: dict[Identifier, Derived] = Field(
        default_factory=dict, description="Values computed from facts at evaluation time (never stored in snapshots).")
    phases: list[Phase]
    verdicts: list[Verdict] = Field(default_factory=list)
    report: ReportSpec | None = None

    @field_validator("version", mode="before")
    @classmethod
    def _version_text(cls, v: Any) -> Any:
        return str(v) if isinstance(v, (int, float)) else v

    @model_validator(mode="after")
    def _nonempty(self) -> Rulebook:
        if not self.modes:
            raise ValueError("a rulebook needs at least one mode")
        return self

    def phase(self, phase_id: str) -> Phase | None:
        return next((p for p in self.phases if p.id == phase_id), None)


def on_missing_for(policy: OnMissing | None, mode: str, mode_default: MissingPolicy) -> MissingPolicy:
    if policy is None:
        return mode_default
    if isinstance(policy, str):
        return policy
    return policy.get(mode, policy.get("default", mode_default))
