"""Host-scoped facts without Ray: --host-label, merging a cell, hosts.<probe>, old snapshots."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from policyrun.errors import UsageError
from policyrun.facts import FactsSnapshot, load_facts, merge_facts

ROOT = Path(__file__).resolve().parent.parent
RULEBOOK = ROOT / "tests" / "data" / "cluster" / "cell.yaml"
EXAMPLE = ROOT / "examples" / "gpu-cell-h200"


def policyrun(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "policyrun", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=600, env={**os.environ, **(env or {})})


def collect(tmp: Path, label: str, driver: str) -> Path:
    out = tmp / f"{label}.json"
    done = policyrun("collect", str(RULEBOOK), "--host-label", label, "-o", str(out), cwd=tmp,
                     env={"FAKE_DRIVER": driver})
    assert done.returncode == 0, done.stderr
    return out


def test_host_label_records_the_host_and_keeps_facts_readable_as_before(tmp_path: Path) -> None:
    snap = json.loads(collect(tmp_path, "node-a", "550").read_text())
    assert list(snap["hosts"]) == ["node-a"] and snap["hosts"]["node-a"]["hostname"]
    assert snap["facts"]["driver"]["provenance"]["host"] == "node-a"
    assert "host" not in snap["facts"]["release"]["provenance"]  # a const describes the run
    assert "by_host" not in snap


def test_a_cell_merged_by_evaluate_names_the_host_that_disagrees(tmp_path: Path) -> None:
    files = [collect(tmp_path, label, d) for label, d in (("node-a", "550"), ("node-b", "560"), ("node-c", "550"))]
    args = [a for f in files for a in ("--facts", str(f))]
    ev = policyrun("evaluate", str(RULEBOOK), *args, "--out", "t", cwd=tmp_path)
    assert ev.returncode == 1, ev.stdout + ev.stderr
    assert '"hosts": ["node-b"], "value": "560"' in ev.stdout
    agree = policyrun("evaluate", str(RULEBOOK), "--facts", str(files[0]), "--facts", str(files[2]), "--out", "u",
                      cwd=tmp_path)
    assert agree.returncode == 0, agree.stdout + agree.stderr


def test_the_same_host_twice_with_different_facts_is_an_error(tmp_path: Path) -> None:
    a = collect(tmp_path, "node-a", "550")
    (tmp_path / "again").mkdir()
    b = collect(tmp_path / "again", "node-a", "560")
    ev = policyrun("evaluate", str(RULEBOOK), "--facts", str(a), "--facts", str(b), "--out", "t", cwd=tmp_path)
    assert ev.returncode == 3
    assert "host 'node-a' appears in" in ev.stderr and "F004" in ev.stderr
    # The same snapshot twice is no conflict.
    assert policyrun("evaluate", str(RULEBOOK), "--facts", str(a), "--facts", str(a), "--out", "u",
                     cwd=tmp_path).returncode == 0


def test_a_single_host_check_is_blocked_on_a_cell_never_answered_from_one_node(tmp_path: Path) -> None:
    files = [collect(tmp_path, label, "550") for label in ("node-a", "node-b")]
    cell = merge_facts((str(f), load_facts(f)) for f in files)
    assert cell.facts["driver"].error is not None and cell.facts["driver"].error.code == "host.per_host"
    assert sorted(cell.host_values()["driver"]) == ["node-a", "node-b"]
    single = merge_facts([(str(files[0]), load_facts(files[0]))])
    assert single.facts["driver"].ok and single.by_host is None


def test_a_failed_host_makes_the_per_host_map_missing_and_names_the_host(tmp_path: Path) -> None:
    files = [collect(tmp_path, label, "550") for label in ("node-a", "node-b")]
    data = json.loads(files[1].read_text())
    fact = data["facts"]["driver"]
    fact.pop("value")
    fact["error"] = fact["provenance"]["error"] = {"code": "host.unreachable", "message": "node-b did not answer"}
    files[1].write_text(json.dumps(data))
    ev = policyrun("evaluate", str(RULEBOOK), "--facts", str(files[0]), "--facts", str(files[1]), "--out", "t",
                   cwd=tmp_path)
    assert ev.returncode == 2, ev.stdout + ev.stderr
    trace = json.loads((tmp_path / "t" / "trace.json").read_text())
    assert trace["phases"][0]["status"] == "BLOCKED"
    assert "node-b: host.unreachable" in json.dumps(trace["phases"][0])


def test_snapshots_without_hosts_load_and_digest_as_before() -> None:
    old = ROOT / "examples" / "gpu-node-preflight-h200" / "facts.json"
    snap = load_facts(old)
    assert snap.hosts is None and snap.host_values() == {}
    # The serialised form of an unlabelled snapshot has no new keys, so its digest is unchanged.
    assert "hosts" not in snap.to_json() and '"host"' not in snap.to_json()
    assert FactsSnapshot.model_validate_json(snap.to_json()).digest() == snap.digest()


def test_bad_host_label_is_a_usage_error(tmp_path: Path) -> None:
    done = policyrun("collect", str(RULEBOOK), "--host-label", "a b", "-o", "f.json", cwd=tmp_path)
    assert done.returncode == 3 and "--host-label" in done.stderr


def test_cluster_without_ray_or_with_another_engine_is_a_usage_error(tmp_path: Path) -> None:
    done = policyrun("collect", str(RULEBOOK), "--cluster", "slurm", "-o", "f.json", cwd=tmp_path)
    assert done.returncode == 3 and "the supported engine is Ray" in done.stderr
    # Ray hidden from the interpreter: the extra is named.
    shim = tmp_path / "noray"
    (shim / "ray").mkdir(parents=True)
    (shim / "ray" / "__init__.py").write_text("raise ImportError('no ray here')\n")
    env = {"PYTHONPATH": os.pathsep.join([str(shim), os.environ.get("PYTHONPATH", "")])}
    done = policyrun("collect", str(RULEBOOK), "--cluster", "ray", "-o", "f.json", cwd=tmp_path, env=env)
    assert done.returncode == 3, done.stderr
    assert "pip install 'policyrun[cluster]'" in done.stderr


def test_the_cell_example_is_current(tmp_path: Path) -> None:
    ev = policyrun("evaluate", "gpu-cell-preflight", "--facts", str(EXAMPLE / "cell.json"), "--set",
                   "roles=h200-real=attention,fake-attn-0=attention,fake-ffn-0=ffn", "--out", str(tmp_path / "t"),
                   "--no-timestamp", cwd=tmp_path)
    assert ev.returncode == 2
    got = json.loads((tmp_path / "t" / "trace.json").read_text())
    want = json.loads((EXAMPLE / "expected" / "trace.json").read_text())
    assert json.dumps(got, indent=1, sort_keys=True) == json.dumps(want, indent=1, sort_keys=True)
    assert merge_facts((n, load_facts(EXAMPLE / n)) for n in ("h200-real.json", "fake-attn-0.json",
                                                              "fake-ffn-0.json")).to_json() == \
        (EXAMPLE / "cell.json").read_text()


def test_the_real_h200_snapshot_evaluates_here_as_it_did_on_the_device(tmp_path: Path) -> None:
    # The device's own evaluation of its unedited snapshot is kept in device/evaluate.log; the
    # same snapshot evaluated here must give the same statuses and blocker (ROLES: 1 GPU of 8).
    ev = policyrun("evaluate", "gpu-cell-preflight", "--facts", str(EXAMPLE / "h200-real.json"), "--set",
                   "roles=h200-real=attention", "--out", str(tmp_path / "t"), "--no-timestamp", cwd=tmp_path)
    assert ev.returncode == 2
    on_device = (EXAMPLE / "device" / "evaluate.log").read_text()
    table = [line for line in ev.stdout.splitlines() if line.split()[:1] and line.split()[0] in
             ("REACH", "AGREE", "ROLES", "DEVICES", "CLEAN")]
    assert table and all(line in on_device for line in table)
    assert "ROLES    BLOCKED  h200-real (attention) has 1 GPU(s), needs 8" in ev.stdout
    snap = json.loads((EXAMPLE / "h200-real.json").read_text())
    assert sorted(snap["facts"]) == ["gpu", "modules", "netenv", "stack"]
    assert all(f["provenance"]["host"] == "h200-real" and "error" not in f for f in snap["facts"].values())
