"""One check identity: its text form reads back, and every report and the evaluation name a check
the way the rulebook's list of checks does."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from policyrun.checkid import CheckId, check_label, rulebook_checks, split_in_phase
from policyrun.cli import main
from policyrun.evaluate.engine import check_locations
from policyrun.language.rulebook import load_rulebook
from policyrun.trace.records import phase_checks

RULEBOOK = """\
policyrun: 1
name: ids
modes:
  ci:
    gating: independent
    phases:
      - {phase: A, when: "inputs.run_a"}
      - {phase: B}
inputs:
  run_a: {type: bool, default: true}
derive:
  twice: {value: "2 * 2"}
phases:
  - id: A
    preconditions:
      - {id: ready, check: "true"}
      - {check: "derived.twice == 4"}
    stop_when:
      - {id: frozen, when: "false", status: STOPPED, blocker: "release freeze"}
      - {when: "false", status: STOPPED, blocker: "unnamed"}
    evidence:
      - {id: unit_passed, check: "false", message: "2 failed"}
      - {id: guarded, applies_when: "true", check: "true"}
  - id: B
    evidence:
      - {id: e2e_passed, check: "true"}
verdicts:
  - {id: done, when: "phases.A.status == 'PASS'", summary: done}
  - {id: not_done, when: "true", summary: not done}
"""


@pytest.mark.parametrize("ident, text", [
    (CheckId("A", "evidence", "unit_passed"), "A/evidence/unit_passed"),
    (CheckId("A", "precondition", "precondition[1]"), "A/precondition/precondition[1]"),
    (CheckId("A", "stop_when", "frozen"), "A/stop_when/frozen"),
    (CheckId("A", "template", "next:FAIL"), "A/template/next:FAIL"),
    (CheckId("A", "mode_selection", "final-validation.v2"), "mode/final-validation.v2/A"),
    (CheckId(None, "verdict", "done"), "verdict/done"),
    (CheckId(None, "derive", "twice"), "derive/twice"),
    # A phase named like the words of the text form is still itself.
    (CheckId("mode", "evidence", "verdict"), "mode/evidence/verdict"),
    (CheckId("derive", "stop_when", "x"), "derive/stop_when/x"),
])
def test_the_text_form_reads_back(ident: CheckId, text: str) -> None:
    assert str(ident) == text
    assert CheckId.parse(text) == ident


@pytest.mark.parametrize("text", ["", "A", "A/evidence", "A//x", "/evidence/x", "A/evidance/x", "A/evidence/x/y",
                                  "verdict/", "mode/ci", "other/done"])
def test_text_that_names_no_check_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        CheckId.parse(text)


def test_a_check_of_a_phase_names_its_phase_and_a_verdict_does_not() -> None:
    with pytest.raises(ValueError):
        CheckId(None, "evidence", "x")
    with pytest.raises(ValueError):
        CheckId("A", "verdict", "x")


def test_names_for_reports() -> None:
    ident = CheckId("A", "evidence", "unit_passed")
    assert (ident.label, ident.record_id, ident.in_phase) == ("evidence unit_passed", "unit_passed", "A.unit_passed")
    mode = CheckId("A", "mode_selection", "ci")
    assert (mode.label, mode.record_id) == ("mode_selection mode.A", "mode.A")
    assert CheckId.of_record("A", "mode_selection", "mode.A", "ci") == mode
    assert check_label("stop_when", "frozen") == "stop_when frozen"
    assert split_in_phase("A.precondition[0]") == ("A", "precondition[0]")
    assert split_in_phase("A.next:FAIL") == ("A", "next:FAIL")


def test_the_rulebooks_checks_are_every_check_once(tmp_path: Path) -> None:
    path = tmp_path / "ids.yaml"
    path.write_text(RULEBOOK)
    checks = list(rulebook_checks(load_rulebook(path).model))
    assert [str(c.id) for c in checks] == [
        "mode/ci/A", "mode/ci/B", "derive/twice",
        "A/precondition/ready", "A/precondition/precondition[1]", "A/stop_when/frozen", "A/stop_when/stop_when[1]",
        "A/evidence/unit_passed", "A/evidence/guarded", "B/evidence/e2e_passed", "verdict/done", "verdict/not_done"]
    assert [CheckId.parse(str(c.id)) for c in checks] == [c.id for c in checks]


def test_every_recorded_check_is_located_where_the_rulebook_declares_it(tmp_path: Path) -> None:
    """The interpreter looks a check's location up by its own key: each one it records must be the
    key the rulebook's list of checks gives (a key built another way leaves `location` null)."""
    path = tmp_path / "ids.yaml"
    path.write_text(RULEBOOK)
    facts = tmp_path / "facts.json"
    facts.write_text('{"policyrun_facts": 1, "facts": {}}')
    assert main(["evaluate", str(path), "--facts", str(facts), "--out", str(tmp_path / "o"), "-q"]) == 1
    trace = json.loads((tmp_path / "o" / "trace.json").read_text())
    rb = load_rulebook(path)
    where = {str(c.id): str(rb.locate(c.node)) for c in rulebook_checks(rb.model)}
    recorded = {str(CheckId.of_record(p["phase"], c["kind"], c["id"], trace["mode"])): c["location"]
                for p in trace["phases"] for c in phase_checks(p)}
    recorded |= {str(CheckId(None, "verdict", c["id"])): c["location"] for c in trace["verdict"]["conditions"]}
    recorded |= {str(CheckId(None, "derive", d["id"])): d["location"] for d in trace["derived"]}
    assert recorded.keys() == where.keys() - {"mode/ci/B"}  # B has no `when`
    assert all(recorded[k] == where[k] and where[k].startswith(f"{path}:") for k in recorded)
    locations = check_locations(rb)
    assert locations["phase.A.evidence.guarded.applies_when"] == str(rb.locate(("phases", 0, "evidence", 1,
                                                                                 "applies_when")))


