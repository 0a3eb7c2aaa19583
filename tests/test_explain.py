"""`policyrun explain`: a filter over the trace, for people."""

from __future__ import annotations

from pathlib import Path

import pytest
import tracefactory as tf

from policyrun.cli import main
from policyrun.errors import UsageError
from policyrun.render.explain import render_explain


def test_explain_golden() -> None:
    tf.golden("explain.txt", render_explain(tf.flagship()))


def test_explain_failures_golden() -> None:
    tf.golden("explain-failures.txt", render_explain(tf.flagship(), failures=True))


def test_failures_shows_only_failing_phases_and_deciding_checks() -> None:
    text = render_explain(tf.flagship(), failures=True)
    body = text.split("\n\n", 1)[1]  # after the header, the summary and the exceptions
    failed, _, not_run = body.partition("\nDid not run in mode final-validation (4; nothing is known about them):\n")
    phases = [line.split(" — ")[0] for line in failed.splitlines() if line and not line.startswith(" ")]
    assert phases == ["ARCHITECTURE_GATE", "STATIC_AND_UNIT_GATE", "GPU_BASIC_E2E_GATE"]
    assert "unit_tests_pass" in text and "no_unexplained_skips" not in text  # SATISFIED check hidden
    assert "FREEZE_IDENTITY" not in body and "FINAL_AUDIT" not in failed
    assert "  FINAL_AUDIT: SKIPPED — gated by STATIC_AND_UNIT_GATE=FAIL\n" in not_run


def test_explain_shows_values_and_where_they_came_from() -> None:
    text = render_explain(tf.flagship(), phase="FREEZE_IDENTITY")
    assert "read facts.target = {\"ref\": \"v0.9.1\", \"sha\": \"" + tf.TARGET_SHA in text
    assert "from target (git.resolve)" in text
    assert "ran:   git rev-parse --verify v0.9.1^{commit}" in text
    assert "repo:  /src/vllm @ " + tf.TARGET_SHA in text
    pins = render_explain(tf.flagship(), phase="FREEZE_IDENTITY")
    assert "file:  pyproject.toml:14" in pins
    gpu = render_explain(tf.flagship(), phase="GPU_BASIC_E2E_GATE")
    assert "error: file.not_found: build/e2e-junit.xml does not exist" in gpu
    assert "decided by: evidence e2e_passed -> BLOCKED" in gpu


def test_stop_condition_that_did_not_fire_is_not_a_failure() -> None:
    trace = tf.flagship()
    phases = [trace.phases[0].model_copy(update={"status": "FAIL"})]
    text = render_explain(trace.model_copy(update={"phases": phases}), failures=True)
    assert "pins_disagree" not in text


def test_nothing_failed() -> None:
    text = render_explain(tf.all_pass(), failures=True)
    assert text.endswith("Nothing failed: all 3 phases are PASS or outside this mode.\n")


def test_gates_that_never_ran_are_not_filed_under_nothing_failed() -> None:
    trace = tf.all_pass()
    gate = trace.phases[2].model_copy(update={"phase": "GPU_BASIC_E2E_GATE", "status": "SKIPPED", "evidence": [],
                                              "reason": "outside mode planning-audit: inputs.gpu_validation is false"})
    far = trace.phases[1].model_copy(update={"phase": "FINAL_AUDIT", "status": "SKIPPED", "evidence": [],
                                             "reason": "outside mode"})
    text = render_explain(trace.model_copy(update={"phases": [*trace.phases[:2], gate, far]}), failures=True)
    assert "Nothing failed" not in text
    assert "No phase is FAIL, BLOCKED or STOPPED, but what did not run was not verified:" in text
    assert text.endswith("Did not run in mode planning-audit (1; nothing is known about them):\n"
                         "  GPU_BASIC_E2E_GATE: SKIPPED — outside mode planning-audit: inputs.gpu_validation is "
                         "false\n")


