"""ci.workflows on the real afd-plugin history: its CPU-only CI workflow at the tip and at the commit
that added it, actions pinned by tag (not by sha), `run` blocks located."""

from __future__ import annotations

import subprocess
from pathlib import Path

from policyrun.probes.base import ProbeContext
from policyrun.probes.repo.workflows import WorkflowsProbe

WORKFLOW = ".github/workflows/cpu-only-ci.yml"


def _run(base: Path, **params: str) -> dict:  # type: ignore[type-arg]
    return WorkflowsProbe().run(params, ProbeContext(base_dir=base, timeout_s=60)).value


def test_tip_workflow(afd_repo: Path) -> None:
    v = _run(afd_repo)
    assert v["files"] == [WORKFLOW]
    wf = v["workflows"][WORKFLOW]
    assert wf["name"] == "CPU-only CI" and wf["on"] == ["pull_request", "push"]
    assert {u["raw"] for u in v["uses"]} == {"actions/checkout@v4", "actions/setup-python@v5", "astral-sh/setup-uv@v5"}
    assert all(u["ref_kind"] == "tag" and not u["pinned"] for u in v["uses"]) and len(v["unpinned"]) == len(v["uses"])
    lines = (afd_repo / WORKFLOW).read_text().splitlines()
    for run in v["runs"]:
        assert run["text"].strip().splitlines()[0] in lines[run["line_start"] - 1]
        assert run["text"].strip().splitlines()[-1] in lines[run["line_end"] - 1]
    assert any(r["text"].startswith("ruby -e") and r["line_start"] > 1 for r in v["runs"])  # a `run: |` block


def test_the_commit_that_added_it_and_the_one_before(afd_repo: Path) -> None:
    added = subprocess.run(["git", "log", "--format=%H", "--diff-filter=A", "--", WORKFLOW], cwd=afd_repo,
                           capture_output=True, text=True, check=True).stdout.split()[-1]
    first = _run(afd_repo, rev=added)
    assert first["files"] == [WORKFLOW] and first["rev_sha"] == added and first["uses"]
    assert _run(afd_repo, rev=f"{added}~1")["files"] == []