def test_coverage_names_checks_by_their_text_form(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "ids.yaml"
    path.write_text(RULEBOOK)
    (tmp_path / "ids.test.yaml").write_text(
        "policyrun_test: 1\nrulebook: ids.yaml\ncases:\n  - name: a fails\n    mode: ci\n    facts: {}\n"
        "    expect: {phases: {A: FAIL}, checks: {A.unit_passed: UNSATISFIED, 'A.precondition[1]': SATISFIED}}\n")
    assert main(["test", str(tmp_path), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    rb = load_rulebook(path)
    declared = {str(c.id) for c in rulebook_checks(rb.model)} - {"mode/ci/B"}
    assert set(doc["coverage"]["conditions"]) == declared
    assert doc["coverage"]["conditions"]["A/precondition/precondition[1]"] == ["SATISFIED"]
    assert "derive/twice" not in doc["coverage"]["missing"] and doc["coverage"]["missing"]["A/evidence/unit_passed"] \
        == ["SATISFIED"]


def test_location_keys_come_from_the_check_identity() -> None:
    from policyrun.checkid import location_key, part_key, phase_key

    assert location_key(CheckId("GATE", "mode_selection", "ci")) == "modes.ci.GATE.when"
    assert location_key(CheckId.listed("GATE", "precondition", None, 2), 2) == "phase.GATE.preconditions.2"
    assert CheckId.listed("GATE", "stop_when", None, 1).id == "stop_when[1]"
    assert CheckId.listed("GATE", "stop_when", "frozen", 1).id == "frozen"
    assert location_key(CheckId("GATE", "evidence", "unit")) == "phase.GATE.evidence.unit"
    assert location_key(CheckId("GATE", "template", "next:PASS")) == "phase.GATE.next.PASS"
    assert location_key(CheckId(None, "verdict", "ok")) == "verdict.ok"
    assert location_key(CheckId(None, "derive", "rows")) == "derive.rows"
    assert phase_key("GATE") == "phase.GATE" and part_key("derive.rows", "check") == "derive.rows.check"
    with pytest.raises(ValueError, match="by its index"):
        location_key(CheckId("GATE", "precondition", "ready"))  # keyed by place, for it may have no id
