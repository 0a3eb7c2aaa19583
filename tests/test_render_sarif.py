"""SARIF 2.1.0 for lint findings and for a trace, validated against the full OASIS schema.

A trace's failing phases are located at the code their checks read; the end-to-end tests collect
real facts from fixture repositories (search, JUnit, Python constants, git diff) and compare the
locations with lines the test finds in the files itself.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import tracefactory as tf
from gitfixtures import init_repo

from policyrun.cli import main
from policyrun.errors import Finding, Location
from policyrun.facts import Provenance, RepoState
from policyrun.lintcodes import LINT_CODES
from policyrun.render.sarif import artifact_uri, render_sarif, trace_to_sarif
from policyrun.trace.model import CheckRecord, DerivedRecord, PhaseRecord, Read, Trace, load_trace

SCHEMA = json.loads((Path(__file__).parent / "schemas" / "sarif-schema-2.1.0.json").read_text())

FINDINGS = [
    Finding("L102", "probe 'target' is never read by any check", Location("rulebooks/upgrade.yaml", 31, 5),
            severity="warning", node="probes → target"),
    Finding("X002", "type error: no matching overload for '_>_' applied to '(string, int)'",
            Location("rulebooks/upgrade.yaml", 52, 16), node="phases → FREEZE_IDENTITY → evidence[0] → check"),
    Finding("Y001", "mapping values are not allowed here", Location("rulebooks/broken file.yaml", 3, 0)),
    Finding("R001", "template not found", Location("rulebooks/templates/x.md.j2")),
]


def validate(text: str) -> dict[str, Any]:
    log = json.loads(text)
    jsonschema.Draft4Validator(SCHEMA, format_checker=jsonschema.Draft4Validator.FORMAT_CHECKER).validate(log)
    return log


def _where(loc: dict[str, Any]) -> tuple[str, str | None, int, int]:
    phys = loc["physicalLocation"]
    region = phys.get("region", {})
    return (phys["artifactLocation"]["uri"], phys["artifactLocation"].get("uriBaseId"),
            region.get("startLine", 0), region.get("startColumn", 0))


# --- lint ----------------------------------------------------------------------------------------

def test_lint_sarif_golden() -> None:
    tf.golden("lint.sarif", render_sarif(FINDINGS, tool_version="0.1.0"))


def test_lint_sarif_is_valid_and_located() -> None:
    log = validate(render_sarif(FINDINGS, tool_version="0.1.0"))
    run = log["runs"][0]
    assert log["version"] == "2.1.0" and run["tool"]["driver"]["name"] == "policyrun"
    rules = run["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == ["L102", "R001", "X002", "Y001"]
    by_rule = {r["ruleId"]: r for r in run["results"]}
    for result in run["results"]:
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"]
    x002 = by_rule["X002"]["locations"][0]["physicalLocation"]
    assert x002 == {"artifactLocation": {"uri": "rulebooks/upgrade.yaml", "uriBaseId": "%SRCROOT%"},
                    "region": {"startLine": 52, "startColumn": 16}}
    assert by_rule["X002"]["level"] == "error" and by_rule["L102"]["level"] == "warning"
    assert "(at phases → FREEZE_IDENTITY → evidence[0] → check)" in by_rule["X002"]["message"]["text"]
    # Column 0 means unknown: no startColumn; line 0: no region at all.
    assert by_rule["Y001"]["locations"][0]["physicalLocation"]["region"] == {"startLine": 3}
    y001 = by_rule["Y001"]["locations"][0]["physicalLocation"]
    assert y001["artifactLocation"]["uri"] == "rulebooks/broken%20file.yaml"
    assert "region" not in by_rule["R001"]["locations"][0]["physicalLocation"]


def test_lint_rules_carry_the_code_table_description_and_help() -> None:
    rules = {r["id"]: r for r in validate(render_sarif(FINDINGS, tool_version="0"))["runs"][0]["tool"]["driver"]["rules"]}
    x002 = LINT_CODES["X002"]
    assert rules["X002"]["shortDescription"] == {"text": x002.short}
    assert rules["X002"]["help"]["text"].startswith(f"X002: {x002.short}. ")
    assert x002.help in rules["X002"]["help"]["markdown"] and "**X002** (error)" in rules["X002"]["help"]["markdown"]
    # A code outside the table (a plugin's) still gets a description rather than nothing.
    assert rules["L102"]["shortDescription"] == {"text": "policyrun lint L102"}
    assert rules["L102"]["help"]["text"]


def test_every_lint_code_has_real_help() -> None:
    for code, entry in LINT_CODES.items():
        assert entry.code == code and entry.severity in ("error", "warning")
        assert entry.short and not entry.short.endswith(".") and len(entry.help) > 20, code


def test_docs_lint_md_lists_exactly_the_lint_codes() -> None:
    docs = (Path(__file__).parent.parent / "docs" / "lint.md").read_text()
    rows = re.findall(r"^\| ([A-Z][0-9]{3}) \| (error|warning) \|", docs, re.MULTILINE)
    assert len(rows) == len({code for code, _ in rows})
    assert dict(rows) == {code: entry.severity for code, entry in LINT_CODES.items()}


# Modules whose every code is a lint finding (the loaders, static checks, expression compiler,
# overlays and waivers); in the template modules only codes built into a Finding are lint's
# (the others are raised while rendering a report).
LINT_MODULES = ["language/checks.py", "language/lint.py", "language/typecheck.py", "language/vacuous.py", "language/rulebook.py", "language/overlay.py", "yamlsource.py",
                "language/expr.py", "language/waivers.py", "language/suitelint.py", "language/commandlint.py"]


def test_every_code_lint_can_report_is_in_the_table() -> None:
    package = Path(__file__).parent.parent / "policyrun"
    reported: set[str] = set()
    for name in LINT_MODULES:
        reported |= set(re.findall(r'"([A-Z][0-9]{3})"', (package / name).read_text()))
    for name in ["render/templating.py", "render/__init__.py"]:
        reported |= set(re.findall(r'Finding\(\s*"([A-Z][0-9]{3})"', (package / name).read_text()))
    assert {"L003", "X002", "Y008", "W003", "R007"} <= reported
    assert reported == set(LINT_CODES)


def test_lint_sarif_empty_is_valid() -> None:
    log = validate(render_sarif([], tool_version="0.1.0"))
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


def test_schema_rejects_misspelt_properties() -> None:
    log = json.loads(render_sarif(FINDINGS[:1], tool_version="0"))
    log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"]["startcolumn"] = 1
    with pytest.raises(jsonschema.ValidationError):
        validate(json.dumps(log))


# --- traces: statuses and rulebook lines ---------------------------------------------------------

def test_trace_sarif_golden() -> None:
    tf.golden("trace.sarif", trace_to_sarif(tf.flagship(), tool_version="0.1.0"))


@pytest.mark.parametrize("make", [tf.flagship, tf.generic, tf.all_pass])
def test_trace_sarif_is_valid(make) -> None:  # type: ignore[no-untyped-def]
    validate(trace_to_sarif(make(), tool_version="0.1.0"))


def test_trace_sarif_reports_failing_phases_only() -> None:
    trace = tf.flagship()
    run = validate(trace_to_sarif(trace, tool_version="0.1.0"))["runs"][0]
    failing = [p for p in trace.phases if p.status in ("FAIL", "BLOCKED", "STOPPED", "WARN")]
    assert failing and any(p.status == "SKIPPED" for p in trace.phases)
    assert [r["ruleId"] for r in run["results"]] == [f"upgrade-gpu-version/{p.phase}" for p in failing]
    assert [r["id"] for r in run["tool"]["driver"]["rules"]] == [r["ruleId"] for r in run["results"]]
    assert all(r["kind"] == "fail" and r["level"] == "error" for r in run["results"])
    assert all(r["help"]["text"] and r["help"]["markdown"] for r in run["tool"]["driver"]["rules"])
    assert run["automationDetails"]["id"] == "policyrun/upgrade-gpu-version/final-validation/"


def test_trace_sarif_without_code_locations_stays_on_the_rulebook_line() -> None:
    run = validate(trace_to_sarif(tf.flagship(), tool_version="0.1.0"))["runs"][0]
    unit = next(r for r in run["results"] if r["ruleId"].endswith("/STATIC_AND_UNIT_GATE"))
    # The unit check read only totals: no code location, so the phase's rulebook line is primary
    # and the check's rulebook line is related.
    assert _where(unit["locations"][0]) == ("rulebooks/upgrade-gpu-version.yaml", "%SRCROOT%", 160, 5)
    assert [_where(r)[2] for r in unit["relatedLocations"]] == [166]
    assert "unit_tests_pass" in unit["message"]["markdown"] and unit["properties"]["checks"] == ["unit_tests_pass"]


def test_warn_phase_is_a_warning_and_skipped_is_absent() -> None:
    trace = tf.generic()
    phases = [p.model_copy(update={"status": "WARN"}) if i == 0 else p.model_copy(update={"status": "SKIPPED"})
              for i, p in enumerate(trace.phases)]
    run = validate(trace_to_sarif(trace.model_copy(update={"phases": phases}), tool_version="0"))["runs"][0]
    assert [(r["ruleId"].split("/")[1], r["level"]) for r in run["results"]] == [(phases[0].phase, "warning")]
    assert run["tool"]["driver"]["rules"][0]["defaultConfiguration"] == {"level": "warning"}


@pytest.mark.parametrize("path, uri", [("rb.yaml", "rb.yaml"), ("rules/gate:2", "rules/gate%3A2")])
def test_trace_sarif_falls_back_to_rulebook_path(path: str, uri: str) -> None:
    """A rulebook file whose name ends like a line number (`gate:2`) is that file, at its first line."""
    trace = tf.generic().model_copy(update={"rulebook": tf.generic().rulebook.model_copy(update={"path": path})})
    trace = trace.model_copy(update={"phases": [p.model_copy(update={"location": None}) for p in trace.phases]})
    run = validate(trace_to_sarif(trace, tool_version="0"))["runs"][0]
    failing = [r for r in run["results"] if "locations" in r]
    assert failing and all(_where(r["locations"][0])[:3] == (uri, "%SRCROOT%", 1) for r in failing
                           if not r.get("relatedLocations"))


# --- traces of a shipped rulebook: locations in the user's repository only ---------------------

def _uris(log: dict[str, Any]) -> list[str]:
    run = log["runs"][0]
    return [loc["physicalLocation"]["artifactLocation"]["uri"] for r in run["results"]
            for loc in r.get("locations", []) + r.get("relatedLocations", [])]


def test_trace_sarif_of_a_shipped_rulebook_golden() -> None:
    tf.golden("trace-shipped.sarif", trace_to_sarif(tf.shipped(), tool_version="0.1.0"))


@pytest.mark.parametrize("path", ["<shipped>/upgrade-gpu-version.yaml",
                                  "/usr/lib/python3/site-packages/policyrun/_shipped/rulebooks/upgrade-gpu-version.yaml",
                                  "/opt/venv/lib/python3.12/site-packages/policyrun/_shipped/rulebooks/x.yaml"])
def test_a_shipped_rulebooks_lines_are_never_locations(path: str) -> None:
    """A shipped rulebook's file is inside the installed package, not the user's repository: a
    result is placed on the code its checks read, else it has no physical location and names its
    rule in ruleId and properties."""
    run = validate(trace_to_sarif(tf.shipped(path), tool_version="0"))["runs"][0]
    results = {r["ruleId"].split("/")[1]: r for r in run["results"]}
    assert not any("shipped" in uri or "site-packages" in uri or "upgrade-gpu-version" in uri
                   for uri in _uris({"runs": [run]}))
    # The unit gate read only totals: no code location, so no location at all (it used to be the
    # phase's rulebook line), and the rule is named in ruleId and properties.
    unit = results["STATIC_AND_UNIT_GATE"]
    assert "locations" not in unit and "relatedLocations" not in unit
    assert unit["ruleId"] == "upgrade-gpu-version/STATIC_AND_UNIT_GATE"
    assert unit["properties"]["rulebook"] == "upgrade-gpu-version"
    assert unit["properties"]["phase"] == "STATIC_AND_UNIT_GATE"
    assert unit["properties"]["checks"] == ["unit_tests_pass"]
    # `<shipped>/NAME.yaml` is a stable name, not a path: kept for people; an installed path is not.
    shown = unit["properties"].get("rulebook_location")
    assert shown == ("<shipped>/upgrade-gpu-version.yaml:160:5" if path.startswith("<") else None)


def test_an_overlay_of_a_shipped_rulebook_is_the_users_file() -> None:
    """An overlay in the repository that extends a shipped rulebook: the phases it did not change
    are defined in the shipped file (no location), so a result with no code falls back to the
    overlay, the rulebook file that is the user's."""
    trace = tf.shipped()
    trace = trace.model_copy(update={"rulebook": trace.rulebook.model_copy(update={"path": "policy/overlay.yaml"})})
    run = validate(trace_to_sarif(trace, tool_version="0"))["runs"][0]
    assert all(_where(r["locations"][0]) == ("policy/overlay.yaml", "%SRCROOT%", 1, 1) for r in run["results"])
    assert not any("shipped" in uri for uri in _uris({"runs": [run]}))


