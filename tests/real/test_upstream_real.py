"""Issue 18 items 1, 2 and 9 on the real v0.27.0 upgrade: the code must follow upstream.

Each test makes one realistic mistake on top of the corpus's complete upgrade (tests/real/upgrade.py)
and asserts the gate that refuses it and a message naming the file and line: a patch of upstream
added without the plugin's markers, a replacement left on the old upstream signature, an upstream
name the target removed still used through a module attribute, a copy of an upstream method whose
body changed left unported. The complete upgrade passes (tests/real/test_upgrade_real.py); its
unmarked patches that predate the upgrade are listed, never blocking.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.real.conftest import copy_repo, git
from tests.real.upgrade import (Upgrade, checks, edit_and_commit, evaluate_upgrade, git_env, gpu_evidence, stamp_commit,
                                statuses)

ENGINE_CORE = "afd_plugin/compat/patches/engine_core.py"
RUNNER = "afd_plugin/v1/worker/attention_model_runner.py"
ASYNC_DP = "afd_plugin/compat/patches/async_dp_engine.py"
DEEPSEEK = "afd_plugin/model_executor/models/deepseek_v2.py"


def _mistake(up: Upgrade, tmp: Path) -> Upgrade:
    """A copy of the upgraded checkout to make one mistake in (the session's fixture stays intact)."""
    repo = copy_repo(up.repo, tmp / "afd")
    return Upgrade(repo=repo, vllm=up.vllm, base=up.base, head=up.head, evidence=up.evidence, shas=up.shas,
                   unit_junit=up.unit_junit, unit_junit_nonpu=up.unit_junit_nonpu, e2e_junit=up.e2e_junit,
                   accuracy=up.accuracy)


def _append(repo: Path, path: str, text: str, message: str) -> int:
    """Append `text` to `path`, commit, and return the line `text` starts on."""
    file = repo / path
    old = file.read_text()
    file.write_text(old + text)
    git_env(repo, "commit", "-qam", message)
    return old.count("\n") + 1


def _line_of(repo: Path, path: str, needle: str) -> int:
    lines = (repo / path).read_text().split("\n")
    return next(i for i, line in enumerate(lines, 1) if needle in line)


def _implementation(up: Upgrade, tmp: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    return evaluate_upgrade(up, "implementation", tmp / "out", monkeypatch)


# --- item 1: patches are found by what code does ----------------------------------------------------

def test_the_complete_upgrade_lists_its_preexisting_unmarked_patches(upgraded_afd: Upgrade, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    trace = _implementation(upgraded_afd, tmp_path, monkeypatch)
    assert statuses(trace)["IMPLEMENT_ATOMIC_ADAPTATIONS"] == "PASS"
    for phase in ("INVENTORY_AFD_CONTRACTS", "IMPLEMENT_ATOMIC_ADAPTATIONS"):
        gap = checks(trace, phase)["code_patches_marked" if phase.startswith("INV") else "preexisting_patch_gaps"]
        assert gap["result"] == "UNKNOWN"
        # the real plugin's own: the metadata-provider wrapper and the UBatchWrapper swap, at afd_base
        assert "afd_plugin/model_executor/models/forward_context.py:84 wrap of " \
               "vllm.forward_context.create_forward_context (missing: markers)" in gap["message"]
        assert "afd_plugin/v1/worker/attention_model_runner.py:699 assign of " \
               "vllm.v1.worker.gpu_model_runner.UBatchWrapper" in gap["message"]
    assert checks(trace, "IMPLEMENT_ATOMIC_ADAPTATIONS")["new_patches_marked"]["result"] == "SATISFIED"


def test_a_new_unmarked_setattr_patch_fails_implementation_and_the_final_audit(
        upgraded_afd: Upgrade, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    up = _mistake(upgraded_afd, tmp_path)
    _append(up.repo, ENGINE_CORE, (
        "\n\ndef _afd_run_busy_loop(self):\n"
        "    return run_busy_loop(self)\n\n\n"
        "setattr(core_module.EngineCoreProc, \"run_busy_loop\", _afd_run_busy_loop)\n"),
        "compat: route EngineCoreProc's busy loop through AFD")
    site = f"{ENGINE_CORE}:{_line_of(up.repo, ENGINE_CORE, 'setattr(core_module.EngineCoreProc')}"
    trace = _implementation(up, tmp_path, monkeypatch)
    assert statuses(trace)["IMPLEMENT_ATOMIC_ADAPTATIONS"] == "FAIL"
    found = checks(trace, "IMPLEMENT_ATOMIC_ADAPTATIONS")["new_patches_marked"]
    assert found["result"] == "UNSATISFIED"
    assert f"{site} setattr of vllm.v1.engine.core.EngineCoreProc.run_busy_loop (missing: markers)" in found["message"]
    # final validation of that revision, with GPU evidence for it: the audit refuses it too
    head = git(up.repo, "rev-parse", "HEAD").strip()
    # Evidence belongs to the audited commit: the same runs, recorded for the new HEAD.
    e2e, accuracy = gpu_evidence(tmp_path, head)
    unit = stamp_commit(up.unit_junit, tmp_path / "unit-target.xml", head)
    final = evaluate_upgrade(up, "final-validation", tmp_path / "final", monkeypatch, accuracy_results=accuracy,
                             e2e_junit=e2e, unit_junit=unit)
    assert statuses(final)["FINAL_AUDIT"] == "FAIL", statuses(final)
    audit = checks(final, "FINAL_AUDIT")["code_patches_marked"]
    assert site in audit["message"] and "vllm.v1.engine.core.EngineCoreProc.run_busy_loop" in audit["message"]


def test_a_new_unmarked_method_replacement_fails_implementation(upgraded_afd: Upgrade, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    up = _mistake(upgraded_afd, tmp_path)
    _append(up.repo, RUNNER, (
        "\n\ndef _afd_sample_tokens(self, *args, **kwargs):\n"
        "    return None\n\n\n"
        "gpu_model_runner.GPUModelRunner.sample_tokens = _afd_sample_tokens\n"),
        "worker: skip sampling on Attention ranks")
    trace = _implementation(up, tmp_path, monkeypatch)
    found = checks(trace, "IMPLEMENT_ATOMIC_ADAPTATIONS")["new_patches_marked"]
    assert found["result"] == "UNSATISFIED"
    line = _line_of(up.repo, RUNNER, ".sample_tokens = _afd_sample_tokens")
    assert f"{RUNNER}:{line} method_replace of vllm.v1.worker.gpu_model_runner.GPUModelRunner.sample_tokens " \
           "(missing: markers)" in found["message"]


# --- item 2: what planning found is checked again after the change ------------------------------------

def test_reverting_the_launch_core_engines_signature_fails_naming_both_signatures(
        upgraded_afd: Upgrade, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Patch 0003 dropped `num_api_servers`; putting it back is the replacement no longer matching."""
    up = _mistake(upgraded_afd, tmp_path)
    edit_and_commit(up.repo, ASYNC_DP, "    addresses: EngineZmqAddresses,\n) -> Iterator[",
                    "    addresses: EngineZmqAddresses,\n    num_api_servers: int = 1,\n) -> Iterator[",
                    "compat: keep num_api_servers for older callers")
    trace = _implementation(up, tmp_path, monkeypatch)
    assert statuses(trace)["IMPLEMENT_ATOMIC_ADAPTATIONS"] == "FAIL"
    message = checks(trace, "IMPLEMENT_ATOMIC_ADAPTATIONS")["replacements_match_target"]["message"]
    for target in ("vllm.v1.engine.utils.launch_core_engines", "vllm.v1.engine.core_client.launch_core_engines"):
        assert ("launch_core_engines(vllm_config, executor_class, log_stats, addresses, num_api_servers=1) "
                f"does not match {target}(vllm_config: VllmConfig, executor_class: type[Executor], log_stats: bool, "
                "addresses: EngineZmqAddresses) -> ") in message
    assert f"{ASYNC_DP}:" in message


def test_a_name_removed_at_the_target_used_through_a_module_attribute_fails(
        upgraded_afd: Upgrade, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    up = _mistake(upgraded_afd, tmp_path)
    line = _append(up.repo, DEEPSEEK, "\n\n# kept for the NPU factory refresh\n_LEGACY_MOE = fused_moe.FusedMoE\n",
                   "model: keep the legacy MoE factory name")
    trace = _implementation(up, tmp_path, monkeypatch)
    assert statuses(trace)["IMPLEMENT_ATOMIC_ADAPTATIONS"] == "FAIL"
    found = checks(trace, "IMPLEMENT_ATOMIC_ADAPTATIONS")["upstream_names_present"]
    assert found["message"] == (f"vllm.model_executor.layers.fused_moe.FusedMoE used at {DEEPSEEK}:{line + 3} "
                                "is gone at v0.27.0")


def test_a_removed_name_read_through_getattr_fails(upgraded_afd: Upgrade, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    up = _mistake(upgraded_afd, tmp_path)
    line = _append(up.repo, DEEPSEEK, "\n\n_LEGACY_MOE = getattr(fused_moe, \"FusedMoE\", None)\n",
                   "model: look the legacy factory up lazily")
    trace = _implementation(up, tmp_path, monkeypatch)
    found = checks(trace, "IMPLEMENT_ATOMIC_ADAPTATIONS")["upstream_names_present"]
    assert found["result"] == "UNSATISFIED"
    assert f"vllm.model_executor.layers.fused_moe.FusedMoE used at {DEEPSEEK}:{line + 2} is gone at v0.27.0" \
        in found["message"]


# --- item 9: copied and patched upstream code that changed upstream ----------------------------------

def _unport_engine_core(up: Upgrade, docs_only: bool) -> None:
    """The EngineCore copies as they were at afd_base (patch 0002 not done), optionally with only their
    docstrings and comments claiming the port."""
    text = git(up.repo, "show", f"{up.base}:{ENGINE_CORE}")
    if docs_only:
        text = text.replace("# Patch reason:", "# Ported to vLLM v0.27.0.\n# Patch reason:", 1)
        text = text.replace('    """Core busy loop of the EngineCore."""',
                            '    """Core busy loop of the EngineCore, as of vLLM v0.27.0."""', 1)
    (up.repo / ENGINE_CORE).write_text(text)
    git_env(up.repo, "commit", "-qam", "compat: EngineCore copies" + (" (docs)" if docs_only else ""))


@pytest.mark.parametrize("docs_only", [False, True], ids=["reverted", "docstrings-and-comments-only"])
def test_unported_engine_core_copies_fail_naming_each(upgraded_afd: Upgrade, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch, docs_only: bool) -> None:
    up = _mistake(upgraded_afd, tmp_path)
    _unport_engine_core(up, docs_only)
    trace = _implementation(up, tmp_path, monkeypatch)
    assert statuses(trace)["IMPLEMENT_ATOMIC_ADAPTATIONS"] == "FAIL"
    message = checks(trace, "IMPLEMENT_ATOMIC_ADAPTATIONS")["changed_bodies_ported"]["message"]
    for symbol in ("EngineCore.__init__", "EngineCore._initialize_kv_caches", "EngineCoreProc.run_busy_loop",
                   "DPEngineCoreProc.run_busy_loop"):
        assert f"vllm.v1.engine.core.{symbol} (target body " in message
    line = _line_of(up.repo, ENGINE_CORE, "core_module.EngineCore.__init__ =")
    assert f"unchanged replacement {ENGINE_CORE}:{line}" in message
    # the bodies the upgrade did port elsewhere are not named
    assert "launch_core_engines" not in message and "_dummy_run" not in message
