"""One derive stage: derived values are computed by one guarded function, for collection and
evaluation alike, within a total budget; what evaluation cannot compute, no check can pass on;
whatever `evaluate` writes, `report`, `explain` and `verify` read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from policyrun import limits
from policyrun.cli import main
from policyrun.evaluate.derive import derive_values, graph_of
from policyrun.errors import PolicyrunError
from policyrun.evaluate.expreval import EvalContext
from policyrun.facts import FactsSnapshot
from policyrun.language.rulebook import load_rulebook

RUNAWAY = "'a'" + ".replace('a', 'aa')" * 29  # 2**29 characters if left to run

BACKEND = """\
policyrun: 1
name: backend-demo
modes:
  m: {phases: [A]}
probes:
  nvml: {uses: file.read, with: {path: "no-such-nvml.json"}}
  backend_info: {uses: const, with: {value: "${derived.backend}"}}
derive:
  backend: {value: "failed(facts.nvml) ? 'cpu' : string(facts.nvml.driver)"}
phases:
  - id: A
    evidence:
      - {id: backend, check: "facts.backend_info == 'cpu'"}
"""


def _write(tmp_path: Path, text: str, name: str = "rb.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _collect(tmp_path: Path, rb: Path, capsys: pytest.CaptureFixture[str], *mode: str) -> dict:
    out = tmp_path / "facts.json"
    code = main(["collect", str(rb), "-o", str(out), *mode])
    capsys.readouterr()
    facts = json.loads(out.read_text())["facts"]
    assert code == (2 if any(f.get("error") for f in facts.values()) else 0)  # a failed probe: exit 2
    return facts


def _trace(out: Path) -> dict:
    return json.loads((out / "trace.json").read_text())


# --- issue 21: a derived value that guards a failed probe with failed() ---------------------------

def test_parameter_reading_a_failed_guarded_derived_value_is_collected(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    facts = _collect(tmp_path, _write(tmp_path, BACKEND), capsys)
    assert facts["nvml"]["error"]["code"] == "file.not_found"
    assert facts["backend_info"]["value"] == "cpu" and "error" not in facts["backend_info"]
    assert main(["evaluate", str(tmp_path / "rb.yaml"), "--out", str(tmp_path / "o"), "-q"]) == 0


def test_parameter_reading_a_failed_guarded_probe_of_another_mode_is_collected(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    rb = _write(tmp_path, BACKEND.replace("  m: {phases: [A]}", "  m: {phases: [A]}\n  gpu: {phases: [A]}").replace(
        'with: {path: "no-such-nvml.json"}}', 'with: {path: "no-such-nvml.json"}, modes: [gpu]}'))
    facts = _collect(tmp_path, rb, capsys, "--mode", "m")  # nvml is not collected in m: failed(facts.nvml)
    assert "nvml" not in facts and facts["backend_info"]["value"] == "cpu"


def test_parameter_reading_a_derived_value_that_needs_the_failed_fact_fails(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    rb = _write(tmp_path, BACKEND.replace("failed(facts.nvml) ? 'cpu' : string(facts.nvml.driver)",
                                          "string(facts.nvml.driver)"))
    fact = _collect(tmp_path, rb, capsys)["backend_info"]
    assert fact["error"]["code"] == "dependency.failed"
    assert fact["error"]["message"].startswith("reads derived.backend, which has no value: missing fact facts.nvml")


def test_graph_waits_for_probes_asked_about_and_orders_through_probes(tmp_path: Path) -> None:
    rb = load_rulebook(_write(tmp_path, BACKEND.replace(
        "derive:\n", "derive:\n  after: {value: \"facts.backend_info + '!'\"}\n")))
    graph = graph_of(rb.model)
    assert graph.status["backend"] == {"nvml"} and graph.facts["backend"] == {"nvml"}
    params = graph.params["backend_info"]
    assert params.derived == {"backend"} and params.waits_for == {"nvml"} and params.facts == frozenset()
    # `after` reads a probe whose parameters read `backend`: it comes after it, although declared first.
    assert graph.order.index("backend") < graph.order.index("after")
    assert graph_of(rb.model) is graph  # once per rulebook


# --- issue 19 item 8: one guarded stage -----------------------------------------------------------

SLOW = f"""\
policyrun: 1
name: slow-demo
modes:
  m: {{phases: [A]}}
probes:
  p: {{uses: const, with: {{value: "${{derived.slow}}"}}}}
