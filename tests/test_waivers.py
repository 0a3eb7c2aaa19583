"""Waivers: a failing check may be excused by a named owner until a date, where the rulebook
allows it; anything else about a waiver is a warning, never a silent effect."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from policyrun.cli import main
from policyrun.trace.records import phase_checks

RULEBOOK = """\
policyrun: 1
name: waivable
modes:
  ci: {phases: [A, B], waivers: [A]}
  strict: {phases: [A, B], waivers: none}
phases:
  - id: A
    preconditions:
      - {id: ready, check: "true"}
    stop_when:
      - {id: frozen, when: "inputs.freeze", status: STOPPED, blocker: "release freeze"}
    evidence:
      - {id: unit_passed, check: "false", message: "2 failed: test_a, test_b"}
      - {id: lint_clean, check: "true"}
  - id: B
    evidence:
      - {id: e2e_passed, check: "false", message: "1 failed: test_e2e"}
inputs:
  freeze: {type: bool, default: false}
"""


def _files(tmp_path: Path, waivers: str) -> tuple[Path, Path, Path]:
    rb = tmp_path / "waivable.yaml"
    rb.write_text(RULEBOOK)
    facts = tmp_path / "facts.json"
    facts.write_text('{"policyrun_facts": 1, "facts": {}}')
    w = tmp_path / "waivers.yaml"
    # `issued` keeps the fixed --as-of days below valid whatever the day the tests run (--as-of may
    # not be earlier than the file's date).
    w.write_text("policyrun_waivers: 1\nwaivers:\n" + waivers + "issued: 2026-12-01\n")
    return rb, facts, w


WAIVER = """\
  - rulebook: waivable
    phase: A
    check: unit_passed
    reason: flaky on the shared runner
    owner: ada@example.com
    expires: 2027-01-31
    ticket: AFD-12
