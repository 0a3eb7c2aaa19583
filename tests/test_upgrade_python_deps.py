"""The shipped upgrade-python-deps rulebook on this repository itself (CI's dogfooding command, as
.ci/run writes it) and with --baseline; its cases live in rulebooks/upgrade-python-deps.test.yaml."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from policyrun.cli import main

ROOT = Path(__file__).resolve().parent.parent


def _ci_command() -> list[str]:
    """The dogfooding `policyrun evaluate upgrade-python-deps ...` line of .ci/run (continuations joined)."""
    text = (ROOT / ".ci" / "run").read_text().replace("\\\n", " ")
    line = next(line for line in text.splitlines() if line.startswith("policyrun evaluate upgrade-python-deps"))
    return shlex.split(line)[1:]


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


@pytest.fixture
def checkout(tmp_path: Path) -> Path:
    """This repository's manifest, workflows and example plan in a fresh git repository (as CI's
    checkout, without the rest of the tree)."""
    repo = tmp_path / "policyrun"
    (repo / "examples" / "upgrade-python-deps").mkdir(parents=True)
    shutil.copy(ROOT / "pyproject.toml", repo / "pyproject.toml")
    shutil.copytree(ROOT / ".github" / "workflows", repo / ".github" / "workflows")
    shutil.copy(ROOT / "examples" / "upgrade-python-deps" / "policyrun-plan.yaml",
                repo / "examples" / "upgrade-python-deps" / "policyrun-plan.yaml")
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-qm", "base")
    return repo


def test_ci_dogfooding_plans_this_repository(checkout: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    args = _ci_command()
    assert args[:4] == ["evaluate", "upgrade-python-deps", "--mode", "plan"] and "lock=" in args
    out = args.index("--out")
    args[out + 1] = str(tmp_path / "out")
    monkeypatch.chdir(checkout)
    assert main(args) == 0, capsys.readouterr()
    trace = json.loads((tmp_path / "out" / "trace.json").read_text())
    assert trace["verdict"]["id"] == "planned"
    assert {p["phase"]: p["status"] for p in trace["phases"] if p["status"] != "SKIPPED"} == {
        "BASELINE": "PASS", "PLAN": "PASS", "CI_PINS": "PASS"}


def test_an_unpinned_action_fails_the_dogfooding(checkout: Path, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    workflow = checkout / ".github" / "workflows" / "policyrun.yml"
    workflow.write_text(re.sub(r"actions/checkout@[0-9a-f]{40}", "actions/checkout@v4", workflow.read_text()))
    args = _ci_command()
    args[args.index("--out") + 1] = str(tmp_path / "out")
    monkeypatch.chdir(checkout)
    assert main(args) == 1
    trace = json.loads((tmp_path / "out" / "trace.json").read_text())
    pins = next(p for p in trace["phases"] if p["phase"] == "CI_PINS")
    assert pins["status"] == "FAIL" and "actions/checkout@v4" in pins["blocker"]


def test_a_planned_package_dropped_from_the_manifest_fails_the_plan(checkout: Path, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    manifest = checkout / "pyproject.toml"
    manifest.write_text(manifest.read_text().replace('"jinja2>=3.1",', ""))
    _git(checkout, "-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-qam", "drop jinja2")
    args = _ci_command()
    args[args.index("--out") + 1] = str(tmp_path / "out")
    monkeypatch.chdir(checkout)
    assert main(args) == 1
    trace = json.loads((tmp_path / "out" / "trace.json").read_text())
    plan = next(p for p in trace["phases"] if p["phase"] == "PLAN")
    assert "not declared in the baseline's pyproject.toml: Jinja2" in plan["blocker"]


def test_the_shipped_name_lints() -> None:
    assert main(["lint", "upgrade-python-deps"]) == 0


def test_baseline_reads_the_plan_run(checkout: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--keep-facts on the plan run, --baseline on the next: the verify run's trace names the plan run."""
    monkeypatch.chdir(checkout)
    plan = ["--set", "lock=", "--set", "plan=examples/upgrade-python-deps/policyrun-plan.yaml", "--quiet"]
    assert main(["evaluate", "upgrade-python-deps", "--mode", "plan", *plan, "--out", str(tmp_path / "before"),
                 "--keep-facts"]) == 0
    assert main(["evaluate", "upgrade-python-deps", "--mode", "verify", *plan, "--out", str(tmp_path / "after"),
                 "--keep-facts", "--baseline", str(tmp_path / "before")]) == 1
    trace = json.loads((tmp_path / "after" / "trace.json").read_text())
    assert trace["baseline"]["verdict"] == "planned" and trace["baseline"]["mode"] == "plan"
