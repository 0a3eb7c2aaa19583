"""`policyrun verify TRACE --facts F`: a trace edited after the fact is caught by evaluating again,
whatever was edited; another rulebook or other facts are refused before anything is compared.

Traces here are written by `policyrun evaluate` itself (a small rulebook and a facts snapshot in a
tmp dir, and the shipped flagship example), then edited the way a person would edit them.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from policyrun.cli import main
from policyrun.audit.differences import differences

RULEBOOK = """\
policyrun: 1
name: verify-demo
version: "1.2.0"
inputs:
  repo: {type: path, default: "/src/app"}
  limit: {type: int, default: 1}
  note: {type: string}
modes:
  audit: {phases: [A, B]}
  checklist: {phases: [A, B], gating: independent}
probes:
  diff: {uses: git.diff, with: {path: "${inputs.repo}", base: v1, head: v2}}
  log: {uses: git.log, with: {path: "${inputs.repo}", base: "${facts.diff.base_sha}", head: v2}}
  lib: {uses: git.repo, with: {path: /src/lib}}
derive:
  deleted: {value: "facts.diff.files.filter(f, f.status == 'D').map(f, f.path)"}
phases:
  - id: A
    title: few deletions
    evidence:
      - id: few_deletions
        check: "size(derived.deleted) <= inputs.limit"
        message: "deleted: ${derived.deleted.join(', ')}"
  - id: B
    title: history
    evidence:
      - id: has_commits
        check: "facts.log.count > 0"
        message: "no commits between v1 and v2"
verdicts:
  - {id: ready, when: "phases.A.status == 'PASS' && phases.B.status == 'PASS'", summary: "ready at ${facts.lib.head}"}
