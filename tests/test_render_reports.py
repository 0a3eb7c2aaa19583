"""`write_reports`, `policyrun report`, and every format from a trace the real engine produced."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import tracefactory as tf
import yaml

from policyrun.cli import main
from policyrun.errors import UsageError
from policyrun.render import FORMATS, render, split_formats, write_reports
from policyrun.render.templatefiles import rulebook_templates


def test_json_report_is_the_trace() -> None:
    trace = tf.flagship()
    assert render(trace, "json") == trace.to_json()
    tf.golden("trace.json", render(trace, "json"))


def test_write_reports_all_formats(tmp_path: Path) -> None:
    written = write_reports(tf.flagship(), ["md,html", "junit", "sarif", "json"], tmp_path / "out")
    assert [p.name for p in written] == ["report.md", "report.html", "junit.xml", "report.sarif", "trace.json"]
    assert all(p.stat().st_size > 100 for p in written)
    json.loads((tmp_path / "out" / "report.sarif").read_text())
    ET.fromstring((tmp_path / "out" / "junit.xml").read_text())


def test_write_reports_rulebook_templates(tmp_path: Path) -> None:
    md = tmp_path / "mine.md.j2"
    md.write_text("mode={{ report.mode }}\n")
    extra = tmp_path / "completion.txt.j2"
    extra.write_text("{{ report.verdict.id }}\n")
    written = write_reports(tf.generic(), ["md", "completion"], tmp_path / "out",
                            rulebook_templates={"md": md, "completion": extra})
    assert [p.name for p in written] == ["report.md", "completion.txt"]
    assert written[0].read_text() == "mode=release\n" and written[1].read_text() == "not_released\n"


def test_write_reports_unknown_format(tmp_path: Path) -> None:
    with pytest.raises(UsageError) as err:
        write_reports(tf.generic(), ["pdf"], tmp_path)
    assert err.value.code == "R004" and "md, html, junit, sarif, json" in err.value.message


def test_split_formats() -> None:
    assert split_formats(["md, html", "md", "", "junit"]) == ["md", "html", "junit"]
    assert set(FORMATS) == {"md", "html", "junit", "sarif", "json", "github"}


def test_report_command_stdout_and_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "trace.json"
    trace.write_text(tf.flagship().to_json())
    assert main(["report", str(trace), "--format", "junit"]) == 0
    assert capsys.readouterr().out.startswith('<?xml version="1.0"')
    assert main(["report", str(trace), "--format", "md", "-o", "-"]) == 0
    assert capsys.readouterr().out.startswith("# Completion report")
    out = tmp_path / "deep" / "r.html"
    assert main(["report", str(trace), "-f", "html", "-o", str(out)]) == 0
    assert out.read_text().startswith("<!DOCTYPE html>")
    assert main(["report", str(trace), "-f", "sarif"]) == 0
    assert json.loads(capsys.readouterr().out)["version"] == "2.1.0"


def test_report_command_template_and_context(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "trace.json"
    trace.write_text(tf.generic().to_json())
    tpl = tmp_path / "t.md.j2"
    tpl.write_text("{{ context.owner }}: {{ report.verdict.id }}\n")
    ctx = tmp_path / "ctx.yaml"
    ctx.write_text("owner: release team\n")
    assert main(["report", str(trace), "--template", str(tpl), "--context", str(ctx)]) == 0
    assert capsys.readouterr().out == "release team: not_released\n"


def test_report_command_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "trace.json"
    trace.write_text(tf.generic().to_json())
    assert main(["report", str(tmp_path / "nope.json")]) == 3
    try:  # argparse choices: a usage error, exit 3
        code = main(["report", str(trace), "--format", "pdf"])
    except SystemExit as exited:
        code = int(exited.code or 0)
    assert code == 3
    bad_tpl = tmp_path / "bad.md.j2"
    bad_tpl.write_text("ok\n{% endfor %}\n")
    capsys.readouterr()
    assert main(["report", str(trace), "--template", str(bad_tpl)]) == 3
    assert f"{bad_tpl}:2:1: R001" in capsys.readouterr().err
    ctx = tmp_path / "ctx.json"
    ctx.write_text("[1, 2]")
    assert main(["report", str(trace), "--context", str(ctx)]) == 3
    assert "R006" in capsys.readouterr().err
    assert main(["report", str(trace), "-f", "junit", "--template", str(bad_tpl)]) == 3


# --- end to end: a real rulebook, evaluated by the engine, rendered by every format --------------

RULEBOOK = {
    "policyrun": 1,
    "name": "mini-upgrade",
    "version": "2",
    "modes": {"final": {"phases": ["IDENTITY", "UNIT", "GPU", "REPORT"]}},
    "probes": {
        "target": {"uses": "const", "with": {"value": None}},
        "unit": {"uses": "const", "with": {"value": None}},
        "gpu": {"uses": "const", "with": {"value": None}},
    },
    "phases": [
        {"id": "IDENTITY", "title": "Freeze identity",
         "evidence": [{"id": "sha", "check": "facts.target.sha.matches('^[0-9a-f]{40}$')"}],
         "next": {"PASS": "run the unit gate"}},
        {"id": "UNIT", "title": "Unit gate", "requires": ["IDENTITY"],
         "evidence": [{"id": "green", "check": "facts.unit.failed == 0", "message": "${facts.unit.failed} failed"}],
         "next": {"FAIL": "fix the unit tests"}},
        {"id": "GPU", "title": "GPU gate", "requires": ["IDENTITY"],
         "evidence": [{"id": "visible", "check": "size(facts.gpu.devices) > 0", "on_missing": "BLOCKED"}]},
        {"id": "REPORT", "title": "Report"},
    ],
    "report": {"templates": {"md": "templates/completion.md.j2"}},
}


def _facts() -> dict[str, object]:
    def fact(probe: str, value: object = None, error: dict[str, str] | None = None) -> dict[str, object]:
        prov: dict[str, object] = {"probe": probe, "kind": "const"}
        if error:
            prov["error"] = error
            return {"error": error, "provenance": prov}
        return {"value": value, "provenance": prov}

    return {"policyrun_facts": 1, "facts": {
        "target": fact("target", {"ref": "v1", "sha": tf.TARGET_SHA}),
        "unit": fact("unit", {"failed": 2}),
        "gpu": fact("gpu", error={"code": "nvml.library_not_found", "message": "no NVML"}),
    }}


def test_engine_trace_renders_in_every_format(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "templates").mkdir()
    (tmp_path / "templates" / "completion.md.j2").write_text(
        '{% extends "policyrun/report.md.j2" %}{% block header %}# Mini upgrade: {{ report.verdict.id }}\n'
        "{% endblock %}")
    rb = tmp_path / "rulebook.yaml"
    rb.write_text(yaml.safe_dump(RULEBOOK, sort_keys=False))
    facts = tmp_path / "facts.json"
    facts.write_text(json.dumps(_facts()))
    out = tmp_path / "out"
    assert main(["lint", str(rb)]) == 0, capsys.readouterr()
    code = main(["evaluate", str(rb), "--facts", str(facts), "--out", str(out), "--no-timestamp",
                 "--format", "md,html,junit,sarif,json", "-q"])
    assert code in (1, 2), capsys.readouterr().err
    for name in ("trace.json", "report.md", "report.html", "junit.xml", "report.sarif"):
        assert (out / name).is_file(), name
    md = (out / "report.md").read_text()
    assert md.startswith("# Mini upgrade: ") and "## Phase records" in md  # the rulebook's template
    assert "phase: UNIT\nstatus: FAIL" in md and tf.TARGET_SHA in md
    trace = out / "trace.json"
    capsys.readouterr()
    assert main(["explain", str(trace), "--failures"]) == 0
    text = capsys.readouterr().out
    assert "UNIT — Unit gate: FAIL" in text and "read facts.unit.failed = 2" in text
    assert "GPU — GPU gate: BLOCKED" in text and "nvml.library_not_found" in text
    suite = ET.parse(out / "junit.xml").getroot().find("testsuite")
    assert suite is not None and suite.get("failures") == "2"
    sarif = json.loads((out / "report.sarif").read_text())
    located = {r["ruleId"]: r["locations"][0]["physicalLocation"] for r in sarif["runs"][0]["results"]}
    assert located["mini-upgrade/UNIT"]["region"]["startLine"] > 1
    assert main(["diff", str(trace), str(trace)]) == 0


def test_lint_reports_template_errors_with_lines(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "templates").mkdir()
    (tmp_path / "templates" / "completion.md.j2").write_text("# ok\n{{ report.mode | nosuch }}\n")
    rb = tmp_path / "rulebook.yaml"
    rb.write_text(yaml.safe_dump(RULEBOOK, sort_keys=False))
    assert main(["lint", str(rb), "--format", "sarif"]) == 1
    result = json.loads(capsys.readouterr().out)["runs"][0]["results"][0]
    assert result["ruleId"] == "R001"
    assert result["locations"][0]["physicalLocation"]["region"]["startLine"] == 2


@pytest.mark.parametrize("command", ["lint", "report"])
def test_a_template_nested_past_pythons_limit_is_a_finding_not_a_crash(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str) -> None:
    # Jinja2 compiles to Python, whose compiler refuses ~100 nested blocks with a SyntaxError.
    (tmp_path / "templates").mkdir()
    (tmp_path / "templates" / "completion.md.j2").write_text("{% if true %}" * 120 + "x" + "{% endif %}" * 120)
    rb = tmp_path / "rulebook.yaml"
    rb.write_text(yaml.safe_dump(RULEBOOK, sort_keys=False))
    if command == "lint":
        assert main(["lint", str(rb)]) == 1
    else:
        trace = tmp_path / "trace.json"
        trace.write_text(tf.generic().to_json())
        assert main(["report", str(trace), "--template", str(tmp_path / "templates" / "completion.md.j2")]) == 3
    err = capsys.readouterr()
    assert "template nests too deeply to compile; flatten it" in err.out + err.err
    assert "internal error" not in err.out + err.err


def test_rulebook_templates_resolve_relative_to_rulebook(tmp_path: Path) -> None:
    from policyrun.model import Rulebook

    model = Rulebook.model_validate({**RULEBOOK, "report": {"template": "t/a.md.j2",
                                                             "templates": {"html": "t/b.html.j2"}}})
    assert rulebook_templates(model, tmp_path / "rb.yaml") == {"html": tmp_path / "t/b.html.j2",
                                                                 "md": tmp_path / "t/a.md.j2"}


def test_report_uses_the_rulebooks_own_template_when_the_rulebook_is_unchanged(
        capsys: pytest.CaptureFixture[str]) -> None:
    """`report --format md` of a flagship trace renders what `evaluate --format md` wrote."""
    from policyrun.cli import main

    root = Path(__file__).resolve().parent.parent / "examples" / "planning-pass" / "expected"
    assert main(["report", str(root / "trace.json"), "--format", "md"]) == 0
    assert capsys.readouterr().out == (root / "report.md").read_text()


# --- options of one format, on `evaluate` and `report` alike -------------------------------------

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "identity-disagree"


def _junit_cases(text: str) -> list[str]:
    return [c.get("name") or "" for c in ET.fromstring(text).iter("testcase")]


def test_junit_outside_mode_option_on_evaluate_and_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """planning-audit lists 5 of the flagship's 13 phases: the other 8 are not skipped tests
    unless asked for, with the same option on both commands."""
    base = ["evaluate", "upgrade-gpu-version", "--mode", "planning-audit", "--inputs", str(EXAMPLE / "inputs.yaml"),
            "--facts", str(EXAMPLE / "facts.json"), "--format", "junit", "--no-timestamp", "-q"]
    assert main([*base, "--out", str(tmp_path / "a")]) == 2
    assert main([*base, "--out", str(tmp_path / "b"), "--junit-include-outside-mode"]) == 2
    default = _junit_cases((tmp_path / "a" / "junit.xml").read_text())
    assert default == ["FREEZE_IDENTITY", "INVENTORY_AFD_CONTRACTS", "DIFF_VLLM", "ARCHITECTURE_GATE",
                       "PRODUCE_STAGED_PLAN"]
    assert len(_junit_cases((tmp_path / "b" / "junit.xml").read_text())) == 13
    capsys.readouterr()
    trace = str(tmp_path / "a" / "trace.json")
    assert main(["report", trace, "--format", "junit"]) == 0
    assert _junit_cases(capsys.readouterr().out) == default
    assert main(["report", trace, "--format", "junit", "--junit-include-outside-mode"]) == 0
    assert len(_junit_cases(capsys.readouterr().out)) == 13


def test_sarif_located_only_option(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "trace.json"
    trace.write_text(tf.shipped().to_json())
    assert main(["report", str(trace), "--format", "sarif"]) == 0
    assert len(json.loads(capsys.readouterr().out)["runs"][0]["results"]) == 3
    assert main(["report", str(trace), "--format", "sarif", "--sarif-located-only"]) == 0
    run = json.loads(capsys.readouterr().out)["runs"][0]
    assert run["results"] == [] and len(run["properties"]["unlocated"]) == 3


@pytest.mark.parametrize("argv", [["report", "{trace}", "--format", "md", "--junit-include-outside-mode"],
                                  ["report", "{trace}", "--format", "junit", "--sarif-located-only"],
                                  ["report", "{trace}", "--format", "in-toto", "--sarif-located-only"],
                                  ["evaluate", "upgrade-gpu-version", "--mode", "planning-audit", "--inputs",
                                   str(EXAMPLE / "inputs.yaml"), "--facts", str(EXAMPLE / "facts.json"),
                                   "--format", "md,sarif", "--junit-include-outside-mode", "--out", "{out}"]])
def test_an_option_for_a_format_not_written_is_a_usage_error(argv: list[str], tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "trace.json"
    trace.write_text(tf.flagship().to_json())
    args = [a.replace("{trace}", str(trace)).replace("{out}", str(tmp_path / "out")) for a in argv]
    assert main(args) == 3
    err = capsys.readouterr().err
    assert "R009" in err and "report, which this command does not write; " in err
    assert ("use --format " if argv[0] == "report" else "add junit to --format") in err
    assert not (tmp_path / "out").exists()  # refused before anything ran or was written
