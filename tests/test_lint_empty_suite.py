"""Lint L030: a phase whose checks on test results all hold for a report with no test in it
(issue 19, item 13), and the README's and docs/lint.md's samples that show it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from policyrun.cli import main
from policyrun.language.lint import findings_for
from policyrun.language.rulebook import load_rulebook

ROOT = Path(__file__).resolve().parent.parent

HEAD = """\
policyrun: 1
name: gate
inputs:
  other: {type: string, required: true}
vars:
  max_skipped: 0.2
modes:
  ci: {phases: [RAN, TESTS]}
probes:
  unit: {uses: tests.junit, with: {path: unit.xml}}
  env: {uses: const, with: {value: {ok: true}}}
derive:
  failing: {value: "facts.unit.failed_ids + facts.unit.error_ids"}
phases:
  - id: RAN
    evidence:
      - {id: always, check: "true"}
"""


def _warnings(tmp_path: Path, tests_phase: str, ran_phase: str = "") -> list[str]:
    text = HEAD + tests_phase if not ran_phase else HEAD.replace(
        '      - {id: always, check: "true"}\n', ran_phase) + tests_phase
    path = tmp_path / "gate.yaml"
    path.write_text(text)
    findings = findings_for(load_rulebook(path))
    assert [f for f in findings if f.severity == "error"] == []
    return [f"{f.location.line}:{f.location.column} {f.message}" for f in findings if f.code == "L030"]


FLAGGED = {
    "totals": "        check: facts.unit.totals.failed == 0 && facts.unit.totals.errors == 0\n",
    "violations": "        violations: facts.unit.failed_ids + facts.unit.error_ids\n",
    "through a derived value": "        violations: derived.failing\n",
    "passed equals tests": "        check: facts.unit.totals.passed == facts.unit.totals.tests\n",
    "skip share": "        check: double(facts.unit.totals.skipped) <= vars.max_skipped * double(facts.unit.totals.tests)\n",
}


@pytest.mark.parametrize("check", list(FLAGGED))
def test_a_phase_an_empty_report_passes_is_a_warning_at_its_check(tmp_path: Path, check: str) -> None:
    found = _warnings(tmp_path, "  - id: TESTS\n    evidence:\n      - id: green\n" + FLAGGED[check])
    assert len(found) == 1, found
    assert found[0].startswith("21:") and "phase TESTS passes when facts.unit holds no test at all" in found[0]
    assert "facts.unit.totals.tests > 0" in found[0]


GUARDED = {
    "tests > 0 in the check": ("      - id: green\n        check: facts.unit.totals.tests > 0 && "
                               "facts.unit.totals.failed == 0\n"),
    "a second evidence": ("      - {id: green, violations: facts.unit.failed_ids}\n"
                          "      - {id: ran, check: facts.unit.totals.passed > 0}\n"),
    "a WARN evidence": ("      - {id: green, violations: facts.unit.failed_ids}\n"
                        "      - {id: ran, check: size(facts.unit.suites) > 0, on_fail: WARN}\n"),
    "a stop condition": ("      - {id: green, violations: facts.unit.failed_ids}\n"
                         "    stop_when:\n      - {when: facts.unit.totals.tests == 0, blocker: nothing ran}\n"),
    "a precondition": ("      - {id: green, violations: facts.unit.failed_ids}\n"
                       "    preconditions: [facts.unit.totals.tests > 0]\n"),
    "unknown(...) on an empty report": ("      - id: green\n        check: \"facts.unit.totals.tests > 0 ? "
                                        "facts.unit.totals.failed == 0 : unknown('no test ran')\"\n"),
    "a check that also reads another probe": ("      - id: green\n        check: facts.env.ok && "
                                              "facts.unit.totals.failed == 0\n"),
    "a check that also reads an input without a default": (
        "      - id: green\n        check: facts.unit.totals.failed == 0 && inputs.other != ''\n"),
    "no check on test results": "      - {id: green, check: facts.env.ok}\n",
}


@pytest.mark.parametrize("case", list(GUARDED))
def test_a_phase_that_asks_that_tests_ran_is_not_flagged(tmp_path: Path, case: str) -> None:
    assert _warnings(tmp_path, "  - id: TESTS\n    evidence:\n" + GUARDED[case]) == []


def test_a_guard_in_a_required_phase_counts(tmp_path: Path) -> None:
    tests = "  - id: TESTS\n    evidence:\n      - {id: green, violations: facts.unit.failed_ids}\n"
    ran = "      - {id: ran, check: facts.unit.totals.tests > 0}\n"
    assert _warnings(tmp_path, tests, ran) == []
    independent = tests.replace("  - id: TESTS\n", "  - id: TESTS\n    requires: []\n")
    assert len(_warnings(tmp_path, independent, ran)) == 1


def test_an_evidence_that_does_not_apply_to_an_empty_report_is_no_pass(tmp_path: Path) -> None:
    tests = ("  - id: TESTS\n    evidence:\n      - id: green\n        applies_when: facts.unit.totals.tests > 0\n"
             "        check: facts.unit.totals.failed == 0\n")
    assert _warnings(tmp_path, tests) == []


def _readme_sample() -> str:
    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Writing a rulebook"):]
    return re.search(r"```yaml\n(.*?)```", section, re.S).group(1)  # type: ignore[union-attr]


def test_the_readme_sample_requires_tests_to_have_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sample = _readme_sample()
    (tmp_path / "release-check.yaml").write_text(sample)
    assert main(["lint", str(tmp_path / "release-check.yaml")]) == 0
    assert capsys.readouterr().out == ""
    check = yaml.safe_load(sample)["phases"][1]["evidence"][0]["check"]
    old = sample.replace(check, "facts.unit.totals.failed == 0 && facts.unit.totals.errors == 0")
    assert old != sample
    (tmp_path / "release-check.yaml").write_text(old)
    assert main(["lint", str(tmp_path / "release-check.yaml")]) == 0  # a warning
    assert "L030 phase TESTS passes when facts.unit holds no test at all" in capsys.readouterr().out


# The README's lint output is checked with every other shown output, by tests/test_docs_outputs.py.


def test_the_lint_doc_example_is_what_lint_prints(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    doc = (ROOT / "docs" / "lint.md").read_text()
    section = doc[doc.index("## L030"):]
    rulebook = re.search(r"```yaml\n(# tests-gate.yaml\n.*?)```", section, re.S).group(1)  # type: ignore[union-attr]
    shown = re.search(r"\$ policyrun lint tests-gate.yaml\n(.*?)```", section, re.S).group(1)  # type: ignore[union-attr]
    (tmp_path / "tests-gate.yaml").write_text(rulebook)
    monkeypatch.chdir(tmp_path)
    assert main(["lint", "tests-gate.yaml"]) == 0
    assert capsys.readouterr().out == shown


def test_the_shipped_rulebooks_and_examples_have_no_phase_an_empty_report_passes(
        capsys: pytest.CaptureFixture[str]) -> None:
    main(["lint", str(ROOT / "rulebooks"), str(ROOT / "examples" / "first-rulebook")])
    assert "L030" not in capsys.readouterr().out


def test_a_runaway_derived_value_cannot_hang_or_exhaust_lint(tmp_path: Path) -> None:
    """Lint evaluates the rulebook's expressions; they run under the evaluation guard."""
    chain = "".join(f"  d{i}: {{value: \"derived.d{i - 1} + derived.d{i - 1}\"}}\n" for i in range(1, 41))
    text = HEAD.replace("derive:\n", "derive:\n  d0: {value: \"vars.s + vars.s\"}\n" + chain).replace(
        "  max_skipped: 0.2\n", "  max_skipped: 0.2\n  s: " + "a" * 1000 + "\n")
    text += ("  - id: TESTS\n    evidence:\n      - id: green\n"
             "        check: facts.unit.totals.failed == 0 && size(derived.d40) > 0\n")
    path = tmp_path / "gate.yaml"
    path.write_text(text)
    findings = findings_for(load_rulebook(path))
    assert [f.code for f in findings if f.code == "L030"] == []  # d40 cannot be computed: not sure, no warning
