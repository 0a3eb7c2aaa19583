"""The one list of probe kinds: built-ins plus the `policyrun.probes` entry-point group."""

from __future__ import annotations

import importlib
from functools import cache
from importlib.metadata import entry_points

from policyrun.errors import UsageError
from policyrun.probes.base import Probe

# Each module exposes `PROBES: list[Probe]`. Modules import heavy libraries lazily; lint does not
# import them at all while policyrun/probes/declarations.json is current (policyrun.probes.declared).
BUILTIN_MODULES = (
    "policyrun.probes.const",
    "policyrun.probes.repo.gitstate", "policyrun.probes.repo.git", "policyrun.probes.repo.worktreediff",
    "policyrun.probes.repo.search",
    "policyrun.probes.python.markers", "policyrun.probes.repo.claims",
    "policyrun.probes.repo.pins",
    "policyrun.probes.repo.files", "policyrun.probes.repo.workflows",
    "policyrun.probes.gpu.nvml",
    "policyrun.probes.python.stack",
    "policyrun.probes.python.sourceprobes",
    "policyrun.probes.host.toolchain",
    "policyrun.probes.results.junit", "policyrun.probes.repo.testinventory",
    "policyrun.probes.results.resultsfile",
    "policyrun.probes.host.system",
    "policyrun.probes.host.command", "policyrun.probes.host.env", "policyrun.probes.host.path",
    "policyrun.probes.python.modules",
    "policyrun.probes.host.webhttp", "policyrun.probes.host.netports", "policyrun.probes.host.dockercli",
    "policyrun.probes.host.disk", "policyrun.probes.python.index", "policyrun.probes.python.record",
)

ENTRY_POINT_GROUP = "policyrun.probes"


@cache
def registry() -> dict[str, Probe]:
    kinds: dict[str, Probe] = {}
    for _module, probe in builtin_kinds():
        kinds[probe.kind] = probe
    for kind, probe in plugin_kinds():
        kinds.setdefault(kind, probe)
    return kinds


def builtin_kinds() -> list[tuple[str, Probe]]:
    """(module, probe) for every built-in kind, in registry order."""
    return [(name, probe) for name in BUILTIN_MODULES for probe in importlib.import_module(name).PROBES]


def plugin_kinds() -> list[tuple[str, Probe]]:
    """(kind, probe) for every kind the `policyrun.probes` entry points provide."""
    out: list[tuple[str, Probe]] = []
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            obj = ep.load()
        except Exception as exc:  # a broken plugin must not take the CLI down
            raise UsageError(f"probe plugin {ep.name!r} ({ep.value}) failed to load: {exc}; "
                             "fix or uninstall the package that provides it", code="P001") from None
        probe = obj() if callable(obj) and not isinstance(obj, Probe) else obj
        if not isinstance(probe, Probe):
            raise UsageError(f"probe plugin {ep.name!r} ({ep.value}) does not implement the probe "
                             "protocol (kind, summary, params_schema, fact_schema, side_effects, run)",
                             code="P001")
        out.append((probe.kind, probe))
    return out


def get(kind: str) -> Probe | None:
    return registry().get(kind)


def scope_of(kind: str, declared: str | None) -> str:
    """`host` or `run`: the probe's own `scope:` in the rulebook, else its kind's default."""
    if declared is not None:
        return declared
    probe = get(kind)
    return str(getattr(probe, "scope", "run")) if probe is not None else "run"
