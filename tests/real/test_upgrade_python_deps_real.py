"""The shipped upgrade-python-deps rulebook on the real afd-plugin (its uv.lock, its workflow): the tip
planned, then upgraded to vLLM 0.27.0 by the corpus's seven real commits, with the real unit JUnit of
the upgraded tree (the statuses docs/upgrade-python-deps.md shows)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from policyrun.cli import main
from tests.real.conftest import copy_repo, git

UNPINNED = ["actions/checkout@v4", "actions/setup-python@v5", "astral-sh/setup-uv@v5"]


@pytest.fixture(scope="module")
def upgraded(corpus: Path, afd_repo: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    repo = copy_repo(afd_repo, tmp_path_factory.mktemp("pydeps") / "afd-plugin")
    patches = sorted(str(p) for p in (corpus / "afd-plugin-upgrade-0.27.0" / "patches").glob("*.patch"))
    git(repo, "-c", "user.name=t", "-c", "user.email=t@example.invalid", "am", "-q", *patches)
    return repo


def _evaluate(repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str, plan: str,
              *sets: str) -> dict:  # type: ignore[type-arg]
    (tmp_path / "plan.yaml").write_text(plan)
    monkeypatch.chdir(repo)
    out = tmp_path / "out"
    code = main(["evaluate", "upgrade-python-deps", "--mode", mode, "--set", f"plan={tmp_path / 'plan.yaml'}",
                 *[a for s in sets for a in ("--set", s)], "--out", str(out), "--quiet", "--no-timestamp"])
    trace = json.loads((out / "trace.json").read_text())
    assert trace["exit_code"] == code
    return trace


def _statuses(trace: dict) -> dict[str, str]:  # type: ignore[type-arg]
    return {p["phase"]: p["status"] for p in trace["phases"]}


def test_plan_at_the_tip(afd_repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    repo = copy_repo(afd_repo, tmp_path / "afd-plugin")
    trace = _evaluate(repo, tmp_path, monkeypatch, "plan",
                      'baseline: {rev: main}\nitems: [{package: vllm, from: "0.26.0", to: "0.27.0", status: planned}]\n')
    assert _statuses(trace) == {"BASELINE": "PASS", "PLAN": "PASS", "LOCK": "SKIPPED", "LOCK_RESOLVES": "SKIPPED",
                                "APPLIED": "SKIPPED", "CI_PINS": "FAIL", "CHECKS": "SKIPPED", "LATEST": "SKIPPED"}
    pins = next(p for p in trace["phases"] if p["phase"] == "CI_PINS")
    assert all(raw in pins["blocker"] for raw in UNPINNED)
    assert trace["verdict"]["id"] == "incomplete" and trace["exit_code"] == 1
    # git status: the rulebook reads, never writes, the repository
    assert git(repo, "status", "--porcelain") == ""


def test_a_source_that_is_not_the_locked_version(afd_repo: Path, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    trace = _evaluate(copy_repo(afd_repo, tmp_path / "afd-plugin"), tmp_path, monkeypatch, "plan",
                      'baseline: {rev: main}\nitems: [{package: vllm, from: "0.25.0", to: "0.27.0", status: planned}]\n')
    plan = next(p for p in trace["phases"] if p["phase"] == "PLAN")
    assert plan["status"] == "FAIL" and "vllm 0.25.0" in plan["blocker"]


APPLIED = 'baseline: {rev: HEAD~7}\nitems: [{package: vllm, from: "0.26.0", to: "0.27.0", status: applied}]\n'


def test_verify_after_the_real_upgrade(upgraded: Path, corpus: Path, tmp_path: Path,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    junit = corpus / "afd-plugin-upgrade-0.27.0" / "evidence" / "unit-target.xml"
    trace = _evaluate(upgraded, tmp_path, monkeypatch, "verify", APPLIED, f"junit={junit}")
    assert _statuses(trace) == {"BASELINE": "PASS", "PLAN": "PASS", "LOCK": "PASS", "LOCK_RESOLVES": "SKIPPED",
                                "APPLIED": "PASS", "CI_PINS": "FAIL", "CHECKS": "PASS", "LATEST": "SKIPPED"}
    assert trace["verdict"]["id"] == "incomplete" and trace["exit_code"] == 1
    assert next(d for d in trace["derived"] if d["id"] == "lock_requirements")["value"] == [
        "vllm ==0.27.0", "pre-commit >=4", "pytest >=7.0", "ruff <0.16,>=0.15.7", "setuptools-scm >=8"]


def test_a_manifest_edited_without_uv_lock(upgraded: Path, corpus: Path, tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    repo = copy_repo(upgraded, tmp_path / "edited")
    manifest = repo / "pyproject.toml"
    manifest.write_text(manifest.read_text().replace('"vllm==0.27.0"', '"vllm==0.27.1"'))
    junit = corpus / "afd-plugin-upgrade-0.27.0" / "evidence" / "unit-target.xml"
    trace = _evaluate(repo, tmp_path, monkeypatch, "verify", APPLIED, f"junit={junit}")
    lock = next(p for p in trace["phases"] if p["phase"] == "LOCK")
    assert lock["status"] == "FAIL"
    assert "manifest: vllm ==0.27.1; lock: vllm ==0.27.0" in lock["blocker"]
