"""Questions every report asks of one trace record: which probe a read names, which probes back a
check, whether a phase lies outside the run's mode.

They sit below `view` and `summary` (both ask them; `view` also builds the summary), so neither
of those imports the other to answer them.
"""

from __future__ import annotations

from policyrun.trace.model import CheckRecord, PhaseRecord


def probe_of(path: str) -> str | None:
    """The probe id a read path names (`facts.<probe>...`), or None for inputs/vars/phases."""
    parts = path.split(".")
    return parts[1] if parts[0] == "facts" and len(parts) > 1 else None


def outside_mode(phase: PhaseRecord, mode: str) -> bool:
    """Whether the mode does not list the phase at all (SKIPPED "outside mode M", as the interpreter
    words it). A phase the mode lists under a `when` that is false ("outside mode M: <when> is
    false") is part of the mode, skipped by this run's inputs."""
    return phase.status == "SKIPPED" and phase.reason in ("outside mode", f"outside mode {mode}")


def check_probes(check: CheckRecord) -> list[str]:
    """Probe ids backing a check: its declared facts, then any probe its reads name."""
    probes = list(check.facts)
    for read in check.reads:
        probe = probe_of(read.path)
        if probe and probe not in probes:
            probes.append(probe)
    return probes