def test_located_only_leaves_out_unlocated_results_but_names_them() -> None:
    """GitHub code scanning refuses a whole SARIF file when one result has no location."""
    full = validate(trace_to_sarif(tf.shipped(), tool_version="0"))["runs"][0]
    run = validate(trace_to_sarif(tf.shipped(), tool_version="0", located_only=True))["runs"][0]
    unlocated = [r["ruleId"] for r in full["results"] if "locations" not in r]
    assert unlocated and all("locations" in r for r in run["results"])
    assert [r["ruleId"] for r in run["results"]] == [r["ruleId"] for r in full["results"] if "locations" in r]
    assert [r["id"] for r in run["tool"]["driver"]["rules"]] == [r["ruleId"] for r in run["results"]]
    assert [r["ruleIndex"] for r in run["results"]] == list(range(len(run["results"])))
    assert run["properties"]["unlocated"] == unlocated
    assert "unlocated" not in full["properties"]
    # A trace of the user's own rulebook has a location for every result: nothing to leave out.
    assert trace_to_sarif(tf.flagship(), tool_version="0", located_only=True) == \
        trace_to_sarif(tf.flagship(), tool_version="0")


def test_a_disagreement_names_both_sides_and_links_them() -> None:
    """The message the rulebook wrote names both sources; the violation is the primary location and
    the other side a related location that the message links to (`[path:line](id)`), which is how
    code scanning shows a related location."""
    message = "sources disagree: pin pyproject.toml:16 = 0.26.1, but constant afd/compat.py:12 = 0.26.0 [x]"
    check = CheckRecord(id="agree", kind="evidence", expression="size(violations) == 0", result="UNSATISFIED",
                        outcome="BLOCKED", facts=["consts"], message=message,
                        reads=[Read(path="derived.conflicts", value=[{"source": "afd/compat.py:12", "value": "0.26.0"}])],
                        violations=["constant afd/compat.py:12 = 0.26.0"], location="<shipped>/r.yaml:12:9")
    prov = {"consts": Provenance(probe="consts", kind="python.constants", params={"root": REPO},
                                 repo=RepoState(path=REPO))}
    trace = _trace([check], prov, status="BLOCKED")
    phase = trace.phases[0].model_copy(update={"blocker": message, "location": "<shipped>/r.yaml:10:5"})
    trace = trace.model_copy(update={"phases": [phase], "rulebook": trace.rulebook.model_copy(
        update={"path": "<shipped>/r.yaml"}), "derived": [DerivedRecord(id="conflicts", expression="x",
                                                                          facts=["consts"])]})
    result = validate(trace_to_sarif(trace, tool_version="0"))["runs"][0]["results"][0]
    assert [_where(x) for x in result["locations"]] == [("afd/compat.py", "%SRCROOT%", 12, 0)]
    assert [_where(x) for x in result["relatedLocations"]] == [("pyproject.toml", "%SRCROOT%", 16, 0)]
    assert result["relatedLocations"][0]["message"]["text"] == "named in the message of agree"
    assert result["message"]["text"] == (
        "AUDIT BLOCKED: sources disagree: pin [pyproject.toml:16](1) = 0.26.1, but constant afd/compat.py:12 = "
        "0.26.0 \\[x\\]. Next allowed action: fix it")


