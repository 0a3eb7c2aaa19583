"""Item 13 on a second real plugin: a value that could not be computed never lets a phase PASS.

The bart-plugin (corpus `bart-plugin.bundle`) has no patch markers, so the probe behind the
patched-symbol rows receives an empty symbol list and is refused, and the whole impact matrix has
no value. DIFF_VLLM's evidence all holds, but its PASS next action counts and lists the matrix's
rows: before, the phase PASSed and told the agent to "classify all <?…: unavailable> impact rows";
now it is BLOCKED, naming the value and why.

To run the flagship at all on this plugin, the test clone pins vLLM exactly (the tip pins a range,
which FREEZE_IDENTITY refuses as an identity) and an overlay states what differs: no support claims
in its README, no version constant or runtime check, and names imported inside `try/except
ImportError` fallbacks that resolve only on some releases.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from policyrun.cli import main
from tests.real.conftest import _git, corpus_dir

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
def bart_trace(vllm_repo: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    bundle = corpus_dir() / "bart-plugin.bundle"
    if not bundle.is_file():
        pytest.fail(f"real corpus not found: expected {bundle}", pytrace=False)
    base = tmp_path_factory.mktemp("bart")
    repo = base / "bart-plugin"
    _git("clone", "-q", str(bundle), str(repo))
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
                     "--set", "target_ref=v0.27.0", "--out", str(out), "-q"])
    finally:
        mp.undo()
    trace = json.loads((out / "trace.json").read_text())
    assert code == trace["exit_code"] == 2
    return trace


def test_the_impact_matrix_is_unavailable_on_the_bart_plugin(bart_trace: dict) -> None:
    # The premise: without patch markers the patched-symbol probe is refused, so the matrix has no value.
    matrix = next(d for d in bart_trace["derived"] if d["id"] == "impact_matrix")
    assert matrix["error"] is not None and "facts.patched_symbols" in matrix["error"]


def test_diff_vllm_is_not_pass_with_placeholders(bart_trace: dict) -> None:
    phases = {p["phase"]: p for p in bart_trace["phases"]}
    assert phases["INVENTORY_AFD_CONTRACTS"]["status"] == "PASS"
    diff = phases["DIFF_VLLM"]
    assert diff["status"] == "BLOCKED", diff
    # Its evidence held: what blocks it is the next action that needs the matrix, named with its cause.
    assert all(c["outcome"] is None for c in diff["evidence"] if c["kind"] == "evidence")
    assert "derived.impact_matrix" in diff["blocker"] and "facts.patched_symbols" in diff["blocker"]
    assert "unavailable>" not in diff["next_allowed_action"]
    # Nothing after it runs on the hole, and no PASS anywhere carries a placeholder.
    assert phases["ARCHITECTURE_GATE"]["status"] == "SKIPPED"
    for p in bart_trace["phases"]:
        if p["status"] == "PASS":
            assert "unavailable>" not in p["next_allowed_action"], p
