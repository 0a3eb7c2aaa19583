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
    assert "11 passed, 0 failed; expression coverage 100.0% (15/15 conditions" in capsys.readouterr().out


# --- -k: which cases run -------------------------------------------------------------------------

@pytest.mark.parametrize(("expression", "ran"), [
    ("clean", ["a clean build"]), ("CLEAN", ["a clean build"]), ("not clean", ["a broken build"]),
    ("build and not broken", ["a clean build"]), ("clean or broken", ["a clean build", "a broken build"]),
    ("a broken", ["a broken build"]), ("(clean or broken) and not 'a clean'", ["a broken build"]),
])
def test_k_runs_the_cases_whose_names_match(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                            expression: str, ran: list[str]) -> None:
    _suite(tmp_path, PASSING)
    assert main(["test", str(tmp_path), "-k", expression]) == 0
    out = capsys.readouterr().out
    assert [line.split(": ", 1)[1] for line in out.splitlines() if line.startswith("PASS")] == ran
    left = 2 - len(ran)
    assert f"{len(ran)} passed, 0 failed{f', {left} deselected by -k' if left else ''};" in out


@pytest.mark.parametrize(("expression", "why"), [
    ("nothing like it", "selects none of the 2 case(s)"), ("clean and", "expects text, 'not' or '(' but finds its end"),
    ("(clean", "has a '(' without its closing ')'"), ("'clean", "has an unclosed quote at column 1"),
    ("clean )", "has an unexpected ')'"), ("", "is empty"),
])
def test_k_that_selects_nothing_or_does_not_parse_is_exit_3(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                           expression: str, why: str) -> None:
    # a pre-commit hook whose filter matches nothing must not pass silently
    _suite(tmp_path, PASSING)
    assert main(["test", str(tmp_path), "-k", expression]) == 3
    captured = capsys.readouterr()
    assert f"-k {expression!r} {why}" in captured.err and "PASS" not in captured.out


# --- --format json | junit -----------------------------------------------------------------------