derive:
  slow: {{value: "{RUNAWAY}.size()"}}
phases:
  - id: A
    evidence:
      - {{id: uses_p, check: "facts.p >= 0"}}
      - {{id: p_failed, check: "failed(facts.p)"}}
"""


def test_runaway_derived_value_at_collection_is_stopped_by_the_guard(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("POLICYRUN_EXPRESSION_SECONDS", "1")
    monkeypatch.setenv("POLICYRUN_EVALUATION_MEMORY_MB", "8192")  # so the time limit is what stops it
    rb = _write(tmp_path, SLOW)
    fact = _collect(tmp_path, rb, capsys)["p"]
    assert fact["error"]["code"] == "dependency.failed"
    message = fact["error"]["message"]
    assert message.startswith(f"reads derived.slow, which has no value: the expression at {rb}:8:")
    assert "per-expression time limit of 1s" in message and "replace" not in message


def test_check_on_a_fact_whose_parameters_evaluation_cannot_derive_never_passes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A snapshot whose fact p was collected with a derived value this evaluation cannot compute
    (collected elsewhere, or the value hit a limit only now): p counts as failed."""
    monkeypatch.setenv("POLICYRUN_EXPRESSION_SECONDS", "1")
    monkeypatch.setenv("POLICYRUN_EVALUATION_MEMORY_MB", "8192")
    rb = _write(tmp_path, SLOW)
    facts = tmp_path / "facts.json"
    facts.write_text(json.dumps({"policyrun_facts": 1, "rulebook": "slow-demo", "mode": "m", "facts": {
        "p": {"value": 536870912, "provenance": {"probe": "p", "kind": "const", "params": {"value": 536870912}}}}}))
    out = tmp_path / "o"
    code = main(["evaluate", str(rb), "--facts", str(facts), "--allow-stale-facts", "--out", str(out), "-q"])
    capsys.readouterr()
    assert code == 2
    trace = _trace(out)
    assert trace["derived"][0]["error"].startswith(f"the expression at {rb}:8:")
    (phase,) = trace["phases"]
    checks = {c["id"]: c for c in phase["evidence"]}
    assert checks["uses_p"]["result"] == "UNKNOWN" and phase["status"] == "BLOCKED"
    assert "its parameters read derived.slow, which this evaluation could not compute" in checks["uses_p"]["message"]
    assert checks["p_failed"]["result"] == "SATISFIED"  # failed() agrees
    assert any(s["probe"] == "p" for s in trace["stale_facts"])


def test_derive_values_refuses_to_run_outside_the_guard(tmp_path: Path) -> None:
    rb = load_rulebook(_write(tmp_path, BACKEND))
    ctx = EvalContext(rb.model, "m", {}, FactsSnapshot.model_construct(facts={}))
    ctx.variables = {"facts": {}, "inputs": {}, "vars": {}, "mode": "m", "phases": {}, "derived": {}}
    with pytest.raises(PolicyrunError) as err:
        derive_values(ctx)
    assert err.value.code == "G003"


# --- issue 19 item 7: a total budget, and traces the readers accept -------------------------------

def _doubling(n: int, start: str = "[1, 2]", check: str = "size(derived.d{n}) > 0", message: str = "") -> str:
    lines = ["policyrun: 1", "name: doubling", "modes:", "  m: {phases: [A]}", "derive:",
             f"  d0: {{value: \"{start}\"}}"]
    lines += [f"  d{i}: {{value: \"derived.d{i - 1} + derived.d{i - 1}\"}}" for i in range(1, n + 1)]
    shown = f", message: {json.dumps(message)}" if message else ""
    lines += ["phases:", "  - id: A", "    evidence:", f"      - {{id: big, check: \"{check.format(n=n)}\"{shown}}}"]
    return "\n".join(lines) + "\n"


def _evaluate_and_read_back(tmp_path: Path, rb: Path, capsys: pytest.CaptureFixture[str]) -> dict:
    facts = tmp_path / "empty.json"
    facts.write_text('{"policyrun_facts": 1, "facts": {}}')
    out = tmp_path / "o"
    main(["evaluate", str(rb), "--facts", str(facts), "--out", str(out), "-q"])
    # Whatever evaluate wrote, the other commands read.
    assert main(["report", str(out / "trace.json"), "--format", "md", "--out", str(tmp_path / "r")]) == 0
    assert main(["explain", str(out / "trace.json")]) == 0
    assert main(["verify", str(out / "trace.json"), "--facts", str(facts)]) == 0
    capsys.readouterr()
    return _trace(out)


