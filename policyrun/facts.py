"""The facts snapshot: every fact a probe collected, or the error it met, with provenance.

Facts are keyed by probe id. A fact holds either a JSON value or an error, never both; the
interpreter treats an error exactly like a missing fact, so it can never yield PASS.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from policyrun.errors import Location, UsageError

FACTS_FORMAT = 1


class FactError(BaseModel):
    """Why a fact could not be collected."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    code: str = Field(description="Stable cause, e.g. git.unknown_ref, nvml.library_not_found, refused.permission.")
    message: str = Field(description="What went wrong and what to do about it.")


class RepoState(BaseModel):
    """The repository a fact was read from, as it was at collection time."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: str
    head: str | None = None


class Provenance(BaseModel):
    """Where a fact came from, so an auditor can re-run it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    probe: str = Field(description="Probe id in the rulebook.")
    kind: str = Field(description="Registered probe kind (the rulebook's `uses`).")
    params: dict[str, Any] = Field(default_factory=dict, description="Parameters after interpolation.")
    commands: list[str] = Field(default_factory=list, description="Commands run or library calls made, in order.")
    repo: RepoState | None = None
    sources: list[str] = Field(default_factory=list, description="Files read, as path or path:line.")
    started_at: str | None = Field(default=None, description="UTC ISO-8601 timestamp.")
    finished_at: str | None = Field(default=None, description="UTC ISO-8601 timestamp.")
    duration_s: float | None = None
    error: FactError | None = None
    # Left out of the serialised form when absent, so snapshots and digests of probes without
    # for_each are what they were before fan-out existed.
    elements: dict[str, Provenance] | None = Field(
        default=None, exclude_if=lambda v: v is None,
        description="A probe with `for_each`: each element's key → its own provenance (parameters, commands, "
                    "timings) and error. The fact's value maps the keys of the elements collected without error "
                    "to their values.")


class Fact(BaseModel):
    """One probe's result: a value or an error, with provenance."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    value: Any = None
    error: FactError | None = None
    provenance: Provenance

    @model_validator(mode="after")
    def _value_or_error(self) -> Fact:
        if self.error is not None and self.value is not None:
            raise ValueError("a fact holds a value or an error, not both")
        return self

    @property
    def ok(self) -> bool:
        return self.error is None


def fact_code(facts: Mapping[str, Fact], name: str) -> str | None:
    """What failed()/error_code() answer for `name`: a probe id, or `p[key]` for one element of a
    fan-out probe. The error code, or None when collected without error; KeyError when it was not
    collected (no such fact, or no such element)."""
    pid, bracket, rest = name.partition("[")
    fact = facts[pid]
    if fact.error is not None or not bracket:
        return fact.error.code if fact.error is not None else None
    elements = fact.provenance.elements
    if elements is None:
        raise KeyError(name)
    error = elements[rest[:-1]].error
    return error.code if error is not None else None


class FactsSnapshot(BaseModel):
    """A facts file: `policyrun collect -o facts.json` writes one, `evaluate --facts` reads it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    policyrun_facts: int = Field(default=FACTS_FORMAT, description="Facts format version.")
    collected_at: str | None = Field(default=None, description="UTC timestamp; not part of the digest.")
    rulebook: str | None = Field(default=None, description="Name of the rulebook the facts were collected for.")
    mode: str | None = None
    facts: dict[str, Fact] = Field(default_factory=dict)

    @field_validator("facts", mode="after")
    @classmethod
    def _sorted(cls, v: dict[str, Fact]) -> dict[str, Fact]:
        # Probe ids in sorted order make the serialised snapshot, and so its digest, canonical.
        return dict(sorted(v.items()))

    def values(self) -> dict[str, Any]:
        """The CEL `facts` variable: values of facts that were collected without error (computed
        once per snapshot; callers must not modify it)."""
        cached = self.__dict__.get("_values")  # frozen model: compute once per snapshot
        if cached is None:
            cached = {k: f.value for k, f in self.facts.items() if f.error is None}
            self.__dict__["_values"] = cached
        return cached

    def digest(self) -> str:
        """The facts digest, format 2 (docs/semantics.md, "The facts digest"): sha256 over the
        serialised facts (probe ids sorted, timestamps excluded) with every repository root a
        probe recorded written as `<repo@HEAD>`, so the same commits collected in another folder
        give the same digest.

        Serialised by pydantic's Rust encoder: hashing 50,000 facts this way is several times
        faster than dumping to Python and re-encoding with sorted keys; the roots are replaced in
        that text by one regular expression.
        """
        cached = self.__dict__.get("_digest")  # frozen model: compute once per snapshot
        if cached is None:
            text = _relative_to_roots(self._serialised(), self.roots())
            cached = hashlib.sha256(text.encode()).hexdigest()
            self.__dict__["_digest"] = cached
        return cached

    def digest_v1(self) -> str:
        """The facts digest of format 1 (before policyrun 0.1's auditors' round): the same text,
        absolute paths kept. `verify` still accepts it for traces written then."""
        return hashlib.sha256(self._serialised().encode()).hexdigest()

    def _serialised(self) -> str:
        return self.model_dump_json(include={"facts"}, exclude=_TIME_FIELDS)

    def roots(self) -> dict[str, str]:
        """Every repository root a probe recorded (an absolute path) and the HEAD it was at."""
        out: dict[str, str] = {}
        for fact in self.facts.values():
            repo = fact.provenance.repo
            if repo is not None and repo.head and repo.path.startswith("/") and len(repo.path) > 1:
                out.setdefault(repo.path.rstrip("/"), repo.head)
        return out

    def to_json(self) -> str:
        return json.dumps(self.model_dump(mode="json", exclude_none=True), indent=2, sort_keys=True,
                          ensure_ascii=False) + "\n"