def test_format_json_lists_every_case_and_the_coverage(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    path = _suite(tmp_path, PASSING.replace('"3 warnings"', '"4 warnings"'))
    assert main(["test", str(tmp_path), "--format", "json"]) == 1
    doc = json.loads(capsys.readouterr().out)
    assert doc["exit_code"] == 1 and doc["summary"] == {"passed": 1, "failed": 1, "deselected": 0}
    assert doc["cases"] == [
        {"file": str(path), "name": "a clean build", "status": "passed", "message": ""},
        {"file": str(path), "name": "a broken build", "status": "failed",
         "message": "BUILD.quiet: expected a message containing '4 warnings', got '3 warnings'"}]
    assert doc["coverage"]["percent"] == 100.0 and doc["coverage"]["covered"] == doc["coverage"]["total"] == 2
    assert doc["coverage"]["conditions"]["BUILD/evidence/built"] == ["SATISFIED", "UNSATISFIED"]


def test_format_junit_is_valid_and_fails_the_failing_case(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import xml.etree.ElementTree as ET

    from test_render_junit import XSD, XsdSubset

    path = _suite(tmp_path, PASSING.replace('"3 warnings"', '"4 warnings"'))
    assert main(["test", str(tmp_path), "--format", "junit", "--min-coverage", "100"]) == 1
    root = ET.fromstring(capsys.readouterr().out)
    assert XsdSubset(XSD).validate(root) == []
    assert (root.get("tests"), root.get("failures")) == ("3", "1")
    suite, coverage = root.findall("testsuite")
    assert suite.get("name") == str(path) and suite.get("failures") == "1"
    cases = {c.get("name"): c for c in suite.findall("testcase")}
    assert cases["a clean build"].find("failure") is None
    failure = cases["a broken build"].find("failure")
    assert failure is not None and failure.get("message") == ("BUILD.quiet: expected a message containing "
                                                              "'4 warnings', got '3 warnings'")
    assert coverage.get("failures") == "0" and coverage.find("testcase/failure") is None


def test_format_junit_fails_a_coverage_gate_that_every_case_passed(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    import xml.etree.ElementTree as ET

    _suite(tmp_path, PASSING.split("  - name: a broken build")[0])
    assert main(["test", str(tmp_path), "--format", "junit", "--min-coverage", "100"]) == 1
    root = ET.fromstring(capsys.readouterr().out)
    failure = root.find("testsuite[@name='coverage']/testcase/failure")
    assert failure is not None and failure.get("message") == "coverage 0.0% is below --min-coverage 100%"
    assert "BUILD/evidence/built" in (failure.text or "")


# --- speed: one evaluation child per test file ---------------------------------------------------

def test_the_cases_of_a_file_are_evaluated_in_one_child(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    # A child per case forked the whole process and compiled every expression again for each case:
    # most of `policyrun test`'s time on a loaded machine.
    import os

    import policyrun.language.guard

    forks: list[int] = []
    real_fork = os.fork

    def counting_fork() -> int:
        forks.append(1)
        return real_fork()

    monkeypatch.setattr(policyrun.language.guard.os, "fork", counting_fork)
    _suite(tmp_path, PASSING)
    _suite(tmp_path, PASSING, name="again.test.yaml")
    assert main(["test", str(tmp_path)]) == 0
    assert "4 passed, 0 failed" in capsys.readouterr().out
    assert len(forks) == 2  # one per file, not one per case


RUNAWAY_RULEBOOK = """\
policyrun: 1
name: runaway
modes:
  ci: {phases: [P]}
probes:
  s: {uses: const, with: {value: {v: ""}}}
phases:
  - id: P
    evidence:
      - {id: c, check: "facts.s.v%s.size() == 0", message: "grew"}
""" % (".replace('a', 'aa')" * 26)


def test_an_expression_refused_in_one_case_is_not_refused_in_the_others(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    # Cases share one child, where a refused expression stays refused; the guard's refusal (here of
    # memory, which does not depend on the machine's speed) sends each case to a child of its own.
    monkeypatch.setenv("POLICYRUN_EXPRESSION_SECONDS", "600")
    monkeypatch.setenv("POLICYRUN_EVALUATION_MEMORY_MB", "256")
    (tmp_path / "runaway.yaml").write_text(RUNAWAY_RULEBOOK)
    (tmp_path / "runaway.test.yaml").write_text("""\
policyrun_test: 1
rulebook: runaway.yaml
cases:
  - name: a huge value
    mode: ci
    facts: {s: {v: aaaaaaaaaaaaaaaa}}
    expect: {checks: {P.c: UNKNOWN}, blockers: {P: "exceeded the evaluation memory limit of 256 MiB"}}
  - name: an empty value
    mode: ci
    facts: {s: {v: ""}}
    expect: {checks: {P.c: SATISFIED}, phases: {P: PASS}}
""")
    assert main(["test", str(tmp_path)]) == 0, capsys.readouterr().out


def test_the_k_examples_in_the_docs_select_cases(capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    import re
    import shlex

    monkeypatch.chdir(ROOT)
    text = (ROOT / "docs" / "testing-rulebooks.md").read_text(encoding="utf-8")
    commands = re.findall(r"^policyrun test rulebooks -k (.+?)(?:\s+#.*)?$", text, flags=re.M)
    assert len(commands) == 4
    for command in commands:
        assert main(["test", "rulebooks", "-k", *shlex.split(command)]) == 0, command
        assert " 0 failed, " in capsys.readouterr().out
    assert main(["test", "rulebooks", "-k", "final and not lessons"]) == 0
    assert "`N passed, 0 failed, M deselected by -k; ...` for the" in text
    counts = re.search(r"(\d+) passed, 0 failed, (\d+) deselected by -k; ", capsys.readouterr().out)
    assert counts is not None and int(counts.group(1)) > 0 and int(counts.group(2)) > 0


def _snapshot(path: Path, facts: dict[str, object]) -> None:
    import json

    path.write_text(json.dumps({"policyrun_facts": 1, "facts": {
        pid: {"value": value, "provenance": {"probe": pid, "kind": "const"}} for pid, value in facts.items()}}))


def test_snapshot_files_stack_a_later_fact_replaces_an_earlier_one(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """A shared baseline plus a file that changes one fact: before, two versions of `build` were
    refused (F004, "pass only one of them") and the case could not run."""
    _snapshot(tmp_path / "base.json", {"build": {"ok": True, "warnings": 0}})
    _snapshot(tmp_path / "broken.json", {"build": {"ok": False, "warnings": 2}})
    _snapshot(tmp_path / "noisy.json", {"build": {"ok": True, "warnings": 5}})
    _suite(tmp_path, """\
policyrun_test: 1
rulebook: tiny.yaml
facts_files: [base.json]
cases:
  - {name: baseline, mode: ci, expect: {phases: {BUILD: PASS}}}
  - name: broken on top of the baseline
    mode: ci
    facts_files: [broken.json]
    expect: {phases: {BUILD: FAIL}, messages: {BUILD.quiet: "2 warnings"}}
  - name: the last file wins
    mode: ci
    facts_files: [broken.json, noisy.json]
    expect: {phases: {BUILD: WARN}, messages: {BUILD.quiet: "5 warnings"}}
  - name: inline facts still win over every file
    mode: ci
    facts_files: [noisy.json]
    facts: {build: {ok: true, warnings: 0}}
    expect: {phases: {BUILD: PASS}, checks: {BUILD.quiet: SATISFIED}}
""")
    assert main(["test", str(tmp_path)]) == 0, capsys.readouterr().out
    assert "4 passed, 0 failed" in capsys.readouterr().out


def test_stack_snapshots_keeps_facts_only_earlier_files_have() -> None:
    from policyrun.facts import Fact, FactsSnapshot, Provenance
    from policyrun.audit.ruletest import stack_snapshots

    def snap(**values: object) -> FactsSnapshot:
        return FactsSnapshot(facts={k: Fact(value=v, provenance=Provenance(probe=k, kind="const"))
                                    for k, v in values.items()})

    stacked = stack_snapshots([("a", snap(x=1, y=2)), ("b", snap(y=3)), ("c", snap(z=4))])
    assert {k: f.value for k, f in stacked.items()} == {"x": 1, "y": 3, "z": 4}


def test_lint_checks_a_test_file_as_a_test_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Before, lint read a test file as a rulebook: one S001 "this file is not a rulebook" at 1:1."""
    suite = _suite(tmp_path, """\
policyrun_test: 1
rulebook: tiny.yaml
facts_files: [missing.json]
cases:
  - name: typos
    mode: cl
    inputs: {nope: 1}
    facts: {biuld: {ok: true}}
    expect:
      phases: {BIULD: PASS}
      checks: {BUILD.bulit: SATISFIED}
""")
    assert main(["lint", str(suite)]) == 1
    out = capsys.readouterr().out
    name = str(suite)
    assert f"{name}:3:15: K003 no snapshot file 'missing.json'" in out
    assert f"{name}:6:11: K002 case 'typos': no mode 'cl' in rulebook 'tiny'" in out
    assert f"{name}:7:14: K002 case 'typos': no input 'nope' in rulebook 'tiny'" in out
    assert f"{name}:8:13: K002 case 'typos': the rulebook has no probe 'biuld', so this fact is never read; " \
           "did you mean 'build'?" in out
    assert f"{name}:10:16: K002 case 'typos': expects phase 'BIULD', which the rulebook does not have; " \
           "did you mean 'BUILD'?" in out
    assert f"{name}:11:16: K002 case 'typos': phase BUILD has no check 'bulit'; did you mean 'built'?" in out
    assert "not a rulebook" not in out


def test_lint_of_a_test_file_reports_schema_errors_and_a_missing_rulebook(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    suite = _suite(tmp_path, "policyrun_test: 1\nrulebook: tiny.yaml\ncases:\n  - {name: a, mode: ci, expct: {}}\n")
    assert main(["lint", str(suite)]) == 1
    assert "S002" in capsys.readouterr().out
    suite.write_text("policyrun_test: 1\nrulebook: ./gone.yaml\ncases: []\n")
    assert main(["lint", str(suite)]) == 1
    out = capsys.readouterr().out
    assert f"{suite}:2:11: K001 the rulebook './gone.yaml' cannot be loaded" in out
    _suite(tmp_path, PASSING)
    assert main(["lint", str(tmp_path / "tiny.test.yaml")]) == 0


def test_uncovered_checks_name_the_outcomes_still_missing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    only_clean = PASSING.split("  - name: a broken build")[0]
    _suite(tmp_path, only_clean)
    assert main(["test", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "uncovered BUILD/evidence/built: SATISFIED; missing: never UNSATISFIED" in out
    assert main(["test", str(tmp_path), "--format", "json"]) == 0
    import json

    doc = json.loads(capsys.readouterr().out)
    assert doc["coverage"]["missing"] == {"BUILD/evidence/built": ["UNSATISFIED"],
                                          "BUILD/evidence/quiet": ["UNSATISFIED"]}


SNAPSHOT = """\
{"policyrun_facts": 1, "facts": {"build": {"value": {"ok": true, "warnings": 0, "log": {"lines": 10, "tail": "done"}},
 "provenance": {"probe": "build", "kind": "const"}}}}
"""

ANCHORED = """\
policyrun_test: 1
rulebook: tiny.yaml
x-broken: &broken
  phases: {BUILD: FAIL}
  exit_code: 1
facts_files: [build.facts.json]
cases:
  - name: merged warnings keep the rest of the snapshot fact
    x-note: an x- key in a case is ignored too
    mode: ci
    merge: true
    facts: {build: {warnings: 2, log: {tail: null}}}
    expect: {phases: {BUILD: WARN}, messages: {BUILD.quiet: "2 warnings"}, derived: {}}
  - name: replacing the fact drops what the case does not restate
    mode: ci
    facts: {build: {warnings: 0}}
    expect: {phases: {BUILD: BLOCKED}}
  - name: merge by probe id
    mode: ci
    merge: [build]
    facts: {build: {ok: false}}
    expect: *broken
"""


def test_cases_merge_facts_into_the_snapshot_and_ignore_x_keys(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "build.facts.json").write_text(SNAPSHOT)
    _suite(tmp_path, ANCHORED)
    assert main(["test", str(tmp_path)]) == 0, capsys.readouterr().out
    assert "3 passed, 0 failed" in capsys.readouterr().out


def test_merge_patch_follows_rfc_7386() -> None:
    from policyrun.audit.ruletest import merge_patch

    target = {"a": {"b": 1, "c": [1, 2]}, "d": "x"}
    assert merge_patch(target, {"a": {"c": [3], "e": None}, "d": None, "f": {"g": 1}}) == \
        {"a": {"b": 1, "c": [3]}, "f": {"g": 1}}
    assert merge_patch(target, [1]) == [1]
    assert target == {"a": {"b": 1, "c": [1, 2]}, "d": "x"}  # the snapshot's value is not modified


def test_merging_into_a_fact_no_snapshot_holds_cannot_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _suite(tmp_path, PASSING.replace("    facts: {build: {ok: true, warnings: 0}}",
                                     "    merge: true\n    facts: {build: {ok: true}}"))
    assert main(["test", str(tmp_path)]) == 1
    out = capsys.readouterr().out
    assert "cannot run" in out and "cannot merge fact 'build' into the snapshot: no snapshot file holds it" in out


FANOUT_RB = """\
policyrun: 1
name: fan
vars: {packages: [numpy, torch]}
modes: {ci: {phases: [PINNED]}}
probes:
  pins: {uses: pins.package, for_each: "${vars.packages}", with: {package: "${item}"}}
phases:
  - id: PINNED
    evidence:
      - {id: numpy, check: "facts.pins.numpy.distinct == ['1.26']"}
      - {id: torch_failed, check: "!failed(facts.pins.torch)"}
"""


def test_a_case_states_a_failed_element_of_a_fan_out(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "fan.yaml").write_text(FANOUT_RB)
    (tmp_path / "fan.test.yaml").write_text("""\
policyrun_test: 1
rulebook: fan.yaml
cases:
  - name: torch failed, numpy pinned
    mode: ci
    facts: {pins: {numpy: {distinct: ["1.26"]}, torch: {__error__: pins.no_files}}}
    expect: {checks: {PINNED.numpy: SATISFIED, PINNED.torch_failed: UNSATISFIED}, phases: {PINNED: FAIL}}
  - name: both collected
    mode: ci
    facts: {pins: {numpy: {distinct: ["1.26"]}, torch: {distinct: ["2.9"]}}}
    expect: {phases: {PINNED: PASS}}
""")
    assert main(["test", str(tmp_path / "fan.test.yaml")]) == 0, capsys.readouterr().out