"""

APP_HEAD = "1" * 40
LIB_HEAD = "2" * 40
BASE_SHA = "a" * 40


def facts_doc(*, deleted: int = 1, commits: int = 3) -> dict[str, Any]:
    files = [{"path": f"gone{i}.py", "status": "D"} for i in range(deleted)] + [{"path": "kept.py", "status": "M"}]
    app = {"path": "/src/app", "head": APP_HEAD}
    return {"policyrun_facts": 1, "facts": {
        "diff": {"value": {"base_sha": BASE_SHA, "files": files},
                 "provenance": {"probe": "diff", "kind": "git.diff", "params": {"path": "/src/app", "base": "v1",
                                                                                "head": "v2"}, "repo": app}},
        "log": {"value": {"count": commits},
                "provenance": {"probe": "log", "kind": "git.log",
                               "params": {"path": "/src/app", "base": BASE_SHA, "head": "v2"}, "repo": app}},
        "lib": {"value": {"head": LIB_HEAD, "clean": True},
                "provenance": {"probe": "lib", "kind": "git.repo", "params": {"path": "/src/lib"},
                               "repo": {"path": "/src/lib", "head": LIB_HEAD}}},
    }}


class Scenario:
    """A rulebook, a facts snapshot and the trace `evaluate` wrote from them, in a tmp dir."""

    def __init__(self, root: Path, *, rulebook: str = RULEBOOK, facts: dict[str, Any] | None = None) -> None:
        self.root = root
        self.rulebook = root / "rb.yaml"
        self.rulebook.write_text(rulebook)
        self.facts = root / "facts.json"
        self.facts.write_text(json.dumps(facts or facts_doc()))
        self.trace = root / "out" / "trace.json"

    def evaluate(self, *extra: str, mode: str = "audit") -> int:
        return main(["evaluate", str(self.rulebook), "--mode", mode, "--facts", str(self.facts),
                     "--out", str(self.root / "out"), "-q", *extra])

    def load(self) -> dict[str, Any]:
        return json.loads(self.trace.read_text())  # type: ignore[no-any-return]

    def edit(self, change: Callable[[dict[str, Any]], None], name: str = "edited.json") -> Path:
        data = self.load()
        change(data)
        path = Path(name)  # in the current directory, so messages name it as given
        path.write_text(json.dumps(data, indent=2))
        return path

    def verify(self, trace: Path | None = None, *extra: str) -> int:
        return main(["verify", str(trace or self.trace), "--facts", str(self.facts), *extra])


@pytest.fixture()
def scenario(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Scenario:
    monkeypatch.chdir(tmp_path)  # the trace names the rulebook as given: rb.yaml beside it
    s = Scenario(tmp_path)
    s.rulebook, s.facts, s.trace = Path("rb.yaml"), Path("facts.json"), Path("out/trace.json")
    return s


def result(capsys: pytest.CaptureFixture[str]) -> tuple[list[str], str]:
    out, err = capsys.readouterr()
    return out.splitlines(), err


def difference_lines(lines: list[str]) -> list[str]:
    return [line for line in lines if ": trace has " in line]


def phase(trace: dict[str, Any], pid: str) -> dict[str, Any]:
    return next(p for p in trace["phases"] if p["phase"] == pid)


# --- a genuine trace verifies ---------------------------------------------------------------------


def test_genuine_trace_verifies(scenario: Scenario, capsys: pytest.CaptureFixture[str]) -> None:
    assert scenario.evaluate() == 0
    trace = scenario.load()
    assert trace["generated_at"]  # stamped now; verify evaluates without a stamp and must ignore it
    capsys.readouterr()
    assert scenario.verify() == 0
    lines, err = result(capsys)
    assert lines[0] == "verified: out/trace.json is what its rulebook gives over these facts"
    rb_sha = hashlib.sha256(Path("rb.yaml").read_bytes()).hexdigest()
    assert f"  rulebook  rb.yaml (verify-demo 1.2.0) sha256 {rb_sha}" in lines
    assert f"  facts     sha256 {trace['facts_sha256']}" in lines
    assert "  verdict   ready, exit code 0" in lines
    assert err == ""


def test_failing_and_blocked_traces_verify_too(scenario: Scenario, capsys: pytest.CaptureFixture[str]) -> None:
    scenario.facts.write_text(json.dumps(facts_doc(deleted=2, commits=0)))
    assert scenario.evaluate(mode="checklist") == 1
    capsys.readouterr()
    assert scenario.verify() == 0
    assert "  verdict   incomplete, exit code 1" in result(capsys)[0]


# --- every kind of edit is a difference (exit 1) --------------------------------------------------


def test_phase_status_edited(scenario: Scenario, capsys: pytest.CaptureFixture[str]) -> None:
    scenario.facts.write_text(json.dumps(facts_doc(deleted=2)))
    assert scenario.evaluate() == 1

    def to_pass(t: dict[str, Any]) -> None:
        phase(t, "A")["status"] = "PASS"  # its check still says UNSATISFIED -> FAIL
        t["exit_code"] = 0

    capsys.readouterr()
    assert scenario.verify(scenario.edit(to_pass)) == 1
    lines, _ = result(capsys)
    assert difference_lines(lines) == ["phases[A].status: trace has PASS, evaluation gives FAIL",
                                       "exit_code: trace has 0, evaluation gives 1"]
    assert "the trace also contradicts itself:" in lines  # and the load-time checks say why
    assert "  - A is PASS but evidence few_deletions imposed FAIL" in lines
    assert lines[-1] == ("NOT VERIFIED: edited.json differs from its re-evaluation in 2 field(s) "
                         "(generated_at and run are not compared)")


def test_exit_code_edited(scenario: Scenario, capsys: pytest.CaptureFixture[str]) -> None:
    scenario.facts.write_text(json.dumps(facts_doc(commits=0)))
    assert scenario.evaluate() == 1

    def to_zero(t: dict[str, Any]) -> None:
        t["exit_code"] = 0

    capsys.readouterr()
    assert scenario.verify(scenario.edit(to_zero)) == 1
    assert difference_lines(result(capsys)[0]) == ["exit_code: trace has 0, evaluation gives 1"]


def test_check_result_edited(scenario: Scenario, capsys: pytest.CaptureFixture[str]) -> None:
    scenario.facts.write_text(json.dumps(facts_doc(deleted=2)))
    assert scenario.evaluate() == 1

    def satisfied(t: dict[str, Any]) -> None:
        check = phase(t, "A")["evidence"][0]
        check["result"], check["outcome"], check["message"] = "SATISFIED", None, None

    capsys.readouterr()
    assert scenario.verify(scenario.edit(satisfied)) == 1
    assert difference_lines(result(capsys)[0]) == [
        "phases[A].evidence[evidence:few_deletions].result: trace has SATISFIED, evaluation gives UNSATISFIED",
        "phases[A].evidence[evidence:few_deletions].outcome: trace has null, evaluation gives FAIL",
        'phases[A].evidence[evidence:few_deletions].message: trace has null, evaluation gives "deleted: gone0.py, '
        'gone1.py"',
    ]


def test_values_read_verdict_derived_and_provenance_edited(scenario: Scenario,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    assert scenario.evaluate() == 0

    def many(t: dict[str, Any]) -> None:
        t["derived"][0]["value"] = []
        phase(t, "B")["evidence"][0]["reads"][0]["value"] = 7
        t["verdict"]["summary"] = "ready at HEAD"
        t["provenance"]["log"]["repo"]["head"] = "f" * 40
        t["inputs"]["limit"] = 2

    capsys.readouterr()
    assert scenario.verify(scenario.edit(many)) == 1
    assert sorted(difference_lines(result(capsys)[0])) == sorted([
        # The trace's inputs are the question evaluated again: the check now reads 2, the trace said 1.
        "phases[A].evidence[evidence:few_deletions].reads[inputs.limit].value: trace has 1, evaluation gives 2",
        "derived[deleted].value[0]: trace has (absent), evaluation gives gone0.py",
        "phases[B].evidence[evidence:has_commits].reads[facts.log.count].value: trace has 7, evaluation gives 3",
        f'verdict.summary: trace has "ready at HEAD", evaluation gives "ready at {LIB_HEAD}"',
        # All digits: quoted, so it cannot be read as a number.
        f'provenance.log.repo.head: trace has {"f" * 40}, evaluation gives "{APP_HEAD}"',
    ])


def test_added_and_removed_records_are_named(scenario: Scenario, capsys: pytest.CaptureFixture[str]) -> None:
    assert scenario.evaluate() == 0

    def reshape(t: dict[str, Any]) -> None:
        extra = dict(phase(t, "B"), phase="C")
        t["phases"] = [phase(t, "B"), phase(t, "A"), extra]  # reordered, and a phase that never ran
        del t["provenance"]["log"]

    capsys.readouterr()
    assert scenario.verify(scenario.edit(reshape)) == 1
    lines = result(capsys)[0]
    assert 'phases order: trace has ["B", "A"], evaluation gives ["A", "B"]' in lines
    assert any(line.startswith('phases[C]: trace has {"blocker": null') and line.endswith("evaluation gives (absent)")
               for line in lines)
    assert any(line.startswith("provenance.log: trace has (absent), evaluation gives {") for line in lines)


def test_inputs_given_on_the_command_line_are_reported(scenario: Scenario,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    assert scenario.evaluate() == 0
    capsys.readouterr()
    assert scenario.verify(None, "--set", "limit=0") == 1
    lines = difference_lines(result(capsys)[0])
    assert lines[0] == "inputs.limit: trace has 1, evaluation gives 0"
    assert "phases[A].status: trace has PASS, evaluation gives FAIL" in lines
    inputs = Path("inputs.yaml")
    inputs.write_text("limit: 1\nnote: audited\n")
    assert main(["verify", str(scenario.trace), "--facts", str(scenario.facts), "--inputs", str(inputs)]) == 1
    assert difference_lines(result(capsys)[0]) == ["inputs.note: trace has null, evaluation gives audited"]


def test_a_null_input_stays_null_whatever_the_environment(scenario: Scenario, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    scenario.rulebook.write_text(RULEBOOK.replace("note: {type: string}", "note: {type: string, env: AUDIT_NOTE}"))
    assert scenario.evaluate() == 0
    monkeypatch.setenv("AUDIT_NOTE", "set on the auditor's machine")
    capsys.readouterr()
    assert scenario.verify() == 0


def test_fail_on_warn_is_replayed_as_recorded(scenario: Scenario, capsys: pytest.CaptureFixture[str]) -> None:
    scenario.rulebook.write_text(RULEBOOK.replace('message: "no commits between v1 and v2"',
                                                  'message: "no commits between v1 and v2"\n        on_fail: WARN'))
    scenario.facts.write_text(json.dumps(facts_doc(commits=0)))
    assert scenario.evaluate("--fail-on", "warn") == 1
    capsys.readouterr()
    assert scenario.verify() == 0  # without --fail-on warn the evaluation would exit 0, not 1

    def drop(t: dict[str, Any]) -> None:
        t["fail_on_warn"] = False  # the claim changes, so the replay does too; the exit code now disagrees

    assert scenario.verify(scenario.edit(drop)) == 1
    assert difference_lines(result(capsys)[0]) == [
        "verdict.id: trace has incomplete, evaluation gives complete",
        'verdict.summary: trace has "B is WARN: no commits between v1 and v2", evaluation gives "every phase of '
        'mode audit passed, with warnings in B"',
        "exit_code: trace has 1, evaluation gives 0"]


# --- another rulebook or other facts: refused before comparing (exit 3) --------------------------


def test_rulebook_sha256_edited(scenario: Scenario, capsys: pytest.CaptureFixture[str]) -> None:
    assert scenario.evaluate() == 0
    fake = "0" * 64

    def fake_sha(t: dict[str, Any]) -> None:
        t["rulebook"]["sha256"] = fake

    capsys.readouterr()
    assert scenario.verify(scenario.edit(fake_sha)) == 3
    _, err = result(capsys)
    real = hashlib.sha256(Path("rb.yaml").read_bytes()).hexdigest()
    assert "V001" in err and f"has sha256 {real}, but the trace records {fake}" in err


def test_rulebook_changed_since(scenario: Scenario, capsys: pytest.CaptureFixture[str]) -> None:
    assert scenario.evaluate() == 0
    scenario.rulebook.write_text(RULEBOOK.replace("<= inputs.limit", "< inputs.limit"))
    capsys.readouterr()
    assert scenario.verify() == 3
    assert "V001" in result(capsys)[1]


def test_facts_edited_after_the_fact(scenario: Scenario, capsys: pytest.CaptureFixture[str]) -> None:
    assert scenario.evaluate() == 0
    recorded = scenario.load()["facts_sha256"]
    doc = facts_doc()
    doc["facts"]["log"]["value"]["count"] = 0  # what the edited snapshot would now decide
    scenario.facts.write_text(json.dumps(doc))
    capsys.readouterr()
    assert scenario.verify() == 3
    err = result(capsys)[1]
    assert "V003" in err and f"but the trace was evaluated over facts {recorded}" in err
    now = re.search(r"the facts have sha256 ([0-9a-f]{64})", err)
    assert now is not None and now.group(1) != recorded


def test_facts_sha256_edited_in_the_trace(scenario: Scenario, capsys: pytest.CaptureFixture[str]) -> None:
    assert scenario.evaluate() == 0

    def fake(t: dict[str, Any]) -> None:
        t["facts_sha256"] = "e" * 64

    capsys.readouterr()
    assert scenario.verify(scenario.edit(fake)) == 3
    assert f"evaluated over facts {'e' * 64}" in result(capsys)[1]


def test_stale_facts_are_refused_like_evaluate_does(scenario: Scenario, capsys: pytest.CaptureFixture[str]) -> None:
    doc = facts_doc()
    doc["facts"]["lib"]["provenance"]["params"]["path"] = "/src/other"  # collected for another question
    scenario.facts.write_text(json.dumps(doc))
    assert scenario.evaluate() == 3  # evaluate refuses it (F005) ...
    assert scenario.evaluate("--allow-stale-facts") == 0  # ... unless told, and the trace records it
    assert [s["probe"] for s in scenario.load()["stale_facts"]] == ["lib"]
    capsys.readouterr()
    assert scenario.verify() == 0  # recorded: verify evaluates the same way

    def unrecorded(t: dict[str, Any]) -> None:
        t["stale_facts"] = []

    edited = scenario.edit(unrecorded)
    assert scenario.verify(edited) == 3
    err = result(capsys)[1]
    assert "F005" in err and "lib: collected with other parameters" in err and "--allow-stale-facts" in err
    assert scenario.verify(edited, "--allow-stale-facts") == 1
    assert difference_lines(result(capsys)[0])[0].startswith(
        'stale_facts[lib]: trace has (absent), evaluation gives {"probe": "lib", "reason": "collected with other')


def test_facts_and_rulebook_must_be_found(scenario: Scenario, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert scenario.evaluate() == 0
    capsys.readouterr()
    assert main(["verify", str(scenario.trace)]) == 3
    assert "V004" in result(capsys)[1]
    moved = tmp_path / "elsewhere.yaml"
    shutil.move("rb.yaml", moved)
    assert scenario.verify() == 3
    err = result(capsys)[1]
    assert "U001" in err and "'rb.yaml', which is not here; pass --rulebook" in err
    assert scenario.verify(None, "--key", "pub.pem") == 3
    assert "V009" in result(capsys)[1]


def test_rulebook_read_from_another_path(scenario: Scenario, tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    scenario.facts.write_text(json.dumps(facts_doc(deleted=2)))
    assert scenario.evaluate() == 1
    copy = tmp_path / "audit" / "copy.yaml"
    copy.parent.mkdir()
    shutil.copy("rb.yaml", copy)
    capsys.readouterr()
    # Every location in the trace says rb.yaml:LINE:COL; the same bytes elsewhere verify.
    assert scenario.verify(None, "--rulebook", str(copy)) == 0
    lines, err = result(capsys)
    assert lines[0].startswith("verified:")
    assert f"rulebook read from {copy.as_posix()}; the trace names it rb.yaml (same sha256)" in err
    copy.write_text(RULEBOOK + "# changed\n")
    assert scenario.verify(None, "--rulebook", str(copy)) == 3


def test_inconsistent_unreadable_or_foreign_files(scenario: Scenario, capsys: pytest.CaptureFixture[str]) -> None:
    Path("not.json").write_text("{nope")
    assert main(["verify", "not.json", "--facts", str(scenario.facts)]) == 3
    assert "T002" in result(capsys)[1]
    Path("statement.json").write_text(json.dumps({"_type": "https://in-toto.io/Statement/v1", "subject": []}))
    assert main(["verify", "statement.json", "--facts", str(scenario.facts)]) == 3
    err = result(capsys)[1]
    assert "V005" in err and "unsigned in-toto statement" in err


# --- overlays: every file of the chain is pinned --------------------------------------------------


OVERLAY = """\
policyrun: 1
extends: rb.yaml
name: verify-demo-strict
inputs:
  limit: {default: 0}