def test_a_message_without_links_is_left_as_written() -> None:
    run = validate(trace_to_sarif(tf.generic(), tool_version="0"))["runs"][0]
    assert run["results"][0]["message"]["text"] == ("TAG FAIL: tag v2.0 is not signed. Next allowed action: "
                                                    "sign the tag with `git tag -s`")


def test_identity_disagree_example_points_at_both_sources(tmp_path: Path) -> None:
    """The flagship's identity-disagree example: FREEZE_IDENTITY BLOCKED because the pin says 0.26.1
    and the constant 0.26.0. Both are files of the plugin; the shipped rulebook is neither."""
    root = Path(__file__).parent.parent / "examples" / "identity-disagree"
    out = tmp_path / "out"
    code = main(["evaluate", "upgrade-gpu-version", "--mode", "planning-audit", "--inputs", str(root / "inputs.yaml"),
                 "--facts", str(root / "facts.json"), "--out", str(out), "--format", "sarif", "--no-timestamp", "-q"])
    assert code == 2
    log = validate((out / "report.sarif").read_text())
    [result] = log["runs"][0]["results"]
    assert result["ruleId"] == "upgrade-gpu-version/FREEZE_IDENTITY"
    assert [_where(x) for x in result["locations"]] == [("afd_plugin/compat/vllm.py", "%SRCROOT%", 12, 0)]
    assert [_where(x) for x in result["relatedLocations"]] == [("pyproject.toml", "%SRCROOT%", 16, 0)]
    assert "pin [pyproject.toml:16](1) = 0.26.1, but constant afd_plugin/compat/vllm.py:12" in result["message"]["text"]
    assert not any("shipped" in uri or uri.startswith("rulebooks/") for uri in _uris(log))
    # The check is the generic rulebook's, which the flagship overlays: located in the file that wrote it.
    assert result["properties"]["rulebook_location"].startswith("<shipped>/upgrade-vllm-plugin.yaml:")


