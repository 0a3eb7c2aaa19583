"""GitHub Actions workflow commands: escaping, lint findings, and a trace's failing checks at their code."""

from __future__ import annotations

from pathlib import Path

import pytest
import tracefactory as tf
from test_render_sarif import COMPAT, DOCKERFILE, FINDINGS, RULEBOOK, TEST_MATH, UPSTREAM_VERSION, build_scenario, find

from policyrun.cli import main
from policyrun.render.github import command, escape_data, escape_property, render_lint_github, render_trace_github
from policyrun.trace.model import CheckRecord, PhaseRecord, Read


def parse(line: str) -> tuple[str, dict[str, str], str]:
    """A workflow command as the runner reads it (actions/runner ActionCommand.TryParseV2):
    `::name k=v,k=v::message`, properties and message unescaped."""
    assert line.startswith("::") and "\n" not in line and "\r" not in line
    head, sep, data = line[2:].partition("::")
    assert sep
    name, _, props = head.partition(" ")
    properties = {}
    for item in filter(None, props.split(",")):
        key, eq, value = item.partition("=")
        assert eq, item
        properties[key] = (value.replace("%0D", "\r").replace("%0A", "\n").replace("%3A", ":")
                           .replace("%2C", ",").replace("%25", "%"))
    return name, properties, data.replace("%0D", "\r").replace("%0A", "\n").replace("%25", "%")


def test_escaping_follows_the_runner() -> None:
    assert escape_data("100%\r\nnext: a,b") == "100%25%0D%0Anext: a,b"
    assert escape_property("100%\r\nnext: a,b") == "100%25%0D%0Anext%3A a%2Cb"
    # `%` first, so an escape sequence already in the text survives a round trip.
    assert parse(command("error", "literal %0A stays", title="t %2C"))[1:] == ({"title": "t %2C"},
                                                                              "literal %0A stays")


def test_command_shapes() -> None:
    assert command("warning", "plain") == "::warning::plain"
    assert command("error", "m", file="a,b:c.py", line=3, col=0, title="T: x, y") == \
        "::error file=a%2Cb%3Ac.py,line=3,title=T%3A x%2C y::m"
    assert command("error", "m", file="a.py", line=0, col=5) == "::error file=a.py::m"  # no line: no col
    assert command("error", "m", file=None, line=4) == "::error::m"


def test_a_fact_value_cannot_start_a_command_of_its_own() -> None:
    evil = "0.26.1\n::error file=README.md,line=1::pwned\r\n::stop-commands::x\x1b[2J"
    check = CheckRecord(id="c", kind="evidence", expression="e", result="UNSATISFIED", outcome="FAIL",
                        message=evil, reads=[Read(path="facts.x", value=evil)])
    phase = PhaseRecord(phase="P", status="FAIL", reason="r", evidence=[check], blocker=evil,
                        next_allowed_action="n", location="rulebooks/r.yaml:3:5")
    trace = tf.generic().model_copy(update={"phases": [phase], "provenance": {}})
    text = render_trace_github(trace)
    lines = text.splitlines()
    assert len(lines) == 1 and text.endswith("\n")
    name, props, message = parse(lines[0])
    assert name == "error" and props["file"] == "rulebooks/r.yaml" and props["line"] == "3"
    assert message.startswith("P is FAIL: 0.26.1\n::error file=README.md,line=1::pwned\\x0d\n::stop-commands::x\\x1b[2J")


def test_lint_findings_become_annotations_on_their_lines() -> None:
    lines = render_lint_github(FINDINGS).splitlines()
    parsed = [parse(line) for line in lines]
    assert [(n, p.get("file"), p.get("line"), p.get("col")) for n, p, _ in parsed] == [
        ("error", "rulebooks/broken file.yaml", "3", None),
        ("error", "rulebooks/templates/x.md.j2", None, None),
        ("warning", "rulebooks/upgrade.yaml", "31", "5"),
        ("error", "rulebooks/upgrade.yaml", "52", "16")]
    x002 = parsed[3]
    assert x002[1]["title"] == "X002 CEL type error, or a condition that is not a bool"
    assert x002[2].endswith("(at phases → FREEZE_IDENTITY → evidence[0] → check)")


