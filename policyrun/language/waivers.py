"""Waivers: governed, expiring exceptions to individual checks.

A waivers file (`evaluate --waivers FILE`) lists which check of which phase of which rulebook is
waived, why, by whom, until when, and optionally under which ticket:

    policyrun_waivers: 1
    issued: 2026-12-01          # optional: the day this version of the file was written
    waivers:
      - rulebook: upgrade-gpu-version
        phase: STATIC_AND_UNIT_GATE
        check: unit_passed
        reason: flaky under load, fix tracked upstream
        owner: ada@example.com
        expires: 2027-01-31
        ticket: AFD-1234

A waiver applies only where the rulebook allows it (`modes.<m>.waivers`: `all`, `none`, or a list
of phase ids), only to evidence checks and stop conditions (a precondition is never waived), and
only until its expiry date (inclusive, UTC). An applied waiver makes the check impose no status;
the check keeps its result and message and carries the waiver (WAIVED in every report). An
expired, unmatched or forbidden waiver has no effect and is reported as a warning.

`evaluate --as-of DAY` checks expiry against another day than today. A past day would apply a
waiver that has expired, so it is bounded: not before the file's `issued` date (evaluating the
file as of a day it existed reproduces what an evaluation that day gave), and, for a file that
declares no `issued`, not before today. Whenever `--as-of` is given, a warning on stderr and in the
trace says so.
"""

from __future__ import annotations

import difflib
from datetime import date
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from policyrun.checkid import CheckId, CheckKind, in_phase, rulebook_checks
from policyrun.errors import Finding, Location, UsageError

_STRICT = ConfigDict(frozen=True, extra="forbid")
# The kinds of check a waiver may apply to; a precondition is never waived.
WAIVABLE: tuple[CheckKind, ...] = ("evidence", "stop_when")


class Waiver(BaseModel):
    model_config = _STRICT

    rulebook: str = Field(min_length=1, description="The rulebook's name (an overlay's own name).")
    phase: str = Field(min_length=1)
    check: str = Field(min_length=1, description="An evidence or stop-condition id of the phase.")
    reason: str = Field(min_length=1, description="Why the check does not apply for now.")
    owner: str = Field(min_length=1, description="Who granted the waiver and answers for it.")
    expires: date = Field(description="Last day (UTC) the waiver applies, YYYY-MM-DD.")
    ticket: str | None = Field(default=None, description="Where the follow-up is tracked.")

    def waives(self, rulebook: str, check: CheckId) -> bool:
        return (self.rulebook, self.phase, self.check) == (rulebook, check.phase, check.id) and check.kind in WAIVABLE

    @property
    def target(self) -> str:
        """The check it names, as `PHASE.id` (a waiver does not say which kind of check)."""
        return in_phase(self.phase, self.check)


