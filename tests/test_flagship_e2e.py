"""End to end: `policyrun collect` / `evaluate upgrade-gpu-version` run in a plugin checkout, with the real probes.

The repositories are built once per session by tests/afdfixtures.py (from tests/data/afd): an upstream vLLM with
annotated release tags whose diff renames, deletes and re-exports modules the plugin depends on,
and an AFD plugin that follows the real afd-plugin's conventions, pinned to the older release.
Each test runs the CLI as a user would (a subprocess whose working directory is the plugin
checkout) and checks the phase statuses, blockers and derived values, and that neither repository
was touched: the same `git status --porcelain`, HEAD, and every file under `.git` with the same
bytes and modification time. There is no GPU here: where a test needs the target machine, the
machine facts of a collected snapshot are replaced by the shapes gpu.nvml and python.stack produce
(keeping the parameters the rulebook gave those probes, so `evaluate --facts` accepts it).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from policyrun.trace.records import phase_checks
from tests import afdfixtures as fx

ROOT = Path(__file__).resolve().parent.parent
PLANNING = ["FREEZE_IDENTITY", "INVENTORY_AFD_CONTRACTS", "DIFF_VLLM", "ARCHITECTURE_GATE", "PRODUCE_STAGED_PLAN"]
GPU_AND_AFTER = ["TARGET_NATIVE_GPU_CONTROL", "GPU_BASIC_E2E_GATE", "GPU_ACCURACY_GATE", "DOCUMENTATION_REFRESH_GATE",
                 "FINAL_AUDIT", "CAPTURE_LESSONS_AND_REPORT"]
NO_PYTHON = "python=/nonexistent/bin/python"  # planning records the stack as a gap; skip spawning one


# --- helpers ---------------------------------------------------------------------------------------

def _git_dir_state(repo: Path) -> dict[str, tuple[str, int]]:
    """Every file under .git: content digest and modification time."""
    state = {}
    for path in sorted((repo / ".git").rglob("*")):
        if path.is_file() and not path.is_symlink():
            state[str(path.relative_to(repo))] = (hashlib.sha256(path.read_bytes()).hexdigest(), path.stat().st_mtime_ns)
    return state


def _repo_state(repo: Path) -> tuple[str, str, dict[str, tuple[str, int]]]:
    env = {**os.environ, "GIT_OPTIONAL_LOCKS": "0"}  # our own look must not refresh the index either
    git_dir = _git_dir_state(repo)  # before git runs here
    status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=repo, env=env,
                            capture_output=True, text=True, check=True).stdout
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, env=env, capture_output=True, text=True,
                          check=True).stdout.strip()
    return status, head, git_dir


def policyrun(cwd: Path, *argv: str, repos: tuple[Path, ...]) -> subprocess.CompletedProcess[str]:
    """Run the CLI in `cwd`; assert that `repos` are left exactly as they were."""
    before = [_repo_state(r) for r in repos]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CI": "1"}
    proc = subprocess.run([sys.executable, "-m", "policyrun", *argv], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=600)
    after = [_repo_state(r) for r in repos]
    for repo, b, a in zip(repos, before, after, strict=True):
        assert a[0] == b[0], f"git status of {repo} changed:\n{b[0]}\n---\n{a[0]}"
        assert a[1] == b[1], f"HEAD of {repo} moved"
        changed = sorted(k for k in set(a[2]) | set(b[2]) if a[2].get(k) != b[2].get(k))
        assert changed == [], f"files under {repo}/.git changed: {changed}"
    return proc


def evaluate(cwd: Path, mode: str, out: Path, *sets: str, repos: tuple[Path, ...],
             facts: Path | None = None) -> tuple[int, dict[str, Any]]:
    argv = ["evaluate", "upgrade-gpu-version", "--mode", mode, "--out", str(out), "--no-timestamp", "-q"]
    for item in sets:
        argv += ["--set", item]
    if facts is not None:
        argv += ["--facts", str(facts)]
    proc = policyrun(cwd, *argv, repos=repos)
    assert proc.returncode in (0, 1, 2), f"exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    trace = json.loads((out / "trace.json").read_text())
    assert trace["exit_code"] == proc.returncode
    return proc.returncode, trace


def collect(cwd: Path, mode: str, out: Path, *sets: str, repos: tuple[Path, ...],
            may_fail: frozenset[str] = frozenset()) -> Path:
    """`collect --json`: every probe collects its fact except those in `may_fail` (the machine
    probes, on a runner without NVML or the target interpreter), and the exit code says whether one
    failed (2) or none (0)."""
    argv = ["collect", "upgrade-gpu-version", "--mode", mode, "-o", str(out), "--json"]
    for item in sets:
        argv += ["--set", item]
    proc = policyrun(cwd, *argv, repos=repos)
    summary = json.loads(proc.stdout)
    failed = set(summary["failed"])
    assert failed <= may_fail and proc.returncode == (2 if failed else 0), f"exit {proc.returncode}\n{proc.stderr}"
    assert summary["facts_path"] == str(out) and out.is_file()
    return out


def with_machine(snapshot: Path, machine: dict[str, Any]) -> Path:
    """The snapshot with its machine facts replaced (parameters kept: the rulebook's own)."""
    data = json.loads(snapshot.read_text())
    for pid, value in machine.items():
        fact = data["facts"].get(pid)
        if fact is None:
            continue
        fact.pop("error", None)
        fact["provenance"].pop("error", None)
        fact["value"] = fx.machine_value(pid, value, fact["provenance"]["params"])
    out = snapshot.with_name("machine-" + snapshot.name)
    out.write_text(json.dumps(data), encoding="utf-8")
    return out


def statuses(trace: dict[str, Any]) -> dict[str, str]:
    return {p["phase"]: p["status"] for p in trace["phases"]}


def phase(trace: dict[str, Any], pid: str) -> dict[str, Any]:
    return next(p for p in trace["phases"] if p["phase"] == pid)


def check(trace: dict[str, Any], pid: str, cid: str) -> dict[str, Any]:
    return next(c for c in phase_checks(phase(trace, pid)) if c["id"] == cid)


def derived(trace: dict[str, Any], did: str) -> Any:
    rec = next(d for d in trace["derived"] if d["id"] == did)
    assert rec["error"] is None, rec["error"]
    return rec["value"]


# --- fixtures --------------------------------------------------------------------------------------

# The session's shared repositories (tests/conftest.py); a test that edits one takes a copy.

@pytest.fixture()
def upstream(afd_upstream: fx.VllmRepo) -> fx.VllmRepo:
    return afd_upstream


@pytest.fixture()
def plugin(afd_plugin: fx.PluginRepo) -> fx.PluginRepo:
    return afd_plugin


@pytest.fixture()
def upgraded(afd_upgraded: fx.PluginRepo) -> fx.PluginRepo:
    return afd_upgraded


@pytest.fixture()
def evidence(tmp_path: Path, upstream: fx.VllmRepo) -> Path:
    """An evidence folder outside both repositories with the architecture and plan attestations."""
    folder = tmp_path / "evidence"
    fx.dump_yaml(folder / "architecture.yaml", fx.architecture_doc(upstream.current_sha, upstream.target_sha))
    fx.dump_yaml(folder / "plan.yaml", fx.plan_doc(upstream.current_sha, upstream.target_sha))
    return folder


def _results(folder: Path, repo: fx.PluginRepo, gpu: dict[str, Any]) -> list[str]:
    """The files the GPU node's tooling writes: control run, accuracy, unit and E2E JUnit."""
    fx.dump_yaml(folder / "native-control.yaml", fx.native_control_doc([d["uuid"] for d in gpu["devices"]]))
    fx.dump_yaml(folder / "accuracy.yaml", fx.accuracy_doc(repo.head_sha))
    # Each report records the commit it ran on (the flagship refuses results without one).
    (folder / "unit.xml").write_text(fx.junit_xml(fx.UNIT_CASES, commit=repo.head_sha))
    (folder / "e2e.xml").write_text(fx.junit_xml(fx.E2E_CASES, "gpu-e2e", commit=repo.head_sha))
    return [f"unit_junit={folder / 'unit.xml'}", f"e2e_junit={folder / 'e2e.xml'}",
            f"accuracy_results={folder / 'accuracy.yaml'}"]


# --- planning-audit --------------------------------------------------------------------------------

def test_planning_audit_passes_with_attestations(plugin: fx.PluginRepo, upstream: fx.VllmRepo, evidence: Path,
                                                 tmp_path: Path) -> None:
    """collect, then evaluate the snapshot: every planning phase passes on facts the real probes read."""
    repos = (plugin.path, upstream.path)
    sets = (f"vllm_src={upstream.path}", "target_ref=v0.27.0", f"evidence_dir={evidence}")
    # Planning tolerates missing machine facts; collect still says when one could not be collected.
    facts = collect(plugin.path, "planning-audit", tmp_path / "facts.json", *sets, repos=repos,
                    may_fail=frozenset(fx.machine_facts(2)))
    code, trace = evaluate(plugin.path, "planning-audit", tmp_path / "out", *sets, facts=facts, repos=repos)
    assert code == 0, {p: phase(trace, p)["blocker"] for p in PLANNING}
    assert [statuses(trace)[p] for p in PLANNING] == ["PASS"] * 5
    assert trace["verdict"]["id"] == "plan_ready"

    # Identity from the working tree: pin, lock, the annotated constant, GPU/general claims only.
    assert derived(trace, "identity_sources") == [
        {"kind": "pin", "source": "pyproject.toml:16", "value": "0.26.1"},
        {"kind": "pin", "source": "uv.lock:16", "value": "0.26.1"},
        {"kind": "pin", "source": "uv.lock:38", "value": "0.26.1"},  # the lock's copy of the project's requirement
        {"kind": "constant", "source": "afd_plugin/compat/vllm.py:12", "value": "0.26.1"},
        {"kind": "doc", "source": "README.md:8", "value": "0.26.1"},
        {"kind": "doc", "source": "README.md:19", "value": "0.26.1"},
        {"kind": "doc", "source": "README.md:30", "value": "0.26.1"},
        {"kind": "doc", "source": "docs/gpu/user-guide.md:3", "value": "0.26.1"}]
    assert check(trace, "FREEZE_IDENTITY", "current_resolves")["reads"][0]["value"] == upstream.current_sha  # peeled

    # The impact matrix, re-exports and annotations included.
    impact = derived(trace, "impact_matrix")
    assert [(r["upstream"], r["status"], r["change"]) for r in impact] == fx.IMPACT_ROWS
    rows = {r["upstream"]: r for r in impact}
    assert rows["vllm/config/compilation.py"]["consumers"] == [  # only through vllm/config/__init__.py
        "afd_plugin/compat/patches/forward_context.py:24", "afd_plugin/v1/worker/attention_model_runner.py:10"]
    assert rows["vllm/attention/layer.py"]["new_path"] == "vllm/attention/layers/attention.py"
    assert rows["vllm.sequence.IntermediateTensors"]["new_path"] == "vllm/v1/outputs.py"
    assert "vllm/entrypoints/openai/api_server.py" not in rows  # changed, but the plugin does not use it
    assert "vllm/distributed/parallel_state.py" not in rows  # used (a submodule import), but unchanged
    assert derived(trace, "toolchain_changes") == ["torch 2.8.0 -> 2.9.0", "torchaudio 2.8.0 -> 2.9.0",
                                                  "torchvision 0.23.0 -> 0.24.0"]
    inventory = {p["file"]: p for p in derived(trace, "patch_inventory")}
    assert sorted(inventory) == sorted(fx.PATCH_FILES)
    assert inventory["afd_plugin/compat/patches/engine_core.py"]["starts"] == 2
    assert inventory["afd_plugin/v1/worker/ubatch_wrapper.py"]["in_patches_package"] is False
    assert "references/20250401-v0.26.1-to-v0.27.0-lessons.md" in trace["verdict"]["summary"]


def test_planning_audit_without_attestation_blocks_the_gate(plugin: fx.PluginRepo, upstream: fx.VllmRepo,
                                                           tmp_path: Path) -> None:
    """The default evidence folder (.policyrun/evidence in the checkout) holds nothing yet."""
    code, trace = evaluate(plugin.path, "planning-audit", tmp_path / "out", f"vllm_src={upstream.path}",
                           "target_ref=v0.27.0", NO_PYTHON, repos=(plugin.path, upstream.path))
    assert code == 2
    assert statuses(trace)["DIFF_VLLM"] == "PASS"
    gate = phase(trace, "ARCHITECTURE_GATE")
    assert gate["status"] == "BLOCKED"
    assert ".policyrun/evidence/architecture.yaml" in gate["blocker"]
    assert "vllm/v1/worker/worker_base.py (deleted)" in gate["blocker"]
    assert "no production edit before this gate passes" in gate["next_allowed_action"]
    assert statuses(trace)["PRODUCE_STAGED_PLAN"] == "SKIPPED"


@pytest.mark.parametrize(("variant", "blocker"), [
    (fx.DISAGREEING_CONSTANT, "sources disagree on the current vLLM version: pin pyproject.toml:16 = 0.26.1, but "
                              "constant afd_plugin/compat/vllm.py:12 = 0.26.0"),
    (fx.DISAGREEING_README, "sources disagree on the current vLLM version: pin pyproject.toml:16 = 0.26.1, but "
                            "doc README.md:8 = 0.26.0"),
    (fx.DISAGREEING_NPU_CLAIM, None),  # NPU-scoped claims are not the GPU backend's identity
], ids=["constant", "readme", "npu-claim"])
def test_identity_sources_must_agree(variant: dict[str, str | None], blocker: str | None, upstream: fx.VllmRepo,
                                     evidence: Path, tmp_path: Path, afd_repos: fx.FixtureRepos) -> None:
    repo = afd_repos.copy_plugin(tmp_path / "afd-plugin", variant=variant)
    code, trace = evaluate(repo.path, "planning-audit", tmp_path / "out", f"vllm_src={upstream.path}",
                           "target_ref=v0.27.0", f"evidence_dir={evidence}", NO_PYTHON,
                           repos=(repo.path, upstream.path))
    freeze = phase(trace, "FREEZE_IDENTITY")
    if blocker is None:
        assert code == 0 and freeze["status"] == "PASS"
        assert all(s["value"] == "0.26.1" for s in derived(trace, "identity_sources"))
        return
    assert code == 2
    assert freeze["blocker"] == blocker
    assert "0.25.0" not in freeze["blocker"] and "0.24.0" not in freeze["blocker"]  # history is no source
    assert all(statuses(trace)[p] == "SKIPPED" for p in PLANNING[1:])


# --- implementation and final validation ------------------------------------------------------------

def test_implementation_passes_on_the_upgraded_plugin(upgraded: fx.PluginRepo, upstream: fx.VllmRepo,
                                                      evidence: Path, tmp_path: Path) -> None:
    machine = fx.machine_facts(2)
    repos = (upgraded.path, upstream.path)
    sets = (f"vllm_src={upstream.path}", "target_ref=v0.27.0", f"afd_base={upgraded.base_sha}",
            f"python={fx.STABLE_PYTHON}", f"evidence_dir={evidence}", "gpu_validation=true",
            *_results(evidence, upgraded, machine["gpu"]))
    facts = with_machine(collect(upgraded.path, "implementation", tmp_path / "facts.json", *sets, repos=repos,
                                 may_fail=frozenset(machine)), machine)
    code, trace = evaluate(upgraded.path, "implementation", tmp_path / "out", *sets, facts=facts, repos=repos)
    assert code == 0, {p["phase"]: p["blocker"] for p in trace["phases"] if p["status"] != "PASS"}
    assert set(statuses(trace).values()) == {"PASS"}
    assert trace["verdict"]["id"] == "gpu_validated"
    # The inventory and the impact matrix are read at afd_base: the rows the architecture review classified.
    assert [(r["upstream"], r["status"], r["change"]) for r in derived(trace, "impact_matrix")] == fx.IMPACT_ROWS
    assert derived(trace, "current_version") == "0.26.1"
    assert derived(trace, "stale_vllm_annotations") == []
    changed = check(trace, "IMPLEMENT_ATOMIC_ADAPTATIONS", "changes_within_plan")
    assert changed["result"] == "SATISFIED"
    assert phase(trace, "CAPTURE_LESSONS_AND_REPORT")["next_allowed_action"] == (
        f"publish the completion report; the lesson {fx.NEW_LESSON} is committed")


def test_final_validation_on_the_frozen_revision(afd_repos: fx.FixtureRepos, upstream: fx.VllmRepo, evidence: Path,
                                                 tmp_path: Path) -> None:
    upgraded = afd_repos.copy_plugin(tmp_path / "afd-plugin", post=True)  # its README is edited below
    machine = fx.machine_facts(2)
    repos = (upgraded.path, upstream.path)
    sets = (f"vllm_src={upstream.path}", "target_ref=v0.27.0", f"afd_base={upgraded.base_sha}",
            f"python={fx.STABLE_PYTHON}", f"evidence_dir={evidence}", *_results(evidence, upgraded, machine["gpu"]))
    facts = with_machine(collect(upgraded.path, "final-validation", tmp_path / "facts.json", *sets, repos=repos,
                                 may_fail=frozenset(machine)), machine)
    code, trace = evaluate(upgraded.path, "final-validation", tmp_path / "out", *sets, facts=facts, repos=repos)
    assert code == 0, {p["phase"]: p["blocker"] for p in trace["phases"] if p["status"] != "PASS"}
    assert trace["verdict"]["id"] == "gpu_validated"
    assert [statuses(trace)[p] for p in ["FREEZE_IDENTITY", "STATIC_AND_UNIT_GATE", *GPU_AND_AFTER]] == ["PASS"] * 8
    # The documentation gate judged the GPU and general claims; the NPU guide still names 0.26.1.
    docs = check(trace, "DOCUMENTATION_REFRESH_GATE", "no_stale_version_mentions")
    assert docs["result"] == "SATISFIED"
    claims = json.loads(facts.read_text())["facts"]["doc_claims"]["value"]["claims"]
    assert {(c["site"], c["release"]) for c in claims if c["scope"] == "npu"} == {
        ("README.md:15", "0.26"), ("README.md:36", "0.26.1"), ("docs/npu/user-guide.md:3", "0.26.1")}
    assert check(trace, "TARGET_NATIVE_GPU_CONTROL", "nvcc_matches_torch_cuda")["result"] == "NOT_APPLICABLE"

    # Without the machine facts this runner has no NVML and no target interpreter: final validation
    # blocks on them (never UNKNOWN), and an uncommitted edit is named too.
    readme = upgraded.path / "README.md"
    readme.write_text(readme.read_text() + "\nlocal note\n")
    code, trace = evaluate(upgraded.path, "final-validation", tmp_path / "out2", *sets, repos=repos)
    assert code == 2
    freeze = phase(trace, "FREEZE_IDENTITY")
    assert freeze["status"] == "BLOCKED"
    assert check(trace, "FREEZE_IDENTITY", "plugin_frozen")["message"] == (
        f"AFD checkout {upgraded.path} is not frozen at {upgraded.head_sha}: uncommitted changes in README.md")
    assert check(trace, "FREEZE_IDENTITY", "target_stack_recorded")["outcome"] == "BLOCKED"
    assert [c["id"] for c in phase_checks(freeze) if c["result"] == "UNKNOWN" and c["outcome"] is None] == []
    assert all(statuses(trace)[p] == "SKIPPED" for p in ["STATIC_AND_UNIT_GATE", *GPU_AND_AFTER])
