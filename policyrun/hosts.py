"""Host-scoped facts: which probes describe a host, and labelling a snapshot by host.

A probe with `scope: host` (or of a kind whose default scope is host: GPUs, the Python stack,
processes, environment) describes the machine it ran on. Its facts carry the host's label, the
snapshot records the host, and snapshots of different hosts merge into a cell
(policyrun.facts.merge_facts); the language reads them per host through `hosts.<probe>`.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping

from policyrun.errors import UsageError
from policyrun.facts import Fact, FactsSnapshot, HostInfo, with_hosts
from policyrun.model import Rulebook
from policyrun.probes.registry import scope_of

_LABEL_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


def host_probes(rulebook: Rulebook, mode: str) -> set[str]:
    """Probes of `mode` whose facts describe a host."""
    return {pid for pid, spec in rulebook.probes.items()
            if (spec.modes is None or mode in spec.modes) and scope_of(spec.uses, spec.scope) == "host"}


def check_label(label: str) -> str:
    # Labels appear in messages, map keys and file names of a cell: keep them plain.
    if not label or len(label) > 128 or not set(label) <= _LABEL_CHARS:
        raise UsageError(f"--host-label {label!r}: use 1 to 128 letters, digits, '.', '_' or '-'",
                         code="U003")
    return label


def hostname() -> str:
    return socket.gethostname()


def label_snapshot(snapshot: FactsSnapshot, rulebook: Rulebook, label: str, *, node_id: str | None = None,
                   host: str | None = None) -> FactsSnapshot:
    """`snapshot`, collected on one host, with its host-scoped facts labelled `label`."""
    scoped = host_probes(rulebook, snapshot.mode or "")
    run_facts: dict[str, Fact] = {}
    mine: dict[str, Fact] = {}
    for pid, fact in snapshot.facts.items():
        if pid in scoped:
            mine[pid] = fact.model_copy(update={"provenance": fact.provenance.model_copy(update={"host": label})})
        else:
            run_facts[pid] = fact
    info = HostInfo(hostname=host if host is not None else hostname(), node_id=node_id,
                    collected_at=snapshot.collected_at)
    out = with_hosts(run_facts, {label: info}, {label: mine})
    return out.model_copy(update={"collected_at": snapshot.collected_at, "rulebook": snapshot.rulebook,
                                  "mode": snapshot.mode})


def cell(run_facts: Mapping[str, Fact], hosts: Mapping[str, HostInfo],
         per_host: Mapping[str, Mapping[str, Fact]], *, collected_at: str, rulebook: str, mode: str) -> FactsSnapshot:
    out = with_hosts(run_facts, hosts, per_host)
    return out.model_copy(update={"collected_at": collected_at, "rulebook": rulebook, "mode": mode})