"""


AS_OF_NOTE = "--as-of {}: waivers were checked against that day, not the day of the evaluation"


def _run(rb: Path, facts: Path, w: Path, out: Path, *extra: str) -> tuple[int, dict]:
    code = main(["evaluate", str(rb), "--facts", str(facts), "--out", str(out), "--waivers", str(w), "-q", *extra])
    return code, json.loads((out / "trace.json").read_text())


def test_waiver_applies_and_every_report_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rb, facts, w = _files(tmp_path, WAIVER)
    code, trace = _run(rb, facts, w, tmp_path / "o", "--mode", "ci", "--as-of", "2027-01-31", "--format", "md")
    a, b = trace["phases"]
    assert a["status"] == "PASS" and "WAIVED: unit_passed (ada@example.com, until 2027-01-31)" in a["reason"]
    check = next(c for c in a["evidence"] if c["id"] == "unit_passed")
    assert check["result"] == "UNSATISFIED" and check["outcome"] is None
    assert check["waiver"] == {"owner": "ada@example.com", "reason": "flaky on the shared runner",
                               "expires": "2027-01-31", "ticket": "AFD-12", "source": f"{w}:3:5"}
    assert b["status"] == "FAIL" and code == 1  # B is not waivable in mode ci
    assert trace["waivers"] == {"as_of": "2027-01-31", "warnings": [AS_OF_NOTE.format("2027-01-31")],
                                "file": str(w), "sha256": hashlib.sha256(w.read_bytes()).hexdigest()}
    md = (tmp_path / "o" / "report.md").read_text()
    assert "**WAIVED** (ada@example.com, until 2027-01-31: flaky on the shared runner (AFD-12))" in md
    capsys.readouterr()
    assert main(["explain", str(tmp_path / "o" / "trace.json")]) == 0
    # explain shows the waiver as every other report does, its ticket included (trace.model.waiver_text)
    assert "-> WAIVED (ada@example.com, until 2027-01-31: flaky on the shared runner (AFD-12))" in capsys.readouterr().out


@pytest.mark.parametrize("waivers, mode, warning", [
    (WAIVER, "ci", "expired on 2027-01-31"),  # evaluated the day after
    (WAIVER, "strict", "phase A cannot be waived in mode strict"),
    (WAIVER.replace("check: unit_passed", "check: unit_pased"), "ci",
     "phase A has no evidence or stop condition 'unit_pased'; did you mean 'unit_passed'?"),
    (WAIVER.replace("check: unit_passed", "check: ready"), "ci", "phase A has no evidence or stop condition 'ready'"),
    (WAIVER.replace("check: unit_passed", "check: lint_clean"), "ci", "the check did not fail"),
    (WAIVER.replace("rulebook: waivable", "rulebook: other"), "ci", "it names rulebook 'other', not 'waivable'"),
])
def test_ineffective_waivers_are_warnings(tmp_path: Path, capsys: pytest.CaptureFixture[str], waivers: str,
                                          mode: str, warning: str) -> None:
    rb, facts, w = _files(tmp_path, waivers)
    code, trace = _run(rb, facts, w, tmp_path / "o", "--mode", mode, "--as-of", "2027-02-01")
    assert trace["phases"][0]["status"] == "FAIL" and code == 1
    note, recorded = trace["waivers"]["warnings"]
    assert note == AS_OF_NOTE.format("2027-02-01")
    assert recorded.startswith(f"{w}:3:5: waiver for A.") and warning in recorded
    assert warning in capsys.readouterr().err


def test_a_stop_condition_can_be_waived(tmp_path: Path) -> None:
    rb, facts, w = _files(tmp_path, WAIVER.replace("check: unit_passed", "check: frozen") + WAIVER)
    _, trace = _run(rb, facts, w, tmp_path / "o", "--mode", "ci", "--as-of", "2027-01-01", "--set", "freeze=true")
    a = trace["phases"][0]
    assert a["status"] == "PASS"
    assert {c["id"]: bool(c.get("waiver")) for c in phase_checks(a)} == {"ready": False, "frozen": True,
                                                                         "unit_passed": True, "lint_clean": False}


def test_a_bad_waivers_file_is_refused_with_its_location(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rb, facts, w = _files(tmp_path, WAIVER.replace("    owner: ada@example.com\n", ""))
    assert main(["evaluate", str(rb), "--facts", str(facts), "--out", str(tmp_path / "o"), "--waivers", str(w),
                 "--mode", "ci"]) == 3
    err = capsys.readouterr().err
    assert f"{w}:3:5: W001" in err and "missing required key 'owner'" in err
    assert not (tmp_path / "o").exists()


def test_lint_checks_waivers_against_the_rulebook(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rb, facts, w = _files(tmp_path, WAIVER.replace("check: unit_passed", "check: unit_pased")
                          + WAIVER.replace("expires: 2027-01-31", "expires: 2020-01-01"))
    assert main(["lint", str(w)]) == 1
    out = capsys.readouterr().out
    assert f"{w}:3:5: W002 phase A has no evidence or stop condition 'unit_pased'; did you mean 'unit_passed'?" in out
    assert f"{w}:10:5: W003 waiver for A.unit_passed expired on 2020-01-01" in out


def test_the_flagship_never_waives_a_gpu_gate(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """An unexplained E2E skip stays a FAIL under a waiver: final validation waives no GPU gate."""
    root = Path(__file__).resolve().parent.parent
    monkeypatch.chdir(root)  # the example's inputs name paths relative to the repository
    w = tmp_path / "waivers.yaml"
    w.write_text("policyrun_waivers: 1\nwaivers:\n  - rulebook: upgrade-gpu-version\n    phase: GPU_BASIC_E2E_GATE\n"
                 "    check: skips_documented\n    reason: the connector test is flaky\n    owner: ada@example.com\n"
                 "    expires: 2027-01-31\nissued: 2026-12-01\n")
    folder = "examples/final-unexplained-skip"
    code = main(["evaluate", "upgrade-gpu-version", "--mode", "final-validation", "--inputs", f"{folder}/inputs.yaml",
                 "--facts", f"{folder}/facts.json", "--out", str(tmp_path / "o"), "--waivers", str(w),
                 "--as-of", "2027-01-01", "-q"])
    trace = json.loads((tmp_path / "o" / "trace.json").read_text())
    gate = next(p for p in trace["phases"] if p["phase"] == "GPU_BASIC_E2E_GATE")
    assert code == 1 and gate["status"] == "FAIL"
    _, warning = trace["waivers"]["warnings"]
    assert "phase GPU_BASIC_E2E_GATE cannot be waived in mode final-validation" in warning
    assert "cannot be waived" in capsys.readouterr().err


def test_a_waiver_is_named_even_when_another_check_decides_the_phase(tmp_path: Path) -> None:
    rb, facts, w = _files(tmp_path, WAIVER)
    rb.write_text(RULEBOOK.replace('      - {id: lint_clean, check: "true"}',
                                   '      - {id: lint_clean, check: "false", on_fail: WARN, message: "3 lint warnings"}'))
    code, trace = _run(rb, facts, w, tmp_path / "o", "--mode", "ci", "--as-of", "2027-01-01")
    a = trace["phases"][0]
    assert a["status"] == "WARN" and a["blocker"] == "3 lint warnings"
    assert a["reason"] == "evidence lint_clean UNSATISFIED; WAIVED: unit_passed (ada@example.com, until 2027-01-31)"


# --- --as-of in the past (issue 19, item 10) -------------------------------------------------------
# A past --as-of used to apply a waiver that had expired, quietly. It may not predate the file's
# `issued` date (or, for a file without one, today), and it is always said.

EXPIRED = WAIVER.replace("expires: 2027-01-31", "expires: 2020-06-30")


def test_a_past_as_of_cannot_revive_an_expired_waiver_of_an_undated_file(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rb, facts, w = _files(tmp_path, EXPIRED)
    w.write_text("policyrun_waivers: 1\nwaivers:\n" + EXPIRED)  # no `issued`
    out = tmp_path / "o"
    assert main(["evaluate", str(rb), "--facts", str(facts), "--out", str(out), "--waivers", str(w),
                 "--mode", "ci", "--as-of", "2020-06-01"]) == 3
    err = capsys.readouterr().err
    assert f"{w}:1:1: U003 --as-of 2020-06-01 is in the past" in err and "declares no `issued:` date" in err
    assert not out.exists()


def test_as_of_may_not_predate_the_files_issued_date(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rb, facts, w = _files(tmp_path, EXPIRED)  # issued: 2026-12-01, on line 10
    out = tmp_path / "o"
    assert main(["evaluate", str(rb), "--facts", str(facts), "--out", str(out), "--waivers", str(w),
                 "--mode", "ci", "--as-of", "2026-11-30"]) == 3
    err = capsys.readouterr().err
    assert f"{w}:10:9: U003 --as-of 2026-11-30 is before the waivers file's `issued: 2026-12-01`" in err
    assert not out.exists()


def test_an_as_of_from_the_files_issued_date_on_is_allowed_and_always_said(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rb, facts, w = _files(tmp_path, WAIVER.replace("expires: 2027-01-31", "expires: 2999-12-31"))
    code, trace = _run(rb, facts, w, tmp_path / "o", "--mode", "ci", "--as-of", "2026-12-01")
    assert trace["phases"][0]["status"] == "PASS"
    assert trace["waivers"]["warnings"] == [AS_OF_NOTE.format("2026-12-01")]
    assert "policyrun: warning: " + AS_OF_NOTE.format("2026-12-01") in capsys.readouterr().err
    code, trace = _run(rb, facts, w, tmp_path / "o2", "--mode", "ci")  # today: nothing to say
    assert trace["waivers"]["warnings"] == [] and "--as-of" not in capsys.readouterr().err


def test_a_waivers_file_in_a_folder_named_like_a_position_is_located_in_full(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A waiver's place in its file is a Location, never a string split again: a folder `c:1:2`
    stays part of the file name in the trace and in lint findings."""
    odd = tmp_path / "c:1:2"
    odd.mkdir()
    rb, facts, w = _files(odd, WAIVER + WAIVER.replace("check: unit_passed", "check: unit_pased"))
    _, trace = _run(rb, facts, w, tmp_path / "o", "--mode", "ci", "--as-of", "2027-01-31")
    check = next(c for c in trace["phases"][0]["evidence"] if c["id"] == "unit_passed")
    assert check["waiver"]["source"] == f"{w}:3:5"
    assert any(x.startswith(f"{w}:10:5: waiver for A.unit_pased had no effect") for x in trace["waivers"]["warnings"])
    capsys.readouterr()
    assert main(["lint", str(w)]) == 1
    assert f"{w}:10:5: W002 phase A has no evidence or stop condition 'unit_pased'" in capsys.readouterr().out