"""


def test_overlay_chain_is_pinned(scenario: Scenario, capsys: pytest.CaptureFixture[str]) -> None:
    Path("strict.yaml").write_text(OVERLAY)
    assert main(["evaluate", "strict.yaml", "--mode", "audit", "--facts", str(scenario.facts), "--out", "o", "-q"]) == 1
    trace = json.loads(Path("o/trace.json").read_text())
    assert [c["path"] for c in trace["rulebook"]["chain"]] == ["rb.yaml", "strict.yaml"]
    capsys.readouterr()
    assert main(["verify", "o/trace.json", "--facts", str(scenario.facts)]) == 0
    scenario.rulebook.write_text(RULEBOOK.replace('version: "1.2.0"', 'version: "1.2.1"'))  # the base moved on
    assert main(["verify", "o/trace.json", "--facts", str(scenario.facts)]) == 3
    err = result(capsys)[1]
    base_now = hashlib.sha256(Path("rb.yaml").read_bytes()).hexdigest()
    assert "V002" in err and f"overlay layer rb.yaml (verify-demo) has sha256 {base_now}" in err


# --- the shipped flagship, on a shipped example ---------------------------------------------------


EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def test_flagship_example_verifies_and_edits_are_caught(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(EXAMPLES.parent)  # the example's inputs name evidence relative to the checkout
    facts = "examples/planning-pass/facts.json"
    out = tmp_path / "out"
    code = main(["evaluate", "upgrade-gpu-version", "--mode", "planning-audit", "--inputs",
                 "examples/planning-pass/inputs.yaml", "--facts", facts, "--out", str(out), "-q"])
    assert code in (0, 1, 2)
    capsys.readouterr()
    assert main(["verify", str(out / "trace.json"), "--facts", facts]) == 0
    assert result(capsys)[0][1].startswith("  rulebook  <shipped>/upgrade-gpu-version.yaml (upgrade-gpu-version ")
    trace = json.loads((out / "trace.json").read_text())
    first = trace["phases"][0]
    was = first["status"]
    first["status"] = "STOPPED" if was != "STOPPED" else "PASS"
    edited = tmp_path / "edited.json"
    edited.write_text(json.dumps(trace))
    assert main(["verify", str(edited), "--facts", facts]) == 1
    assert f"phases[{first['phase']}].status: trace has {first['status']}, evaluation gives {was}" in \
        result(capsys)[0]


# --- the comparison itself -------------------------------------------------------------------------


def test_records_are_matched_by_identity_not_position() -> None:
    a = {"phases": [{"phase": "A", "status": "PASS"}, {"phase": "B", "status": "FAIL"}]}
    b = {"phases": [{"phase": "A", "status": "PASS"}, {"phase": "X", "status": "PASS"},
                    {"phase": "B", "status": "FAIL"}]}
    assert [d.line() for d in differences(a, b)] == [
        'phases[X]: trace has (absent), evaluation gives {"phase": "X", "status": "PASS"}']


def test_checks_are_matched_by_kind_and_id_and_duplicates_by_position() -> None:
    a = [{"kind": "precondition", "id": "x", "result": "SATISFIED"}, {"kind": "evidence", "id": "x",
                                                                      "result": "SATISFIED"}]
    b = [a[0], {"kind": "evidence", "id": "x", "result": "UNKNOWN"}]
    assert [d.line() for d in differences(a, b)] == [
        "[evidence:x].result: trace has SATISFIED, evaluation gives UNKNOWN"]
    dup = [{"id": "x", "v": 1}, {"id": "x", "v": 2}]
    assert [d.line() for d in differences(dup, [dup[0], {"id": "x", "v": 3}])] == [
        "[1].v: trace has 2, evaluation gives 3"]


def test_types_count_and_ignored_paths() -> None:
    assert [d.line() for d in differences({"n": 1}, {"n": True})] == ["n: trace has 1, evaluation gives true"]
    assert [d.line() for d in differences({"n": "1"}, {"n": 1})] == ['n: trace has "1", evaluation gives 1']
    assert [d.line() for d in differences({"n": "null"}, {"n": None})] == ['n: trace has "null", evaluation gives null']
    assert differences({"generated_at": "x", "a": 1}, {"generated_at": None, "a": 1}, ignore={"generated_at"}) == []
    assert differences({"a": {"generated_at": 1}}, {"a": {"generated_at": 2}}, ignore={"generated_at"}) != []