# --- traces: code locations from the facts a check read ------------------------------------------

REPO = "/work/afd"


def _trace(checks: list[CheckRecord], provenance: dict[str, Provenance], status: str = "FAIL") -> Trace:
    phase = PhaseRecord(phase="AUDIT", status=status, reason="r", evidence=checks,  # type: ignore[arg-type]
                        blocker="b", next_allowed_action="fix it", location="rulebooks/r.yaml:10:5")
    return tf.generic().model_copy(update={"phases": [phase], "provenance": provenance, "derived": []})


def _search_prov(probe: str, root: str, repo: str) -> Provenance:
    return Provenance(probe=probe, kind="search.regex", params={"root": root, "pattern": "x"},
                      repo=RepoState(path=repo, head="a" * 40))


def _hits(n: int) -> list[dict[str, Any]]:
    return [{"path": f"src/m{i}.py", "line": i + 1, "column": 3, "match": "x", "groups": [], "text": "x"}
            for i in range(n)]


def test_locations_are_bounded_and_the_first_hit_is_primary() -> None:
    check = CheckRecord(id="clean", kind="evidence", expression="size(facts.s.hits) == 0", result="UNSATISFIED",
                        outcome="FAIL", reads=[Read(path="facts.s.hits", value=_hits(30))], facts=["s"],
                        location="rulebooks/r.yaml:12:9")
    run = validate(trace_to_sarif(_trace([check], {"s": _search_prov("s", REPO, REPO)}), tool_version="0"))["runs"][0]
    result = run["results"][0]
    assert _where(result["locations"][0]) == ("src/m0.py", "%SRCROOT%", 1, 3)
    related = [_where(r) for r in result["relatedLocations"]]
    # The check's rulebook line first, then 19 more hits (20 code locations in all), then the phase.
    assert related[0] == ("rulebooks/r.yaml", "%SRCROOT%", 12, 9)
    assert related[1:20] == [(f"src/m{i}.py", "%SRCROOT%", i + 1, 3) for i in range(1, 20)]
    assert related[20:] == [("rulebooks/r.yaml", "%SRCROOT%", 10, 5)]
    assert [r["id"] for r in result["relatedLocations"]] == list(range(1, 22))
    assert result["properties"]["code_locations"] == 20


