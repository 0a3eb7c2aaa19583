"""`policyrun test`: a rulebook's own cases — what passes, what a failing case prints, coverage,
waivers in cases, and the exit codes CI relies on."""

from __future__ import annotations

from pathlib import Path

import pytest

from policyrun.cli import main

ROOT = Path(__file__).resolve().parent.parent

RULEBOOK = """\
policyrun: 1
name: tiny
modes:
  ci: {phases: [BUILD], waivers: [BUILD]}
probes:
  build: {uses: const, with: {value: {ok: true, warnings: 0}}}
phases:
  - id: BUILD
    evidence:
      - {id: built, check: facts.build.ok, message: "the build failed"}
      - {id: quiet, check: facts.build.warnings == 0, on_fail: WARN, message: "${facts.build.warnings} warnings"}
"""

PASSING = """\
policyrun_test: 1
rulebook: tiny.yaml
cases:
  - name: a clean build
    mode: ci
    facts: {build: {ok: true, warnings: 0}}
    expect: {phases: {BUILD: PASS}, exit_code: 0}
  - name: a broken build
    mode: ci
    facts: {build: {ok: false, warnings: 3}}
    expect:
      phases: {BUILD: FAIL}
      messages: {BUILD.quiet: "3 warnings"}
      exit_code: 1
"""


def _suite(tmp_path: Path, text: str, name: str = "tiny.test.yaml") -> Path:
    (tmp_path / "tiny.yaml").write_text(RULEBOOK)
    path = tmp_path / name
    path.write_text(text)
    return path


def test_a_passing_suite_with_full_coverage(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _suite(tmp_path, PASSING)
    assert main(["test", str(tmp_path), "--min-coverage", "100"]) == 0
    out = capsys.readouterr().out
    assert f"PASS {tmp_path / 'tiny.test.yaml'}: a clean build" in out
    assert "2 passed, 0 failed; expression coverage 100.0% (2/2 conditions" in out


def test_a_failing_case_says_what_differed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _suite(tmp_path, PASSING.replace("phases: {BUILD: FAIL}", "phases: {BUILD: PASS}")
           .replace('"3 warnings"', '"4 warnings"'))
    assert main(["test", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert f"FAIL {tmp_path / 'tiny.test.yaml'}: a broken build" in out
    assert "BUILD: expected PASS, got FAIL (the build failed)" in out
    assert "BUILD.quiet: expected a message containing '4 warnings', got '3 warnings'" in out
    assert "1 passed, 1 failed" in out


def test_coverage_below_the_minimum_fails_and_names_what_is_uncovered(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    only_clean = PASSING.split("  - name: a broken build")[0]
    _suite(tmp_path, only_clean)
    assert main(["test", str(tmp_path), "--min-coverage", "100"]) == 1
    out = capsys.readouterr().out
    assert "uncovered BUILD/evidence/built: SATISFIED" in out
    assert "coverage 0.0% is below --min-coverage 100%" in out
    assert main(["test", str(tmp_path)]) == 0  # no minimum: the cases themselves pass


def test_an_invalid_test_file_is_exit_3_with_its_location(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _suite(tmp_path, PASSING.replace("    expect: {phases: {BUILD: PASS}, exit_code: 0}",
                                            "    expects: {phases: {BUILD: PASS}}"))
    assert main(["test", str(path)]) == 3
    err = capsys.readouterr().err
    assert f"{path}:7:5" in err and "expects" in err


WAIVERS = """\
policyrun_waivers: 1
waivers:
  - {rulebook: tiny, phase: BUILD, check: built, reason: known breakage, owner: ada@example.com, expires: 2027-01-31}
"""


def test_cases_can_evaluate_under_waivers_on_a_fixed_date(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "waivers.yaml").write_text(WAIVERS)
    _suite(tmp_path, """\
policyrun_test: 1
rulebook: tiny.yaml
cases:
  - name: waived
    mode: ci
    facts: {build: {ok: false, warnings: 0}}
    waivers: waivers.yaml
    as_of: 2027-01-31
    expect: {phases: {BUILD: PASS}, waived: [BUILD.built], exit_code: 0}
  - name: expired
    mode: ci
    facts: {build: {ok: false, warnings: 0}}
    waivers: waivers.yaml
    as_of: 2027-02-01
    expect: {phases: {BUILD: FAIL}, waived: [BUILD.built], waiver_warnings: ["expired on 2027-01-31"]}
""")
    assert main(["test", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "PASS" in out.splitlines()[0]
    assert "BUILD.built: expected a waiver to apply, got none" in out  # the second case's wrong expectation
    assert "expected a warning containing" not in out  # its warning expectation held


def test_a_case_with_waivers_needs_a_date(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "waivers.yaml").write_text(WAIVERS)
    path = _suite(tmp_path, PASSING.replace("    mode: ci\n    facts: {build: {ok: true, warnings: 0}}",
                                            "    mode: ci\n    waivers: waivers.yaml\n"
                                            "    facts: {build: {ok: true, warnings: 0}}", 1))
    assert main(["test", str(path)]) == 3
    assert "a case with `waivers` needs `as_of: YYYY-MM-DD`" in capsys.readouterr().err


def test_the_walkthrough_rulebook_is_fully_covered(capsys: pytest.CaptureFixture[str],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    assert main(["test", "examples/first-rulebook", "--min-coverage", "100"]) == 0
    assert "10 passed, 0 failed; expression coverage 100.0% (15/15 conditions" in capsys.readouterr().out
