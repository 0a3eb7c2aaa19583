"""The flagship's later gates on a real upgrade: the afd-plugin tip moved to vLLM v0.27.0 by the
corpus's seven commits (tests/real/upgrade.py builds it), evaluated in implementation and final
validation with the machine facts of a two-H200 node injected (no GPU here).

The complete upgrade must pass every gate of both modes (no false FAIL); an unfinished one, such
as the tip with only the version bumped and its annotations rewritten by `sed`, must not.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.real.conftest import git
from tests.real.upgrade import (
    CORPUS_SHAS,
    SYMBOL_ROWS,
    DOC_FILES,
    Upgrade,
    build_upgrade,
    checks,
    evaluate_upgrade,
    git_env,
    phase,
    rewrite_attestation,
    sed_annotations,
    statuses,
)

EARLIER = ("FREEZE_IDENTITY", "INVENTORY_AFD_CONTRACTS", "DIFF_VLLM", "ARCHITECTURE_GATE", "PRODUCE_STAGED_PLAN")
GPU_PHASES = ("TARGET_NATIVE_GPU_CONTROL", "GPU_BASIC_E2E_GATE", "GPU_ACCURACY_GATE", "DOCUMENTATION_REFRESH_GATE",
              "FINAL_AUDIT", "CAPTURE_LESSONS_AND_REPORT")


def _why(trace: dict[str, Any]) -> str:
    return "; ".join(f"{p['phase']}={p['status']}: {p.get('blocker')}" for p in trace["phases"]
                     if p["status"] not in ("PASS", "SKIPPED"))


@pytest.fixture(scope="module")
def implementation(upgraded_afd: Upgrade, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    mp = pytest.MonkeyPatch()
    try:
        return evaluate_upgrade(upgraded_afd, "implementation", tmp_path_factory.mktemp("impl"), mp)
    finally:
        mp.undo()


@pytest.fixture(scope="module")
def final(upgraded_afd: Upgrade, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    mp = pytest.MonkeyPatch()
    try:
        return evaluate_upgrade(upgraded_afd, "final-validation", tmp_path_factory.mktemp("final"), mp)
    finally:
        mp.undo()


# --- the fixture is the corpus's upgrade --------------------------------------------------------------

def test_fixture_is_the_corpus_upgrade_on_the_tip(upgraded_afd: Upgrade, afd_repo: Path) -> None:
    up = upgraded_afd
    assert up.base == git(afd_repo, "rev-parse", "HEAD").strip()
    subjects = git(up.repo, "log", "--format=%s", f"{up.base}..HEAD").splitlines()[::-1]
    # the corpus's seven, then the NPU region's comment fields, the annotations' commits re-addressed to this
    # clone's vLLM, and the claims
    assert len(subjects) == 10
    assert subjects[0] == "compat: pin and require vLLM v0.27.0"
    assert subjects[-1].startswith("docs: claim vLLM v0.27.0")
    assert 'vllm==0.27.0' in (up.repo / "pyproject.toml").read_text()
    assert git(up.repo, "status", "--porcelain") == ""  # the evidence lives beside the clone, not in it
    for name in ("architecture.yaml", "plan.yaml"):
        text = (up.evidence / name).read_text()
        assert up.shas["current"] in text and up.shas["target"] in text
        assert CORPUS_SHAS["current"] not in text and CORPUS_SHAS["target"] not in text
    plan = yaml.safe_load((up.evidence / "plan.yaml").read_text())
    assert plan["stages"][-1]["files"] == DOC_FILES


def test_the_upgrade_is_reproducible(upgraded_afd: Upgrade, afd_repo: Path, vllm_repo: Path, corpus: Path,
                                     tmp_path: Path) -> None:
    """Fixed identity and dates: the same HEAD in every session (evidence can name it)."""
    again = build_upgrade(afd_repo, vllm_repo, corpus, tmp_path / "again")
    assert again.head == upgraded_afd.head


# --- the complete upgrade passes ------------------------------------------------------------------------

def test_implementation_reaches_implemented_gpu_unverified(implementation: dict[str, Any]) -> None:
    got = statuses(implementation)
    for pid in (*EARLIER, "IMPLEMENT_ATOMIC_ADAPTATIONS", "STATIC_AND_UNIT_GATE"):
        assert got[pid] == "PASS", _why(implementation)
    assert all(got[p] == "SKIPPED" for p in GPU_PHASES)
    assert implementation["verdict"]["id"] == "implemented_gpu_unverified"
    assert implementation["exit_code"] == 0


def test_final_validation_with_gpu_evidence_is_gpu_validated(final: dict[str, Any], upgraded_afd: Upgrade) -> None:
    got = statuses(final)
    assert got["FREEZE_IDENTITY"] == "PASS", _why(final)
    for pid in ("STATIC_AND_UNIT_GATE", *GPU_PHASES):
        assert got[pid] == "PASS", _why(final)
    assert final["verdict"]["id"] == "gpu_validated", _why(final)
    assert upgraded_afd.head in final["verdict"]["summary"]
    assert final["exit_code"] == 0


def test_implementation_with_gpu_validation_needs_the_lesson(upgraded_afd: Upgrade, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Implementation with --set gpu_validation=true runs every phase; the only thing the corpus's
    upgrade lacks is the committed lessons file, named in the blocker."""
    trace = evaluate_upgrade(upgraded_afd, "implementation", tmp_path / "out", monkeypatch, gpu_validation=True)
    got = statuses(trace)
    failing = {p: s for p, s in got.items() if s not in ("PASS",)}
    assert failing == {"CAPTURE_LESSONS_AND_REPORT": "FAIL"}, _why(trace)
    assert "references/" in phase(trace, "CAPTURE_LESSONS_AND_REPORT")["blocker"]