def test_hits_under_a_subfolder_root_are_relative_to_the_repository() -> None:
    check = CheckRecord(id="clean", kind="evidence", expression="e", result="UNSATISFIED", outcome="FAIL",
                        reads=[Read(path="facts.s.hits", value=_hits(1))], facts=["s"])
    trace = _trace([check], {"s": _search_prov("s", f"{REPO}/pkg", REPO)})
    assert _where(json.loads(trace_to_sarif(trace, tool_version="0"))["runs"][0]["results"][0]["locations"][0]) \
        == ("pkg/src/m0.py", "%SRCROOT%", 1, 3)


def test_truncated_values_yield_no_locations_but_the_result_stays_on_the_rulebook() -> None:
    summary = {"truncated": True, "type": "list", "length": 5000, "sha256": "0" * 64}
    check = CheckRecord(id="clean", kind="evidence", expression="e", result="UNSATISFIED", outcome="FAIL",
                        reads=[Read(path="facts.s.hits", value=summary)], facts=["s"], location="rulebooks/r.yaml:12:9")
    result = validate(trace_to_sarif(_trace([check], {"s": _search_prov("s", REPO, REPO)}),
                                     tool_version="0"))["runs"][0]["results"][0]
    assert _where(result["locations"][0]) == ("rulebooks/r.yaml", "%SRCROOT%", 10, 5)
    assert result["properties"]["code_locations"] == 0


def test_sites_rows_and_violations_are_locations() -> None:
    constants = [{"name": "TARGET", "file": "afd/compat.py", "line": 12, "site": "afd/compat.py:12", "value": "1"}]
    imports = [{"file": "afd/a.py", "line": 3, "module": "vllm.x", "site": "afd/a.py:3",
                "target": {"defining_file": "vllm/x.py", "line": 40}}]
    check = CheckRecord(id="agree", kind="evidence", expression="e", result="UNSATISFIED", outcome="BLOCKED",
                        reads=[Read(path="derived.conflicts", value=[{"source": "pyproject.toml:7", "value": "1"}]),
                               Read(path="facts.consts.constants", value=constants),
                               Read(path="facts.imps.imports", value=imports)],
                        facts=["consts", "imps"], violations=["constant afd/compat.py:12 = 1 (not 2)"])
    prov = {"consts": Provenance(probe="consts", kind="python.constants", params={"root": REPO},
                                 repo=RepoState(path=REPO)),
            "imps": Provenance(probe="imps", kind="python.imports", params={"root": REPO}, repo=RepoState(path=REPO))}
    trace = _trace([check], prov, status="BLOCKED")
    trace = trace.model_copy(update={"derived": [DerivedRecord(id="conflicts", expression="x", facts=["consts"])]})
    result = validate(trace_to_sarif(trace, tool_version="0"))["runs"][0]["results"][0]
    code = [_where(result["locations"][0])] + [_where(r) for r in result["relatedLocations"]
                                                if r["message"]["text"] != "phase AUDIT in the rulebook"]
    # Violations first; the constant's row merges with it; the upstream definition in `target`
    # (another tree) is not a location of this repository.
    assert code == [("afd/compat.py", "%SRCROOT%", 12, 0), ("pyproject.toml", "%SRCROOT%", 7, 0),
                    ("afd/a.py", "%SRCROOT%", 3, 0)]


