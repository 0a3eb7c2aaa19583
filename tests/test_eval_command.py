"""`policyrun eval`: an expression's value over a snapshot, with the fail-closed reads of checks."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from policyrun.cli import main

ROOT = Path(__file__).parent.parent
PLANNING = ROOT / "examples" / "planning-pass"


def _facts(tmp_path: Path, facts: dict[str, Any]) -> Path:
    """A snapshot file: each value is a fact value, or `("error", code, message)` for a failed probe."""
    out: dict[str, Any] = {}
    for pid, value in facts.items():
        prov = {"probe": pid, "kind": "const"}
        if isinstance(value, tuple):
            out[pid] = {"error": {"code": value[1], "message": value[2]}, "provenance": prov}
        else:
            out[pid] = {"value": value, "provenance": prov}
    path = tmp_path / "facts.json"
    path.write_text(json.dumps({"policyrun_facts": 1, "facts": out}))
    return path


def _eval(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["eval", *args])
    out, err = capsys.readouterr()
    return code, out, err


SNAPSHOT = {
    "pins": {"distinct": ["0.26.1"], "sources": [{"file": "pyproject.toml", "line": 7, "version": "0.26.1"}]},
    "gpu": ("error", "nvml.library_not_found", "libnvidia-ml.so.1 not found; install the NVIDIA driver"),
}


def test_prints_the_value_as_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    facts = _facts(tmp_path, SNAPSHOT)
    code, out, err = _eval(capsys, "facts.pins.sources.map(s, s.file + ':' + string(s.line))", "--facts", str(facts))
    assert (code, json.loads(out), err) == (0, ["pyproject.toml:7"], "")
    code, out, _ = _eval(capsys, "failed(facts.gpu) && error_code(facts.gpu) == 'nvml.library_not_found'",
                         "--facts", str(facts))
    assert (code, out) == (0, "true\n")


def test_a_failed_fact_gives_no_value_and_says_why(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    facts = _facts(tmp_path, SNAPSHOT)
    code, out, err = _eval(capsys, "facts.gpu.devices.size() > 0", "--facts", str(facts))
    # Not false: a read of a failed fact is no value at all, as in a check (UNKNOWN, never FAIL or PASS).
    assert (code, out) == (1, "")
    assert err.splitlines() == [
        "policyrun: no value: missing fact facts.gpu: nvml.library_not_found: libnvidia-ml.so.1 not found; "
        "install the NVIDIA driver",
        "  facts.gpu.devices: nvml.library_not_found: libnvidia-ml.so.1 not found; install the NVIDIA driver"]
    # As in a check, a side of || that decides alone stands without the missing fact.
    code, out, _ = _eval(capsys, "facts.gpu.devices.size() > 0 || size(facts.pins.distinct) == 1", "--facts",
                         str(facts))
    assert (code, out) == (0, "true\n")


def test_a_fact_not_in_the_snapshot_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _eval(capsys, "facts.target.sha", "--facts", str(_facts(tmp_path, SNAPSHOT)))
    assert (code, out) == (1, "")
    assert err.startswith("policyrun: no value: missing fact facts.target: not collected\n")


def test_an_absent_field_is_no_value(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _eval(capsys, "facts.pins.distinctt", "--facts", str(_facts(tmp_path, SNAPSHOT)))
    assert code == 1 and err == 'policyrun: no value: missing value: no key "distinctt"\n'


def test_json_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    facts = _facts(tmp_path, SNAPSHOT)
    code, out, _ = _eval(capsys, "size(facts.pins.distinct) == 1", "--facts", str(facts), "--json")
    assert code == 0 and json.loads(out) == {
        "expression": "size(facts.pins.distinct) == 1", "mode": "", "ok": True, "value": True, "error": None,
        "reads": [{"path": "facts.pins.distinct", "value": ["0.26.1"]}], "facts": ["pins"]}
    code, out, _ = _eval(capsys, "facts.gpu.count", "--facts", str(facts), "--json")
    result = json.loads(out)
    assert code == 1 and result["ok"] is False and result["value"] is None
    assert result["reads"] == [{"path": "facts.gpu.count", "missing": True,
                                "error": "nvml.library_not_found: libnvidia-ml.so.1 not found; install the NVIDIA "
                                         "driver"}]


@pytest.mark.parametrize(("expression", "code", "line", "column"), [
    ("facts.pins +", "X001", 1, 13),
    ("facts.pins.distinct == 1 && nope", "X003", 1, 29),
    ("size(facts.pins.distinct) > 0 &&\n  derived.current_version == '1'", "L022", 2, 3),
])
def test_expression_errors_are_located(tmp_path: Path, capsys: pytest.CaptureFixture[str], expression: str,
                                       code: str, line: int, column: int) -> None:
    rc, out, err = _eval(capsys, expression, "--facts", str(_facts(tmp_path, SNAPSHOT)))
    assert (rc, out) == (3, "")
    first, text, caret = err.splitlines()
    assert first.startswith(f"<expression>:{line}:{column}: {code} ")
    assert text == "  " + expression.splitlines()[line - 1]
    assert caret == "  " + " " * (column - 1) + "^"


def test_expression_errors_come_before_reading_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, _, err = _eval(capsys, "facts.pins +", "--facts", str(tmp_path / "missing.json"))
    assert rc == 3 and " X001 " in err


def test_inputs_and_mode_without_a_rulebook(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    inputs = tmp_path / "inputs.yaml"
    inputs.write_text("repo: /src/afd\nlimit: 3\n")
    code, out, _ = _eval(capsys, "[inputs.repo, inputs.limit, inputs.tag, mode]", "--facts",
                         str(_facts(tmp_path, SNAPSHOT)), "--inputs", str(inputs), "--set", "tag=v1", "--mode", "m")
    assert (code, json.loads(out)) == (0, ["/src/afd", 3, "v1", "m"])


def test_with_the_shipped_rulebook_derived_values_follow_the_facts(capsys: pytest.CaptureFixture[str]) -> None:
    facts = json.loads((PLANNING / "facts.json").read_text())["facts"]
    [pinned] = facts["vllm_pins"]["value"]["distinct"]  # the ground truth, from the snapshot itself
    code, out, err = _eval(capsys, "[derived.current_version, vars.vllm_tag_prefix + derived.current_version]",
                           "--facts", str(PLANNING / "facts.json"), "--rulebook", "upgrade-gpu-version",
                           "--inputs", str(PLANNING / "inputs.yaml"), "--mode", "planning-audit")
    assert code == 0, err
    assert json.loads(out) == [pinned, f"v{pinned}"]
    # A derived value the rulebook does not declare is refused with a suggestion.
    code, _, err = _eval(capsys, "derived.current_versio", "--facts", str(PLANNING / "facts.json"),
                         "--rulebook", "upgrade-gpu-version", "--inputs", str(PLANNING / "inputs.yaml"), "-m",
                         "planning-audit")
    assert code == 3 and "did you mean 'current_version'?" in err


def test_rulebook_inputs_are_checked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _eval(capsys, "inputs.repo", "--facts", str(_facts(tmp_path, SNAPSHOT)), "--rulebook",
                         "upgrade-gpu-version", "--inputs", str(PLANNING / "inputs.yaml"), "--set", "vllm_sr=x",
                         "--mode", "planning-audit")
    assert code == 3 and "U006 unknown input 'vllm_sr'; did you mean 'vllm_src'?" in err
    # A rulebook with several modes needs --mode, as evaluate does.
    code, _, err = _eval(capsys, "mode", "--facts", str(_facts(tmp_path, SNAPSHOT)), "--rulebook",
                         "upgrade-gpu-version", "--inputs", str(PLANNING / "inputs.yaml"))
    assert code == 3 and "choose one with --mode" in err


def test_facts_are_required(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", "1 + 1"]) == 3
    assert "--facts" in capsys.readouterr().err


def test_printed_values_cannot_drive_a_ci_log(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    evil = "ok ##vso[task.setvariable variable=GATE]open ##[error]x"
    facts = _facts(tmp_path, {"log": {"line": evil}})
    for flags in ([], ["--json"]):
        code, out, _ = _eval(capsys, "facts.log.line", "--facts", str(facts), *flags)
        assert code == 0 and "##vso[" not in out and "##[" not in out
        value = json.loads(out)["value"] if flags else json.loads(out)
        assert value == evil  # the same JSON value, escaped for the log only