def test_doubling_chain_fails_closed_at_the_total_size_budget(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(limits, "DERIVED_BYTES", 4 * limits.MIB)
    rb = _write(tmp_path, _doubling(24))
    trace = _evaluate_and_read_back(tmp_path, rb, capsys)
    derived = {d["id"]: d for d in trace["derived"]}
    failed = [d for d in trace["derived"] if d["error"] and not d["error"].startswith("missing fact")]
    assert len(failed) == 1
    assert failed[0]["error"] == (f"the value of the derived value at {failed[0]['location']} would take the derived "
                                  "values past their total size budget of 4 MiB (counted as JSON text)")
    assert failed[0]["location"].startswith(f"{rb}:")
    assert derived["d24"]["value"] is None and trace["phases"][0]["status"] == "BLOCKED"
    big = derived[f"d{int(failed[0]['id'][1:]) - 1}"]["value"]  # the last one computed is summarised
    assert big["truncated"] is True and big["type"] == "list" and len(big["sha256"]) == 64


def test_derived_values_stop_at_the_total_time_budget(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(limits, "DERIVED_SECONDS", 0.0)
    rb = _write(tmp_path, _doubling(2))
    trace = _evaluate_and_read_back(tmp_path, rb, capsys)
    first = trace["derived"][0]
    assert first["error"] == (f"the derived value at {first['location']} was not computed: the derived values used "
                              "up their total time budget of 0s")
    assert trace["phases"][0]["status"] == "BLOCKED"


def test_long_strings_are_summarised_and_messages_cut(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rb = _write(tmp_path, _doubling(18, start="'ab'", check="derived.d{n} == 'x'", message="${derived.d18}"))
    trace = _evaluate_and_read_back(tmp_path, rb, capsys)
    last = trace["derived"][-1]
    assert last["value"] == {"truncated": True, "type": "str", "length": 2 ** 19,
                             "sha256": last["value"]["sha256"]}
    check = trace["phases"][0]["evidence"][0]
    assert check["result"] == "UNSATISFIED"
    assert check["reads"][0]["value"]["truncated"] is True
    assert len(check["message"]) < limits.MESSAGE_VALUE_CHARS + 100 and check["message"].endswith(
        f"({2 ** 19} characters; cut at {limits.MESSAGE_VALUE_CHARS})")
    assert (tmp_path / "o" / "trace.json").stat().st_size < 1 * limits.MIB


def test_a_derived_value_without_a_value_because_of_an_error_is_never_tolerated_as_missing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A mode may accept UNKNOWN for missing facts; an evaluation error or a bound hit in a derived
    value is a defect, not a gap (docs/semantics.md), so the checks reading it still block."""
    monkeypatch.setattr(limits, "DERIVED_BYTES", 64)
    rb = _write(tmp_path, """\
policyrun: 1
name: tolerant
modes:
  m: {phases: [A], on_missing: UNKNOWN}
derive:
  broken: {value: "1 / 0"}
  large: {value: "'x'.repeat(200)"}
phases:
  - id: A
    evidence:
      - {id: reads_broken, check: "derived.broken > 0"}
      - {id: reads_large, check: "size(derived.large) > 0"}
""".replace("'x'.repeat(200)", "'" + "x" * 200 + "'"))
    trace = _evaluate_and_read_back(tmp_path, rb, capsys)
    phase = trace["phases"][0]
    assert phase["status"] == "BLOCKED"
    assert [c["outcome"] for c in phase["evidence"]] == ["BLOCKED", "BLOCKED"]
    assert "total size budget of 64 bytes" in phase["evidence"][1]["message"]


def test_a_trace_the_readers_would_refuse_is_not_written(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(limits, "TRACE_BYTES", 1024)
    rb = _write(tmp_path, _doubling(3))
    facts = tmp_path / "empty.json"
    facts.write_text('{"policyrun_facts": 1, "facts": {}}')
    code = main(["evaluate", str(rb), "--facts", str(facts), "--out", str(tmp_path / "o"), "-q"])
    err = capsys.readouterr().err
    assert code == 3 and "T006" in err
    assert "bytes, over the 1024 bytes that report, explain and verify read; nothing was written" in err
    assert not (tmp_path / "o" / "trace.json").exists()