def test_paths_in_facts_that_are_not_about_code_are_not_locations() -> None:
    """An installed package's folder (`python.stack`), a path inside an attestation document: not
    code a finding is about. A violation that names `path:line` still is."""
    check = CheckRecord(id="stack", kind="evidence", expression="e", result="UNSATISFIED", outcome="BLOCKED",
                        reads=[Read(path="facts.stack.torch", value={"path": "/opt/venv/site-packages/torch"}),
                               Read(path="facts.plan.document", value={"stages": [{"file": "afd/x.py", "line": 3}]})],
                        facts=["stack", "plan"], violations=["afd/worker.py:7 is not staged"])
    prov = {"stack": Provenance(probe="stack", kind="python.stack", params={"python": "/opt/venv/bin/python"}),
            "plan": Provenance(probe="plan", kind="attestation", params={"path": "evidence/plan.yaml"})}
    result = validate(trace_to_sarif(_trace([check], prov), tool_version="0"))["runs"][0]["results"][0]
    code = [_where(result["locations"][0])] + [_where(r) for r in result["relatedLocations"]]
    assert ("afd/worker.py", "%SRCROOT%", 7, 0) == code[0]
    assert ("evidence/plan.yaml", "%SRCROOT%", 0, 0) in code
    assert not any("site-packages" in c[0] or c[0] == "afd/x.py" for c in code)
    assert result["properties"]["code_locations"] == 2


def test_base_makes_locations_relative_and_other_repositories_get_their_own_base() -> None:
    check = CheckRecord(id="clean", kind="evidence", expression="e", result="UNSATISFIED", outcome="FAIL",
                        reads=[Read(path="facts.s.hits", value=_hits(1)), Read(path="facts.u.hits", value=_hits(1))],
                        facts=["s", "u"])
    prov = {"s": _search_prov("s", REPO, REPO), "u": _search_prov("u", "/work/vllm", "/work/vllm")}
    log = validate(trace_to_sarif(_trace([check], prov), tool_version="0", base_dir=Path("/work")))
    result = log["runs"][0]["results"][0]
    assert _where(result["locations"][0]) == ("afd/src/m0.py", "%SRCROOT%", 1, 3)
    assert ("vllm/src/m0.py", "%SRCROOT%", 1, 3) in [_where(r) for r in result["relatedLocations"]]
    # Without --base the repository most probes read is the source root (ties: the first by name),
    # and the other one is named in originalUriBaseIds.
    log = validate(trace_to_sarif(_trace([check], prov), tool_version="0"))
    result = log["runs"][0]["results"][0]
    assert _where(result["locations"][0]) == ("src/m0.py", "%SRCROOT%", 1, 3)
    assert ("src/m0.py", "REPO_VLLM", 1, 3) in [_where(r) for r in result["relatedLocations"]]
    assert log["runs"][0]["originalUriBaseIds"] == {"REPO_VLLM": {
        "uri": "file:///work/vllm/", "description": {"text": f"repository /work/vllm at {'a' * 40}"}}}


# --- end to end: real probes over fixture repositories --------------------------------------------

RULEBOOK = r"""policyrun: 1
name: ci-locations
inputs:
  repo: {type: path, default: "."}
  upstream: {type: path, required: true}
modes:
  audit: {phases: [STALE, UPSTREAM, TESTS, CONSTANT, DIFF, LATER]}
probes:
  mentions: {uses: search.regex, with: {root: "${inputs.repo}", pattern: "0\\.26\\.1", include: ["Dockerfile", "*.py"]}}
  upstream_mentions: {uses: search.regex, with: {root: "${inputs.upstream}", pattern: "0\\.26\\.1"}}
  unit: {uses: tests.junit, with: {path: build/unit.xml}}
  consts: {uses: python.constants, with: {root: "${inputs.repo}", names: [TARGET_VLLM_VERSION]}}
  changes: {uses: git.diff, with: {path: "${inputs.repo}", base: "HEAD~1", head: "HEAD"}}
phases:
  - id: STALE
    evidence:
      - id: no_old_version
        violations: facts.mentions.hits.map(h, h.path + ':' + string(h.line))
  - id: UPSTREAM
    requires: []
    evidence:
      - id: upstream_clean
        check: size(facts.upstream_mentions.hits) == 0
  - id: TESTS
    requires: []
    evidence:
      - id: green
        check: size(facts.unit.failures) == 0
  - id: CONSTANT
    requires: []
    evidence:
      - id: at_target
        check: facts.consts.constants.all(c, c.value == '0.27.0')
  - id: DIFF
    requires: []
    evidence:
      - id: nothing_changed
        check: size(facts.changes.changed_paths) == 0
        on_fail: WARN
  - id: LATER
    requires: [STALE]
    evidence:
      - id: ok
        check: "true"
"""