def test_unknown_phase_is_a_usage_error() -> None:
    with pytest.raises(UsageError) as err:
        render_explain(tf.flagship(), phase="NOPE")
    assert "FREEZE_IDENTITY" in err.value.message


def test_explain_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "trace.json"
    trace.write_text(tf.flagship().to_json())
    assert main(["explain", str(trace), "--phase", "STATIC_AND_UNIT_GATE", "--failures"]) == 0
    out = capsys.readouterr().out
    assert out.count("STATIC_AND_UNIT_GATE — Static and unit gate: FAIL") == 1
    assert main(["explain", str(trace), "--phase", "NOPE"]) == 3
    assert main(["explain", str(tmp_path / "missing.json")]) == 3
    (tmp_path / "bad.json").write_text('{"not": "a trace"}')
    assert main(["explain", str(tmp_path / "bad.json")]) == 3
    assert "T003" in capsys.readouterr().err


def test_explain_lists_probes_read_only_through_failed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Before, a probe a check only asked failed() about was in neither its reads nor the trace's
    provenance: explain showed nothing of why `failed(facts.smi)` was true."""
    import json

    rb = tmp_path / "rb.yaml"
    rb.write_text("""\
policyrun: 1
name: asks
modes: {m: {phases: [P]}}
probes:
  cfg: {uses: const, with: {value: {gpus: 0}}}
  smi: {uses: command, with: {argv: [nvidia-smi]}}
phases:
  - id: P
    evidence:
      - {id: cpu_only, check: "failed(facts.smi) ? facts.cfg.gpus == 0 : true"}
      - {id: code, check: "error_code(facts.smi) != null"}
""")
    assert main(["evaluate", str(rb), "-q", "--out", str(tmp_path / "o")]) == 0
    trace = json.loads((tmp_path / "o" / "trace.json").read_text())
    assert trace["provenance"]["smi"]["error"]["code"] == "refused.permission"
    assert trace["phases"][0]["evidence"][1]["facts"] == ["smi"]
    capsys.readouterr()
    assert main(["explain", str(tmp_path / "o" / "trace.json")]) == 0
    out = capsys.readouterr().out
    assert "probes read only through failed()/error_code(): smi — failed (refused.permission)\n" in out
    assert out.count("asked only whether smi failed, never read: failed (refused.permission)") == 2
    assert "asked only whether cfg" not in out and "from cfg (const)" in out
    assert "error: refused.permission: needs permission 'exec'" in out


def test_a_stopped_phase_still_shows_every_evidence_result(tmp_path: Path) -> None:
    """docs/semantics.md: when a stop condition fires, the evidence is still evaluated and shown."""
    from policyrun.evaluate.engine import evaluate
    from policyrun.facts import Fact, FactsSnapshot, Provenance
    from policyrun.language.rulebook import load_rulebook
    from policyrun.trace.consistency import inconsistencies

    rb_path = tmp_path / "rb.yaml"
    rb_path.write_text(
        "policyrun: 1\nname: stop\nmodes: {m: {phases: [A]}}\n"
        "probes: {n: {uses: const, with: {value: 3}}}\n"
        "phases:\n  - id: A\n    stop_when: [{id: halt, when: 'facts.n == 3', blocker: halted}]\n"
        "    evidence:\n      - {id: small, check: 'facts.n < 2', message: 'too big: ${facts.n}'}\n"
        "      - {id: odd, check: 'facts.n % 2 == 1'}\n")
    facts = FactsSnapshot(facts={"n": Fact(value=3, provenance=Provenance(probe="n", kind="const"))})
    trace = evaluate(load_rulebook(rb_path), mode="m", inputs={}, facts=facts, timestamp=False)
    assert inconsistencies(trace) == []
    text = render_explain(trace)
    assert "stop_when halt: SATISFIED -> phase STOPPED" in text
    assert "evidence small: UNSATISFIED" in text and "too big: 3" in text
    assert "evidence odd: SATISFIED" in text
    assert "decided by: stop_when halt -> STOPPED" in text
