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
    # Left out when absent, like `elements`: snapshots of one unlabelled host are unchanged.
    host: str | None = Field(
        default=None, exclude_if=lambda v: v is None,
        description="Label of the host this fact describes (a host-scoped probe, `scope: host`); absent for "
                    "facts about the run itself (repositories, files, constants).")
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


class HostInfo(BaseModel):
    """One host of a snapshot: how it is known, and when its facts were collected."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    hostname: str | None = Field(default=None, description="The host's name (nodes of one machine share it).")
    node_id: str | None = Field(default=None, description="The engine's node id (Ray), where known.")
    collected_at: str | None = Field(default=None, description="UTC timestamp; not part of the digest.")


PER_HOST = "host.per_host"  # the `facts` entry of a host-scoped probe in a snapshot of several hosts
UNREACHABLE = "host.unreachable"  # a host whose facts could not be collected (node died, timed out)


class FactsSnapshot(BaseModel):
    """A facts file: `policyrun collect -o facts.json` writes one, `evaluate --facts` reads it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    policyrun_facts: int = Field(default=FACTS_FORMAT, description="Facts format version.")
    collected_at: str | None = Field(default=None, description="UTC timestamp; not part of the digest.")
    rulebook: str | None = Field(default=None, description="Name of the rulebook the facts were collected for.")
    mode: str | None = None
    facts: dict[str, Fact] = Field(default_factory=dict)
    # Both left out when absent: a snapshot of one unlabelled host serialises (and digests) as
    # before hosts existed, and old snapshots load unchanged.
    hosts: dict[str, HostInfo] | None = Field(
        default=None, exclude_if=lambda v: v is None,
        description="Host label → the host. Present when facts are labelled by host (`collect --host-label`, "
                    "`collect --cluster`, or a merge of such snapshots).")
    by_host: dict[str, dict[str, Fact]] | None = Field(
        default=None, exclude_if=lambda v: v is None,
        description="Host label → probe id → fact, for host-scoped probes in a snapshot of several hosts; their "
                    "`facts` entry is then an error fact (host.per_host). With one host they stay in `facts`.")

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

    def host_facts(self) -> dict[str, dict[str, Fact]]:
        """Probe id → host label → fact, for host-scoped probes (empty when no host is recorded)."""
        out: dict[str, dict[str, Fact]] = {}
        if self.by_host is not None:
            for label, facts in self.by_host.items():
                for pid, fact in facts.items():
                    out.setdefault(pid, {})[label] = fact
        for pid, fact in self.facts.items():
            if fact.provenance.host is not None:
                out.setdefault(pid, {})[fact.provenance.host] = fact
        return {pid: dict(sorted(m.items())) for pid, m in sorted(out.items())}

    def host_values(self) -> dict[str, dict[str, Any]]:
        """The CEL `hosts` variable: probe id → host label → value, only for probes every host
        collected without error (a host that failed makes the whole map missing, never a smaller
        cell). Computed once per snapshot; callers must not modify it."""
        cached = self.__dict__.get("_host_values")
        if cached is None:
            cached = {pid: {h: f.value for h, f in m.items()} for pid, m in self.host_facts().items()
                      if all(f.error is None for f in m.values())}
            self.__dict__["_host_values"] = cached
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
        # Without hosts, `hosts` and `by_host` add nothing: a single-host snapshot digests as before.
        return self.model_dump_json(include={"facts", "hosts", "by_host"}, exclude=_TIME_FIELDS)

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
_PROV_TIMES: Any = {"provenance": {**dict.fromkeys(_TIME_KEYS, True), "elements": {"__all__": set(_TIME_KEYS)}}}
_TIME_FIELDS: Any = {"facts": {"__all__": _PROV_TIMES}, "hosts": {"__all__": {"collected_at"}},
                     "by_host": {"__all__": {"__all__": _PROV_TIMES}}}


def _strip_times(fact: dict[str, Any]) -> dict[str, Any]:
    prov = {k: v for k, v in fact.get("provenance", {}).items() if k not in _TIME_KEYS}
    if isinstance(prov.get("elements"), dict):
        prov["elements"] = {k: {f: v for f, v in e.items() if f not in _TIME_KEYS} for k, e in prov["elements"].items()}
    return {**fact, "provenance": prov}


def host_read_error(snapshot: FactsSnapshot, pid: str) -> str:
    """Why `hosts.<pid>` has no value: no host recorded it, or the hosts that failed, by name."""
    by_label = snapshot.host_facts().get(pid)
    if not by_label:
        return (f"not collected per host: no host-scoped fact {pid!r} in the snapshot (collect with "
                "--host-label or --cluster, and give the probe `scope: host`)")
    failed = [f"{h}: {f.error.code}: {f.error.message}" for h, f in by_label.items() if f.error is not None]
    return f"{len(failed)} of {len(by_label)} hosts failed: " + "; ".join(failed)