JUNIT = """<?xml version="1.0"?>
<testsuite name="pytest" tests="1" failures="1" errors="0" skipped="0">
<testcase classname="tests.test_math" name="test_add" time="0.01"><failure message="assert 2 == 3">def test_add():
&gt;       assert 1 + 1 == 3
E       assert 2 == 3

tests/test_math.py:{line}: AssertionError</failure></testcase>
</testsuite>
"""

COMPAT = '"""Compat."""\n\n# pinned\nTARGET_VLLM_VERSION = "0.26.1"\n'
DOCKERFILE = "FROM python:3.11\nRUN pip install vllm==0.26.1\n"
TEST_MATH = "def test_add():\n    assert 1 + 1 == 3\n"
UPSTREAM_VERSION = '__version__ = "0.27.0"\nOLD = "0.26.1"\n'


@dataclass
class Scenario:
    plugin: Path
    upstream: Path
    out: Path
    rulebook: Path
    trace: Trace


def find(text: str, needle: str) -> tuple[int, int]:
    """1-based (line, column) of the first `needle` in `text`: the test's own ground truth."""
    for number, line in enumerate(text.splitlines(), 1):
        if needle in line:
            return number, line.index(needle) + 1
    raise AssertionError(f"{needle!r} not in text")


def build_scenario(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *extra: str) -> Scenario:
    """Collect and evaluate in the plugin checkout, as CI does (`repo` stays `.` unless `extra` sets it)."""
    plugin = init_repo(tmp_path / "plugin")
    plugin.write("Dockerfile", DOCKERFILE)
    plugin.write("pkg/compat.py", COMPAT.replace("# pinned\n", ""))
    plugin.write("tests/test_math.py", TEST_MATH)
    plugin.write(".gitignore", "build/\n")
    plugin.commit("one")
    plugin.write("pkg/compat.py", COMPAT)
    plugin.write("pkg/new.py", "X = 1\n")
    plugin.commit("two")
    upstream = init_repo(tmp_path / "upstream")
    upstream.write("vllm/version.py", UPSTREAM_VERSION)
    upstream.commit("up")
    plugin.write("build/unit.xml", JUNIT.replace("{line}", str(find(TEST_MATH, "assert")[0])))
    rulebook = tmp_path / "rb.yaml"
    rulebook.write_text(RULEBOOK)
    out = tmp_path / "out"
    monkeypatch.chdir(plugin.path)
    code = main(["evaluate", str(rulebook), "--mode", "audit", "--set", f"upstream={upstream.path}", "--out", str(out),
                 "--no-timestamp", "-q", *extra])
    assert code == 1
    return Scenario(plugin.path, upstream.path, out, rulebook, load_trace(out / "trace.json"))


def test_end_to_end_sarif_points_at_the_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    s = build_scenario(tmp_path, monkeypatch, "--format", "sarif")
    log = validate((s.out / "report.sarif").read_text())
    results = {r["ruleId"].split("/")[1]: r for r in log["runs"][0]["results"]}
    # LATER is SKIPPED: not a result. DIFF is WARN: a warning.
    assert list(results) == ["STALE", "UPSTREAM", "TESTS", "CONSTANT", "DIFF"]
    assert [results[p]["level"] for p in results] == ["error"] * 4 + ["warning"]

    docker = find(DOCKERFILE, "0.26.1")
    compat = find(COMPAT, "0.26.1")
    stale = results["STALE"]
    assert _where(stale["locations"][0]) == ("Dockerfile", "%SRCROOT%", *docker)
    assert ("pkg/compat.py", "%SRCROOT%", *compat) in [_where(r) for r in stale["relatedLocations"]]
    rule_line = find(RULEBOOK, "- id: no_old_version")[0]
    assert (s.rulebook.as_uri(), None, rule_line, 9) == _where(stale["relatedLocations"][0])

    upstream = results["UPSTREAM"]
    assert _where(upstream["locations"][0]) == ("vllm/version.py", "REPO_UPSTREAM", *find(UPSTREAM_VERSION, "0.26.1"))
    assert log["runs"][0]["originalUriBaseIds"]["REPO_UPSTREAM"]["uri"] == s.upstream.as_uri() + "/"

    tests = results["TESTS"]
    assert _where(tests["locations"][0]) == ("tests/test_math.py", "%SRCROOT%", find(TEST_MATH, "assert")[0], 0)
    assert ("build/unit.xml", "%SRCROOT%", 0, 0) in [_where(r) for r in tests["relatedLocations"]]

    assert _where(results["CONSTANT"]["locations"][0]) == ("pkg/compat.py", "%SRCROOT%",
                                                           find(COMPAT, "TARGET_VLLM_VERSION")[0], 0)
    diff = results["DIFF"]
    assert _where(diff["locations"][0]) == ("pkg/compat.py", "%SRCROOT%", 0, 0)
    assert ("pkg/new.py", "%SRCROOT%", 0, 0) in [_where(r) for r in diff["relatedLocations"]]
    assert (s.plugin / "build" / "unit.xml").exists() and not (s.plugin / ".policyrun").exists()


