"""Overlays: `extends` merges a short rulebook onto a base, and every finding stays in its own file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from policyrun.cli import main
from policyrun.errors import RulebookError
from policyrun.language.lint import lint_file
from policyrun.language.rulebook import load_rulebook

BASE = """\
policyrun: 1
name: base
version: "1"
inputs:
  repo: {type: path, default: ".", description: the repository}
vars:
  limit: 2
  label: PATCH
modes:
  audit: {phases: [A, B], permissions: {network: false}}
probes:
  n: {uses: const, with: {value: 3}}
derive:
  doubled: {value: "facts.n * 2"}
phases:
  - id: A
    evidence:
      - {id: small, check: "facts.n <= vars.limit", message: "n is ${facts.n}"}
      - {id: positive, check: "facts.n > 0"}
  - id: B
    evidence:
      - {id: doubled_even, check: "derived.doubled % 2 == 0"}
verdicts:
  - {id: fine, when: "phases.B.status == 'PASS'", summary: "all good"}
"""


@pytest.fixture()
def base(tmp_path: Path) -> Path:
    (tmp_path / "base").mkdir()
    path = tmp_path / "base" / "base.yaml"
    path.write_text(BASE)
    return path


def _overlay(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "overlay.yaml"
    path.write_text(text)
    return path


def _facts(tmp_path: Path) -> Path:
    path = tmp_path / "facts.json"
    path.write_text(json.dumps({"policyrun_facts": 1, "facts": {
        "n": {"value": 3, "provenance": {"probe": "n", "kind": "const", "params": {"value": 3}}}}}))
    return path


def test_merge_rules(base: Path, tmp_path: Path) -> None:
    overlay = _overlay(tmp_path, """\
policyrun: 1
name: adapted
extends: base/base.yaml
inputs:
  repo: {default: "plugin"}
vars:
  limit: 5
modes:
  audit: {permissions: {exec: false}}
derive:
  doubled: {value: "facts.n * 4"}
phases:
  - id: A
    disable:
      - {id: positive, reason: "n is a count; never negative here"}
    evidence:
      - {id: named, check: "vars.label == 'PATCH'"}
  - id: C
    evidence:
      - {id: extra, check: "true"}
verdicts:
  - {id: adapted_ok, when: "phases.A.status == 'PASS'", summary: "adapted"}
""")
    rb = load_rulebook(overlay).model
    assert rb.name == "adapted" and rb.version == "1"
    assert rb.inputs["repo"].default == "plugin" and rb.inputs["repo"].description == "the repository"
    assert rb.vars == {"limit": 5, "label": "PATCH"}
    assert rb.modes["audit"].permissions == {"network": False, "exec": False}
    assert rb.derive["doubled"].value == "facts.n * 4"
    assert [e.id for e in rb.phases[0].evidence] == ["small", "named"]
    assert [(d.id, d.reason) for d in rb.phases[0].disabled] == [("positive", "n is a count; never negative here")]
    assert [p.id for p in rb.phases] == ["A", "B", "C"]
    assert [v.id for v in rb.verdicts] == ["adapted_ok", "fine"]


def test_findings_are_located_in_the_file_that_wrote_them(base: Path, tmp_path: Path) -> None:
    base.write_text(BASE.replace("derived.doubled % 2 == 0", "derived.doubld % 2 == 0"))
    overlay = _overlay(tmp_path, """\
policyrun: 1
name: adapted
extends: base/base.yaml
phases:
  - id: A
    evidence:
      - {id: named, check: "vars.lable == 'x'"}
""")
    findings = {(f.code, f.location.file, f.location.line) for f in lint_file(overlay)}
    typo_line = base.read_text().splitlines().index(
        "      - {id: doubled_even, check: \"derived.doubld % 2 == 0\"}") + 1
    assert ("L022", str(base), typo_line) in findings  # in the base, where it was written
    assert ("L002", str(overlay), 7) in findings  # in the overlay


def test_trace_records_the_chain_and_disabled_checks(base: Path, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    overlay = _overlay(tmp_path, """\
policyrun: 1
name: adapted
extends: base/base.yaml
vars: {limit: 5}
phases:
  - id: A
    disable: [{id: positive, reason: "not our convention"}]