def _relative_to_roots(text: str, roots: dict[str, str]) -> str:
    """`text` (JSON) with each root, where it stands as a whole path or a path's leading part, as
    `<repo@HEAD>`: a root inside a longer name (`/srv/vllm-old` for `/srv/vllm`) is left alone."""
    if not roots:
        return text
    import re

    # As the JSON encoder writes them (a root with a quote or a backslash is escaped there too).
    encoded = {json.dumps(root, ensure_ascii=False)[1:-1]: f"<repo@{head}>" for root, head in roots.items()}
    pattern = re.compile(r"(?<![\w.\-/])(?:" + "|".join(re.escape(r) for r in sorted(encoded, key=len, reverse=True))
                         + r")(?![\w.\-])")
    return pattern.sub(lambda m: encoded[m.group()], text)


_TIME_KEYS = frozenset({"started_at", "finished_at", "duration_s"})
_TIME_FIELDS: Any = {"facts": {"__all__": {"provenance": {
    **dict.fromkeys(_TIME_KEYS, True), "elements": {"__all__": set(_TIME_KEYS)}}}}}


def _strip_times(fact: dict[str, Any]) -> dict[str, Any]:
    prov = {k: v for k, v in fact.get("provenance", {}).items() if k not in _TIME_KEYS}
    if isinstance(prov.get("elements"), dict):
        prov["elements"] = {k: {f: v for f, v in e.items() if f not in _TIME_KEYS} for k, e in prov["elements"].items()}
    return {**fact, "provenance": prov}


def load_facts(path: Path) -> FactsSnapshot:
    """Read one facts file; errors name the file and the offending key."""
    from policyrun.jsonfile import load_json_model

    return load_json_model(path, FactsSnapshot, what="facts file", code="F",
                           hint="check the --facts path (`policyrun schema facts` shows the format)")


def merge_facts(snapshots: Iterable[tuple[str, FactsSnapshot]]) -> FactsSnapshot:
    """Merge several snapshots; the same probe id with different content is an error."""
    merged: dict[str, Fact] = {}
    origin: dict[str, str] = {}
    for name, snap in snapshots:
        for key, fact in snap.facts.items():
            if key in merged and _strip_times(merged[key].model_dump(mode="json")) != _strip_times(
                    fact.model_dump(mode="json")):
                raise UsageError(f"fact {key!r} differs between {origin[key]} and {name}; "
                                 "pass only one of them or remove the fact from one file",
                                 code="F004", location=Location(name))
            merged.setdefault(key, fact)
            origin.setdefault(key, name)
    return FactsSnapshot(facts=dict(sorted(merged.items())))
