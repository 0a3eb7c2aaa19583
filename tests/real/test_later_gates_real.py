"""Single realistic mistakes on the real upgrade (issue 18 items 3, 5, 6, 7): each is the complete
corpus upgrade (`upgraded_afd`, which reaches gpu_validated) with one thing an engineer could leave
undone, and each asserts the gate that refuses it, a message naming file:line, and a next action
that names the artefact to change. Expected lines and SHAs are computed here from the files and
git, not taken from policyrun."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.real.conftest import copy_repo, git
from tests.real.upgrade import (DOCS_DATE, Upgrade, checks, evaluate_upgrade, git_env, gpu_evidence, phase,
                                stamp_commit, statuses)

RUNNER = "afd_plugin/v1/worker/attention_model_runner.py"
FFN_RUNNER = "afd_plugin/v1/worker/ffn_model_runner.py"
UBATCH = "afd_plugin/v1/worker/ubatch_wrapper.py"
NPU_WRAPPER = "afd_plugin/v1/worker/npu/npu_ubatch_wrapper.py"
CONNECTORS_README = "afd_plugin/connectors/README.md"
GPU_RECIPE = "recipe/gpu/P2pNcclAFDConnector/deepseek_v2_lite/README.md"
CONFIG_TEST = "tests/unit/compat/patches/test_config_validation.py"
UPSTREAM_V027 = "98945f69035af6035660609b04d7b4a34fcc94be"  # upstream's v0.27.0 commit: not in this vLLM source


def _line(repo: Path, path: str, needle: str) -> int:
    return next(n for n, text in enumerate((repo / path).read_text().splitlines(), 1) if needle in text)


def _mistake(up: Upgrade, where: Path, edits: list[tuple[str, str, str]], message: str) -> Upgrade:
    """The upgrade with one more commit making the edits, and GPU evidence for that commit."""
    where.mkdir(parents=True, exist_ok=True)
    repo = copy_repo(up.repo, where / "afd")
    for path, old, new in edits:
        file = repo / path
        text = file.read_text()
        assert old in text, (path, old)
        file.write_text(text.replace(old, new, 1))
    git_env(repo, "commit", "-qam", message, date=DOCS_DATE)
    head = git(repo, "rev-parse", "HEAD").strip()
    # Evidence belongs to the audited commit: the same runs, recorded for the new HEAD.
    e2e, accuracy = gpu_evidence(where, head)
    unit = stamp_commit(up.unit_junit, where / "unit-target.xml", head)
    return dataclasses.replace(up, repo=repo, head=head, e2e_junit=e2e, accuracy=accuracy, unit_junit=unit)


def _final(up: Upgrade, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, **inputs: Any) -> dict[str, Any]:
    return evaluate_upgrade(up, "final-validation", tmp_path / "final", monkeypatch, **inputs)


def _gates_before(trace: dict[str, Any], pid: str) -> None:
    order = ["FREEZE_IDENTITY", "STATIC_AND_UNIT_GATE", "TARGET_NATIVE_GPU_CONTROL", "GPU_BASIC_E2E_GATE",
             "GPU_ACCURACY_GATE", "DOCUMENTATION_REFRESH_GATE", "FINAL_AUDIT"]
    got = statuses(trace)
    for earlier in order[:order.index(pid)]:
        assert got[earlier] == "PASS", (earlier, phase(trace, earlier).get("blocker"))
    assert trace["verdict"]["id"] != "gpu_validated"


# --- item 3: annotations name the target completely ----------------------------------------------------

def test_a_commit_annotation_naming_the_old_release_fails_naming_both_commits(
        upgraded_afd: Upgrade, vllm_repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    current = git(vllm_repo, "rev-parse", "v0.26.0^{commit}").strip()
    target = git(vllm_repo, "rev-parse", "v0.27.0^{commit}").strip()
    up = _mistake(upgraded_afd, tmp_path / "m", [(RUNNER, f"# Commit: {target}", f"# Commit: {current}")],
                  "runner: copy from the old tree")
    line = _line(up.repo, RUNNER, f"# Commit: {current}")
    finding = (f"{RUNNER}:{line} names commit {current} = {current} (v0.26.0), not the target v0.27.0 = {target}")
    final = _final(up, tmp_path, monkeypatch)
    _gates_before(final, "FINAL_AUDIT")
    assert statuses(final)["FINAL_AUDIT"] == "FAIL"
    assert finding in phase(final, "FINAL_AUDIT")["blocker"]
    assert "report each annotation" in phase(final, "FINAL_AUDIT")["next_allowed_action"]
    # In implementation, the adaptation gate refuses it and says what to re-copy from where.
    impl = evaluate_upgrade(up, "implementation", tmp_path / "impl", monkeypatch)
    assert statuses(impl)["IMPLEMENT_ATOMIC_ADAPTATIONS"] == "FAIL", phase(impl, "IMPLEMENT_ATOMIC_ADAPTATIONS")
    assert finding in phase(impl, "IMPLEMENT_ATOMIC_ADAPTATIONS")["blocker"]
    assert f"re-copy each patched function from v0.27.0 ({target})" in \
        phase(impl, "IMPLEMENT_ATOMIC_ADAPTATIONS")["next_allowed_action"]


def test_a_docstring_annotation_on_the_old_release_fails_at_the_fields_own_line(
        upgraded_afd: Upgrade, vllm_repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = git(vllm_repo, "rev-parse", "v0.27.0^{commit}").strip()
    up = _mistake(upgraded_afd, tmp_path / "m",
                  [(NPU_WRAPPER, f"Upstream source: vLLM v0.27.0 commit {target[:12]},",
                    "Upstream source: vLLM v0.26.0 commit 568afb3a1,")], "npu: keep the old docstring")
    line = _line(up.repo, NPU_WRAPPER, "Upstream source: vLLM v0.26.0")
    docstring = _line(up.repo, NPU_WRAPPER, '"""Preserve the current Ascend model-output')
    assert line > docstring  # the field's own line, not the start of its docstring
    final = _final(up, tmp_path, monkeypatch)
    _gates_before(final, "FINAL_AUDIT")
    audit = phase(final, "FINAL_AUDIT")
    # the release is refused; the commit this vLLM source does not hold is unverifiable, never accepted
    assert statuses(final)["FINAL_AUDIT"] == "BLOCKED"
    assert f"{NPU_WRAPPER}:{line} 568afb3a1" in audit["blocker"]
    assert f"{NPU_WRAPPER}:{line} names vLLM 0.26.0, not 0.27.0" in " ".join(audit["blockers"])
    assert f"{NPU_WRAPPER}:{docstring} " not in " ".join(audit["blockers"])


