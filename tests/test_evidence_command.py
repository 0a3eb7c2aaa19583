"""`policyrun evidence`: evidence schemas, prefilled skeletons and their validation, on the fixture
plugin and vLLM of tests/afdfixtures.py (real probes, real git repositories).

What users rely on: the skeleton holds exactly the impact rows and patches the gates ask about
and the frozen SHAs; an unfilled skeleton never passes (the command's check and the gate both
refuse it, naming file:line:col); the same file completed passes the gates it feeds; an existing
file is never overwritten; an invalid evidence file is shown with its errors, never as "no
attestation".
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests import afdfixtures as fx

ROOT = Path(__file__).resolve().parent.parent

PLANNING = ["FREEZE_IDENTITY", "INVENTORY_AFD_CONTRACTS", "DIFF_VLLM", "ARCHITECTURE_GATE", "PRODUCE_STAGED_PLAN"]


# The session's shared, read-only repositories (tests/conftest.py).

@pytest.fixture()
def upstream(afd_upstream: fx.VllmRepo) -> fx.VllmRepo:
    return afd_upstream


@pytest.fixture()
def plugin(afd_plugin: fx.PluginRepo) -> fx.PluginRepo:
    return afd_plugin


def _sets(upstream: fx.VllmRepo, evidence: Path) -> list[str]:
    out = []
    for item in (f"vllm_src={upstream.path}", "target_ref=v0.27.0", f"evidence_dir={evidence}",
                 "python=/nonexistent/bin/python"):
        out += ["--set", item]
    return out


def _run(*argv: str) -> tuple[int, str, str]:
    """The CLI in a child process, in the working directory (probes keep per-process caches, which
    would change the provenance other tests compare)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-m", "policyrun", *argv], capture_output=True, text=True, env=env,
                          timeout=600)
    return proc.returncode, proc.stdout, proc.stderr


def _evaluate(plugin: fx.PluginRepo, upstream: fx.VllmRepo, evidence: Path, out: Path) -> dict[str, Any]:
    _run("evaluate", "upgrade-gpu-version", "-m", "planning-audit", *_sets(upstream, evidence),
         "--out", str(out), "-q")
    trace: dict[str, Any] = json.loads((out / "trace.json").read_text())
    return trace


def _phase(trace: dict[str, Any], pid: str) -> dict[str, Any]:
    return next(p for p in trace["phases"] if p["phase"] == pid)


def _derived(trace: dict[str, Any], did: str) -> Any:
    return next(d for d in trace["derived"] if d["id"] == did)["value"]


def _skeleton(plugin: fx.PluginRepo, upstream: fx.VllmRepo, evidence: Path, name: str,
              *extra: str) -> tuple[int, str, str]:
    return _run("evidence", "upgrade-gpu-version", "-m", "planning-audit", *_sets(upstream, evidence),
                "--schema", name, "--skeleton", *extra)


def test_list_names_every_schema_its_file_and_skeleton() -> None:
    code, out, _ = _run("evidence", "upgrade-gpu-version")
    assert code == 0
    assert "architecture: Architecture gate attestation\n  file: ${inputs.evidence_dir}/architecture.yaml" in out
    assert ("  skeleton: derived.plan_skeleton (policyrun evidence upgrade-gpu-version --schema plan --skeleton)"
            in out)
    assert "accuracy: GPU accuracy results\n  file: ${inputs.accuracy_results} (probe accuracy)" in out


def test_schema_prints_the_rulebooks_json_schema() -> None:
    code, out, _ = _run("evidence", "upgrade-gpu-version", "--schema", "plan")
    assert code == 0
    schema = json.loads(out)
    assert schema["title"] == "Staged upgrade plan" and schema["required"] == ["current_sha", "target_sha",
                                                                               "stages", "patches"]
    code, _, err = _run("evidence", "upgrade-gpu-version", "--schema", "archtecture")
    assert code == 3 and "no evidence schema 'archtecture' (declared: architecture, plan, native_control" in err


