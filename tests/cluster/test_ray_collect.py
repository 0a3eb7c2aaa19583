"""`collect --cluster ray=ADDRESS` against a real local Ray cluster of three nodes (tests/cluster/conftest.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from policyrun.trace.records import phase_checks

pytest.importorskip("ray")

RULEBOOK = Path(__file__).resolve().parent.parent / "data" / "cluster" / "cell.yaml"
TIMEOUT = 300  # generous: guards against a hang, never measures speed


def policyrun(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "policyrun", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=TIMEOUT, env={**os.environ, **(env or {})})


def alive_nodes(cluster: Any) -> list[str]:
    import ray

    if not ray.is_initialized():
        ray.init(address=cluster.address, logging_level="ERROR", log_to_driver=False)
    return sorted(n["NodeID"] for n in ray.nodes() if n["Alive"])


def test_collect_labels_every_node_and_names_the_one_that_disagrees(ray_cluster: Any, tmp_path: Path) -> None:
    from tests.cluster.conftest import DRIVERS

    nodes = alive_nodes(ray_cluster)
    out = tmp_path / "cell.json"
    done = policyrun("collect", str(RULEBOOK), "--cluster", f"ray={ray_cluster.address}", "-o", str(out),
                     cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    snap = json.loads(out.read_text())
    assert sorted(snap["hosts"]) == nodes and len(nodes) == 3
    assert all(h["node_id"] == label for label, h in snap["hosts"].items())
    # Per-host facts: each node reported its own environment, with its own provenance.
    drivers = {label: facts["driver"]["value"]["vars"]["FAKE_DRIVER"]["value"] for label, facts in snap["by_host"].items()}
    assert sorted(drivers.values()) == sorted(DRIVERS)
    assert all(f["work"]["provenance"]["host"] == label for label, f in snap["by_host"].items())
    # A host-scoped probe's `facts` entry says to read it per host; the run's own fact ran once, on the driver.
    assert snap["facts"]["driver"]["error"]["code"] == "host.per_host"
    assert snap["facts"]["release"]["value"] == "r1" and "host" not in snap["facts"]["release"]["provenance"]

    ev = policyrun("evaluate", str(RULEBOOK), "--facts", str(out), "--out", str(tmp_path / "t"), cwd=tmp_path)
    assert ev.returncode == 1, ev.stdout + ev.stderr
    odd = next(label for label, v in drivers.items() if v == DRIVERS[2])
    trace = json.loads((tmp_path / "t" / "trace.json").read_text())
    agree = trace["phases"][0]
    assert agree["status"] == "FAIL"
    shown = json.dumps(list(phase_checks(agree)))
    assert odd in shown and "560.35.03" in shown


def test_a_cluster_that_agrees_passes(ray_cluster: Any, tmp_path: Path) -> None:
    """The same cell with the odd node's facts left out of the comparison by a host-labelled merge:
    two agreeing hosts PASS (the merge of per-node snapshots and the Ray path read the same)."""
    out = tmp_path / "cell.json"
    assert policyrun("collect", str(RULEBOOK), "--cluster", f"ray={ray_cluster.address}", "-o", str(out),
                     cwd=tmp_path).returncode == 0
    snap = json.loads(out.read_text())
    from tests.cluster.conftest import DRIVERS

    keep = [label for label, f in snap["by_host"].items()
            if f["driver"]["value"]["vars"]["FAKE_DRIVER"]["value"] == DRIVERS[0]]
    files = []
    for label in keep:
        one = tmp_path / f"{label[:8]}.json"
        done = policyrun("collect", str(RULEBOOK), "--host-label", label[:8], "-o", str(one), cwd=tmp_path,
                         env={"FAKE_DRIVER": DRIVERS[0]})
        assert done.returncode == 0, done.stderr
        files += ["--facts", str(one)]
    ev = policyrun("evaluate", str(RULEBOOK), *files, "--out", str(tmp_path / "t"), cwd=tmp_path)
    assert ev.returncode == 0, ev.stdout + ev.stderr


def test_no_cluster_at_the_address_is_a_usage_error(tmp_path: Path) -> None:
    done = policyrun("collect", str(RULEBOOK), "--cluster", "ray=127.0.0.1:1", "-o", str(tmp_path / "f.json"),
                     cwd=tmp_path)
    assert done.returncode == 3, done.stderr
    assert "cannot connect to a Ray cluster" in done.stderr
    assert not (tmp_path / "f.json").exists()


def test_a_node_killed_mid_collection_is_unreachable_and_blocks(ray_cluster: Any, tmp_path: Path) -> None:
    """Last in this file: it adds a fourth node and kills it while its probe runs."""
    mark = tmp_path / "started"
    slow = ray_cluster.add_node(num_cpus=1, object_store_memory=80 * 1024 * 1024, env_vars={
        "PYTHONPATH": os.environ.get("PYTHONPATH", ""), "FAKE_DRIVER": "550.54.15",
        "CELL_MARK": str(mark), "CELL_SLOW": "100"})
    ray_cluster.wait_for_nodes(timeout=120)
    out = tmp_path / "cell.json"
    proc = subprocess.Popen([sys.executable, "-m", "policyrun", "collect", str(RULEBOOK), "--cluster",
                             f"ray={ray_cluster.address}", "-o", str(out)], cwd=tmp_path, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + TIMEOUT
        while not mark.exists():  # the slow node's probe has started
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the slow node's probe never started"
            time.sleep(0.2)
        ray_cluster.remove_node(slow, allow_graceful=False)
        _, stderr = proc.communicate(timeout=TIMEOUT)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 2, stderr
    snap = json.loads(out.read_text())
    assert len(snap["hosts"]) == 4  # never a silently smaller cell
    dead = [label for label, f in snap["by_host"].items() if not all("error" not in x for x in f.values())]
    assert len(dead) == 1
    assert {f["error"]["code"] for f in snap["by_host"][dead[0]].values()} == {"host.unreachable"}
    assert "host.unreachable" in stderr and dead[0] in stderr
    ev = policyrun("evaluate", str(RULEBOOK), "--facts", str(out), "--out", str(tmp_path / "t"), cwd=tmp_path)
    assert ev.returncode == 2, ev.stdout + ev.stderr
    trace = json.loads((tmp_path / "t" / "trace.json").read_text())
    assert trace["phases"][0]["status"] == "BLOCKED"
    assert "host.unreachable" in json.dumps(trace["phases"][0])
