"""Secret inputs (`secret: true`, or `env:` naming a variable whose name or value looks secret):
expressions see the value, nothing policyrun writes or prints shows it, replay included."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from policyrun.cli import main

TOKEN = "hf_" + "AbCdEfGhIjKlMnOpQrStUvWxYz0123"
KEY = "k3y-value-123"

RULEBOOK = """\
policyrun: 1
name: secret-demo
version: "1"
inputs:
  token: {type: string, env: HF_TOKEN}
  api_key: {type: string, secret: true}
  repo: {type: string, env: REPO_DIR, default: "/src/app"}
modes:
  audit: {phases: [A, B]}
probes:
  host: {uses: env, with: {names: [HOME]}}
derive:
  said: {value: "'token ' + inputs.token"}
phases:
  - id: A
    title: the checks see the real values
    evidence:
      - id: shape
        check: "inputs.token.startsWith('hf_') && inputs.api_key.endsWith('-123') && facts.host.vars.HOME.set"
        message: "token ${inputs.token}"
  - id: B
    title: a failing check quotes them
    evidence:
      - id: quotes
        check: "inputs.token == 'nope' || inputs.api_key == 'nope'"
        message: "token ${inputs.token}, key ${inputs.api_key}, said ${derived.said}, repo ${inputs.repo}"
"""

FACTS = {"policyrun_facts": 1, "facts": {"host": {
    "value": {"vars": {"HOME": {"set": True, "value": "/root", "masked": False, "length": 5}}, "missing": []},
    "provenance": {"probe": "host", "kind": "env", "params": {"names": ["HOME"]}}}}}


@pytest.fixture
def scene(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "rb.yaml").write_text(RULEBOOK)
    (tmp_path / "facts.json").write_text(json.dumps(FACTS))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    return tmp_path


def _leaks(where: Path) -> list[str]:
    return [str(p) for p in sorted(where.rglob("*")) if p.is_file()
            and (TOKEN in p.read_text(errors="replace") or KEY in p.read_text(errors="replace"))]


def test_secret_inputs_are_masked_in_the_trace_and_every_report(scene: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["evaluate", "rb.yaml", "--facts", "facts.json", "--set", f"api_key={KEY}", "--out", "out",
                 "--format", "md,html,junit,sarif,json,github", "--no-timestamp"])
    assert code == 1
    trace = json.loads((scene / "out" / "trace.json").read_text())
    assert [(p["phase"], p["status"]) for p in trace["phases"]] == [("A", "PASS"), ("B", "FAIL")]
    assert trace["inputs"] == {"token": "***", "api_key": "***", "repo": "/src/app"}  # repo is not secret
    message = trace["phases"][1]["evidence"][0]["message"]
    assert message == "token ***, key ***, said token ***, repo /src/app"
    assert _leaks(scene / "out") == []
    assert len(list((scene / "out").iterdir())) >= 7
    out = capsys.readouterr()
    assert TOKEN not in out.out + out.err and KEY not in out.out + out.err
    assert main(["report", "out/trace.json", "--format", "md", "-o", "again.md"]) == 0
    assert main(["explain", "out/trace.json"]) in (0, 1)
    out = capsys.readouterr()
    assert TOKEN not in out.out + out.err and _leaks(scene) == []


def test_verify_binds_masked_inputs_again_and_says_so_when_it_cannot(scene: Path, monkeypatch: pytest.MonkeyPatch,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    main(["evaluate", "rb.yaml", "--facts", "facts.json", "--set", f"api_key={KEY}", "--out", "out",
          "--no-timestamp"])
    assert main(["verify", "out/trace.json", "--facts", "facts.json", "--set", f"api_key={KEY}"]) == 0
    capsys.readouterr()
    monkeypatch.delenv("HF_TOKEN")
    assert main(["verify", "out/trace.json", "--facts", "facts.json"]) == 3
    err = capsys.readouterr().err
    assert "masks secret inputs api_key, token" in err and "$HF_TOKEN" in err


def test_a_type_error_never_prints_a_secret_value(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    rb = RULEBOOK.replace("token: {type: string, env: HF_TOKEN}", "token: {type: int, env: HF_TOKEN}")
    (tmp_path / "rb.yaml").write_text(rb.replace("inputs.token.startsWith('hf_')", "inputs.token > 0"))
    (tmp_path / "facts.json").write_text(json.dumps(FACTS))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    assert main(["evaluate", "rb.yaml", "--facts", "facts.json", "--set", "api_key=x"]) == 3
    err = capsys.readouterr().err
    assert "input 'token' must be an integer, got *** (from environment variable HF_TOKEN)" in err and TOKEN not in err
    monkeypatch.delenv("HF_TOKEN")
    assert main(["evaluate", "rb.yaml", "--facts", "facts.json", "--set", f"token={KEY}", "--set", "api_key=x"]) == 3
    err = capsys.readouterr().err
    assert "got ***" in err and KEY not in err  # the variable's name (HF_TOKEN) marks --set values too


def test_a_collected_snapshot_masks_secret_inputs_and_replays(scene: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rb = RULEBOOK.replace("  host: {uses: env, with: {names: [HOME]}}",
                          "  host: {uses: env, with: {names: [HOME]}}\n"
                          "  where: {uses: path, with: {paths: [\"/nonexistent/${inputs.api_key}\"]}}")
    (scene / "rb.yaml").write_text(rb)
    assert main(["collect", "rb.yaml", "--set", f"api_key={KEY}", "-o", "collected.json"]) == 0
    text = (scene / "collected.json").read_text()
    assert KEY not in text and "/nonexistent/***" in text
    # Replay over the masked snapshot: not stale (compared masked), the same verdicts as before.
    assert main(["evaluate", "rb.yaml", "--facts", "collected.json", "--set", f"api_key={KEY}", "--out", "re"]) == 1
    assert _leaks(scene / "re") == []
    assert "do not match" not in capsys.readouterr().err


def test_eval_prints_a_secret_input_masked(scene: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", "'token is ' + inputs.token", "--rulebook", "rb.yaml", "--facts", "facts.json",
                 "--set", "api_key=x", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["value"] == "token is ***" and TOKEN not in json.dumps(out)
    assert main(["eval", "inputs.token.startsWith('hf_')", "--rulebook", "rb.yaml", "--facts", "facts.json",
                 "--set", "api_key=x"]) == 0
    assert capsys.readouterr().out == "true\n"  # the expression saw the real value


def test_an_env_bound_input_is_secret_by_its_variable_or_its_value() -> None:
    from policyrun.language.inputs import secret_input
    from policyrun.model import InputSpec

    assert secret_input(InputSpec(env="HF_TOKEN"), "anything")  # the variable's name
    assert secret_input(InputSpec(env="MODEL_DIR"), TOKEN)  # a token pasted into an innocent name
    assert secret_input(InputSpec(type="list", env="MIRRORS"), ["https://a", "https://u:pw@b/"])
    assert not secret_input(InputSpec(env="MODEL_DIR"), "/models/Qwen2_5_7B_Instruct")
    assert not secret_input(InputSpec(), TOKEN)  # not bound to the environment, not declared secret
    assert secret_input(InputSpec(secret=True), "x")