""")
    out = tmp_path / "out"
    assert main(["evaluate", str(overlay), "--facts", str(_facts(tmp_path)), "--out", str(out), "-q"]) == 0
    trace = json.loads((out / "trace.json").read_text())
    chain = trace["rulebook"]["chain"]
    assert [c["name"] for c in chain] == ["base", "adapted"]
    assert chain[0]["path"] == str(base) and len(chain[0]["sha256"]) == 64
    assert trace["phases"][0]["disabled"] == [{"id": "positive", "reason": "not our convention"}]
    capsys.readouterr()


@pytest.mark.parametrize("text, code, line", [
    ("extends: base/bsae.yaml\n", "O001", 3),
    ("extends: overlay.yaml\n", "O002", 3),
    ("extends: base/base.yaml\nphases:\n  - id: A\n    disable: [{id: positive}]\n", "O003", 6),
    ("extends: base/base.yaml\nphases:\n  - id: A\n    disable: [{id: nope, reason: x}]\n", "O003", 6),
])
def test_bad_overlays_are_located(base: Path, tmp_path: Path, text: str, code: str, line: int) -> None:
    overlay = _overlay(tmp_path, "policyrun: 1\nname: adapted\n" + text)
    with pytest.raises(RulebookError) as exc:
        load_rulebook(overlay)
    assert exc.value.code == code
    assert exc.value.location is not None and exc.value.location.file == str(overlay)
    assert exc.value.location.line == line


def test_overlay_of_a_shipped_rulebook_lints_clean(tmp_path: Path) -> None:
    overlay = _overlay(tmp_path, """\
policyrun: 1
name: other-plugin-upgrade
extends: upgrade-gpu-version
vars:
  version_constant_names: [PLUGIN_VLLM_VERSION]
  patch_marker_start: '^#\\s*>>>\\s*AFD-PATCH\\b:?\\s*(?P<label>.*?)\\s*$'
  patch_marker_end: '^#\\s*<<<\\s*AFD-PATCH\\b:?\\s*(?P<label>.*?)\\s*$'
inputs:
  patches_dir: {default: "other_plugin/patches"}
""")
    assert [f for f in lint_file(overlay) if f.severity == "error"] == []
    rb = load_rulebook(overlay)
    assert rb.model.vars["version_constant_names"] == ["PLUGIN_VLLM_VERSION"]
    assert rb.file_of(("report",)).name == "upgrade-gpu-version.yaml"  # templates stay the base's


@pytest.mark.parametrize("text, message", [
    ("extends: base/bsae.yaml\n", "`extends: base/bsae.yaml` is not a file (a path is relative to this rulebook); "
                                  "did you mean 'base/base.yaml'?"),
    ("extends: bsae/base.yaml\n", "; did you mean 'base/base.yaml'?"),  # a misspelt folder too
    ("extends: base/base.yaml\nphases:\n  - id: A\n    disable: [{id: postive, reason: x}]\n",
     "phase A has no check 'postive' to disable; did you mean 'positive'?"),
    ("extends: base/base.yaml\nphases:\n  - id: A\n    disable: [{id: zzz, reason: x}]\n",
     "phase A has no check 'zzz' to disable; its checks: small, positive"),
])
def test_misspelt_overlay_references_get_a_did_you_mean(base: Path, tmp_path: Path, text: str, message: str) -> None:
    overlay = _overlay(tmp_path, "policyrun: 1\nname: adapted\n" + text)
    with pytest.raises(RulebookError) as exc:
        load_rulebook(overlay)
    assert message in exc.value.message


RENAMING = """\
policyrun: 1
name: adapted
extends: base/base.yaml
modes:
  audit: {waivers: [A]}
inputs:
  repo: {aliases: [plugin_repo]}
phases:
  - id: ALPHA
    renames: A
    evidence:
      - {id: named, check: "vars.label == 'PATCH'"}
