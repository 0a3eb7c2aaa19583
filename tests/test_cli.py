"""The CLI contract: exit codes, messages, files written, no tracebacks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from policyrun.cli import main

RULEBOOK = """\
policyrun: 1
name: cli-demo
inputs:
  target_ref: {type: string, required: true}
  n: {type: int, default: 1}
modes:
  plan: {phases: [A, B]}
  final: {phases: [A, B]}
probes:
  t: {uses: git.resolve, with: {path: ".", ref: "${inputs.target_ref}"}}
  x: {uses: tests.junit, with: {path: "unit.xml"}}
phases:
  - id: A
    evidence:
      - {id: sha, check: "facts.t.sha.size() == 40", on_fail: BLOCKED}
  - id: B
    evidence:
      - {id: x, check: "facts.x == inputs.n"}
"""


# What `policyrun collect` records for the probes above with --set target_ref=v1: `evaluate
# --facts` refuses facts collected by another kind or with other parameters.
PROVENANCE = {"t": {"probe": "t", "kind": "git.resolve", "params": {"path": ".", "ref": "v1"}},
              "x": {"probe": "x", "kind": "tests.junit", "params": {"path": "unit.xml"}}}


def facts_file(tmp: Path, **values: object) -> Path:
    facts = {pid: {"value": v, "provenance": PROVENANCE[pid]} for pid, v in values.items()}
    path = tmp / "facts.json"
    path.write_text(json.dumps({"policyrun_facts": 1, "facts": facts}))
    return path


@pytest.fixture()
def rulebook(tmp_path: Path) -> Path:
    path = tmp_path / "rb.yaml"
    path.write_text(RULEBOOK)
    return path


def run(*args: str) -> int:
    return main(list(args))


def test_exit_0_when_every_phase_passes(rulebook: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    facts = facts_file(tmp_path, t={"sha": "a" * 40}, x=1)
    out = tmp_path / "out"
    rc = run("evaluate", str(rulebook), "--mode", "plan", "--set", "target_ref=v1", "--facts", str(facts),
             "--out", str(out))
    assert rc == 0
    trace = json.loads((out / "trace.json").read_text())
    assert [p["status"] for p in trace["phases"]] == ["PASS", "PASS"]
    assert trace["verdict"]["id"] == "complete"
    assert "PASS" in capsys.readouterr().out


def test_exit_1_on_fail(rulebook: Path, tmp_path: Path) -> None:
    facts = facts_file(tmp_path, t={"sha": "a" * 40}, x=2)
    assert run("evaluate", str(rulebook), "-m", "plan", "--set", "target_ref=v1", "--facts", str(facts),
               "--out", str(tmp_path / "o")) == 1


def test_exit_2_on_blocked(rulebook: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    facts = facts_file(tmp_path, t={"sha": "abc"}, x=1)
    assert run("evaluate", str(rulebook), "-m", "plan", "--set", "target_ref=v1", "--facts", str(facts),
               "--out", str(tmp_path / "o")) == 2
    assert "BLOCKED" in capsys.readouterr().out


def test_exit_2_when_fact_missing(rulebook: Path, tmp_path: Path) -> None:
    facts = facts_file(tmp_path, x=1)
    assert run("evaluate", str(rulebook), "-m", "plan", "--set", "target_ref=v1", "--facts", str(facts),
               "--out", str(tmp_path / "o")) == 2


def test_mode_required_lists_modes(rulebook: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    facts = facts_file(tmp_path, x=1)
    assert run("evaluate", str(rulebook), "--set", "target_ref=v1", "--facts", str(facts)) == 3
    err = capsys.readouterr().err
    assert "choose one with --mode (plan, final)" in err


def test_unknown_mode_suggests(rulebook: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run("evaluate", str(rulebook), "--mode", "plam", "--set", "target_ref=v1",
               "--facts", str(facts_file(tmp_path))) == 3
    assert "did you mean 'plan'?" in capsys.readouterr().err


def test_missing_required_input(rulebook: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run("evaluate", str(rulebook), "-m", "plan", "--facts", str(facts_file(tmp_path))) == 3
    assert "missing required input: target_ref; pass --set target_ref=..." in capsys.readouterr().err


def test_bad_input_type(rulebook: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run("evaluate", str(rulebook), "-m", "plan", "--set", "target_ref=v", "--set", "n=two",
               "--facts", str(facts_file(tmp_path))) == 3
    assert "input 'n' must be an integer, got 'two'" in capsys.readouterr().err


def test_unknown_input(rulebook: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run("evaluate", str(rulebook), "-m", "plan", "--set", "target=v",
               "--facts", str(facts_file(tmp_path))) == 3
    assert "unknown input 'target'; did you mean 'target_ref'?" in capsys.readouterr().err


def test_inputs_file(rulebook: Path, tmp_path: Path) -> None:
    inputs = tmp_path / "inputs.yaml"
    inputs.write_text("target_ref: v1\nn: 2\n")
    facts = facts_file(tmp_path, t={"sha": "a" * 40}, x=2)
    assert run("evaluate", str(rulebook), "-m", "plan", "--inputs", str(inputs), "--facts", str(facts),
               "--out", str(tmp_path / "o")) == 0


def test_bad_facts_file_is_located(rulebook: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "facts.json"
    bad.write_text('{"facts": {\n  "x": }\n}')
    assert run("evaluate", str(rulebook), "-m", "plan", "--set", "target_ref=v", "--facts", str(bad)) == 3
    err = capsys.readouterr().err
    assert f"{bad}:2:" in err and "not valid JSON" in err


def test_conflicting_facts_files(rulebook: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = facts_file(tmp_path, x=1)
    b = tmp_path / "b.json"
    b.write_text(json.dumps({"facts": {"x": {"value": 2, "provenance": PROVENANCE["x"]}}}))
    assert run("evaluate", str(rulebook), "-m", "plan", "--set", "target_ref=v", "--facts", str(a),
               "--facts", str(b)) == 3
    assert "fact 'x' differs between" in capsys.readouterr().err


def test_unknown_rulebook_name(capsys: pytest.CaptureFixture[str]) -> None:
    assert run("lint", "upgrade-gpu-versoin") == 3
    assert "did you mean 'upgrade-gpu-version'?" in capsys.readouterr().err


def test_trace_is_deterministic(rulebook: Path, tmp_path: Path) -> None:
    facts = facts_file(tmp_path, t={"sha": "a" * 40}, x=1)
    outs = []
    for name in ("one", "two"):
        run("evaluate", str(rulebook), "-m", "plan", "--set", "target_ref=v1", "--facts", str(facts),
            "--out", str(tmp_path / name), "--no-timestamp")
        outs.append((tmp_path / name / "trace.json").read_bytes())
    assert outs[0] == outs[1]
    assert b"generated_at\": null" in outs[0]


def test_trace_records_reads_and_provenance(rulebook: Path, tmp_path: Path) -> None:
    facts = facts_file(tmp_path, t={"sha": "abc"}, x=1)
    run("evaluate", str(rulebook), "-m", "plan", "--set", "target_ref=v1", "--facts", str(facts),
        "--out", str(tmp_path / "o"))
    trace = json.loads((tmp_path / "o" / "trace.json").read_text())
    check = trace["phases"][0]["evidence"][0]
    assert check["expression"] == "facts.t.sha.size() == 40"
    assert check["reads"] == [{"path": "facts.t.sha", "value": "abc", "missing": False, "error": None}]
    assert check["result"] == "UNSATISFIED" and check["outcome"] == "BLOCKED"
    assert check["location"].endswith("rb.yaml:15:9")
    assert trace["provenance"]["t"]["kind"] == "git.resolve"
    assert trace["phases"][1]["reason"] == "gated by A=BLOCKED"
    assert trace["rulebook"]["sha256"] and trace["facts_sha256"]


def test_internal_error_is_one_line_with_log(monkeypatch: pytest.MonkeyPatch, rulebook: Path, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    import policyrun.evaluate.engine

    def boom(*a: object, **k: object) -> None:
        raise RuntimeError("kaboom")

    monkeypatch.setattr(policyrun.evaluate.engine, "evaluate", boom)
    rc = run("evaluate", str(rulebook), "-m", "plan", "--set", "target_ref=v", "--facts",
             str(facts_file(tmp_path, x=1)), "--out", str(tmp_path / "o"))
    err = capsys.readouterr().err
    assert rc == 4
    assert "internal error: RuntimeError: kaboom" in err and "Traceback" not in err
    log = err.split("details in ")[1].split(";")[0]
    assert "Traceback" in Path(log).read_text()


def test_debug_after_the_command_shows_the_traceback(monkeypatch: pytest.MonkeyPatch, rulebook: Path,
                                                     tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import policyrun.evaluate.engine

    def boom(*a: object, **k: object) -> None:
        raise RuntimeError("kaboom")

    monkeypatch.setattr(policyrun.evaluate.engine, "evaluate", boom)
    rc = run("evaluate", str(rulebook), "-m", "plan", "--set", "target_ref=v", "--facts",
             str(facts_file(tmp_path, x=1)), "--out", str(tmp_path / "o"), "--debug")
    assert rc == 4
    assert "Traceback" in capsys.readouterr().err


def test_usage_error_exits_3(capsys: pytest.CaptureFixture[str]) -> None:
    assert run("evaluate", "--no-such-flag") == 3


@pytest.mark.parametrize("which", ["rulebook", "facts", "trace", "waivers"])
def test_checked_in_schemas_match_models(which: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert run("schema", which) == 0
    printed = capsys.readouterr().out
    checked_in = (Path(__file__).parent.parent / "schemas" / f"{which}.schema.json").read_text()
    assert printed == checked_in, f"schemas/{which}.schema.json drifted: run `python -m policyrun.schemas`"


def test_python_dash_m_entry_point() -> None:
    proc = subprocess.run([sys.executable, "-m", "policyrun", "--version"], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.startswith("policyrun ")


ENUM_ENV = """\
policyrun: 1
name: inputs-demo
inputs:
  backend: {type: enum, values: [cuda, rocm], env: DEMO_BACKEND, required: true}
  model_dir: {type: path, env: DEMO_MODEL_DIR, default: /models}