def load_facts(path: Path) -> FactsSnapshot:
    """Read one facts file; errors name the file and the offending key."""
    from policyrun.jsonfile import load_json_model

    return load_json_model(path, FactsSnapshot, what="facts file", code="F",
                           hint="check the --facts path (`policyrun schema facts` shows the format)")


def merge_facts(snapshots: Iterable[tuple[str, FactsSnapshot]]) -> FactsSnapshot:
    """Merge several snapshots. Facts about the run: the same probe id with different content is an
    error. Host-scoped facts are kept per host; the same host twice with different content is an
    error, different hosts make a cell (docs/semantics.md, "Hosts")."""
    merged: dict[str, Fact] = {}
    origin: dict[str, str] = {}
    hosts: dict[str, HostInfo] = {}
    per_host: dict[str, dict[str, Fact]] = {}
    host_origin: dict[str, str] = {}
    for name, snap in snapshots:
        for label, info in (snap.hosts or {}).items():
            if label in hosts and label in host_origin and host_origin[label] != name:
                mine = {pid: m[label] for pid, m in snap.host_facts().items() if label in m}
                if {k: _strip_times(f.model_dump(mode="json")) for k, f in mine.items()} != \
                        {k: _strip_times(f.model_dump(mode="json")) for k, f in per_host.get(label, {}).items()}:
                    raise UsageError(f"host {label!r} appears in {host_origin[label]} and {name} with different "
                                     "facts; pass only one snapshot of each host, or collect them with distinct "
                                     "--host-label names", code="F004", location=Location(name))
                continue
            hosts.setdefault(label, info)
            host_origin.setdefault(label, name)
        for pid, by_label in snap.host_facts().items():
            for label, fact in by_label.items():
                if host_origin.get(label) == name:
                    per_host.setdefault(label, {})[pid] = fact
        for key, fact in snap.facts.items():
            if fact.provenance.host is not None or (fact.error is not None and fact.error.code == PER_HOST):
                continue
            if key in merged and _strip_times(merged[key].model_dump(mode="json")) != _strip_times(
                    fact.model_dump(mode="json")):
                raise UsageError(f"fact {key!r} differs between {origin[key]} and {name}; "
                                 "pass only one of them or remove the fact from one file",
                                 code="F004", location=Location(name))
            merged.setdefault(key, fact)
            origin.setdefault(key, name)
    return with_hosts(merged, hosts, per_host)


def with_hosts(facts: Mapping[str, Fact], hosts: Mapping[str, HostInfo],
               per_host: Mapping[str, Mapping[str, Fact]]) -> FactsSnapshot:
    """The canonical snapshot of facts about the run plus host-scoped facts of `hosts`: with one
    host they sit in `facts` (a single-host rulebook reads them unchanged); with several, in
    `by_host`, and `facts` holds a host.per_host error for each (so a check written for one host
    is BLOCKED on a cell, never answered from an arbitrary host)."""
    merged = dict(facts)
    if not hosts:
        return FactsSnapshot(facts=dict(sorted(merged.items())))
    host_pids = sorted({pid for m in per_host.values() for pid in m})
    clash = sorted(set(host_pids) & set(merged))
    if clash:
        raise UsageError(f"fact {clash[0]!r} is host-scoped in one snapshot and about the run in another; collect "
                         "every snapshot with the same rulebook", code="F004")
    if len(hosts) == 1:
        label = next(iter(hosts))
        for pid, fact in per_host.get(label, {}).items():
            merged[pid] = fact
        return FactsSnapshot(facts=dict(sorted(merged.items())), hosts=dict(hosts))
    labels = sorted(hosts)
    for pid in host_pids:
        sample = next(m[pid] for m in per_host.values() if pid in m)
        prov = sample.provenance.model_copy(update={
            "host": None, "started_at": None, "finished_at": None, "duration_s": None, "commands": [],
            "sources": [], "elements": None, "repo": None,
            "error": FactError(code=PER_HOST, message="")})
        error = FactError(code=PER_HOST, message=f"collected on {len(labels)} hosts ({', '.join(labels)}); "
                                                 f"read hosts.{pid} for the value of each host")
        merged[pid] = Fact(error=error, provenance=prov.model_copy(update={"error": error}))
    by_host = {label: dict(sorted(per_host.get(label, {}).items())) for label in labels}
    return FactsSnapshot(facts=dict(sorted(merged.items())), hosts=dict(sorted(hosts.items())), by_host=by_host)
