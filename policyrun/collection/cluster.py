"""`collect --cluster ray[=ADDRESS]`: host-scoped probes on every alive node of a Ray cluster.

One Ray task per alive node, pinned to it (NodeAffinitySchedulingStrategy, soft=False), runs the
rulebook's host-scoped probes there (policyrun.hosts); the other probes run once on the driver.
Every node the cluster listed as alive when collection began is in the result: a node that dies,
or whose task does not finish within the probes' own timeouts, yields `host.unreachable` facts for
that host, so a cell is never silently smaller than the cluster. Ray is an optional extra
(`pip install 'policyrun[cluster]'`); it is imported only here.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TextIO

from policyrun.errors import UsageError
from policyrun.facts import UNREACHABLE, Fact, FactError, FactsSnapshot, HostInfo, Provenance
from policyrun.model import Rulebook

# Ray's own start-up, scheduling and result transfer, on top of the probes' timeouts.
MARGIN_S = 60.0
CONNECT_S = 10.0  # to open a TCP connection to the cluster's address


def _node_collect(rulebook: Rulebook, mode: str, inputs: Mapping[str, Any], base_dir: str,
                  rulebook_dir: str | None, only: set[str]) -> dict[str, Any]:
    """Runs inside a Ray task on one node: the host-scoped probes, as JSON plus the node's identity."""
    import ray

    from policyrun.collection.run import collect
    from policyrun.hosts import hostname

    snap = collect(rulebook, mode, inputs, base_dir=Path(base_dir), only=only,
                   rulebook_dir=Path(rulebook_dir) if rulebook_dir else None)
    return {"snapshot": snap.to_json(), "hostname": hostname(),
            "node_id": ray.get_runtime_context().get_node_id()}


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise UsageError("--cluster ray needs Ray, which is not installed: pip install 'policyrun[cluster]' "
                         "(or collect on each node with --host-label and merge with evaluate --facts)",
                         code="U050") from None
    return ray


def parse_cluster(value: str) -> str | None:
    """`ray` → None (Ray's own discovery: RAY_ADDRESS or a local cluster), `ray=ADDRESS` → ADDRESS."""
    engine, eq, address = value.partition("=")
    if engine != "ray" or (eq and not address):
        raise UsageError(f"--cluster {value!r}: the supported engine is Ray: --cluster ray or --cluster ray=ADDRESS "
                         "(e.g. ray=10.0.0.1:6379); for Kubernetes or Slurm, run collect --host-label on each node "
                         "(docs/cell-preflight.md)", code="U003")
    return address or None


def collect_cluster(rulebook: Rulebook, mode: str, inputs: Mapping[str, Any], *, address: str | None,
                    base_dir: Path, rulebook_dir: Path | None, locations: Mapping[str, str] | None = None,
                    stream: TextIO | None = None) -> FactsSnapshot:
    from policyrun.collection.plan import plan
    from policyrun.collection.run import collect, utc_now
    from policyrun.hosts import cell, host_probes

    ray = _ray()
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    err = stream or sys.stderr
    started = utc_now()
    if not ray.is_initialized():
        if address:
            _reachable(address)
        try:
            ray.init(address=address or "auto", logging_level="ERROR", log_to_driver=False,
                     include_dashboard=False)
        except Exception as exc:  # ConnectionError, RuntimeError, ValueError: all mean "no cluster there"
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise UsageError(f"--cluster ray{'=' + address if address else ''}: cannot connect to a Ray cluster "
                             f"({first}); start one (ray start --head) or pass its address", code="U051") from None
    nodes = sorted(n["NodeID"] for n in ray.nodes() if n.get("Alive"))
    if not nodes:
        raise UsageError("--cluster ray: the cluster has no alive node", code="U051")
    the_plan = plan(rulebook, mode)
    scoped = host_probes(rulebook, mode) & set(the_plan.probes)
    others = set(the_plan.probes) - scoped
    # Host probes wait for run facts they read? They run on the node with `only`, which brings
    # along what their parameters read; the node's copies of those are dropped below.
    budget = sum(rulebook.probes[pid].timeout_s for pid in the_plan.probes) + MARGIN_S
    task = ray.remote(num_cpus=0, max_retries=0)(_node_collect)
    refs: dict[str, Any] = {}
    if scoped:
        for node in nodes:
            strategy = NodeAffinitySchedulingStrategy(node_id=node, soft=False)
            refs[node] = task.options(scheduling_strategy=strategy).remote(
                rulebook, mode, dict(inputs), str(base_dir), str(rulebook_dir) if rulebook_dir else None, scoped)
    err.write(f"collect: {len(nodes)} Ray nodes, {len(scoped)} host-scoped probes on each, "
              f"{len(others)} on the driver\n")
    run_facts = collect(rulebook, mode, inputs, base_dir=base_dir, only=others, rulebook_dir=rulebook_dir,
                        locations=locations).facts if others else {}
    ready: list[Any] = []
    if refs:
        ready, _ = ray.wait(list(refs.values()), num_returns=len(refs), timeout=budget)
    hosts: dict[str, HostInfo] = {}
    per_host: dict[str, dict[str, Fact]] = {}
    for node, ref in refs.items():
        why: str | None = None
        result: dict[str, Any] | None = None
        if ref in ready:
            try:
                result = ray.get(ref, timeout=MARGIN_S)
            except Exception as exc:  # the node died, or the task crashed there
                why = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
        else:
            why = f"no answer within {budget:.0f}s (the probes' timeouts plus {MARGIN_S:.0f}s)"
            ray.cancel(ref, force=True)
        if result is None:
            hosts[node] = HostInfo(node_id=node, collected_at=utc_now())
            per_host[node] = {pid: _unreachable(rulebook, pid, node, why or "") for pid in scoped}
            err.write(f"collect: node {node}: {UNREACHABLE}: {why}\n")
            continue
        snap = FactsSnapshot.model_validate_json(result["snapshot"])
        hosts[node] = HostInfo(hostname=result["hostname"], node_id=result["node_id"],
                               collected_at=snap.collected_at)
        per_host[node] = {pid: f.model_copy(update={"provenance": f.provenance.model_copy(update={"host": node})})
                          for pid, f in snap.facts.items() if pid in scoped}
    return cell({pid: f for pid, f in run_facts.items() if pid not in scoped}, hosts, per_host,
                collected_at=started, rulebook=rulebook.name, mode=mode)


def _reachable(address: str) -> None:
    """Ray keeps retrying an address where nothing listens; a plain TCP connect says so at once."""
    import socket

    host, _, port = address.removeprefix("ray://").rpartition(":")
    try:
        with socket.create_connection((host or "127.0.0.1", int(port)), timeout=CONNECT_S):
            return
    except (OSError, ValueError) as exc:
        raise UsageError(f"--cluster ray={address}: cannot connect to a Ray cluster ({exc}); start one "
                         "(ray start --head) or pass its address as HOST:PORT", code="U051") from None


def _unreachable(rulebook: Rulebook, pid: str, node: str, why: str) -> Fact:
    error = FactError(code=UNREACHABLE, message=f"node {node} did not return its facts: {why}; check that the node "
                                                "is up and policyrun is installed there, then collect again")
    spec = rulebook.probes[pid]
    # Its parameters were never resolved there: recorded as written, the way any probe that failed
    # before resolving them is, so replay (stale_facts) has nothing to compare and never calls it stale.
    return Fact(error=error, provenance=Provenance(probe=pid, kind=spec.uses, host=node, error=error,
                                                   params=dict(spec.with_)))
