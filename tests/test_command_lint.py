"""Lint L031/L032: how checks read a `command` probe's fact now that it fails closed."""

from __future__ import annotations

from pathlib import Path

from policyrun.language.lint import findings_for
from policyrun.language.rulebook import load_rulebook

RULEBOOK = """\
policyrun: 1
name: cl
modes:
  m: {phases: [P], permissions: {exec: true, network: true}}
probes:
  outdated: {uses: command, with: {argv: [pip, list, --outdated], ok_exit_codes: [0, 1], network: true}}
  old: {uses: command, with: {argv: [pip, check]}}
  fresh: {uses: command, with: {argv: [pip, --version]}}
derive:
  names:
    value: facts.outdated.stdout.head.split('\\n')
  guarded:
    value: "facts.outdated.ok ? facts.outdated.stdout.tail : ''"
phases:
  - id: P
    evidence:
      - {id: a, check: "derived.names.size() == 0 && derived.guarded == ''"}
      - id: b
        check: facts.old.ok
        on_fail: WARN
      - id: c
        applies_when: facts.outdated.ok
        check: facts.outdated.stdout.tail == ''
      - id: d
        check: "!failed(facts.old) && facts.old.exit_code == 0"
        message: "${error_message(facts.old)}"
      - {id: e, check: "facts.fresh.stdout.head.startsWith('pip ')"}
"""


def _findings(tmp_path: Path, text: str) -> list[tuple[str, int, str]]:
    rb = tmp_path / "rb.yaml"
    rb.write_text(text)
    return sorted((f.code, f.location.line, f.severity) for f in findings_for(load_rulebook(rb))
                  if f.code in ("L031", "L032"))


def test_output_read_without_the_outcome_and_the_fail_closed_migration(tmp_path: Path) -> None:
    # names reads stdout of a probe whose failed runs are facts (L031); guarded and evidence c ask
    # `ok` in the same unit; b tests `ok` of a fail-closed probe (L032: missing, not false, now);
    # d asks failed() first; e reads stdout of a fail-closed probe, which is only there on exit 0.
    assert _findings(tmp_path, RULEBOOK) == [("L031", 11, "warning"), ("L032", 19, "warning")]


def test_messages_say_what_to_do(tmp_path: Path) -> None:
    rb = tmp_path / "rb.yaml"
    rb.write_text(RULEBOOK)
    by_code = {f.code: f.message for f in findings_for(load_rulebook(rb))}
    assert "probe 'outdated' lists ok_exit_codes" in by_code["L031"] and "facts.outdated.ok" in by_code["L031"]
    assert "failed(facts.old)" in by_code["L032"] and "ok_exit_codes: [0]" in by_code["L032"]
    assert "docs/migrating.md" in by_code["L032"]


def test_listing_ok_exit_codes_is_the_documented_way_back(tmp_path: Path) -> None:
    text = RULEBOOK.replace("old: {uses: command, with: {argv: [pip, check]}}",
                            "old: {uses: command, with: {argv: [pip, check], ok_exit_codes: [0]}}")
    assert _findings(tmp_path, text) == [("L031", 11, "warning")]


def test_shipped_rulebooks_and_examples_have_no_command_warnings() -> None:
    root = Path(__file__).resolve().parent.parent
    for path in [*sorted((root / "rulebooks").glob("*.yaml")), root / "examples" / "first-rulebook" / "e2e-gate.yaml"]:
        if path.name.endswith(".test.yaml"):
            continue
        found = [f for f in findings_for(load_rulebook(path)) if f.code in ("L031", "L032")]
        assert found == [], (path, found)