class WaiverFile(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", json_schema_extra={"title": "policyrun waivers"})

    policyrun_waivers: Literal[1] = Field(description="Waivers format version.")
    issued: date | None = Field(default=None, description="The day this version of the file was written "
                                                          "(YYYY-MM-DD); `evaluate --as-of` may not be earlier.")
    waivers: list[Waiver] = Field(default_factory=list)


def load_waivers(path: Path) -> tuple[list[Waiver], list[Location]]:
    """The waivers and, for each, where it is written (`file:line:col`); errors located."""
    parsed, sources, _ = load_waivers_file(path)
    return list(parsed.waivers), sources


def as_of_refusal(day: date, today: date, issued: date | None) -> str | None:
    """Why `--as-of day` is refused for a file dated `issued` (module doc), or None."""
    if issued is not None and day < issued:
        return (f"--as-of {day.isoformat()} is before the waivers file's `issued: {issued.isoformat()}`: a file "
                "cannot be checked as of a day before it was written (a waiver that has expired would apply again); "
                "give a later day, or leave --as-of out")
    if issued is None and day < today:
        return (f"--as-of {day.isoformat()} is in the past (today is {today.isoformat()}, UTC) and the waivers file "
                "declares no `issued:` date, so a waiver that has expired would apply again; to reproduce an "
                "evaluation of a past day, date the file (`issued: YYYY-MM-DD`, the day it was written) and give a "
                "day no earlier")
    return None


def file_sha256(path: Path) -> str:
    import hashlib

    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as exc:
        raise UsageError(f"cannot read the waivers file: {exc.strerror}", code="W001", location=Location(str(path))) \
            from None


def load_waivers_file(path: Path) -> tuple[WaiverFile, list[Location], Location | None]:
    """The parsed file, where each waiver is written, and where `issued` is."""
    from policyrun.language.rulebook import validation_findings
    from policyrun.yamlsource import load_yaml_file

    display = str(path)
    try:
        data, smap = load_yaml_file(path, display)
    except Exception as exc:
        from policyrun.errors import PolicyrunError

        if isinstance(exc, PolicyrunError):
            raise UsageError(f"waivers file: {exc.message}", code=exc.code, location=exc.location) from None
        raise
    if not isinstance(data, dict) or "policyrun_waivers" not in data:
        raise UsageError("a waivers file is a mapping with `policyrun_waivers: 1` and `waivers:`",
                         code="W001", location=Location(display, 1, 1))
    try:
        parsed = WaiverFile.model_validate(data)
    except ValidationError as exc:
        findings = validation_findings(exc, smap)
        raise UsageError(f"waivers file: {findings[0].message}", code="W001", location=findings[0].location) from None
    return (parsed, [smap.locate(("waivers", i)) for i in range(len(parsed.waivers))],
            smap.locate(("issued",)) if parsed.issued is not None else None)


def waivable(rulebook: Any, mode: str, phase: str) -> bool:
    allowed = rulebook.modes[mode].waivers
    if allowed == "all":
        return True
    if allowed == "none":
        return False
    return phase in allowed


class Waivers:
    """The waivers of one evaluation: matched as checks fail, the rest reported at the end."""

    def __init__(self, waivers: list[Waiver], sources: list[Location], *, as_of: date, as_of_given: bool = False,
                 file: str | None = None, sha256: str | None = None) -> None:
        self.waivers = waivers
        # The file's name and the sha256 of its bytes, recorded in the trace so `verify --waivers`
        # can tell the file an auditor holds is the one the evaluation used.
        self.file = file
        self.sha256 = sha256
        self.sources = sources
        self.as_of = as_of
        self.as_of_given = as_of_given  # `--as-of`: said in every trace, never silently
        self.used: set[int] = set()
        self.notes: dict[int, str] = {}  # waiver index → why it had no effect

    def find(self, rulebook: Any, mode: str, phase: str, check: str) -> dict[str, Any] | None:
        """The waiver record for a failing evidence check or stop condition of `phase`, or None
        (noting why a matching one did not apply)."""
        target = _waivable(rulebook, phase).get(check)
        for i, w in enumerate(self.waivers):
            if target is None or not w.waives(rulebook.name, target):
                continue
            if not waivable(rulebook, mode, phase):
                self.notes[i] = f"phase {phase} cannot be waived in mode {mode} (the rulebook's modes.{mode}.waivers)"
                continue
            if w.expires < self.as_of:
                self.notes[i] = f"expired on {w.expires.isoformat()}"
                continue
            self.used.add(i)
            return {"owner": w.owner, "reason": w.reason, "expires": w.expires.isoformat(), "ticket": w.ticket,
                    "source": str(self.sources[i])}
        return None

    def report(self, rulebook: Any) -> dict[str, Any]:
        """What the trace records: the date, and a warning for every waiver that had no effect."""
        warnings: list[str] = []
        if self.as_of_given:
            warnings.append(f"--as-of {self.as_of.isoformat()}: waivers were checked against that day, not the day "
                            "of the evaluation")
        for i, w in enumerate(self.waivers):
            if i in self.used:
                continue
            where = self.sources[i]
            if i in self.notes:
                why = self.notes[i]
            elif w.rulebook != rulebook.name:
                why = f"it names rulebook {w.rulebook!r}, not {rulebook.name!r}"
            elif (phase := rulebook.phase(w.phase)) is None:
                hint = difflib.get_close_matches(w.phase, [p.id for p in rulebook.phases], n=1)
                why = f"rulebook {rulebook.name!r} has no phase {w.phase!r}" + (f"; did you mean {hint[0]!r}?"
                                                                                 if hint else "")
            elif w.check not in _check_ids(rulebook, phase.id):
                hint = difflib.get_close_matches(w.check, _check_ids(rulebook, phase.id), n=1)
                why = f"phase {w.phase} has no evidence or stop condition {w.check!r}" + (
                    f"; did you mean {hint[0]!r}?" if hint else "")
            else:
                why = "the check did not fail (or its phase did not run)"
            warnings.append(f"{where}: waiver for {w.target} had no effect: {why}")
        out: dict[str, Any] = {"as_of": self.as_of.isoformat(), "warnings": warnings}
        if self.sha256 is not None:
            out["file"] = self.file
            out["sha256"] = self.sha256
        return out


def _waivable(rulebook: Any, phase: str) -> dict[str, CheckId]:
    """The checks of `phase` a waiver may name, by id: its evidence, then its stop conditions that
    have an id."""
    checks = [c.id for c in rulebook_checks(rulebook) if c.id.phase == phase and c.id.kind in WAIVABLE and c.spec.id]
    return {c.id: c for c in sorted(checks, key=lambda c: c.kind != "evidence")}


def _check_ids(rulebook: Any, phase: str) -> list[str]:
    return list(_waivable(rulebook, phase))


def lint_waivers(path: Path) -> list[Finding]:
    """Findings for a waivers file: its shape, and, when its rulebook can be found (a shipped name
    or a path beside the file), that every phase and check exists; expired waivers are warnings."""
    try:
        waivers, sources = load_waivers(path)
    except UsageError as exc:
        return [Finding(exc.code, exc.message, exc.location or Location(str(path)))]
    findings: list[Finding] = []
    today = date.today()
    for w, where in zip(waivers, sources, strict=True):
        rb = _rulebook(path, w.rulebook)
        if rb is not None:
            phase = rb.phase(w.phase)
            if phase is None:
                hint = difflib.get_close_matches(w.phase, [p.id for p in rb.phases], n=1)
                findings.append(Finding("W002", f"rulebook {w.rulebook!r} has no phase {w.phase!r}"
                                        + (f"; did you mean {hint[0]!r}?" if hint else ""), where))
            elif w.check not in _check_ids(rb, phase.id):
                hint = difflib.get_close_matches(w.check, _check_ids(rb, phase.id), n=1)
                findings.append(Finding("W002", f"phase {w.phase} has no evidence or stop condition {w.check!r}"
                                        + (f"; did you mean {hint[0]!r}?" if hint else ""), where))
        if w.expires < today:
            findings.append(Finding("W003", f"waiver for {w.target} expired on {w.expires.isoformat()}; "
                                    "renew it or remove it", where, severity="warning"))
    return findings


def _rulebook(waivers_path: Path, name: str) -> Any:
    from policyrun.errors import PolicyrunError
    from policyrun.language.locate import shipped_rulebooks
    from policyrun.language.rulebook import load_rulebook

    candidates = [p for p in (waivers_path.parent / f"{name}.yaml",) if p.is_file()]
    shipped = shipped_rulebooks()
    if name in shipped:
        candidates.append(shipped[name])
    for candidate in candidates:
        try:
            rb = load_rulebook(candidate)
        except PolicyrunError:
            continue
        if rb.model.name == name:
            return rb.model
    return None
