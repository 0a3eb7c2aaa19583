"""Test evidence on the real upgrade: complete (issue 18 item 4), for the audited commit (item 8),
scoped by the plan's backends (item 11).

Each case starts from the corpus's real upgrade (tests/real/upgrade.py) and its real JUnit files
and makes one mistake an engineer makes: a run with a module `--ignore`d, a subset of paths, a
test module added after the run, results from another commit or with none, a plan that declares
no backend. Expected values come from the XML and the git tree read here, never from policyrun.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

import pytest
import yaml

from tests.real.conftest import copy_repo, git
from tests.real.upgrade import (
    Upgrade,
    checks,
    evaluate_upgrade,
    git_env,
    phase,
    stamp_commit,
    statuses,
)

NPU_MODULES = ["tests.unit.connectors.test_async_cam_connector", "tests.unit.connectors.test_camp2p_connector"]


def junit_modules(path: Path) -> set[str]:
    """Modules a JUnit file reports, read with ElementTree (tests' classname up to `test_*`)."""
    out = set()
    for case in ElementTree.parse(path).getroot().iter("testcase"):
        name = case.get("classname") or case.get("name") or ""
        parts = name.split(".")
        last = max(i for i, p in enumerate(parts) if p.startswith("test_"))
        out.add(".".join(parts[:last + 1]))
    return out


def without_modules(src: Path, dest: Path, drop: list[str], sha: str) -> Path:
    """The report a run with `--ignore` for each of `drop` (module paths) writes."""
    modules = {p[:-3].replace("/", ".") for p in drop}
    tree = ElementTree.parse(src)
    for suite in tree.getroot().iter("testsuite"):
        for case in list(suite.findall("testcase")):
            name = case.get("classname") or case.get("name") or ""
            if any(name == m or name.startswith(m + ".") for m in modules):
                suite.remove(case)
    raw = dest.with_suffix(".raw.xml")
    tree.write(raw, encoding="utf-8", xml_declaration=True)
    return stamp_commit(raw, dest, sha)


def unit_gate(trace: dict[str, Any]) -> dict[str, Any]:
    return phase(trace, "STATIC_AND_UNIT_GATE")


def derived(trace: dict[str, Any], name: str) -> Any:
    record = next(d for d in trace["derived"] if d["id"] == name)
    assert record["error"] is None, record["error"]
    return record["value"]


# --- item 4: the report is the complete suite ------------------------------------------------------------

def test_the_record_reconciles_the_report_with_the_repository(upgraded_afd: Upgrade, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    trace = evaluate_upgrade(upgraded_afd, "implementation", tmp_path / "out", monkeypatch)
    assert unit_gate(trace)["status"] == "PASS", unit_gate(trace)["blocker"]
    tree = git(upgraded_afd.repo, "ls-tree", "-r", "--name-only", "HEAD", "tests/unit").split()
    expected = sorted(p[:-3].replace("/", ".") for p in tree
                      if Path(p).name.startswith("test_") and p.endswith(".py"))
    record = derived(trace, "unit_modules")
    assert sorted(record["expected"]) == expected and len(expected) == 33
    reported = junit_modules(upgraded_afd.unit_junit)
    assert sorted(record["ran"]) == sorted(reported - set(NPU_MODULES))
    assert sorted(record["skipped_at_collection"]) == NPU_MODULES
    assert sorted(record["out_of_scope"]) == NPU_MODULES
    assert derived(trace, "unit_missing") == []


def test_an_ignored_module_fails_the_gate_naming_it(upgraded_afd: Upgrade, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """`pytest tests/unit --ignore=tests/unit/compat/patches/test_engine_core.py`: the module that
    tests the ported EngineCore copies is the one left out."""
    ignored = "tests/unit/compat/patches/test_engine_core.py"
    junit = without_modules(upgraded_afd.unit_junit, tmp_path / "unit.xml", [ignored], upgraded_afd.head)
    trace = evaluate_upgrade(upgraded_afd, "implementation", tmp_path / "out", monkeypatch, unit_junit=junit,
                             formats="md")
    gate = unit_gate(trace)
    assert gate["status"] == "FAIL"
    check = checks(trace, "STATIC_AND_UNIT_GATE")["unit_suite_complete"]
    assert check["result"] == "UNSATISFIED"
    assert check["message"].startswith("partial run, not a full pass: 1 of 33 test module(s) under tests/unit at "
                                       + upgraded_afd.head[:12])
    assert check["message"].endswith(ignored)
    assert gate["blocker"] == check["message"]
    assert "no --ignore" in gate["next_allowed_action"]
    assert trace["verdict"]["id"] != "implemented_gpu_unverified"
    # the report's record: what was expected, what ran, what is out of scope and what is missing
    report = (tmp_path / "out" / "report.md").read_text()
    assert ("33 expected, 30 ran, 2 skipped at collection, 2 out of scope by the plan's backends, 1 missing."
            in report.replace("\n", " "))
    assert f"| `{ignored}` | **missing**: neither ran nor was skipped with a reason |" in report
    assert "| `tests/unit/connectors/test_camp2p_connector.py` | out of scope: needs torch_npu |" in report


def test_a_subset_of_paths_is_not_a_full_pass(upgraded_afd: Upgrade, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """`pytest tests/unit/v1 tests/unit/compat` after the worker and compat commits: everything else
    (package, model executor, connectors, config, ...) is missing, each named."""
    tree = git(upgraded_afd.repo, "ls-tree", "-r", "--name-only", "HEAD", "tests/unit").split()
    left_out = sorted(p for p in tree if Path(p).name.startswith("test_") and p.endswith(".py")
                      and not p.startswith(("tests/unit/v1/", "tests/unit/compat/")))
    in_scope_left_out = [p for p in left_out if p[:-3].replace("/", ".") not in NPU_MODULES]
    junit = without_modules(upgraded_afd.unit_junit, tmp_path / "unit.xml", left_out, upgraded_afd.head)
    trace = evaluate_upgrade(upgraded_afd, "final-validation", tmp_path / "out", monkeypatch, unit_junit=junit)
    assert unit_gate(trace)["status"] == "FAIL"
    message = checks(trace, "STATIC_AND_UNIT_GATE")["unit_suite_complete"]["message"]
    assert f"{len(in_scope_left_out)} of 33 test module(s)" in message
    for path in in_scope_left_out:
        assert path in message
    assert trace["verdict"]["id"] != "gpu_validated"
    assert statuses(trace)["TARGET_NATIVE_GPU_CONTROL"] == "SKIPPED"


def test_a_module_added_after_the_run_is_missing(upgraded_afd: Upgrade, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """The engineer adds a regression test module for the no-op scheduler after running the suite,
    commits it, and stamps the old report with the new HEAD: the new module never ran."""
    repo = copy_repo(upgraded_afd.repo, tmp_path / "afd")
    new = repo / "tests" / "unit" / "compat" / "patches" / "test_ffn_daemon_scheduler.py"
    new.write_text("def test_noop_scheduler_has_no_requests():\n    assert True\n")
    git_env(repo, "add", str(new.relative_to(repo)))
    git_env(repo, "commit", "-qm", "test: FFN daemon no-op scheduler")
    head = git(repo, "rev-parse", "HEAD").strip()
    junit = stamp_commit(upgraded_afd.unit_junit, tmp_path / "unit.xml", head)
    evidence = tmp_path / "evidence"
    shutil.copytree(upgraded_afd.evidence, evidence)
    plan = yaml.safe_load((evidence / "plan.yaml").read_text())
    plan["stages"][1]["files"].append("tests/unit/compat/patches/test_ffn_daemon_scheduler.py")
    (evidence / "plan.yaml").write_text(yaml.safe_dump(plan, sort_keys=False))
    trace = evaluate_upgrade(upgraded_afd, "implementation", tmp_path / "out", monkeypatch, repo=repo,
                             unit_junit=junit, evidence_dir=evidence)
    assert statuses(trace)["IMPLEMENT_ATOMIC_ADAPTATIONS"] == "PASS", phase(trace, "IMPLEMENT_ATOMIC_ADAPTATIONS")
    check = checks(trace, "STATIC_AND_UNIT_GATE")["unit_suite_complete"]
    assert check["result"] == "UNSATISFIED"
    assert "1 of 34 test module(s)" in check["message"]
    assert check["message"].endswith("tests/unit/compat/patches/test_ffn_daemon_scheduler.py")


# --- item 8: the report is for the audited commit -------------------------------------------------------

def test_results_with_no_commit_do_not_satisfy_the_gate(upgraded_afd: Upgrade, corpus: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """The corpus's unit-target.xml as pytest wrote it: it does not say which commit it ran on."""
    raw = corpus / "afd-plugin-upgrade-0.27.0" / "evidence" / "unit-target.xml"
    junit = shutil.copyfile(raw, tmp_path / "unit.xml")
    trace = evaluate_upgrade(upgraded_afd, "implementation", tmp_path / "out", monkeypatch, unit_junit=junit)
    gate = unit_gate(trace)
    assert gate["status"] == "BLOCKED"
    assert gate["blocker"] == (f"unit results are not for the audited AFD commit {upgraded_afd.head}: "
                               f"{junit}: no commit recorded")
    assert f"git rev-parse HEAD > {junit}.commit" in gate["next_allowed_action"]
    assert "policyrun.commit" in gate["next_allowed_action"]


def test_results_from_the_base_commit_are_refused_naming_both(upgraded_afd: Upgrade, corpus: Path, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """unit-base-on-027.xml is the tree before the upgrade run in the 0.27.0 runtime; its commit is
    afd_base, recorded honestly, and it is not the audited HEAD."""
    raw = corpus / "afd-plugin-upgrade-0.27.0" / "evidence" / "unit-base-on-027.xml"
    junit = stamp_commit(raw, tmp_path / "unit.xml", upgraded_afd.base)
    trace = evaluate_upgrade(upgraded_afd, "final-validation", tmp_path / "out", monkeypatch, unit_junit=junit)
    gate = unit_gate(trace)
    assert gate["status"] == "BLOCKED"
    assert gate["blocker"] == (f"unit results are not for the audited AFD commit {upgraded_afd.head}: "
                               f"{junit} ran on {upgraded_afd.base}")
    assert trace["verdict"]["id"] != "gpu_validated"


def test_a_sidecar_naming_the_commit_before_the_docs_commit_is_refused(upgraded_afd: Upgrade, tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The suite ran before the last commit (the claims refresh): `git rev-parse HEAD` then wrote the
    parent. Only the audited commit counts; the fix is to rerun, not to edit the sidecar."""
    parent = git(upgraded_afd.repo, "rev-parse", "HEAD~1").strip()
    junit = stamp_commit(upgraded_afd.unit_junit, tmp_path / "unit.xml", parent, how="sidecar")
    trace = evaluate_upgrade(upgraded_afd, "implementation", tmp_path / "out", monkeypatch, unit_junit=junit)
    assert unit_gate(trace)["blocker"].endswith(f"{junit} ran on {parent}")


def test_property_and_sidecar_disagreeing_is_refused(upgraded_afd: Upgrade, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    junit = stamp_commit(upgraded_afd.unit_junit, tmp_path / "unit.xml", upgraded_afd.head)
    (tmp_path / "unit.xml.commit").write_text(upgraded_afd.base + "\n")
    trace = evaluate_upgrade(upgraded_afd, "implementation", tmp_path / "out", monkeypatch, unit_junit=junit)
    assert unit_gate(trace)["status"] == "BLOCKED"
    first, second = sorted([upgraded_afd.head, upgraded_afd.base])
    assert unit_gate(trace)["blocker"].endswith(f"{junit} names several commits: {first}, {second}")


def test_e2e_results_of_another_commit_block_the_gpu_gate(upgraded_afd: Upgrade, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    parent = git(upgraded_afd.repo, "rev-parse", "HEAD~1").strip()
    e2e = stamp_commit(upgraded_afd.e2e_junit, tmp_path / "e2e.xml", parent)
    trace = evaluate_upgrade(upgraded_afd, "final-validation", tmp_path / "out", monkeypatch, e2e_junit=e2e)
    gate = phase(trace, "GPU_BASIC_E2E_GATE")
    assert statuses(trace)["TARGET_NATIVE_GPU_CONTROL"] == "PASS"
    assert gate["status"] == "BLOCKED"
    assert gate["blocker"] == f"E2E results are not for the audited AFD commit {upgraded_afd.head}: {e2e} ran on {parent}"
    assert f"git rev-parse HEAD > {e2e}.commit" in gate["next_allowed_action"]


def test_accuracy_for_the_parent_commit_blocks_naming_both(upgraded_afd: Upgrade, tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    parent = git(upgraded_afd.repo, "rev-parse", "HEAD~1").strip()
    doc = yaml.safe_load(upgraded_afd.accuracy.read_text())
    doc["afd_sha"] = parent
    accuracy = tmp_path / "accuracy.yaml"
    accuracy.write_text(yaml.safe_dump(doc))
    trace = evaluate_upgrade(upgraded_afd, "final-validation", tmp_path / "out", monkeypatch,
                             accuracy_results=accuracy)
    gate = phase(trace, "GPU_ACCURACY_GATE")
    assert gate["status"] == "BLOCKED"
    assert gate["blocker"] == (f"{accuracy} is for AFD {parent} and vLLM 0.27.0, not the audited AFD commit "
                               f"{upgraded_afd.head} and vLLM 0.27.0")
    assert gate["next_allowed_action"].startswith(f"rerun every accuracy case on AFD {upgraded_afd.head}")


# --- item 11: the plan's backends scope the suite ----------------------------------------------------------

def _plan_with(upgraded_afd: Upgrade, tmp_path: Path, backends: list[str] | None) -> Path:
    evidence = tmp_path / "evidence"
    shutil.copytree(upgraded_afd.evidence, evidence)
    plan = yaml.safe_load((evidence / "plan.yaml").read_text())
    plan.pop("backends", None)
    if backends is not None:
        plan["backends"] = backends
    (evidence / "plan.yaml").write_text(yaml.safe_dump(plan, sort_keys=False))
    return evidence


def test_without_declared_backends_npu_modules_block_as_environment(upgraded_afd: Upgrade, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    evidence = _plan_with(upgraded_afd, tmp_path, None)
    trace = evaluate_upgrade(upgraded_afd, "implementation", tmp_path / "out", monkeypatch, evidence_dir=evidence)
    gate = unit_gate(trace)
    assert gate["status"] == "BLOCKED"
    assert gate["blocker"].startswith("environment failure: 2 test module(s) were skipped at collection")
    for module in NPU_MODULES:
        assert module in gate["blocker"]
    assert "backends:" in gate["next_allowed_action"]
    assert derived(trace, "unit_modules")["out_of_scope"] == []


def test_declaring_both_backends_keeps_npu_modules_in_scope(upgraded_afd: Upgrade, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A plan that claims the NPU backend too must show NPU evidence; the GPU run does not."""
    evidence = _plan_with(upgraded_afd, tmp_path, ["gpu", "npu"])
    trace = evaluate_upgrade(upgraded_afd, "implementation", tmp_path / "out", monkeypatch, evidence_dir=evidence,
                             unit_junit=upgraded_afd.unit_junit_nonpu)
    gate = unit_gate(trace)
    assert gate["status"] == "FAIL"
    message = checks(trace, "STATIC_AND_UNIT_GATE")["unit_suite_complete"]["message"]
    assert "2 of 33 test module(s)" in message
    assert "tests/unit/connectors/test_async_cam_connector.py" in message


def test_the_gpu_run_without_npu_modules_passes_when_the_plan_is_gpu_only(upgraded_afd: Upgrade, tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """unit-target-nonpu.xml left the NPU-only modules out (a sidecar records its commit): with
    `backends: [gpu]` they are out of scope, not missing."""
    trace = evaluate_upgrade(upgraded_afd, "implementation", tmp_path / "out", monkeypatch,
                             unit_junit=upgraded_afd.unit_junit_nonpu)
    assert unit_gate(trace)["status"] == "PASS", unit_gate(trace)["blocker"]
    record = derived(trace, "unit_modules")
    assert record["skipped_at_collection"] == [] and sorted(record["out_of_scope"]) == NPU_MODULES


def test_a_gpu_module_missing_its_runtime_is_still_an_environment_failure(upgraded_afd: Upgrade, tmp_path: Path,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A GPU model-runner test module skipped because vLLM is not importable in the runtime: GPU is
    the declared backend, so it blocks, named, whatever the plan says."""
    module = "tests.unit.v1.worker.test_attention_model_runner"
    tree = ElementTree.parse(upgraded_afd.unit_junit)
    suite = next(tree.getroot().iter("testsuite"))
    for case in list(suite.findall("testcase")):
        if (case.get("classname") or "").startswith(module):
            suite.remove(case)
    skipped = ElementTree.SubElement(ElementTree.SubElement(suite, "testcase", classname="", name=module, time="0"),
                                     "skipped", message="collection skipped")
    skipped.text = repr((f"/srv/scratch/afd-plugin/{module.replace('.', '/')}.py", 20,
                         "Skipped: could not import 'vllm': No module named 'vllm'"))
    junit = tmp_path / "unit.xml"
    tree.write(junit, encoding="utf-8", xml_declaration=True)
    trace = evaluate_upgrade(upgraded_afd, "implementation", tmp_path / "out", monkeypatch, unit_junit=junit)
    gate = unit_gate(trace)
    assert gate["status"] == "BLOCKED"
    assert gate["blocker"] == ("environment failure: 1 test module(s) were skipped at collection and never ran: "
                               f"{module} (could not import 'vllm': No module named 'vllm')")
