"""The flagship's planning audit on partial clones of the real afd-plugin.

Two clones made from a local bare copy (`uploadpack.allowFilter`): `--filter=blob:none` (the
store holds only the blobs the checkout of HEAD fetched) and `--filter=blob:limit=300k` with a
sparse checkout that leaves out the plugin's one NPU wheel (so HEAD's wheel blob is absent too).
A planning audit without `afd_base` reads HEAD only, whose needed blobs both clones have: it
must collect the same facts and reach the same phase statuses as the full clone, fetch nothing
and write nothing. With `afd_base` at an older commit the blobs it needs are absent: a located
`git.object_missing` (path and revision), never a crash.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from policyrun.cli import main
from tests.gitfixtures import git_dir_files
from tests.real.conftest import git

WHEEL = "afd_plugin/connectors/npu/bin/umdk_cam_op_lib-209.0.0b1-cp312-cp312-linux_aarch64.whl"
# Facts of the AFD checkout that read blobs or list files (identity, inventory, diff).
AUDIT_FACTS = ["plugin_head", "vllm_pins", "version_constants", "doc_claims", "base_pins", "base_constants",
               "patch_markers", "patch_package", "plugin_imports", "patched_symbols", "native_sources",
               "lessons_files", "base_lessons", "worktree_markers", "vllm_current", "vllm_target", "vllm_diff",
               "vllm_history", "current_toolchain", "target_toolchain"]


@pytest.fixture(scope="module")
def clones(afd_repo: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    base = tmp_path_factory.mktemp("partial")
    bare = base / "bare.git"
    git(base, "clone", "-q", "--bare", str(afd_repo), str(bare))
    git(bare, "config", "uploadpack.allowFilter", "true")
    git(base, "clone", "-q", "--filter=blob:none", f"file://{bare}", str(base / "blob-none"))
    sparse = base / "sparse"
    git(base, "clone", "-q", "--filter=blob:limit=300k", "--no-checkout", f"file://{bare}", str(sparse))
    git(sparse, "sparse-checkout", "set", "--no-cone", "/*", f"!/{WHEEL}")
    git(sparse, "checkout", "-q", "main")
    return {"full": afd_repo, "blob-none": base / "blob-none", "sparse": sparse}


def _absent(repo: Path, name: str) -> bool:
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("GIT_")}, "GIT_ALLOW_PROTOCOL": ""}
    return subprocess.run(["git", "cat-file", "-e", name], cwd=repo, env=env, capture_output=True).returncode != 0


def _run(repo: Path, vllm: Path, out: Path, monkeypatch: pytest.MonkeyPatch, *extra: str) -> tuple[dict[str, Any],
                                                                                                   dict[str, Any]]:
    """(facts, trace) of a planning audit of `repo`."""
    monkeypatch.chdir(repo)
    args = ["upgrade-gpu-version", "--mode", "planning-audit", "--set", f"vllm_src={vllm}",
            "--set", "target_ref=v0.27.0", *extra]
    out.mkdir(parents=True, exist_ok=True)
    assert main(["collect", *args, "-o", str(out / "facts.json")]) in (0, 2)
    code = main(["evaluate", *args, "--facts", str(out / "facts.json"), "--out", str(out), "-q"])
    trace = json.loads((out / "trace.json").read_text())
    assert code == trace["exit_code"]
    return json.loads((out / "facts.json").read_text())["facts"], trace


def _comparable(fact: dict[str, Any], root: Path) -> Any:
    """A fact's value (or error code) with the clone's own path written `<root>`."""
    shown = json.dumps(fact.get("value"), sort_keys=True).replace(str(root), "<root>")
    return json.loads(shown), (fact.get("error") or {}).get("code")


@pytest.mark.parametrize("kind", ["blob-none", "sparse"])
def test_a_partial_clone_plans_exactly_as_the_full_clone(clones: dict[str, Path], vllm_repo: Path, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    clone = clones[kind]
    if kind == "blob-none":  # the clone lacks what it should
        assert _absent(clone, f"{git(clone, 'rev-parse', 'HEAD~5').strip()}:pyproject.toml")
    else:
        assert _absent(clone, f"HEAD:{WHEEL}") and not (clone / WHEEL).exists()
    before = git_dir_files(clone / ".git")
    full_facts, full_trace = _run(clones["full"], vllm_repo, tmp_path / "full", monkeypatch)
    facts, trace = _run(clone, vllm_repo, tmp_path / kind, monkeypatch)
    for pid in AUDIT_FACTS:
        assert _comparable(facts[pid], clone) == _comparable(full_facts[pid], clones["full"]), pid
    assert [(p["phase"], p["status"]) for p in trace["phases"]] == [
        (p["phase"], p["status"]) for p in full_trace["phases"]]
    statuses = {p["phase"]: p["status"] for p in trace["phases"]}
    assert statuses["FREEZE_IDENTITY"] == statuses["INVENTORY_AFD_CONTRACTS"] == statuses["DIFF_VLLM"] == "PASS"
    assert git_dir_files(clone / ".git") == before  # nothing fetched, nothing written


def test_an_older_afd_base_in_a_blob_none_clone_is_a_located_object_missing(
        clones: dict[str, Path], vllm_repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    clone = clones["blob-none"]
    older = git(clone, "rev-parse", "HEAD~5").strip()
    before = git_dir_files(clone / ".git")
    facts, trace = _run(clone, vllm_repo, tmp_path / "older", monkeypatch, "--set", f"afd_base={older}")
    for pid in ["base_pins", "base_constants", "patch_markers", "patch_package"]:
        error = facts[pid]["error"]
        assert error["code"] == "git.object_missing", (pid, error)
        assert f" at {older[:12]} (blob " in error["message"] and "never fetches" in error["message"]
        path = error["message"].split(" at ")[0]
        assert git(clone, "ls-tree", "--name-only", older, "--", path).strip() == path  # a real file of that commit
    freeze = next(p for p in trace["phases"] if p["phase"] == "FREEZE_IDENTITY")
    assert freeze["status"] == "BLOCKED" and "git.object_missing" in freeze["blocker"]
    assert "probe.crashed" not in json.dumps(facts)
    assert git_dir_files(clone / ".git") == before
