"""End to end: `policyrun evaluate upgrade-gpu-version` run in a plugin checkout, with the real probes.

The repositories are built by tests/afdfixtures.py in a temporary folder: an upstream vLLM with
annotated release tags whose diff renames and deletes modules the plugin imports, and an AFD
plugin pinned to the older release. Each test runs the CLI as a user would (a subprocess whose
working directory is the plugin checkout), then checks the phase statuses and blockers and that
neither repository was touched: same `git status --porcelain`, same HEAD, same `.git/index`
bytes and modification time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import afdfixtures as fx

ROOT = Path(__file__).resolve().parent.parent


# --- helpers ---------------------------------------------------------------------------------------

def _repo_state(path: Path) -> tuple[str, str, bytes, int]:
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0"}  # our own look must not refresh the index either
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=path, env=env,
                            capture_output=True, text=True, check=True).stdout
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=path, env=env, capture_output=True, text=True,
                          check=True).stdout.strip()
    index = path / ".git" / "index"
    return status, head, index.read_bytes(), index.stat().st_mtime_ns


def evaluate(cwd: Path, mode: str, out: Path, *sets: str, repos: tuple[Path, ...] = ()) -> tuple[int, dict[str, Any]]:
    """Run the CLI in `cwd` (the plugin checkout); assert that `repos` are left exactly as they were."""
    before = [_repo_state(r) for r in repos]
    argv = [sys.executable, "-m", "policyrun", "evaluate", "upgrade-gpu-version", "--mode", mode,
            "--out", str(out), "--no-timestamp", "-q"]
    for item in sets:
        argv += ["--set", item]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CI": "1"}
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode in (0, 1, 2), f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    after = [_repo_state(r) for r in repos]
    for repo, b, a in zip(repos, before, after, strict=True):
        assert a[0] == b[0], f"git status of {repo} changed:\n{b[0]}\n---\n{a[0]}"
        assert a[1] == b[1], f"HEAD of {repo} moved"
        assert a[2] == b[2] and a[3] == b[3], f"{repo}/.git/index was rewritten"
    trace = json.loads((out / "trace.json").read_text())
    assert trace["exit_code"] == proc.returncode
    return proc.returncode, trace


def statuses(trace: dict[str, Any]) -> dict[str, str]:
    return {p["phase"]: p["status"] for p in trace["phases"]}


def phase(trace: dict[str, Any], pid: str) -> dict[str, Any]:
    return next(p for p in trace["phases"] if p["phase"] == pid)


def fact_read(trace: dict[str, Any], path: str) -> Any:
    for p in trace["phases"]:
        for c in p["evidence"]:
            for r in c["reads"]:
                if r["path"] == path and not r["missing"]:
                    return r["value"]
    raise AssertionError(f"no check read {path}")


PLANNING_PHASES = ["FREEZE_IDENTITY", "INVENTORY_AFD_CONTRACTS", "DIFF_VLLM", "ARCHITECTURE_GATE", "PRODUCE_STAGED_PLAN"]
LATER_PHASES = ["IMPLEMENT_ATOMIC_ADAPTATIONS", "STATIC_AND_UNIT_GATE", "TARGET_NATIVE_GPU_CONTROL",
                "GPU_BASIC_E2E_GATE", "GPU_ACCURACY_GATE", "DOCUMENTATION_REFRESH_GATE", "FINAL_AUDIT",
                "CAPTURE_LESSONS_AND_REPORT"]


# --- fixtures --------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def upstream(tmp_path_factory: pytest.TempPathFactory) -> fx.VllmRepo:
    return fx.build_vllm(tmp_path_factory.mktemp("upstream") / "vllm")


@pytest.fixture(scope="module")
def plugin(tmp_path_factory: pytest.TempPathFactory) -> fx.PluginRepo:
    return fx.build_plugin(tmp_path_factory.mktemp("pre") / "afd-plugin")


@pytest.fixture(scope="module")
def upgraded(tmp_path_factory: pytest.TempPathFactory) -> fx.PluginRepo:
    return fx.build_plugin(tmp_path_factory.mktemp("post") / "afd-plugin", post=True)


@pytest.fixture()
def evidence(tmp_path: Path, upstream: fx.VllmRepo) -> Iterator[Path]:
    """An evidence folder outside both repositories with the architecture and plan attestations."""
    folder = tmp_path / "evidence"
    fx.dump_yaml(folder / "architecture.yaml", fx.architecture_doc(upstream.current_sha, upstream.target_sha))
    fx.dump_yaml(folder / "plan.yaml", fx.plan_doc(upstream.current_sha, upstream.target_sha))
    yield folder


# --- planning-audit --------------------------------------------------------------------------------

def test_planning_audit_passes_from_real_facts(plugin: fx.PluginRepo, upstream: fx.VllmRepo, evidence: Path,
                                               tmp_path: Path) -> None:
    code, trace = evaluate(plugin.path, "planning-audit", tmp_path / "out", f"vllm_src={upstream.path}",
                           "target_ref=v0.27.0", f"evidence_dir={evidence}", repos=(plugin.path, upstream.path))
    assert code == 0, statuses(trace)
    assert [statuses(trace)[p] for p in PLANNING_PHASES] == ["PASS"] * 5
    assert all(statuses(trace)[p] == "SKIPPED" for p in LATER_PHASES)
    assert trace["verdict"]["id"] == "plan_ready"

    # Identity was discovered from the repository: pins, lock file, constant and README claims agree;
    # the README's historical mentions are not claims.
    sources = fact_read(trace, "facts.identity_sources")
    assert {s["value"] for s in sources} == {"0.26.1"}
    assert {s["kind"] for s in sources} == {"pin", "constant", "doc"}
    assert {s["source"].split(":")[0] for s in sources} == {"pyproject.toml", "uv.lock", "afd_plugin/version.py",
                                                             "README.md", "docs/gpu-guide.md"}
    assert fact_read(trace, "facts.vllm_current.sha") == upstream.current_sha  # annotated tag peeled
    assert fact_read(trace, "facts.vllm_target.sha") == upstream.target_sha

    # The impact matrix: renamed and deleted modules the plugin imports are flagged.
    impact = {r["upstream"]: r for r in fact_read(trace, "facts.impact_matrix")}
    assert set(impact) == {u for u, _ in fx.IMPACT_ROWS}
    assert impact["vllm/attention/layer.py"]["change"] == "renamed"
    assert impact["vllm/attention/layer.py"]["new_path"] == "vllm/attention/layers/attention.py"
    assert impact["vllm/v1/worker/worker_base.py"]["change"] == "deleted"
    assert "afd_plugin/workers/ffn_worker.py:3" in impact["vllm/v1/worker/worker_base.py"]["consumers"]
    assert "vllm/entrypoints/openai/api_server.py" not in impact  # changed, but not imported
    diff = phase(trace, "DIFF_VLLM")["next_allowed_action"]
    assert "vllm/attention/layer.py (renamed to vllm/attention/layers/attention.py)" in diff
    assert "vllm/v1/worker/worker_base.py (deleted)" in diff

    # The inventory found the patches package and the copy outside it, markers balanced.
    inventory = {p["file"]: p for p in fact_read(trace, "facts.patch_inventory")}
    assert set(inventory) == {"afd_plugin/compat/patches/attention.py", "afd_plugin/compat/patches/model_runner.py",
                              "afd_plugin/compat/patches/scheduler.py", "afd_plugin/workers/ffn_worker.py"}
    assert inventory["afd_plugin/workers/ffn_worker.py"]["in_patches_package"] is False
    assert all(p["starts"] == p["ends"] == 1 for p in inventory.values())
    assert "20250401-v0.26.1-to-v0.27.0-lessons.md" in phase(trace, "PRODUCE_STAGED_PLAN")["next_allowed_action"]


def test_planning_audit_without_attestation_blocks_the_gate(plugin: fx.PluginRepo, upstream: fx.VllmRepo,
                                                           tmp_path: Path) -> None:
    """The default evidence folder (.policyrun/evidence in the checkout) holds nothing yet."""
    code, trace = evaluate(plugin.path, "planning-audit", tmp_path / "out", f"vllm_src={upstream.path}",
                           "target_ref=v0.27.0", repos=(plugin.path, upstream.path))
    assert code == 2
    assert statuses(trace)["DIFF_VLLM"] == "PASS"
    gate = phase(trace, "ARCHITECTURE_GATE")
    assert gate["status"] == "BLOCKED"
    assert "file.not_found" in gate["blocker"] and "architecture.yaml" in gate["blocker"]
    assert "no production edit before this gate passes" in gate["next_allowed_action"]
    assert statuses(trace)["PRODUCE_STAGED_PLAN"] == "SKIPPED"


def test_planning_audit_stop_decision(plugin: fx.PluginRepo, upstream: fx.VllmRepo, evidence: Path,
                                      tmp_path: Path) -> None:
    fx.dump_yaml(evidence / "architecture.yaml",
                 fx.architecture_doc(upstream.current_sha, upstream.target_sha, decision="stop"))
    code, trace = evaluate(plugin.path, "planning-audit", tmp_path / "out", f"vllm_src={upstream.path}",
                           "target_ref=v0.27.0", f"evidence_dir={evidence}", repos=(plugin.path, upstream.path))
    assert code == 2
    assert statuses(trace)["ARCHITECTURE_GATE"] == "STOPPED"
    assert "replaces the worker lifecycle owner" in phase(trace, "ARCHITECTURE_GATE")["blocker"]
    assert trace["verdict"]["id"] == "architecture_stopped"


def test_target_ref_that_does_not_resolve(plugin: fx.PluginRepo, upstream: fx.VllmRepo, evidence: Path,
                                          tmp_path: Path) -> None:
    code, trace = evaluate(plugin.path, "planning-audit", tmp_path / "out", f"vllm_src={upstream.path}",
                           "target_ref=v0.99.0", f"evidence_dir={evidence}", repos=(plugin.path, upstream.path))
    assert code == 2
    freeze = phase(trace, "FREEZE_IDENTITY")
    assert freeze["status"] == "BLOCKED"
    assert "git.unknown_ref" in freeze["blocker"] and "v0.99.0" in freeze["blocker"]
    assert all(statuses(trace)[p] == "SKIPPED" for p in PLANNING_PHASES[1:] + LATER_PHASES)
    assert phase(trace, "DIFF_VLLM")["reason"] == "gated by FREEZE_IDENTITY=BLOCKED"


def test_branch_target_is_refused(plugin: fx.PluginRepo, upstream: fx.VllmRepo, evidence: Path, tmp_path: Path) -> None:
    code, trace = evaluate(plugin.path, "planning-audit", tmp_path / "out", f"vllm_src={upstream.path}",
                           "target_ref=main", f"evidence_dir={evidence}", repos=(plugin.path, upstream.path))
    assert code == 2
    assert "target_ref main is a branch (mutable)" in phase(trace, "FREEZE_IDENTITY")["blocker"]


def test_current_ref_contradicting_the_repository(plugin: fx.PluginRepo, upstream: fx.VllmRepo, evidence: Path,
                                                  tmp_path: Path) -> None:
    code, trace = evaluate(plugin.path, "planning-audit", tmp_path / "out", f"vllm_src={upstream.path}",
                           "target_ref=v0.27.0", "current_ref=v0.27.0", f"evidence_dir={evidence}",
                           repos=(plugin.path, upstream.path))
    assert code == 2
    assert "current_ref v0.27.0 disagrees with repository evidence (pyproject.toml:7 = 0.26.1)" in \
        phase(trace, "FREEZE_IDENTITY")["blocker"]


def test_disagreeing_sources_block_identity(upstream: fx.VllmRepo, evidence: Path, tmp_path: Path) -> None:
    repo = fx.build_plugin(tmp_path / "afd-plugin", variant=fx.DISAGREEING_CONSTANT)
    code, trace = evaluate(repo.path, "planning-audit", tmp_path / "out", f"vllm_src={upstream.path}",
                           "target_ref=v0.27.0", f"evidence_dir={evidence}", repos=(repo.path, upstream.path))
    assert code == 2
    blocker = phase(trace, "FREEZE_IDENTITY")["blocker"]
    assert blocker.startswith("sources disagree on the current vLLM version: ")
    for source in ("pin pyproject.toml:7 = 0.26.1", "pin uv.lock:19 = 0.26.1", "constant afd_plugin/version.py:5 = 0.26.0",
                   "doc README.md:8 = 0.26.1", "doc README.md:12 = 0.26.1", "doc docs/gpu-guide.md:3 = 0.26.1"):
        assert source in blocker
    assert "0.25.0" not in blocker and "0.24.0" not in blocker  # history is not a claim
    assert all(statuses(trace)[p] == "SKIPPED" for p in PLANNING_PHASES[1:])


def test_missing_patch_comment_is_a_gap_that_blocks_the_gate(upstream: fx.VllmRepo, evidence: Path,
                                                             tmp_path: Path) -> None:
    repo = fx.build_plugin(tmp_path / "afd-plugin", variant=fx.MISSING_SIGNATURE)
    code, trace = evaluate(repo.path, "planning-audit", tmp_path / "out", f"vllm_src={upstream.path}",
                           "target_ref=v0.27.0", f"afd_base={repo.head_sha}", f"evidence_dir={evidence}",
                           repos=(repo.path, upstream.path))
    assert code == 2
    inventory = phase(trace, "INVENTORY_AFD_CONTRACTS")
    assert inventory["status"] == "PASS"
    signature = next(c for c in inventory["evidence"] if c["id"] == "patch_signature_comments")
    assert signature["result"] == "UNKNOWN" and "afd_plugin/compat/patches/scheduler.py" in signature["message"]
    assert phase(trace, "ARCHITECTURE_GATE")["blocker"].startswith(
        "the inventory left affected surfaces UNKNOWN: afd_plugin/compat/patches/scheduler.py (missing: signature)")


def test_unbalanced_markers_fail_the_inventory(upstream: fx.VllmRepo, evidence: Path, tmp_path: Path) -> None:
    repo = fx.build_plugin(tmp_path / "afd-plugin", variant=fx.UNBALANCED_MARKERS)
    code, trace = evaluate(repo.path, "planning-audit", tmp_path / "out", f"vllm_src={upstream.path}",
                           "target_ref=v0.27.0", f"afd_base={repo.head_sha}", f"evidence_dir={evidence}",
                           repos=(repo.path, upstream.path))
    assert code == 1
    assert phase(trace, "INVENTORY_AFD_CONTRACTS")["blocker"] == (
        "unbalanced PATCH START/END markers: afd_plugin/compat/patches/scheduler.py (1 START, 0 END)")


def test_vllm_checkout_on_another_branch_is_read_not_switched(plugin: fx.PluginRepo, upstream: fx.VllmRepo,
                                                               evidence: Path, tmp_path: Path) -> None:
    """The provided vLLM checkout stays on its branch, with its uncommitted edit, untouched."""
    scratch = upstream.path / "vllm" / "config.py"
    original = scratch.read_text()
    scratch.write_text(original + "# local experiment\n")
    try:
        code, trace = evaluate(plugin.path, "planning-audit", tmp_path / "out", f"vllm_src={upstream.path}",
                               "target_ref=v0.27.0", f"evidence_dir={evidence}", repos=(plugin.path, upstream.path))
    finally:
        scratch.write_text(original)
    assert code == 0
    assert fact_read(trace, "facts.vllm_git.head") == upstream.main_sha
    assert fact_read(trace, "facts.vllm_diff.head_sha") == upstream.target_sha


# --- implementation and final validation ------------------------------------------------------------

def _final_evidence(folder: Path, upstream: fx.VllmRepo, repo: fx.PluginRepo) -> list[str]:
    gpu = fx.gpu_fact(2)
    fx.dump_yaml(folder / "native-control.yaml", fx.native_control_doc([d["uuid"] for d in gpu["devices"]]))
    fx.dump_yaml(folder / "accuracy.yaml", fx.accuracy_doc(repo.head_sha))
    (folder / "unit.xml").write_text(fx.junit_xml(fx.UNIT_CASES))
    (folder / "e2e.xml").write_text(fx.junit_xml(fx.E2E_CASES, "gpu-e2e"))
    return [f"unit_junit={folder / 'unit.xml'}", f"e2e_junit={folder / 'e2e.xml'}",
            f"accuracy_results={folder / 'accuracy.yaml'}"]


def test_implementation_on_this_machine(upgraded: fx.PluginRepo, upstream: fx.VllmRepo, evidence: Path,
                                        tmp_path: Path) -> None:
    """Adaptations committed and planned; this interpreter has no vLLM, so the unit gate blocks on the
    target runtime (an environment failure), never passes."""
    results = _final_evidence(evidence, upstream, upgraded)
    code, trace = evaluate(upgraded.path, "implementation", tmp_path / "out", f"vllm_src={upstream.path}",
                           "target_ref=v0.27.0", f"afd_base={upgraded.base_sha}", f"python={sys.executable}",
                           f"evidence_dir={evidence}", *results, repos=(upgraded.path, upstream.path))
    s = statuses(trace)
    assert [s[p] for p in PLANNING_PHASES] == ["PASS"] * 5, {p: phase(trace, p)["blocker"] for p in PLANNING_PHASES}
    assert s["IMPLEMENT_ATOMIC_ADAPTATIONS"] == "PASS", phase(trace, "IMPLEMENT_ATOMIC_ADAPTATIONS")["blocker"]
    # The impact matrix is computed at afd_base, so it is the one the architecture review classified.
    assert {r["upstream"] for r in fact_read(trace, "facts.impact_matrix")} == {u for u, _ in fx.IMPACT_ROWS}
    static = phase(trace, "STATIC_AND_UNIT_GATE")
    if static["status"] != "PASS":  # the usual case: no vLLM 0.27.0 in the interpreter running the tests
        assert static["status"] == "BLOCKED"
        assert "not 0.27.0" in static["blocker"] or "CUDA build" in static["blocker"] or "pip check" in static["blocker"]
    for p in LATER_PHASES[2:]:
        assert s[p] == "SKIPPED" and phase(trace, p)["reason"].startswith("outside mode implementation")


def test_final_validation_blocks_when_the_runtime_cannot_be_established(upgraded: fx.PluginRepo,
                                                                        upstream: fx.VllmRepo, evidence: Path,
                                                                        tmp_path: Path) -> None:
    """Final validation never records an environment gap as UNKNOWN: without a CUDA stack or NVML here,
    identity is BLOCKED and nothing after it runs."""
    results = _final_evidence(evidence, upstream, upgraded)
    code, trace = evaluate(upgraded.path, "final-validation", tmp_path / "out", f"vllm_src={upstream.path}",
                           "target_ref=v0.27.0", f"afd_base={upgraded.base_sha}", f"python={sys.executable}",
                           f"evidence_dir={evidence}", *results, repos=(upgraded.path, upstream.path))
    freeze = phase(trace, "FREEZE_IDENTITY")
    unknown = [c["id"] for c in freeze["evidence"] if c["result"] == "UNKNOWN" and c["outcome"] is None]
    assert unknown == []  # no tolerated gap in final validation
    if freeze["status"] != "PASS":  # a machine without a CUDA PyTorch and NVML (the usual CI runner)
        assert code == 2 and freeze["status"] == "BLOCKED"
        assert all(statuses(trace)[p] == "SKIPPED" for p in LATER_PHASES[1:])
    # The frozen revision's pins and constant name the target; the old version only survives as history.
    assert {s["value"] for s in fact_read(trace, "facts.identity_sources") if s["kind"] != "doc"} == {"0.27.0"}