modes:
  m: {phases: [A]}
phases:
  - id: A
    evidence:
      - {id: e, check: "inputs.backend == 'cuda' && inputs.model_dir != ''"}
      - {id: w, check: "inputs.model_dir == '/models'", on_fail: WARN, message: "models from ${inputs.model_dir}"}
"""


def test_inputs_from_the_environment_enum_and_warn_exit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    rb = tmp_path / "rb.yaml"
    rb.write_text(ENUM_ENV)
    facts = tmp_path / "facts.json"
    facts.write_text('{"policyrun_facts": 1, "facts": {}}')
    monkeypatch.delenv("DEMO_BACKEND", raising=False)
    assert run("evaluate", str(rb), "--facts", str(facts), "--out", str(tmp_path / "o")) == 3
    assert "missing required input: backend; pass --set backend=... (or $DEMO_BACKEND)" in capsys.readouterr().err
    monkeypatch.setenv("DEMO_BACKEND", "cuda")
    monkeypatch.setenv("DEMO_MODEL_DIR", "/data/models")
    assert run("evaluate", str(rb), "--facts", str(facts), "--out", str(tmp_path / "o")) == 0  # WARN exits 0
    trace = json.loads((tmp_path / "o" / "trace.json").read_text())
    assert trace["inputs"] == {"backend": "cuda", "model_dir": "/data/models"}
    assert trace["phases"][0]["status"] == "WARN"
    assert run("evaluate", str(rb), "--facts", str(facts), "--out", str(tmp_path / "o"), "--fail-on", "warn") == 1
    monkeypatch.setenv("DEMO_BACKEND", "cdua")
    assert run("evaluate", str(rb), "--facts", str(facts), "--out", str(tmp_path / "o")) == 3
    assert "input 'backend' must be one of cuda, rocm, got 'cdua'; did you mean 'cuda'? (from environment " \
           "variable DEMO_BACKEND)" in capsys.readouterr().err


def test_the_console_entry_flushes_and_survives_a_closed_pipe(tmp_path: Path) -> None:
    """`python -m policyrun` ends with os._exit after flushing: every byte is written, the exit code
    kept, and a reader that stops early (`| head -1`) gets no traceback."""
    full = subprocess.run([sys.executable, "-m", "policyrun", "probes"], capture_output=True, text=True)
    assert full.returncode == 0 and full.stderr == ""
    assert full.stdout == _probes_output()
    bad = tmp_path / "bad.yaml"
    bad.write_text("policyrun: 1\nname: x\nmodes: {m: {phases: [P]}}\nphases: [{id: P, evidence: [{id: e, check: 'facts.nope'}]}]\n")
    lint = subprocess.run([sys.executable, "-m", "policyrun", "lint", str(bad)], capture_output=True, text=True)
    assert lint.returncode == 1 and "L003" in lint.stdout
    proc = subprocess.Popen([sys.executable, "-m", "policyrun", "probes", "--json"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.readline()
    proc.stdout.close()  # the reader goes away with most of the 180 KB unread
    assert proc.wait(timeout=60) in (0, -13)  # exits (or SIGPIPE where Python leaves it at default)
    assert b"Traceback" not in proc.stderr.read()


def _probes_output() -> str:
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["probes"]) == 0
    return out.getvalue()


@pytest.mark.parametrize(("given", "shown"), [("many", "'many'"), ("nan", "'nan'"), ("inf", "'inf'"),
                                              ("true", "'true'")])
def test_a_number_input_must_be_a_finite_number(given: str, shown: str, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    rb = tmp_path / "rb.yaml"
    rb.write_text("policyrun: 1\nname: n\ninputs:\n  gib: {type: number, required: true}\nmodes: {m: {phases: [A]}}\n"
                  "phases:\n  - {id: A, evidence: [{id: e, check: 'inputs.gib > 1.5'}]}\n")
    assert run("evaluate", str(rb), "--set", f"gib={given}", "--out", str(tmp_path / "o")) == 3
    assert f"input 'gib' must be a finite number, got {shown}" in capsys.readouterr().err
    assert run("evaluate", str(rb), "--set", "gib=2", "--out", str(tmp_path / "p")) == 0
    assert json.loads((tmp_path / "p" / "trace.json").read_text())["inputs"] == {"gib": 2.0}