def test_an_upstream_path_the_target_does_not_have_fails(upgraded_afd: Upgrade, vllm_repo: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    wrong = "vllm/v1/worker/ubatch_wrapper.py"
    assert git(vllm_repo, "ls-tree", "v0.27.0", "--", wrong) == ""  # no such file at the target
    up = _mistake(upgraded_afd, tmp_path / "m",
                  [(UBATCH, "# Upstream: vLLM v0.27.0, vllm/v1/worker/gpu_ubatch_wrapper.py",
                    f"# Upstream: vLLM v0.27.0, {wrong}")], "ubatch: annotate the plugin's own path")
    line = _line(up.repo, UBATCH, f"# Upstream: vLLM v0.27.0, {wrong}")
    final = _final(up, tmp_path, monkeypatch)
    _gates_before(final, "FINAL_AUDIT")
    assert statuses(final)["FINAL_AUDIT"] == "FAIL"
    assert f"{UBATCH}:{line} names {wrong}, which v0.27.0 does not have" in phase(final, "FINAL_AUDIT")["blocker"]


def test_a_commit_the_vllm_source_cannot_resolve_is_unverifiable_never_accepted(
        upgraded_afd: Upgrade, vllm_repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The corpus upgrade's own `# Commit:` names upstream's v0.27.0 commit, which a vLLM source built
    from release archives does not hold: implementation lists it as an UNKNOWN gap, the final audit
    blocks with what to do."""
    target = git(vllm_repo, "rev-parse", "v0.27.0^{commit}").strip()
    up = _mistake(upgraded_afd, tmp_path / "m", [(FFN_RUNNER, f"# Commit: {target}", f"# Commit: {UPSTREAM_V027}")],
                  "ffn: keep upstream's commit id")
    line = _line(up.repo, FFN_RUNNER, f"# Commit: {UPSTREAM_V027}")
    final = _final(up, tmp_path, monkeypatch)
    _gates_before(final, "FINAL_AUDIT")
    audit = phase(final, "FINAL_AUDIT")
    assert audit["status"] == "BLOCKED"
    assert f"{FFN_RUNNER}:{line} {UPSTREAM_V027}" in audit["blocker"]
    assert checks(final, "FINAL_AUDIT")["patch_annotations_name_target"]["result"] == "SATISFIED"
    assert "git clone https://github.com/vllm-project/vllm" in audit["next_allowed_action"]
    assert f"{FFN_RUNNER}:{line}" in audit["next_allowed_action"]
    impl = evaluate_upgrade(up, "implementation", tmp_path / "impl", monkeypatch)
    assert statuses(impl)["IMPLEMENT_ATOMIC_ADAPTATIONS"] == "PASS"
    gap = checks(impl, "IMPLEMENT_ATOMIC_ADAPTATIONS")["annotation_commits_verified"]
    assert gap["result"] == "UNKNOWN" and f"{FFN_RUNNER}:{line} {UPSTREAM_V027}" in str(gap)


# --- item 5: scopes follow the skill -------------------------------------------------------------------

def test_a_package_readme_still_claiming_gpu_support_for_the_old_release_fails(
        upgraded_afd: Upgrade, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    up = _mistake(upgraded_afd, tmp_path / "m",
                  [(CONNECTORS_README, "The vLLM 0.27 support matrix validates GPU",
                    "The vLLM 0.26 support matrix validates GPU")], "connectors: leave the README")
    line = _line(up.repo, CONNECTORS_README, "The vLLM 0.26 support matrix")
    final = _final(up, tmp_path, monkeypatch)
    _gates_before(final, "DOCUMENTATION_REFRESH_GATE")
    docs = phase(final, "DOCUMENTATION_REFRESH_GATE")
    assert docs["status"] == "FAIL"
    assert f"{CONNECTORS_README}:{line} = 0.26" in docs["blocker"]
    assert "report each claim" in docs["next_allowed_action"]


def test_a_recipe_naming_the_short_old_version_fails(upgraded_afd: Upgrade, tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    up = _mistake(upgraded_afd, tmp_path / "m", [(GPU_RECIPE, "plugin on vLLM `v0.27.0`.", "plugin on vLLM `v0.26`.")],
                  "recipe: short version")
    line = _line(up.repo, GPU_RECIPE, "plugin on vLLM `v0.26`.")
    final = _final(up, tmp_path, monkeypatch)
    _gates_before(final, "DOCUMENTATION_REFRESH_GATE")
    docs = phase(final, "DOCUMENTATION_REFRESH_GATE")
    assert docs["status"] == "FAIL"
    assert f"{GPU_RECIPE}:{line} = 0.26" in docs["blocker"]
    assert f"{GPU_RECIPE}:{line}" in " ".join(docs["blockers"][1:])  # and as a stale mention of the release line


def test_a_unit_test_still_on_the_old_version_is_the_final_audits_own_list(
        upgraded_afd: Upgrade, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    up = _mistake(upgraded_afd, tmp_path / "m",
                  [(CONFIG_TEST, 'vllm_module.__version__ = "0.27.0"', 'vllm_module.__version__ = "0.26.0"')],
                  "tests: fake module version left")
    line = _line(up.repo, CONFIG_TEST, '__version__ = "0.26.0"')
    refused = _line(up.repo, "tests/unit/package/test_package.py", 'assert not is_vllm_version_supported("0.26.0")')
    final = _final(up, tmp_path, monkeypatch)
    _gates_before(final, "FINAL_AUDIT")
    audit = phase(final, "FINAL_AUDIT")
    assert audit["status"] == "FAIL"
    assert audit["blocker"] == f"tests still name 0.26.0: {CONFIG_TEST}:{line}"
    assert f"test_package.py:{refused}" not in audit["blocker"]  # asserting the old version is refused is fine
    assert checks(final, "FINAL_AUDIT")["no_stale_source_mentions"]["result"] == "SATISFIED"


def test_a_lock_whose_requirement_specifier_was_not_regenerated_says_regenerate_the_lock(
        upgraded_afd: Upgrade, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Item 5's lock specifier as an identity source, and item 7: its next action is the lock, by line."""
    up = _mistake(upgraded_afd, tmp_path / "m",
                  [("uv.lock", 'marker = "extra == \'vllm\'", specifier = "==0.27.0" }',
                    'marker = "extra == \'vllm\'", specifier = "==0.26.0" }')], "lock: hand-edited")
    line = _line(up.repo, "uv.lock", 'specifier = "==0.26.0"')
    impl = evaluate_upgrade(up, "implementation", tmp_path / "impl", monkeypatch)
    # The inventory compares the working tree's constant with every exact pin, the lock's included.
    gate = phase(impl, "INVENTORY_AFD_CONTRACTS")
    assert gate["status"] == "FAIL", gate
    assert f"pins [0.26.0, 0.27.0]" in gate["blocker"]
    action = gate["next_allowed_action"]
    assert action.startswith("regenerate the lock file"), action
    assert f"uv.lock:{line} still names 0.26.0 while afd_plugin/compat/vllm.py:" in action
    assert "markers" not in action
    # Final validation of that revision refuses it at identity, and says the lock was not regenerated.
    final = _final(up, tmp_path, monkeypatch)
    identity = phase(final, "FREEZE_IDENTITY")
    assert identity["status"] == "BLOCKED"
    assert f"uv.lock:{line} = 0.26.0" in identity["blocker"]
    assert "the lock file was not regenerated" in identity["next_allowed_action"]


# --- item 6: exclusions come from the plan ---------------------------------------------------------------

def _e2e_with_skip(up: Upgrade, where: Path, test: str, reason: str) -> Path:
    where.mkdir(parents=True, exist_ok=True)
    e2e = where / "e2e-extra.xml"
    text = up.e2e_junit.read_text()
    case = (f'<testcase classname="tests.e2e.test_features" name="{test}" time="0.5"><skipped type="pytest.skip" '
            f'message="{reason}">{reason}</skipped></testcase>\n</testsuite>')
    text = text.replace("</testsuite>", case, 1).replace('skipped="2" tests="7"', 'skipped="3" tests="8"')
    e2e.write_text(text)
    return e2e


def test_a_skip_whose_reason_resembles_an_exclusion_is_not_one(upgraded_afd: Upgrade, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    e2e = _e2e_with_skip(upgraded_afd, tmp_path, "test_dbo_tp4", "DBO with TP&gt;1 is an excluded cell")
    final = _final(upgraded_afd, tmp_path, monkeypatch, e2e_junit=e2e)
    _gates_before(final, "GPU_BASIC_E2E_GATE")
    gate = phase(final, "GPU_BASIC_E2E_GATE")
    assert gate["status"] == "FAIL"
    assert gate["blocker"] == ("unexplained skip(s), not a full pass: tests.e2e.test_features::test_dbo_tp4 "
                               "(DBO with TP>1 is an excluded cell)")
    action = gate["next_allowed_action"]
    assert action.startswith("report each skip") and "names it under exclusions with a reason" in action


def test_prose_exclusions_excuse_no_skip(upgraded_afd: Upgrade, tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """A plan whose exclusions are prose (as the corpus's plan writes them, with the cells' very words)
    excuses nothing: each skip must be named by test id or cell."""
    evidence = tmp_path / "evidence"
    shutil.copytree(upgraded_afd.evidence, evidence)
    plan = yaml.safe_load((evidence / "plan.yaml").read_text())
    plan["exclusions"] = [x for x in plan["exclusions"] if isinstance(x, str)] + [
        "DBO with TP>1 is an excluded cell", "NPU-only scenario"]
    (evidence / "plan.yaml").write_text(yaml.safe_dump(plan, sort_keys=False))
    final = _final(upgraded_afd, tmp_path, monkeypatch, evidence_dir=evidence)
    _gates_before(final, "GPU_BASIC_E2E_GATE")
    gate = phase(final, "GPU_BASIC_E2E_GATE")
    assert gate["status"] == "FAIL"
    assert "tests.e2e.test_features::test_dbo_tp2" in gate["blocker"]
    assert "tests.e2e.test_models::test_npu_parity" in gate["blocker"]


def test_a_plan_exclusion_by_cell_excuses_that_parametrisation_only(upgraded_afd: Upgrade, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    evidence = tmp_path / "evidence"
    shutil.copytree(upgraded_afd.evidence, evidence)
    plan = yaml.safe_load((evidence / "plan.yaml").read_text())
    plan["exclusions"].append({"cell": "tp4", "reason": "the AFD cell is validated on two GPUs only"})
    (evidence / "plan.yaml").write_text(yaml.safe_dump(plan, sort_keys=False))
    excused = _e2e_with_skip(upgraded_afd, tmp_path / "a", "test_dbo[tp4]", "needs a four-GPU cell")
    final = _final(upgraded_afd, tmp_path / "a", monkeypatch, e2e_junit=excused, evidence_dir=evidence)
    assert statuses(final)["GPU_BASIC_E2E_GATE"] == "PASS", phase(final, "GPU_BASIC_E2E_GATE")
    assert final["verdict"]["id"] == "gpu_validated"
    other = _e2e_with_skip(upgraded_afd, tmp_path / "b", "test_dbo[tp8]", "needs an eight-GPU cell")
    final = _final(upgraded_afd, tmp_path / "b", monkeypatch, e2e_junit=other, evidence_dir=evidence)
    assert phase(final, "GPU_BASIC_E2E_GATE")["blocker"] == (
        "unexplained skip(s), not a full pass: tests.e2e.test_features::test_dbo[tp8] (needs an eight-GPU cell)")


def test_a_gpu_source_line_naming_the_short_old_release_fails_the_audit(upgraded_afd: Upgrade, tmp_path: Path,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    engine = "afd_plugin/compat/patches/engine_core.py"
    text = (upgraded_afd.repo / engine).read_text()
    old = next(line for line in text.splitlines() if line.startswith("The copied methods follow vLLM v0.27.0"))
    up = _mistake(upgraded_afd, tmp_path / "m", [(engine, old, old.replace("v0.27.0", "v0.26"))],
                  "engine: docstring left on the old line")
    line = _line(up.repo, engine, "The copied methods follow vLLM v0.26")
    final = _final(up, tmp_path, monkeypatch)
    _gates_before(final, "FINAL_AUDIT")
    audit = phase(final, "FINAL_AUDIT")
    assert audit["status"] == "FAIL"
    assert audit["blocker"] == f"0.26.0 is still named in {engine}:{line}"
    assert audit["next_allowed_action"] == "report each line the blocker lists; final validation does not edit"
