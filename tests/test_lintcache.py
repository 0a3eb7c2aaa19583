"""The lint cache answers only for exactly what it checked: the rulebook's bytes, the files it
names, policyrun's code and the installed packages; anything else means linting again."""

from __future__ import annotations

from pathlib import Path

import pytest

from policyrun.language import lint

from policyrun.language import lintcache
from policyrun.cli import main

RULEBOOK = """\
policyrun: 1
name: cached
modes: {m: {phases: [A]}}
report: {template: templates/r.md.j2}
phases:
  - id: A
    evidence:
      - {id: e, check: "inputs.n > 1"}
inputs:
  n: {type: int, default: 2}
"""


@pytest.fixture()
def setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("POLICYRUN_CACHE_DIR", str(tmp_path / "cache"))
    (tmp_path / "templates").mkdir()
    (tmp_path / "templates" / "r.md.j2").write_text("# {{ trace.rulebook.name }}\n")
    rb = tmp_path / "rb.yaml"
    rb.write_text(RULEBOOK)
    return rb


def _count_lints(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls = [0]
    real = lint.findings_for

    def counting(rb: object) -> object:
        calls[0] += 1
        return real(rb)  # type: ignore[arg-type]

    monkeypatch.setattr(lint, "findings_for", counting)
    return calls


def test_unchanged_rulebook_is_answered_from_the_cache(setup: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _count_lints(monkeypatch)
    assert lint.lint_file(setup) == []
    assert lint.lint_file(setup) == []
    assert calls[0] == 1


def test_cached_findings_are_the_same_findings(setup: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    setup.write_text(RULEBOOK.replace("inputs.n > 1", "inputs.nn > 1"))
    assert main(["lint", str(setup)]) == 1
    first = capsys.readouterr().out
    calls = _count_lints(monkeypatch)
    assert main(["lint", str(setup)]) == 1
    assert capsys.readouterr().out == first and "L001" in first
    assert calls[0] == 0


def test_editing_the_rulebook_or_a_template_lints_again(setup: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _count_lints(monkeypatch)
    lint.lint_file(setup)
    setup.write_text(RULEBOOK + "\n# a comment changes the bytes\n")
    lint.lint_file(setup)
    assert calls[0] == 2
    (setup.parent / "templates" / "r.md.j2").write_text("{% if %}\n")  # now broken
    findings = lint.lint_file(setup)
    assert calls[0] == 3 and [f.code for f in findings] == ["R001"]


def test_cache_can_be_turned_off(setup: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POLICYRUN_NO_CACHE", "1")
    calls = _count_lints(monkeypatch)
    lint.lint_file(setup)
    lint.lint_file(setup)
    assert calls[0] == 2
    assert not (setup.parent / "cache").exists()


def test_a_damaged_entry_is_ignored(setup: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    lint.lint_file(setup)
    for entry in (setup.parent / "cache" / "lint").glob("*.json"):
        entry.write_text("{not json")
    calls = _count_lints(monkeypatch)
    assert lint.lint_file(setup) == []
    assert calls[0] == 1


def test_an_unwritable_cache_only_costs_time(setup: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = setup.parent / "not-a-dir"
    blocker.write_text("")
    monkeypatch.setenv("POLICYRUN_CACHE_DIR", str(blocker))
    assert lint.lint_file(setup) == []
    assert lintcache.lookup(setup) is None