# --- an unfinished upgrade does not pass -----------------------------------------------------------------

@pytest.fixture(scope="module")
def sed_only(afd_repo: Path, vllm_repo: Path, upgraded_afd: Upgrade, tmp_path_factory: pytest.TempPathFactory
             ) -> Upgrade:
    """The tip with only pins, lock and constant bumped and every annotation rewritten by `sed`,
    presented with the real upgrade's attestations: none of the four code adaptations is done."""
    dest = tmp_path_factory.mktemp("sed")
    repo = dest / "afd"
    shutil.copytree(afd_repo, repo, symlinks=True)
    for path in git(repo, "ls-files").split("\n"):
        file = repo / path
        if not path or not file.is_file() or path.startswith("tests/"):
            continue
        text = file.read_text(errors="surrogateescape")
        new = text
        if path == "pyproject.toml":
            new = new.replace("vllm==0.26.0", "vllm==0.27.0")
        if path == "uv.lock":
            new = new.replace('name = "vllm"\nversion = "0.26.0"', 'name = "vllm"\nversion = "0.27.0"')
            new = re.sub(r'(name = "vllm", [^}]*specifier = "==)0\.26\.0"', r'\g<1>0.27.0"', new)
        if path == "afd_plugin/compat/vllm.py":
            new = new.replace('= "0.26.0"', '= "0.27.0"')
        if path.endswith(".py"):
            new = sed_annotations(new)
        if new != text:
            file.write_text(new, errors="surrogateescape")
    git_env(repo, "commit", "-qam", "Move to vLLM 0.27.0")
    evidence = dest / "evidence"
    shutil.copytree(upgraded_afd.evidence, evidence)
    head = git(repo, "rev-parse", "HEAD").strip()
    return Upgrade(repo=repo, vllm=vllm_repo, base=upgraded_afd.base, head=head, evidence=evidence,
                   shas=upgraded_afd.shas, unit_junit=upgraded_afd.unit_junit,
                   unit_junit_nonpu=upgraded_afd.unit_junit_nonpu, e2e_junit=upgraded_afd.e2e_junit,
                   accuracy=upgraded_afd.accuracy)


def test_sed_only_upgrade_does_not_pass_implementation(sed_only: Upgrade, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    trace = evaluate_upgrade(sed_only, "implementation", tmp_path / "out", monkeypatch)
    assert statuses(trace)["FREEZE_IDENTITY"] == "PASS", _why(trace)
    assert statuses(trace)["IMPLEMENT_ATOMIC_ADAPTATIONS"] == "FAIL", _why(trace)
    assert trace["verdict"]["id"] != "implemented_gpu_unverified"
    found = checks(trace, "IMPLEMENT_ATOMIC_ADAPTATIONS")
    # the copies of EngineCore methods patch 0002 ports, and the model-runner override of 0005
    unported = found["changed_bodies_ported"]["message"]
    for name in ("vllm.v1.engine.core.EngineCore.__init__", "vllm.v1.engine.core.EngineCoreProc.run_busy_loop",
                 "vllm.v1.engine.core.EngineCore._initialize_kv_caches",
                 "vllm.v1.worker.gpu_model_runner.GPUModelRunner._dummy_run"):
        assert name in unported
    assert "afd_plugin/compat/patches/engine_core.py:628" in unported
    # patch 0003's signature, with both signatures named
    mismatch = found["replacements_match_target"]["message"]
    assert "afd_plugin/compat/patches/async_dp_engine.py:394 launch_core_engines(vllm_config, executor_class, " \
        "log_stats, addresses, num_api_servers=1) does not match vllm.v1.engine.utils.launch_core_engines(" in mismatch
    # patch 0004's rename, used through `fused_moe.FusedMoE`
    gone = found["upstream_names_present"]["message"]
    assert "vllm.model_executor.layers.fused_moe.FusedMoE used at afd_plugin/model_executor/models/deepseek_v2.py:" \
        in gone and "is gone at v0.27.0" in gone


def test_sed_only_upgrade_reaches_the_implementation_gate(sed_only: Upgrade, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The xfail above fails for the right reason: everything before the gate passes on it."""
    trace = evaluate_upgrade(sed_only, "implementation", tmp_path / "out", monkeypatch)
    got = statuses(trace)
    assert all(got[p] == "PASS" for p in EARLIER), _why(trace)


def test_attestations_keep_their_rows(upgraded_afd: Upgrade, corpus: Path) -> None:
    """Only the SHAs were rewritten: every row and stage of the corpus's attestations is kept."""
    source = corpus / "afd-plugin-upgrade-0.27.0" / "evidence"
    arch = rewrite_attestation(source / "architecture.yaml", upgraded_afd.shas)
    written = yaml.safe_load((upgraded_afd.evidence / "architecture.yaml").read_text())
    # completed with the symbol-level rows (issue 18 items 2 and 9) after the corpus's own
    assert written["rows"][:len(arch["rows"])] == arch["rows"]
    assert [r["upstream"] for r in written["rows"][len(arch["rows"]):]] == SYMBOL_ROWS
    assert {k: v for k, v in written.items() if k != "rows"} == {k: v for k, v in arch.items() if k != "rows"}
    plan = yaml.safe_load((upgraded_afd.evidence / "plan.yaml").read_text())
    assert [s["id"] for s in plan["stages"]][:-1] == [
        s["id"] for s in rewrite_attestation(source / "plan.yaml", upgraded_afd.shas)["stages"]]
