"""The fact schemas against the real corpus (issue 21, item 1): the flagship's repository probes
collected on the real afd-plugin and vLLM v0.26.0 -> v0.27.0, and tests.junit on the plugin's real
unit-suite report, each value validated against its kind's fact schema closed as lint reads it
(tests/factschema.py): a real fact never fails lint."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from policyrun.cli import main
from tests.factschema import problems, snapshot_problems
from tests.gitfixtures import run_probe


def test_real_planning_facts_fit_their_schemas(afd_repo: Path, vllm_repo: Path, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(afd_repo)
    out = tmp_path / "facts.json"
    main(["collect", "upgrade-gpu-version", "--mode", "planning-audit", "--set", f"vllm_src={vllm_repo}",
          "--set", "target_ref=v0.27.0", "-o", str(out)])
    facts = json.loads(out.read_text())["facts"]
    kinds = {f["provenance"]["kind"] for f in facts.values() if f.get("error") is None}
    assert {"git.diff", "python.imports", "python.symbols", "markers", "docs.claims", "pins.package"} <= kinds
    assert snapshot_problems(facts) == []


def test_real_junit_fits_its_schema(afd_unit_junit: Path, tmp_path: Path) -> None:
    assert problems("tests.junit", run_probe("tests.junit", {"path": str(afd_unit_junit)}, tmp_path).value) == []
