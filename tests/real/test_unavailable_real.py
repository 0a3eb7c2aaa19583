"""Item 13 on a second real plugin: a value that could not be computed never lets a phase PASS.

The bart-plugin (corpus `bart-plugin.bundle`) is planned by the flagship through an overlay, its
vLLM pinned exactly in the test clone. Its DIFF_VLLM now PASSes honestly: the impact matrix is
computed (the plugin marks no patches, and a rulebook for any plugin no longer needs markers to
build it). The property is then checked on the same real facts with one fact taken away: the
target toolchain, which no DIFF_VLLM evidence reads but its PASS next action lists ("target
toolchain changes: ..."). Its evidence still holds, so before item 13 the phase PASSed and told
the agent "target toolchain changes: <?...: unavailable>"; it must be BLOCKED, naming the value
and why.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from policyrun.cli import main
from tests.real.conftest import _git, copy_repo

OVERLAY = """\
policyrun: 1
name: bart-plugin-upgrade
extends: upgrade-gpu-version
vars:
  doc_globs: ["docs/**/*.md"]
phases:
  - id: INVENTORY_AFD_CONTRACTS
    disable:
      - {id: pin_matches_runtime_check, reason: "the bart-plugin has no version constant nor runtime check"}
  - id: DIFF_VLLM
    disable:
      - {id: imports_resolved_at_current, reason: "the bart-plugin imports some vLLM names inside try/except ImportError fallbacks"}
"""


@pytest.fixture(scope="module")
def bart_trace(bart_repo: Path, vllm_repo: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    base = tmp_path_factory.mktemp("bart-pinned")
    repo = copy_repo(bart_repo, base / "bart-plugin")
    for name in ("pyproject.toml", "setup.py"):
        path = repo / name
        path.write_text(path.read_text().replace("vllm>=0.24.0", "vllm==0.26.0"))
    _git("-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-qam", "pin vLLM exactly", cwd=repo)
    overlay = base / "bart-overlay.yaml"
    overlay.write_text(OVERLAY)
    out = base / "out"
    mp = pytest.MonkeyPatch()
    try:
        mp.chdir(repo)
        code = main(["evaluate", str(overlay), "--mode", "planning-audit", "--set", f"vllm_src={vllm_repo}",
                     "--set", "target_ref=v0.27.0", "--out", str(out), "-q", "--keep-facts"])
    finally:
        mp.undo()
    trace = json.loads((out / "trace.json").read_text())
    assert code == trace["exit_code"] == 2
    return trace


def test_diff_vllm_passes_with_the_matrix_computed(bart_trace: dict) -> None:
    matrix = next(d for d in bart_trace["derived"] if d["id"] == "impact_matrix")
    assert matrix["error"] is None
    diff = {p["phase"]: p for p in bart_trace["phases"]}["DIFF_VLLM"]
    assert diff["status"] == "PASS", diff
    assert "classify all " in diff["next_allowed_action"] and "unavailable>" not in diff["next_allowed_action"]


@pytest.fixture(scope="module")
def without_toolchain(bart_trace: dict, vllm_repo: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    base = tmp_path_factory.getbasetemp()
    out = next(base.glob("bart-pinned*/out"))
    facts = json.loads((out / "facts.json").read_text())
    fact = facts["facts"]["target_toolchain"]
    facts["facts"]["target_toolchain"] = {"value": None, "provenance": fact["provenance"],
                                          "error": {"code": "git.object_missing", "message": "taken away by the test"}}
    broken = out.parent / "facts-without-toolchain.json"
    broken.write_text(json.dumps(facts))
    again = out.parent / "again"
    code = main(["evaluate", str(out.parent / "bart-overlay.yaml"), "--mode", "planning-audit", "--facts", str(broken),
                 "--set", f"vllm_src={vllm_repo}", "--set", "target_ref=v0.27.0", "--out", str(again), "-q"])
    trace = json.loads((again / "trace.json").read_text())
    assert code == trace["exit_code"] == 2
    return trace


def test_diff_vllm_is_not_pass_with_placeholders(without_toolchain: dict) -> None:
    phases = {p["phase"]: p for p in without_toolchain["phases"]}
    assert phases["INVENTORY_AFD_CONTRACTS"]["status"] == "PASS"
    diff = phases["DIFF_VLLM"]
    assert diff["status"] == "BLOCKED", diff
    # Its evidence held: what blocks it is the next action that needs the value, named with its cause.
    assert all(c["outcome"] is None for c in diff["evidence"] if c["kind"] == "evidence")
    assert "derived.toolchain_changes" in diff["blocker"] and "facts.target_toolchain" in diff["blocker"]
    assert "unavailable>" not in diff["next_allowed_action"]
    # Nothing after it runs on the hole, and no PASS anywhere carries a placeholder.
    assert phases["ARCHITECTURE_GATE"]["status"] == "SKIPPED"
    for p in without_toolchain["phases"]:
        if p["status"] == "PASS":
            assert "unavailable>" not in p["next_allowed_action"], p
