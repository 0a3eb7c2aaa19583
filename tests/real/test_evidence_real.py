"""`policyrun evidence` on the real afd-plugin and the real vLLM v0.26.0 -> v0.27.0 sources: the
skeletons hold the real impact rows and patch inventory, and an unfinished one blocks the gate
with its own located errors.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from policyrun.cli import main
from tests.real.conftest import copy_repo, git

PLANNING = ["--mode", "planning-audit", "--set", "target_ref=v0.27.0"]


@pytest.fixture(scope="module")
def workspace(afd_repo: Path, vllm_repo: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A copy of the plugin, the skeletons written into its evidence folder, and a planning trace."""
    base = tmp_path_factory.mktemp("evidence")
    afd = copy_repo(afd_repo, base / "afd-plugin")
    evidence = afd / ".policyrun" / "evidence"
    mp = pytest.MonkeyPatch()
    mp.chdir(afd)
    try:
        sets = [*PLANNING, "--set", f"vllm_src={vllm_repo}"]
        for name in ("architecture", "plan"):
            assert main(["evidence", "upgrade-gpu-version", *sets, "--schema", name, "--skeleton",
                         "-o", str(evidence / f"{name}.yaml")]) == 0
        assert main(["evaluate", "upgrade-gpu-version", *sets, "--out", str(base / "out"), "-q"]) == 2
    finally:
        mp.undo()
    return {"afd": afd, "evidence": evidence, "trace": json.loads((base / "out" / "trace.json").read_text())}


def _derived(trace: dict[str, Any], did: str) -> Any:
    return next(d for d in trace["derived"] if d["id"] == did)["value"]


def test_the_architecture_skeleton_holds_every_real_impact_row(workspace: dict[str, Any], vllm_repo: Path) -> None:
    doc = yaml.safe_load((workspace["evidence"] / "architecture.yaml").read_text())
    impact = _derived(workspace["trace"], "impact_matrix")
    assert len(impact) == 49  # 31 file rows, 17 changed upstream bodies, 1 name gone at the target
    assert sum(r.get("kind") == "body" for r in impact) == 17
    assert [r["upstream"] for r in doc["rows"]] == [r["upstream"] for r in impact]
    assert doc["current_sha"] == git(vllm_repo, "rev-parse", "v0.26.0^{commit}").strip()
    assert doc["target_sha"] == git(vllm_repo, "rev-parse", "v0.27.0^{commit}").strip()
    signature = next(r for r in doc["rows"] if r["upstream"] == "vllm.v1.engine.utils.launch_core_engines")
    assert signature["notes"] == "patched signature and body changed; used at afd_plugin/compat/patches/async_dp_engine.py"


def test_the_plan_skeleton_disposes_of_every_real_patch(workspace: dict[str, Any]) -> None:
    doc = yaml.safe_load((workspace["evidence"] / "plan.yaml").read_text())
    inventory = [p["file"] for p in _derived(workspace["trace"], "patch_inventory")]
    assert len(inventory) == 13
    assert [p["file"] for p in doc["patches"]] == inventory
    staged = {u for stage in doc["stages"] for u in stage["upstream"]}
    assert staged == {r["upstream"] for r in _derived(workspace["trace"], "impact_matrix")}  # every row staged


def test_the_unfinished_skeleton_blocks_with_its_located_errors(workspace: dict[str, Any]) -> None:
    gate = next(p for p in workspace["trace"]["phases"] if p["phase"] == "ARCHITECTURE_GATE")
    assert gate["status"] == "BLOCKED"
    assert gate["blocker"].startswith(".policyrun/evidence/architecture.yaml does not match its schema (")
    assert ".policyrun/evidence/architecture.yaml:4:11: at decision: 'TODO: continue or stop' is not one of" \
        in gate["blocker"]
