"""ci.workflows: GitHub Actions workflows as facts (jobs, steps, `uses` and their pins, `run` blocks
with line ranges), from the working tree or a revision, read-only."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import pytest

from policyrun.probes.base import ProbeContext, ProbeError
from policyrun.probes.repo.workflows import WorkflowsProbe, classify
from tests.gitfixtures import init_repo, snapshot

ROOT = Path(__file__).resolve().parent.parent

WORKFLOW = """\
name: ci
on:
  push:
    branches: [main]
  workflow_dispatch:
permissions: {contents: read}
jobs:
  test:
    runs-on: ubuntu-latest
    steps:
      - uses: actions/checkout@8e5e7e5ab8b370d6c329ec480221332ada57f0ab
      - name: Set up
        uses: actions/setup-python@v5
        with: {python-version: "3.12"}
      - uses: org/monorepo/actions/build@main
      - uses: ./.github/actions/local
      - uses: docker://alpine:3.20
      - uses: docker://ghcr.io/o/i@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
      - name: Tests
        shell: bash
        run: |
          pytest -q
          echo done

      - run: echo one-line
  call:
    uses: org/shared/.github/workflows/release.yml@v1.2.3
"""


def _run(base: Path, **params: Any) -> dict[str, Any]:
    probe = WorkflowsProbe()
    value = probe.run(params, ProbeContext(base_dir=base, timeout_s=30)).value
    jsonschema.Draft202012Validator(probe.fact_schema).validate(value)  # every field is in the schema
    return value


@pytest.mark.parametrize(("raw", "kind", "owner", "repo", "path", "ref", "ref_kind", "pinned"), [
    ("actions/checkout@8e5e7e5ab8b370d6c329ec480221332ada57f0ab", "action", "actions", "checkout", None,
     "8e5e7e5ab8b370d6c329ec480221332ada57f0ab", "sha", True),
    ("actions/checkout@v4", "action", "actions", "checkout", None, "v4", "tag", False),
    ("actions/checkout@4.1.2", "action", "actions", "checkout", None, "4.1.2", "tag", False),
    ("actions/checkout@8e5e7e5", "action", "actions", "checkout", None, "8e5e7e5", "ref", False),  # short sha
    ("org/mono/actions/build@releases/v1", "action", "org", "mono", "actions/build", "releases/v1", "ref", False),
    ("org/shared/.github/workflows/r.yml@main", "reusable_workflow", "org", "shared", ".github/workflows/r.yml",
     "main", "ref", False),
    ("./.github/actions/x", "local", None, None, "./.github/actions/x", None, None, True),
    ("docker://alpine:3.20", "docker", None, None, "alpine", "3.20", "tag", False),
    ("docker://alpine", "docker", None, None, "alpine", None, None, False),
    ("docker://localhost:5000/img", "docker", None, None, "localhost:5000/img", None, None, False),
    ("actions/checkout", "action", "actions", "checkout", None, None, None, False),
])
def test_uses_is_classified_by_form(raw: str, kind: str, owner: str | None, repo: str | None, path: str | None,
                                    ref: str | None, ref_kind: str | None, pinned: bool) -> None:
    got = classify(raw)
    assert (got["kind"], got["owner"], got["repo"], got["path"], got["ref"], got["ref_kind"], got["pinned"]) == (
        kind, owner, repo, path, ref, ref_kind, pinned)


def test_jobs_steps_uses_and_run_blocks(tmp_path: Path) -> None:
    (tmp_path / ".github" / "workflows").mkdir(parents=True)
    (tmp_path / ".github" / "workflows" / "ci.yml").write_text(WORKFLOW)
    (tmp_path / ".github" / "workflows" / "notes.txt").write_text("not a workflow")
    v = _run(tmp_path)
    assert v["files"] == [".github/workflows/ci.yml"] and v["rev"] is None
    wf = v["workflows"][".github/workflows/ci.yml"]
    assert wf["on"] == ["push", "workflow_dispatch"] and wf["name"] == "ci"  # `on:` is a key, not True
    assert wf["permissions"] == {"contents": "read"}
    steps = wf["jobs"]["test"]["steps"]
    assert [s["line"] for s in steps] == [11, 12, 15, 16, 17, 18, 19, 25]
    assert steps[1]["name"] == "Set up" and steps[1]["with"] == {"python-version": "3.12"}
    assert wf["jobs"]["call"]["uses"]["kind"] == "reusable_workflow"
    assert [(u["line"], u["ref_kind"]) for u in v["uses"]] == [
        (11, "sha"), (13, "tag"), (15, "ref"), (16, None), (17, "tag"), (18, "sha"), (27, "tag")]
    assert [u["raw"] for u in v["unpinned"]] == [
        "actions/setup-python@v5", "org/monorepo/actions/build@main", "docker://alpine:3.20",
        "org/shared/.github/workflows/release.yml@v1.2.3"]
    assert [(r["line_start"], r["line_end"], r["shell"], r["name"]) for r in v["runs"]] == [
        (22, 23, "bash", "Tests"), (25, 25, None, None)]
    assert v["runs"][0]["text"] == "pytest -q\necho done\n"
    lines = WORKFLOW.splitlines()
    assert lines[21].strip() == "pytest -q" and lines[22].strip() == "echo done"


def test_this_repositorys_own_workflow() -> None:
    v = _run(ROOT)
    assert v["files"] == [".github/workflows/policyrun.yml"]
    assert v["unpinned"] == [] and v["uses"] and all(u["ref_kind"] == "sha" for u in v["uses"])
    text = (ROOT / ".github" / "workflows" / "policyrun.yml").read_text().splitlines()
    for run in v["runs"]:  # each range holds the script's first and last lines
        first, last = run["text"].strip().splitlines()[0], run["text"].strip().splitlines()[-1]
        assert first.split()[0] in text[run["line_start"] - 1] and last.split()[-1] in text[run["line_end"] - 1]
    assert v["workflows"][".github/workflows/policyrun.yml"]["on"] == ["pull_request", "push"]


def test_at_a_revision_read_only(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "r")
    repo.write(".github/workflows/ci.yml", WORKFLOW)
    repo.commit("ci")
    repo.git("tag", "base")
    repo.write(".github/workflows/ci.yml", WORKFLOW.replace("@v5", "@a26af69be951a213d495a4c3e4e4022e16d87065"))
    repo.git("add", "-A")
    repo.write(".github/workflows/new.yaml", "on: push\njobs: {}\n")  # untracked: not read by default
    before = snapshot(repo)
    now, then = _run(repo.path), _run(repo.path, rev="base")
    assert snapshot(repo) == before
    assert len(now["unpinned"]) == 3 and len(then["unpinned"]) == 4
    assert then["rev_sha"] == repo.sha("base") and now["files"] == [".github/workflows/ci.yml"]
    assert _run(repo.path, untracked=True)["files"] == [".github/workflows/ci.yml", ".github/workflows/new.yaml"]


def test_a_workflow_that_does_not_parse_fails_the_fact(tmp_path: Path) -> None:
    (tmp_path / ".github" / "workflows").mkdir(parents=True)
    (tmp_path / ".github" / "workflows" / "bad.yml").write_text("on: push\njobs:\n  a: [\n")
    with pytest.raises(ProbeError) as info:
        _run(tmp_path)
    assert info.value.code == "file.parse_error" and ".github/workflows/bad.yml:" in info.value.message


def test_no_workflows_is_an_empty_fact(tmp_path: Path) -> None:
    v = _run(tmp_path)
    assert (v["files"], v["uses"], v["unpinned"], v["runs"]) == ([], [], [], [])
