"""SARIF 2.1.0 for lint findings and for a trace, validated with jsonschema."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import tracefactory as tf

from policyrun.errors import Finding, Location
from policyrun.render.sarif import artifact_uri, parse_location, render_sarif, trace_to_sarif

SCHEMA = json.loads((Path(__file__).parent / "schemas" / "sarif-2.1.0-subset.json").read_text())

FINDINGS = [
    Finding("L102", "probe 'target' is never read by any check", Location("rulebooks/upgrade.yaml", 31, 5),
            severity="warning", node="probes → target"),
    Finding("X002", "type error: no matching overload for '_>_' applied to '(string, int)'",
            Location("rulebooks/upgrade.yaml", 52, 16), node="phases → FREEZE_IDENTITY → evidence[0] → check"),
    Finding("Y001", "mapping values are not allowed here", Location("rulebooks/broken file.yaml", 3, 0)),
    Finding("R001", "template not found", Location("rulebooks/templates/x.md.j2")),
]


def _validate(text: str) -> dict[str, Any]:
    log = json.loads(text)
    jsonschema.Draft4Validator(SCHEMA, format_checker=jsonschema.Draft4Validator.FORMAT_CHECKER).validate(log)
    return log


def test_lint_sarif_golden() -> None:
    tf.golden("lint.sarif", render_sarif(FINDINGS, tool_version="0.1.0"))


def test_lint_sarif_is_valid_and_located() -> None:
    log = _validate(render_sarif(FINDINGS, tool_version="0.1.0"))
    run = log["runs"][0]
    assert log["version"] == "2.1.0" and run["tool"]["driver"]["name"] == "policyrun"
    rules = run["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == ["L102", "R001", "X002", "Y001"]
    by_rule = {r["ruleId"]: r for r in run["results"]}
    for result in run["results"]:
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"]
    x002 = by_rule["X002"]["locations"][0]["physicalLocation"]
    assert x002 == {"artifactLocation": {"uri": "rulebooks/upgrade.yaml"},
                    "region": {"startLine": 52, "startColumn": 16}}
    assert by_rule["X002"]["level"] == "error" and by_rule["L102"]["level"] == "warning"
    assert "(at phases → FREEZE_IDENTITY → evidence[0] → check)" in by_rule["X002"]["message"]["text"]
    # Column 0 means unknown: no startColumn; line 0: no region at all.
    assert by_rule["Y001"]["locations"][0]["physicalLocation"]["region"] == {"startLine": 3}
    y001 = by_rule["Y001"]["locations"][0]["physicalLocation"]
    assert y001["artifactLocation"]["uri"] == "rulebooks/broken%20file.yaml"
    assert "region" not in by_rule["R001"]["locations"][0]["physicalLocation"]


def test_lint_sarif_empty_is_valid() -> None:
    log = _validate(render_sarif([], tool_version="0.1.0"))
    assert log["runs"][0]["results"] == [] and log["runs"][0]["tool"]["driver"]["rules"] == []


def test_fingerprints_survive_line_moves() -> None:
    a = json.loads(render_sarif(FINDINGS[:1], tool_version="0"))["runs"][0]["results"][0]
    moved = Finding(**{**FINDINGS[0].__dict__, "location": Location("rulebooks/upgrade.yaml", 40, 5)})
    b = json.loads(render_sarif([moved], tool_version="0"))["runs"][0]["results"][0]
    assert a["partialFingerprints"] == b["partialFingerprints"]


def test_artifact_uri_is_relative_to_base(tmp_path: Path) -> None:
    assert artifact_uri(str(tmp_path / "rb" / "a.yaml"), tmp_path) == "rb/a.yaml"
    assert artifact_uri("./rb/a.yaml") == "rb/a.yaml"
    assert artifact_uri("/elsewhere/a.yaml", tmp_path) == "file:///elsewhere/a.yaml"


def test_parse_location() -> None:
    assert parse_location("a/b.yaml:12:5") == Location("a/b.yaml", 12, 5)
    assert parse_location("a/b.yaml:12") == Location("a/b.yaml", 12)
    assert parse_location("C:/x/b.yaml:3:1") == Location("C:/x/b.yaml", 3, 1)
    assert parse_location("b.yaml") == Location("b.yaml")
    assert parse_location(None) is None


def test_trace_sarif_golden() -> None:
    tf.golden("trace.sarif", trace_to_sarif(tf.flagship(), tool_version="0.1.0"))


@pytest.mark.parametrize("make", [tf.flagship, tf.generic, tf.all_pass])
def test_trace_sarif_is_valid(make) -> None:  # type: ignore[no-untyped-def]
    _validate(trace_to_sarif(make(), tool_version="0.1.0"))


def test_trace_sarif_reports_non_pass_phases_at_their_lines() -> None:
    trace = tf.flagship()
    run = _validate(trace_to_sarif(trace, tool_version="0.1.0"))["runs"][0]
    non_pass = [p for p in trace.phases if p.status != "PASS"]
    assert [r["ruleId"] for r in run["results"]] == [f"upgrade-gpu-version/{p.phase}" for p in non_pass]
    by_phase = {r["ruleId"].split("/")[1]: r for r in run["results"]}
    unit = by_phase["STATIC_AND_UNIT_GATE"]
    assert (unit["kind"], unit["level"]) == ("fail", "error")
    assert unit["locations"][0]["physicalLocation"] == {
        "artifactLocation": {"uri": "rulebooks/upgrade-gpu-version.yaml"},
        "region": {"startLine": 160, "startColumn": 5}}
    assert "unit_tests_pass" in unit["message"]["markdown"] and unit["properties"]["checks"] == ["unit_tests_pass"]
    skipped = by_phase["FINAL_AUDIT"]
    assert (skipped["kind"], skipped["level"]) == ("notApplicable", "none")
    assert run["automationDetails"]["id"] == "policyrun/upgrade-gpu-version/final-validation/"


def test_trace_sarif_falls_back_to_rulebook_path() -> None:
    trace = tf.generic().model_copy(update={"rulebook": tf.generic().rulebook.model_copy(update={"path": "rb.yaml"})})
    run = _validate(trace_to_sarif(trace, tool_version="0"))["runs"][0]
    assert run["results"][0]["locations"][0]["physicalLocation"]["region"] == {"startLine": 1, "startColumn": 1}


def test_schema_subset_rejects_misspelt_properties() -> None:
    log = json.loads(render_sarif(FINDINGS[:1], tool_version="0"))
    log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"]["startcolumn"] = 1
    with pytest.raises(jsonschema.ValidationError):
        _validate(json.dumps(log))
