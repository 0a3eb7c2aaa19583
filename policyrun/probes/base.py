"""The probe contract.

A probe kind is any object with a `kind` name, a JSON Schema for its `with:` parameters, the
side effects it may have, a description of the facts it produces, and a `run` method. Built-ins
are listed in `policyrun.probes.registry`; third parties register kinds through the entry-point
group `policyrun.probes` (the entry point loads to a probe object or a zero-argument factory).

Probe modules must import heavy libraries (NVML, Jinja2) inside `run`, never at module top
level: commands that list or run probes load the registry, and must stay fast. (`policyrun lint`
reads the built-in kinds' schemas from `declarations.json` instead: policyrun.probes.declared.)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from policyrun.probes.python.session import Interpreters

# Side effects a probe may declare. A mode's `permissions` grants them by the same names; a
# probe that needs an effect its mode does not grant is refused and the refusal is recorded.
SIDE_EFFECTS: dict[str, str] = {
    "write_repos": "writes to a repository or working tree",
    "gpu_context": "initialises a CUDA context on a GPU",
    "gpu_allocate": "allocates GPU memory or runs GPU work",
    "network": "reaches the network",
    "exec": "runs a program named by the rulebook",
}


class ProbeError(Exception):
    """A fact that could not be collected. `code` is stable (e.g. `git.unknown_ref`)."""

    def __init__(self, code: str, message: str, *, commands: list[str] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.commands = commands or []


@dataclass
class ProbeContext:
    """What a probe may know about the run it is part of."""

    base_dir: Path  # relative paths in parameters resolve against this (the working directory)
    timeout_s: float  # the probe's own budget; long-running probes pass it to subprocesses
    env: Mapping[str, str] = field(default_factory=dict)  # extra environment for subprocesses
    # The collection's shared interpreter children (policyrun.probes.python.session.Interpreters): probes
    # that inspect the same interpreter ask one child. None outside a collection: each runs its own.
    interpreters: Interpreters | None = None

    def resolve(self, path: str | Path) -> Path:
        p = Path(path).expanduser()
        return p if p.is_absolute() else (self.base_dir / p)


@dataclass
class ProbeResult:
    """A probe's value plus the provenance only the probe knows."""

    value: Any
    commands: list[str] = field(default_factory=list)
    repo_path: str | None = None
    repo_head: str | None = None
    sources: list[str] = field(default_factory=list)


@runtime_checkable
class Probe(Protocol):
    kind: str
    summary: str
    params_schema: Mapping[str, Any]  # JSON Schema (draft 2020-12) for `with:`
    fact_schema: Mapping[str, Any]  # JSON Schema describing the value produced

    def side_effects(self, params: Mapping[str, Any]) -> frozenset[str]:
        """Effects this run would have, from SIDE_EFFECTS; may depend on parameters."""
        ...

    def run(self, params: Mapping[str, Any], ctx: ProbeContext) -> ProbeResult:
        """Collect the fact. Raise ProbeError for an expected failure."""
        ...

    # Optional: `scope = "host"` for kinds whose facts describe the machine they run on (GPUs, the
    # Python stack, processes, environment); such facts are labelled by host and `collect --cluster`
    # runs them on every node. A rulebook's `scope:` on the probe overrides it. Default: "run".

    # Optional, for kinds that read results (tests.junit): `empty_value(params) -> dict`, the fact
    # for input that holds no result at all. Lint (L030, policyrun/language/vacuous.py) evaluates checks
    # against it to find gates an empty test report would pass.
