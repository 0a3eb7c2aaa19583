"""The MCP results as views of the trace (policyrun.mcp.results), and what the MCP tools now do as
the CLI does because both call the application layer (docs/agents.md, "What every tool answers"). The tool
functions are called directly: no SDK needed."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from policyrun.mcp import tools
from policyrun.mcp.results import TRACE_RECORDS, VIEW_ONLY, CheckOut, PhaseOut, ReadOut
from policyrun.trace.model import CheckRecord, PhaseRecord, Read

KEY = "k3y-value-123"
RULEBOOK = """\
policyrun: 1
name: views
inputs:
  api_key: {type: string, secret: true, default: ""}
modes:
  audit: {phases: [NOTES]}
probes:
  notes: {uses: path, with: {paths: ["NOTES.md", "keys/${inputs.api_key}"]}}
report:
  hardware_phases: [NOTES]
phases:
  - id: NOTES
    evidence:
      - id: notes_exist
        check: "!('NOTES.md' in facts.notes.missing)"
        on_fail: BLOCKED
        message: no release notes
"""


def _fields(record: type[Any]) -> set[str]:
    if dataclasses.is_dataclass(record):
        return {f.name for f in dataclasses.fields(record)}
    return set(record.model_fields)


def test_each_view_shows_fields_of_its_trace_record_and_declares_the_rest() -> None:
    for view, record in TRACE_RECORDS.items():
        own = set(view.model_fields) - _fields(record)
        assert own == VIEW_ONLY.get(view, frozenset()), (view.__name__, record.__name__, own)


def test_a_view_copies_the_shared_fields_of_its_record() -> None:
    read = Read(path="facts.notes.missing", value=["NOTES.md"])
    check = CheckRecord(id="c", kind="evidence", expression="true", result="UNSATISFIED", outcome="BLOCKED",
                        reads=[read], message="m", location="rb.yaml:3:7")
    out = CheckOut.of(check, reads=[ReadOut.of(read)], probes=["notes"])
    assert out.model_dump() == {"id": "c", "kind": "evidence", "result": "UNSATISFIED", "outcome": "BLOCKED",
                                "expression": "true", "message": "m", "location": "rb.yaml:3:7",
                                "reads": [{"path": "facts.notes.missing", "value": ["NOTES.md"], "missing": False,
                                           "error": None, "truncated": False}],
                                "probes": ["notes"]}
    phase = PhaseRecord(phase="P", status="PASS", reason="r", next_allowed_action="go", blockers=["a", "b"])
    assert PhaseOut.of(phase).model_dump() == {"phase": "P", "title": "", "status": "PASS", "reason": "r",
                                               "blocker": None, "blockers": ["a", "b"], "next_allowed_action": "go"}


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "views.yaml").write_text(RULEBOOK, encoding="utf-8")
    (tmp_path / "NOTES.md").write_text("# 1.0\n", encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_collect_writes_the_snapshot_with_secret_inputs_masked_as_the_cli_does(project: Path) -> None:
    out = tools.collect("./views.yaml", inputs={"api_key": KEY}, out="facts/snap.json")
    assert out.exit_code == 0, out
    text = (project / "facts" / "snap.json").read_text()
    assert KEY not in text and "keys/***" in json.loads(text)["facts"]["notes"]["value"]["missing"]


def test_evaluate_reports_read_what_the_rulebook_tells_them_as_the_cli_does(project: Path) -> None:
    out = tools.evaluate("./views.yaml", out_dir="out", formats=["md"], timestamp=False)
    assert out.exit_code == 0, out
    report = (project / "out" / "report.md").read_text()
    # `report.hardware_phases` names NOTES: hardware-validated, although no gpu.* probe backs it.
    hardware = report.split("Hardware-validated", 1)[1].split("Shared-code", 1)[0]
    assert "NOTES" in hardware, report