def test_report_base_relativises_locations(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    s = build_scenario(tmp_path, monkeypatch, "--set", f"repo={tmp_path / 'plugin'}")
    capsys.readouterr()
    assert main(["report", str(s.out / "trace.json"), "--format", "sarif", "--base", str(tmp_path)]) == 0
    log = validate(capsys.readouterr().out)
    results = {r["ruleId"].split("/")[1]: r for r in log["runs"][0]["results"]}
    assert _where(results["STALE"]["locations"][0])[:2] == ("plugin/Dockerfile", "%SRCROOT%")
    assert _where(results["UPSTREAM"]["locations"][0])[:2] == ("upstream/vllm/version.py", "%SRCROOT%")
    assert _where(results["STALE"]["relatedLocations"][0])[:2] == ("rb.yaml", "%SRCROOT%")
    assert "originalUriBaseIds" not in log["runs"][0]
    # A probe root given relative (`.`) is relative to where the facts were collected, which the
    # trace does not record: its paths stay relative, for a --base that is that directory.
    s = build_scenario(tmp_path / "relative", monkeypatch)
    capsys.readouterr()
    assert main(["report", str(s.out / "trace.json"), "--format", "sarif", "--base", str(s.plugin)]) == 0
    results = {r["ruleId"].split("/")[1]: r for r in json.loads(capsys.readouterr().out)["runs"][0]["results"]}
    assert _where(results["STALE"]["locations"][0])[:2] == ("Dockerfile", "%SRCROOT%")


def test_flagship_final_audit_points_at_stale_mentions(tmp_path: Path) -> None:
    """The shipped rulebook on the final-pass example, with two stale mentions of the old version."""
    root = Path(__file__).parent.parent / "examples" / "final-pass"
    facts = json.loads((root / "facts.json").read_text())
    hits = [{"path": "Dockerfile", "line": 3, "column": 23, "match": "0.26.1", "groups": [],
             "text": "RUN pip install vllm==0.26.1"},
            {"path": "afd_plugin/compat/vllm.py", "line": 12, "column": 37, "match": "0.26.1", "groups": [],
             "text": 'TARGET_VLLM_VERSION: Final[str] = "0.26.1"'}]
    facts["facts"]["old_source_mentions"]["value"].update(hits=hits, total=2, files_matched=2)
    (tmp_path / "facts.json").write_text(json.dumps(facts))
    out = tmp_path / "out"
    code = main(["evaluate", "upgrade-gpu-version", "--mode", "final-validation", "--inputs", str(root / "inputs.yaml"),
                 "--facts", str(tmp_path / "facts.json"), "--out", str(out), "--format", "sarif", "--no-timestamp", "-q"])
    assert code == 1
    log = validate((out / "report.sarif").read_text())
    [result] = log["runs"][0]["results"]
    assert result["ruleId"] == "upgrade-gpu-version/FINAL_AUDIT" and result["level"] == "error"
    assert _where(result["locations"][0]) == ("Dockerfile", "%SRCROOT%", 3, 23)
    related = [_where(r) for r in result["relatedLocations"]]
    assert related == [("afd_plugin/compat/vllm.py", "%SRCROOT%", 12, 37)]  # the rulebook is shipped: not a location
    assert "[afd_plugin/compat/vllm.py:12](1)" in result["message"]["text"]


def test_the_sarif_example_in_docs_reports_md_is_real(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/reports.md shows the identity-disagree result, trimmed to its rule, message text and
    locations, and the command that writes it (run from the repository root)."""
    root = Path(__file__).parent.parent
    docs = (root / "docs" / "reports.md").read_text()
    section = docs[docs.index("For the flagship's `identity-disagree` example"):]
    command = section[section.index("```sh\n") + 6:].split("\n```")[0].replace("\\\n", " ").split()
    shown = json.loads(section[section.index("```json\n") + 8:].split("\n```")[0])
    assert command[:2] == ["policyrun", "evaluate"] and command[-2:] == ["--out", "/tmp/disagree"]
    monkeypatch.chdir(root)
    assert main([*command[1:-1], str(tmp_path), "-q"]) == 2
    [result] = json.loads((tmp_path / "report.sarif").read_text())["runs"][0]["results"]
    trimmed = {"ruleId": result["ruleId"], "level": result["level"], "message": {"text": result["message"]["text"]},
               "locations": result["locations"], "relatedLocations": result["relatedLocations"]}
    assert trimmed == shown
    assert re.fullmatch(r"<shipped>/upgrade-vllm-plugin\.yaml:\d+:\d+", result["properties"]["rulebook_location"])
    assert "`properties.rulebook_location`: `<shipped>/upgrade-vllm-plugin.yaml:LINE:COLUMN`" in " ".join(section.split())