"""


def test_an_overlay_renames_a_base_phase_everywhere(base: Path, tmp_path: Path) -> None:
    base.write_text(BASE.replace("  - id: B\n", "  - id: B\n    requires: [A]\n")
                    .replace("phases.B.status == 'PASS'", "phases.B.status == 'PASS' && phases['A'].status == 'PASS'"))
    rb = load_rulebook(_overlay(tmp_path, RENAMING)).model
    assert [p.id for p in rb.phases] == ["ALPHA", "B"]
    assert [e.id for e in rb.phases[0].evidence] == ["small", "positive", "named"]  # merged onto the renamed phase
    assert [p.phase for p in rb.modes["audit"].phases] == ["ALPHA", "B"]
    assert rb.modes["audit"].waivers == ["ALPHA"]
    assert rb.phases[1].requires == ["ALPHA"]
    assert rb.verdicts[0].when == "phases.B.status == 'PASS' && phases['ALPHA'].status == 'PASS'"
    assert [f for f in lint_file(tmp_path / "overlay.yaml") if f.severity == "error"] == []


@pytest.mark.parametrize("entry, message", [
    ("  - id: ALPHA\n    renames: AA\n", "the base has no phase 'AA' to rename; did you mean 'A'?"),
    ("  - id: ALPHA\n    renames: ZZZ\n", "the base has no phase 'ZZZ' to rename; its phases: A, B"),
    ("  - id: B\n    renames: A\n", "cannot rename phase 'A' to 'B': the base already has a phase 'B'"),
])
def test_a_bad_rename_is_located_with_a_did_you_mean(base: Path, tmp_path: Path, entry: str, message: str) -> None:
    overlay = _overlay(tmp_path, "policyrun: 1\nname: adapted\nextends: base/base.yaml\nphases:\n" + entry)
    with pytest.raises(RulebookError) as exc:
        load_rulebook(overlay)
    assert exc.value.code == "O004" and exc.value.message == message
    assert exc.value.location is not None and exc.value.location.file == str(overlay)
    assert exc.value.location.line in (5, 6)


def test_an_input_alias_binds_the_declared_input(base: Path, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    overlay = _overlay(tmp_path, RENAMING)
    out = tmp_path / "out"
    assert main(["evaluate", str(overlay), "--facts", str(_facts(tmp_path)), "--out", str(out), "-q",
                 "--set", "plugin_repo=elsewhere"]) == 1  # `small` fails: n is 3, limit 2
    trace = json.loads((out / "trace.json").read_text())
    assert trace["inputs"] == {"repo": "elsewhere"}  # the declared name, never the alias
    assert trace["phases"][0]["phase"] == "ALPHA"
    assert main(["evaluate", str(overlay), "--facts", str(_facts(tmp_path)), "--out", str(out), "-q",
                 "--set", "plugin_repo=a", "--set", "repo=b"]) == 3
    assert "U006 --set 'repo' is given twice, as 'plugin_repo' and 'repo'" in capsys.readouterr().err


@pytest.mark.parametrize("aliases, message", [
    ("[repo]", "input 'repo': alias 'repo' is already itself"),
    ("[other]", "input 'repo': alias 'other' is already input 'other'"),
])
def test_an_alias_naming_another_input_is_located(base: Path, tmp_path: Path, aliases: str, message: str) -> None:
    overlay = _overlay(tmp_path, "policyrun: 1\nname: adapted\nextends: base/base.yaml\ninputs:\n"
                                 f"  other: {{default: x}}\n  repo: {{aliases: {aliases}}}\n")
    with pytest.raises(RulebookError) as exc:
        load_rulebook(overlay)
    assert exc.value.code == "L044" and message in exc.value.message
    assert exc.value.location is not None and exc.value.location.file == str(overlay)
    assert exc.value.location.line == 6


def test_lint_lists_every_check_an_overlay_disables(base: Path, tmp_path: Path) -> None:
    overlay = _overlay(tmp_path, """\
policyrun: 1
name: adapted
extends: base/base.yaml
phases:
  - id: A
    disable:
      - {id: positive, reason: "n is a count"}
""")
    found = [(f.code, f.severity, f.location.file, f.location.line, f.message) for f in lint_file(overlay)
             if f.code == "O005"]
    assert found == [("O005", "warning", str(overlay), 7, "disables check 'positive' of phase A (n is a count)")]


def test_a_test_case_may_name_an_input_by_its_alias(base: Path, tmp_path: Path) -> None:
    _overlay(tmp_path, RENAMING)
    suite = tmp_path / "overlay.test.yaml"
    suite.write_text("policyrun_test: 1\nrulebook: overlay.yaml\ncases:\n"
                     "  - {name: alias, mode: audit, inputs: {plugin_repo: x}, facts: {n: 1},"
                     " expect: {phases: {ALPHA: PASS}}}\n"
                     "  - {name: typo, mode: audit, inputs: {plugin_rep: x}, facts: {n: 1},"
                     " expect: {phases: {ALPHA: PASS}}}\n")
    found = [(f.code, f.message) for f in lint_file(suite)]
    assert found == [("K002", "case 'typo': no input 'plugin_rep' in rulebook 'adapted'; did you mean 'plugin_repo'?")]


def test_the_overlay_in_docs_plugin_upgrade_lints_clean(tmp_path: Path) -> None:
    import re

    page = (Path(__file__).resolve().parents[1] / "docs" / "plugin-upgrade.md").read_text()
    [text] = [b for b in re.findall(r"```yaml\n(.*?)```", page, re.S) if "name: my-plugin-upgrade" in b]
    path = tmp_path / "my-plugin-upgrade.yaml"
    path.write_text(text)
    assert [f for f in lint_file(path) if f.severity == "error" or f.code == "O005"] == []
    rb = load_rulebook(path).model
    assert rb.vars["version_constant_names"] == ["SUPPORTED_VLLM_VERSION"] and rb.inputs["patches_dir"].default == "my_plugin/compat"
    assert [p.id for p in rb.phases][1] == "INVENTORY_PLUGIN_CONTRACTS"