def test_an_unfilled_skeleton_never_passes_and_its_errors_are_the_blocker(
        plugin: fx.PluginRepo, upstream: fx.VllmRepo, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(plugin.path)
    evidence = tmp_path / "evidence"
    target = evidence / "architecture.yaml"
    code, _, err = _skeleton(plugin, upstream, evidence, "architecture", "-o", str(target))
    assert code == 0 and f"wrote {target}" in err
    doc = yaml.safe_load(target.read_text())
    assert list(doc) == ["decision", "reviewer", "current_sha", "target_sha", "rows"]  # the schema's order
    assert (doc["current_sha"], doc["target_sha"]) == (upstream.current_sha, upstream.target_sha)
    assert [r["upstream"] for r in doc["rows"]] == [upstream for upstream, _, _ in fx.IMPACT_ROWS]
    assert all(r["classification"].startswith("TODO") for r in doc["rows"])
    deleted = [r for r in doc["rows"] if r["notes"].startswith(("deleted", "missing at the target"))]
    assert deleted and all(r["replacement"].startswith("TODO") for r in deleted)

    code, out, _ = _run("evidence", "upgrade-gpu-version", "--schema", "architecture", "--check", str(target))
    assert code == 1
    assert f"{target}:4:11: at decision: 'TODO: continue or stop' is not one of ['continue', 'stop']" in out
    assert f"{target}:5:11: at reviewer: 'TODO: who reviewed the rows' must not match '^TODO'" in out
    assert f"problem(s) against schema `architecture`" in out

    trace = _evaluate(plugin, upstream, evidence, tmp_path / "out")
    gate = _phase(trace, "ARCHITECTURE_GATE")
    assert gate["status"] == "BLOCKED"
    assert gate["blocker"].startswith(f"{target} does not match its schema (")  # before: "no architecture attestation"
    assert f"{target}:4:11: at decision:" in gate["blocker"]
    assert _derived(trace, "architecture_skeleton") == doc  # the file is the derived value, as YAML


def _complete_architecture(doc: dict[str, Any]) -> dict[str, Any]:
    doc.update(decision="continue", reviewer="r.chen (GPU backend)")
    for row in doc["rows"]:
        row.update(classification="MECHANICAL", invariant=f"the plugin's use of {row['upstream']} still holds")
        if "replacement" in row:
            row["replacement"] = "vllm/v1/outputs.py"
    return doc


def _complete_plan(doc: dict[str, Any]) -> dict[str, Any]:
    for i, stage in enumerate(doc["stages"]):
        stage.update(id=f"s{i + 1}", invariant="the plugin runs unchanged on the target", tests=["tests/unit"])
        stage["files"] = [f for f in stage["files"] if not f.startswith("TODO")] or ["afd_plugin/"]
    for patch in doc["patches"]:
        patch["disposition"] = "port"
    return doc


def test_a_completed_skeleton_passes_the_gates_it_feeds(plugin: fx.PluginRepo, upstream: fx.VllmRepo,
                                                         tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(plugin.path)
    evidence = tmp_path / "evidence"
    evidence.mkdir()
    for name in ("architecture", "plan"):
        code, out, _ = _skeleton(plugin, upstream, evidence, name)  # to stdout
        assert code == 0 and out.startswith(f"# `{name}` evidence for upgrade-gpu-version (mode planning-audit)")
        complete = _complete_architecture if name == "architecture" else _complete_plan
        fx.dump_yaml(evidence / f"{name}.yaml", complete(yaml.safe_load(out)))
        code, out, _ = _run("evidence", "upgrade-gpu-version", "--schema", name, "--check",
                            str(evidence / f"{name}.yaml"))
        assert (code, out) == (0, f"{evidence / name}.yaml: matches schema `{name}`\n")
    plan = yaml.safe_load((evidence / "plan.yaml").read_text())
    assert sorted(p["file"] for p in plan["patches"]) == sorted(fx.PATCH_FILES)
    trace = _evaluate(plugin, upstream, evidence, tmp_path / "out")
    assert {p: _phase(trace, p)["status"] for p in PLANNING} == {p: "PASS" for p in PLANNING}, [
        _phase(trace, p)["blocker"] for p in PLANNING]


def test_an_unfilled_plan_is_blocked_with_its_errors(plugin: fx.PluginRepo, upstream: fx.VllmRepo, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(plugin.path)
    evidence = tmp_path / "evidence"
    fx.dump_yaml(evidence / "architecture.yaml", fx.architecture_doc(upstream.current_sha, upstream.target_sha))
    code, _, _ = _skeleton(plugin, upstream, evidence, "plan", "-o", str(evidence / "plan.yaml"))
    assert code == 0
    trace = _evaluate(plugin, upstream, evidence, tmp_path / "out")
    plan = _phase(trace, "PRODUCE_STAGED_PLAN")
    assert _phase(trace, "ARCHITECTURE_GATE")["status"] == "PASS"
    assert plan["status"] == "BLOCKED"
    assert f"{evidence / 'plan.yaml'} does not match its schema (" in plan["blocker"]
    assert ("at patches[0].disposition: 'TODO: remove, delegate, port, upstream or stop' is not one of"
            in plan["blocker"])
    action = plan["next_allowed_action"]
    assert "stages and" in action and "patch dispositions to complete" in action


def test_no_attestation_yet_names_the_skeleton_command(plugin: fx.PluginRepo, upstream: fx.VllmRepo,
                                                      tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(plugin.path)
    trace = _evaluate(plugin, upstream, tmp_path / "none", tmp_path / "out")
    blocker = _phase(trace, "ARCHITECTURE_GATE")["blocker"]
    assert blocker.startswith("no architecture attestation")
    assert (f"`policyrun evidence upgrade-gpu-version --mode planning-audit --schema architecture --skeleton -o FILE`"
            f" (with this evaluation's --set inputs) writes it with these {len(fx.IMPACT_ROWS)} rows to classify"
            in blocker)


def test_an_existing_file_is_never_overwritten(plugin: fx.PluginRepo, upstream: fx.VllmRepo, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(plugin.path)
    target = tmp_path / "architecture.yaml"
    target.write_text("decision: continue\n")
    code, _, err = _skeleton(plugin, upstream, tmp_path, "architecture", "-o", str(target))
    assert code == 3 and "U043 " in err and "exists; policyrun never overwrites evidence" in err
    assert target.read_text() == "decision: continue\n"
    code, _, _ = _skeleton(plugin, upstream, tmp_path, "architecture", "-o", str(target), "--force")
    assert code == 0 and "TODO" in target.read_text()


def test_a_schema_without_a_skeleton_says_so() -> None:
    code, _, err = _run("evidence", "upgrade-gpu-version", "-m", "final-validation", "--schema",
                        "native_control", "--skeleton")
    assert code == 3 and "U040 schema 'native_control' of" in err and "has no `x-policyrun-skeleton`" in err
    code, _, err = _run("evidence", "upgrade-gpu-version", "--check", "x.yaml")
    assert code == 3 and "U003 --check and --skeleton need --schema NAME" in err


def test_a_skeleton_that_cannot_be_computed_names_the_missing_fact(plugin: fx.PluginRepo, upstream: fx.VllmRepo,
                                                                   tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(plugin.path)
    code, out, err = _run("evidence", "upgrade-gpu-version", "-m", "planning-audit",
                          "--set", f"vllm_src={upstream.path}", "--set", "target_ref=v9.9.9",
                          "--schema", "architecture", "--skeleton")
    assert (code, out) == (3, "") and "U042 " in err
    assert ("the `architecture` skeleton (derived.architecture_skeleton) cannot be computed in mode "
            "planning-audit" in err)
    assert "facts.vllm_target: git.unknown_ref: unknown revision 'v9.9.9'" in err
