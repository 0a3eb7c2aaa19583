"""`policyrun diff`: changed verdicts, statuses and checks between two traces."""

from __future__ import annotations

from dataclasses import replace

import json
from pathlib import Path

import pytest
import tracefactory as tf

from policyrun.cli import main
from policyrun.render.diff import diff_traces, render_diff_json, render_diff_text
from policyrun.trace.model import CheckRecord, Read, Trace, VerdictRecord


def _changed_rulebook() -> Trace:
    """The flagship after a rulebook edit: the architecture stop relaxed, a check added and removed."""
    old = tf.flagship()
    phases = list(old.phases)
    arch = phases[3]
    stop = replace(arch.stop_when[0], expression="facts.vllm_diff.renamed.exists(r, r.from.startsWith("
                                                 "'vllm/v1/attention'))", result="UNSATISFIED", outcome=None)
    attested = replace(arch.evidence[0], result="SATISFIED")
    phases[3] = arch.model_copy(update={"status": "PASS", "reason": "all evidence satisfied", "blocker": None,
                                        "stop_when": [stop], "evidence": [attested]})
    unit = phases[6]
    added = CheckRecord(id="lint_clean", kind="evidence", expression="facts.lint.errors == 0", result="SATISFIED",
                        reads=[Read(path="facts.lint.errors", value=0)], facts=["lint"])
    phases[6] = unit.model_copy(update={"evidence": [unit.evidence[0], added]})
    phases[4] = phases[4].model_copy(update={"status": "PASS", "reason": "all evidence satisfied"})
    return old.model_copy(update={"phases": phases, "rulebook": old.rulebook.model_copy(update={"sha256": "ef" * 32}),
                                  "verdict": VerdictRecord(id="not_ready_unit"), "exit_code": 1})


def test_no_change() -> None:
    diff = diff_traces(tf.flagship(), tf.flagship())
    assert diff["changed"] is False and diff["phases"] == []
    assert "No change" in render_diff_text(diff)


def test_generated_at_alone_is_not_a_change() -> None:
    assert not diff_traces(tf.flagship(), tf.flagship(generated_at="2030-01-01T00:00:00Z"))["changed"]


def test_rulebook_change_golden() -> None:
    diff = diff_traces(tf.flagship(), _changed_rulebook())
    tf.golden("diff.txt", render_diff_text(diff))
    tf.golden("diff.json", render_diff_json(diff))


def test_statuses_checks_added_removed_and_verdict() -> None:
    diff = diff_traces(tf.flagship(), _changed_rulebook())
    assert diff["changed"] and diff["verdict"] == {"old": "not_ready", "new": "not_ready_unit"}
    assert diff["exit_code"] == {"old": 2, "new": 1}
    phases = {p["phase"]: p for p in diff["phases"]}
    assert set(phases) == {"ARCHITECTURE_GATE", "PRODUCE_STAGED_PLAN", "STATIC_AND_UNIT_GATE"}
    arch = phases["ARCHITECTURE_GATE"]
    assert arch["status"] == {"old": "STOPPED", "new": "PASS"}
    stop = next(c for c in arch["checks"] if c["id"] == "moved_runner")
    assert stop["result"] == {"old": "SATISFIED", "new": "UNSATISFIED"}
    assert stop["outcome"] == {"old": "STOPPED", "new": None}
    assert "expression" in stop and "reads" not in stop
    unit = {c["id"]: c["change"] for c in phases["STATIC_AND_UNIT_GATE"]["checks"]}
    assert unit == {"lint_clean": "added", "no_unexplained_skips": "removed"}
    assert phases["STATIC_AND_UNIT_GATE"]["status"] is None


def test_added_and_removed_phases() -> None:
    old = tf.all_pass()
    new = old.model_copy(update={"phases": old.phases[1:] + [tf.generic().phases[1]]})
    phases = {p["phase"]: p["change"] for p in diff_traces(old, new)["phases"]}
    assert phases == {"TAG": "added", "FREEZE_IDENTITY": "removed"}


def test_different_facts_are_called_out() -> None:
    text = render_diff_text(diff_traces(tf.flagship(), tf.flagship(facts_sha256="ee" * 32)))
    assert "evaluated on different facts" in text


def test_diff_command_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old, new = tmp_path / "old.json", tmp_path / "new.json"
    old.write_text(tf.flagship().to_json())
    new.write_text(_changed_rulebook().to_json())
    assert main(["diff", str(old), str(old)]) == 0
    assert main(["diff", str(old), str(new)]) == 1
    capsys.readouterr()
    assert main(["diff", str(old), str(new), "--json"]) == 1
    assert json.loads(capsys.readouterr().out)["changed"] is True
    assert main(["diff", str(old), str(tmp_path / "missing.json")]) == 3