def test_lint_command_github_format(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    text = ("policyrun: 1\nname: x\nmodes:\n  a: {phases: [P]}\nphases:\n  - id: P\n"
            "    evidence:\n      - {id: e, check: facts.nope == 1}\n")
    Path("rb.yaml").write_text(text)
    assert main(["lint", "rb.yaml", "--format", "github"]) == 1
    [line] = capsys.readouterr().out.splitlines()
    name, props, message = parse(line)
    at = find(text, "facts.nope")
    assert (name, props["file"], props["line"], props["col"]) == ("error", "rb.yaml", str(at[0]), str(at[1]))
    assert props["title"].startswith("L003 ") and "facts.nope" in message
    # An absolute path under the working directory (the repository root in CI) becomes relative.
    assert main(["lint", str(tmp_path / "rb.yaml"), "--format", "github"]) == 1
    assert parse(capsys.readouterr().out.splitlines()[0])[1]["file"] == "rb.yaml"


def test_trace_annotations_point_at_the_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    s = build_scenario(tmp_path, monkeypatch, "--format", "github")
    lines = (s.out / "github-annotations.txt").read_text().splitlines()
    parsed = [parse(line) for line in lines]
    # One per failing check; LATER (SKIPPED) has none, DIFF (WARN) is a warning.
    assert [p["title"].split()[1] for _, p, _ in parsed] == ["STALE", "UPSTREAM", "TESTS", "CONSTANT", "DIFF"]
    assert [n for n, _, _ in parsed] == ["error"] * 4 + ["warning"]
    where = [(p.get("file"), p.get("line"), p.get("col")) for _, p, _ in parsed]
    docker, compat = find(DOCKERFILE, "0.26.1"), find(COMPAT, "0.26.1")
    assert where[0] == ("Dockerfile", str(docker[0]), str(docker[1]))
    assert f"code: pkg/compat.py:{compat[0]}:{compat[1]}" in parsed[0][2]
    # The upstream checkout is not this repository: no file, the location is named in the message.
    upstream = find(UPSTREAM_VERSION, "0.26.1")
    assert where[1] == (None, None, None)
    assert f"vllm/version.py:{upstream[0]}:{upstream[1]} (in REPO_UPSTREAM)" in parsed[1][2]
    assert where[2] == ("tests/test_math.py", str(find(TEST_MATH, "assert")[0]), None)
    assert where[3] == ("pkg/compat.py", str(find(COMPAT, "TARGET_VLLM_VERSION")[0]), None)
    assert where[4] == ("pkg/compat.py", None, None) and "code: pkg/new.py" in parsed[4][2]
    assert parsed[0][1]["title"] == "ci-locations STALE FAIL: no_old_version"
    assert "next allowed action: " in parsed[0][2]


def test_annotation_falls_back_to_the_rulebook_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    s = build_scenario(tmp_path, monkeypatch)
    # A rulebook inside the checkout: a check without code locations is annotated at its line.
    rulebook = s.plugin / "policy.yaml"
    rulebook.write_text(RULEBOOK.replace("size(facts.unit.failures) == 0", "facts.unit.totals.failed == 0"))
    capsys.readouterr()
    code = main(["evaluate", "policy.yaml", "--mode", "audit", "--set", f"upstream={s.upstream}", "--out",
                 str(tmp_path / "out2"), "--no-timestamp", "-q"])
    assert code == 1
    capsys.readouterr()
    assert main(["report", str(tmp_path / "out2" / "trace.json"), "--format", "github"]) == 0
    lines = capsys.readouterr().out.splitlines()
    tests = next(parse(line) for line in lines if " TESTS " in line)
    # The JUnit report file is the only code location (totals name no test): it is in the checkout.
    assert tests[1]["file"] == "build/unit.xml"
    rulebook.write_text(RULEBOOK.replace("size(facts.upstream_mentions.hits) == 0",
                                         "facts.upstream_mentions.total == 0"))
    assert main(["evaluate", "policy.yaml", "--mode", "audit", "--set", f"upstream={s.upstream}", "--out",
                 str(tmp_path / "out3"), "--no-timestamp", "-q", "--format", "github"]) == 1
    lines = (tmp_path / "out3" / "github-annotations.txt").read_text().splitlines()
    upstream = next(parse(line) for line in lines if " UPSTREAM " in line)
    line = find(RULEBOOK, "- id: upstream_clean")[0]
    assert (upstream[1]["file"], upstream[1]["line"], upstream[1]["col"]) == ("policy.yaml", str(line), "9")


def test_a_disagreement_is_annotated_at_one_side_naming_the_other(capsys: pytest.CaptureFixture[str],
                                                                   monkeypatch: pytest.MonkeyPatch,
                                                                   tmp_path: Path) -> None:
    """identity-disagree: the constant (the violation) carries the annotation; the pin, which only
    the check's message names, is listed as other code. The shipped rulebook is no file here."""
    root = Path(__file__).parent.parent
    monkeypatch.chdir(root)
    example = "examples/identity-disagree"
    assert main(["evaluate", "upgrade-gpu-version", "--mode", "planning-audit", "--inputs", f"{example}/inputs.yaml",
                 "--facts", f"{example}/facts.json", "--out", str(tmp_path), "--format", "github", "-q"]) == 2
    [line] = (tmp_path / "github-annotations.txt").read_text().splitlines()
    name, props, message = parse(line)
    assert (name, props["file"], props["line"]) == ("error", "afd_plugin/compat/vllm.py", "12")
    assert "\ncode: pyproject.toml:16\n" in message
