"""Violations as rows (`row:`): rendered as `file:line: text`, one SARIF result and one GitHub
annotation per located row, kept in the trace; traces of checks without rows are unchanged."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from policyrun.evaluate.engine import evaluate
from policyrun.facts import Fact, FactsSnapshot, Provenance
from policyrun.language.inputs import resolve_inputs
from policyrun.language.lint import findings_for
from policyrun.render.github import render_trace_github
from policyrun.render.sarif import trace_to_sarif
from policyrun.language.rulebook import load_rulebook
from policyrun.trace.model import Trace, load_trace

PINS = [{"file": "pyproject.toml", "line": 16, "version": "0.9.0"},
        {"file": "requirements.txt", "line": 3, "version": "0.9.1"},
        {"file": "setup.py", "line": 9, "version": "0.8.5"}]


def _trace(tmp_path: Path, evidence: dict[str, Any]) -> Trace:
    rb = {"policyrun": 1, "name": "rows", "modes": {"m": {"phases": ["PINS"]}},
          "probes": {"pins": {"uses": "const", "with": {"value": None}}},
          "phases": [{"id": "PINS", "evidence": [evidence]}]}
    path = tmp_path / "rows.yaml"
    path.write_text(yaml.safe_dump(rb, sort_keys=False))
    loaded = load_rulebook(path)
    assert [f for f in findings_for(loaded) if f.severity == "error"] == []
    facts = FactsSnapshot(facts={"pins": Fact(value=PINS, provenance=Provenance(probe="pins", kind="const"))})
    return evaluate(loaded, mode="m", inputs=resolve_inputs(loaded.model, values={}), facts=facts, timestamp=False)


ROWS = {"id": "pins_agree",
        "violations": "facts.pins.filter(p, p.version != '0.9.1')"
                      ".map(p, {'file': p.file, 'line': p.line, 'text': 'pins vllm ' + p.version})",
        "row": {"fields": ["file", "line", "text"], "file": "file", "line": "line", "message": "text"},
        "message": "pins disagree with 0.9.1: ${violations}"}


def test_rows_render_as_file_line_text_and_the_trace_keeps_rows_and_their_fields(tmp_path: Path) -> None:
    trace = _trace(tmp_path, ROWS)
    phase = trace.phases[0]
    assert phase.status == "FAIL"
    assert phase.blocker == "pins disagree with 0.9.1: pyproject.toml:16: pins vllm 0.9.0; setup.py:9: pins vllm 0.8.5"
    check = phase.evidence[0]
    assert check.violations == [{"file": "pyproject.toml", "line": 16, "text": "pins vllm 0.9.0"},
                                {"file": "setup.py", "line": 9, "text": "pins vllm 0.8.5"}]
    assert check.row is not None and (check.row.file, check.row.line) == ("file", "line")
    # The trace round-trips the declaration.
    (tmp_path / "trace.json").write_text(trace.to_json())
    assert load_trace(tmp_path / "trace.json").phases[0].evidence[0].row == check.row


def test_sarif_has_one_result_per_row_at_its_file_and_line(tmp_path: Path) -> None:
    log = json.loads(trace_to_sarif(_trace(tmp_path, ROWS), tool_version="0"))
    rows = [r for r in log["runs"][0]["results"] if r.get("properties", {}).get("row")]
    where = [(r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"],
              r["locations"][0]["physicalLocation"]["region"]["startLine"], r["message"]["text"]) for r in rows]
    assert where == [("pyproject.toml", 16, "PINS FAIL: pins_agree: pins vllm 0.9.0"),
                     ("setup.py", 9, "PINS FAIL: pins_agree: pins vllm 0.8.5")]
    assert all(r["ruleId"] == "rows/PINS" for r in rows)
    assert len({r["partialFingerprints"]["policyrunRow/v1"] for r in rows}) == 2


def test_github_annotates_each_row_at_its_file_and_line(tmp_path: Path) -> None:
    text = render_trace_github(_trace(tmp_path, ROWS))
    lines = text.splitlines()
    assert len(lines) == 2, lines  # one per row, not a third for the check that both rows explain
    assert lines[0].startswith("::error file=pyproject.toml,line=16,title=")
    assert "pins_agree: pins vllm 0.9.0" in lines[0]
    assert lines[1].startswith("::error file=setup.py,line=9,")


def test_a_check_without_rows_writes_no_row_field_and_no_row_results(tmp_path: Path) -> None:
    plain = {"id": "pins_agree", "violations": "facts.pins.filter(p, p.version != '0.9.1').map(p, p.file)"}
    trace = _trace(tmp_path, plain)
    assert '"row"' not in trace.to_json()
    log = json.loads(trace_to_sarif(trace, tool_version="0"))
    assert [r for r in log["runs"][0]["results"] if r.get("properties", {}).get("row")] == []
    assert trace.phases[0].blocker == "pins_agree: pyproject.toml; setup.py"


def test_row_results_are_valid_sarif_and_stay_when_only_located_results_are_kept(tmp_path: Path) -> None:
    import jsonschema

    schema = json.loads((Path(__file__).parent / "schemas" / "sarif-schema-2.1.0.json").read_text())
    trace = _trace(tmp_path, ROWS)
    for located_only in (False, True):
        log = json.loads(trace_to_sarif(trace, tool_version="0", located_only=located_only))
        jsonschema.Draft4Validator(schema).validate(log)
        run = log["runs"][0]
        rows = [r for r in run["results"] if r.get("properties", {}).get("row")]
        assert len(rows) == 2
        assert all(run["tool"]["driver"]["rules"][r["ruleIndex"]]["id"] == r["ruleId"] for r in run["results"])
    # The phase's own result is placed at its deciding check's first row, too.
    phase_result = next(r for r in run["results"] if not r.get("properties", {}).get("row"))
    physical = phase_result["locations"][0]["physicalLocation"]
    assert (physical["artifactLocation"]["uri"], physical["region"]["startLine"]) == ("pyproject.toml", 16)
    assert "unlocated" not in run["properties"]
