"""The checkout under audit cannot choose the rulebook (issue 19, defect 1).

A bare name always means the shipped rulebook; a file needs a path form (`./x`, a separator, a
`.yaml`/`.yml` suffix); `extends:` follows the same rule; and every output names the file that was
used and its sha256, so a rulebook read from the working directory is never taken for a shipped one.
"""

from __future__ import annotations

import hashlib
import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from policyrun.cli import main
from policyrun.errors import RulebookError, UsageError
from policyrun.language.locate import display_name, resolve_ref, shipped_rulebooks
from policyrun.language.rulebook import load_rulebook

FLAGSHIP = "upgrade-gpu-version"
FLAGSHIP_SHA = hashlib.sha256(shipped_rulebooks()[FLAGSHIP].read_bytes()).hexdigest()
FLAGSHIP_ARGS = ["--mode", "planning-audit", "--set", "vllm_src=.", "--set", "target_ref=v1"]

# Six lines that PASS anything: what a hostile checkout would put under the flagship's name.
IMPOSTOR = """\
policyrun: 1
name: upgrade-gpu-version
modes: {planning-audit: {phases: [A]}}
phases:
  - id: A
    evidence: [{id: ok, check: "true"}]
"""

# One that extends the flagship and grants itself `exec` to run a command as the invoking user.
ESCALATION = """\
policyrun: 1
name: upgrade-gpu-version
extends: ./base.yaml
"""


@pytest.fixture
def checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A hostile checkout: a file named like the flagship, an empty facts snapshot."""
    (tmp_path / FLAGSHIP).write_text(IMPOSTOR, encoding="utf-8")
    (tmp_path / "empty.json").write_text('{"facts": {}}', encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _trace(folder: Path) -> dict[str, object]:
    data: dict[str, object] = json.loads((folder / ".policyrun" / "trace.json").read_text(encoding="utf-8"))
    return data


def test_a_shipped_name_means_the_shipped_rulebook_even_beside_a_file_of_that_name(
        checkout: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc = main(["evaluate", FLAGSHIP, *FLAGSHIP_ARGS, "--facts", "empty.json"])
    out = capsys.readouterr().out
    assert rc == 2  # the flagship BLOCKs on missing facts; the impostor would have PASSed (exit 0)
    rulebook = _trace(checkout)["rulebook"]
    assert isinstance(rulebook, dict)
    assert (rulebook["path"], rulebook["sha256"]) == (f"<shipped>/{FLAGSHIP}.yaml", FLAGSHIP_SHA)
    assert out.splitlines()[0] == (f"rulebook <shipped>/{FLAGSHIP}.yaml (shipped; {FLAGSHIP} "
                                   f"{rulebook['version']}) sha256 {FLAGSHIP_SHA}")


def test_the_file_is_used_only_when_written_as_a_path_and_is_then_named_as_a_file(
        checkout: Path, capsys: pytest.CaptureFixture[str]) -> None:
    local_sha = hashlib.sha256(IMPOSTOR.encode()).hexdigest()
    assert main(["evaluate", f"./{FLAGSHIP}", "--facts", "empty.json"]) == 0
    out = capsys.readouterr().out
    rulebook = _trace(checkout)["rulebook"]
    assert isinstance(rulebook, dict)
    assert (rulebook["path"], rulebook["sha256"]) == (f"./{FLAGSHIP}", local_sha)
    assert out.splitlines()[0] == (f"rulebook ./{FLAGSHIP} (a file, not a shipped rulebook; {FLAGSHIP} 0) "
                                   f"sha256 {local_sha}")


def test_a_bare_name_that_is_not_shipped_says_how_to_name_the_file(
        checkout: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (checkout / "mine").write_text(IMPOSTOR, encoding="utf-8")
    assert main(["evaluate", "mine", "--facts", "empty.json"]) == 3
    err = capsys.readouterr().err
    assert "U001" in err and "write it as a path: ./mine" in err
    assert not (checkout / ".policyrun").exists()


def test_extends_a_shipped_name_never_reads_a_file_beside_the_overlay(checkout: Path) -> None:
    (checkout / "base.yaml").write_text("policyrun: 1\nname: mine\nextends: upgrade-gpu-version\n"
                                        "modes: {planning-audit: {permissions: {exec: true}}}\n", encoding="utf-8")
    (checkout / "overlay.yaml").write_text(ESCALATION, encoding="utf-8")
    rb = load_rulebook(Path("overlay.yaml"))
    # The flagship is itself an overlay of the shipped generic rulebook: both come from the shipped folder.
    assert [layer.path for layer in rb.chain] == ["<shipped>/upgrade-vllm-plugin.yaml", f"<shipped>/{FLAGSHIP}.yaml",
                                                  "base.yaml", "overlay.yaml"]
    assert rb.chain[1].sha256 == FLAGSHIP_SHA


def test_extends_a_bare_name_that_is_not_shipped_is_refused_with_the_path_to_write(checkout: Path) -> None:
    (checkout / "base").write_text(IMPOSTOR, encoding="utf-8")
    (checkout / "overlay.yaml").write_text("policyrun: 1\nname: o\nextends: base\n", encoding="utf-8")
    with pytest.raises(RulebookError) as exc:
        load_rulebook(Path("overlay.yaml"))
    assert exc.value.code == "O001" and "write it as a path: ./base" in exc.value.message
    assert exc.value.location is not None and (exc.value.location.line, exc.value.location.column) == (3, 10)
    (checkout / "overlay.yaml").write_text("policyrun: 1\nname: o\nextends: ./base\n", encoding="utf-8")
    assert [layer.path for layer in load_rulebook(Path("overlay.yaml")).chain] == ["./base", "overlay.yaml"]


@pytest.mark.parametrize("ref", ["./x", "sub/x", "x.yaml", "x.YML"])
def test_path_forms_are_files_and_never_fall_back_to_a_shipped_name(
        ref: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UsageError, match="is not a file"):
        resolve_ref(ref)
    with pytest.raises(UsageError, match="is not a file"):
        resolve_ref(f"./{FLAGSHIP}")  # not the shipped one: a path names a file


def test_a_test_suite_names_its_rulebook_by_the_same_rule(tmp_path: Path) -> None:
    (tmp_path / FLAGSHIP).write_text(IMPOSTOR, encoding="utf-8")
    assert resolve_ref(FLAGSHIP, relative_to=tmp_path) == shipped_rulebooks()[FLAGSHIP]
    assert resolve_ref(f"./{FLAGSHIP}", relative_to=tmp_path) == tmp_path / FLAGSHIP


def test_lint_of_a_shipped_name_lints_the_shipped_file_beside_a_folder_of_that_name(
        checkout: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (checkout / "gpu-node-preflight").mkdir()
    (checkout / "gpu-node-preflight" / "bad.yaml").write_text("policyrun: 1\nname: [\n", encoding="utf-8")
    assert main(["lint", "gpu-node-preflight"]) == 0
    assert "1 file(s) checked: 0 error(s)" in capsys.readouterr().err
    assert main(["lint", "./gpu-node-preflight"]) == 1  # the folder, as a path


def test_a_local_file_is_never_displayed_as_a_name_or_as_shipped(tmp_path: Path) -> None:
    assert display_name(Path(FLAGSHIP)) == f"./{FLAGSHIP}"
    assert display_name(Path("<shipped>") / f"{FLAGSHIP}.yaml") == f"./<shipped>/{FLAGSHIP}.yaml"
    assert display_name(Path("dir") / "x.yaml") == "dir/x.yaml"
    assert display_name(shipped_rulebooks()[FLAGSHIP]) == f"<shipped>/{FLAGSHIP}.yaml"


def test_the_default_rulebook_is_named_with_its_path_and_sha256_in_every_output(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "policyrun.yaml").write_text(IMPOSTOR, encoding="utf-8")
    (tmp_path / "empty.json").write_text('{"facts": {}}', encoding="utf-8")
    sha = hashlib.sha256(IMPOSTOR.encode()).hexdigest()
    assert main(["evaluate", "--facts", "empty.json", "--format", "md,html,junit,sarif"]) == 0
    identity = f"rulebook policyrun.yaml (a file, not a shipped rulebook; {FLAGSHIP} 0) sha256 {sha}"
    assert capsys.readouterr().out.splitlines()[0] == identity
    out = tmp_path / ".policyrun"
    for report in ("report.md", "report.html"):
        text = (out / report).read_text(encoding="utf-8")
        assert "policyrun.yaml" in text and sha in text, report
    props = {p.get("name"): p.get("value") for p in ET.parse(out / "junit.xml").iter("property")}
    assert (props["rulebook.path"], props["rulebook.sha256"]) == ("policyrun.yaml", sha)
    run = json.loads((out / "report.sarif").read_text(encoding="utf-8"))["runs"][0]["properties"]
    assert (run["rulebook_path"], run["rulebook_sha256"]) == ("policyrun.yaml", sha)
    assert main(["explain", str(out / "trace.json")]) == 0
    assert identity in capsys.readouterr().out
    assert main(["collect", "-o", "facts.json"]) == 0
    assert f"collect: {identity}" in capsys.readouterr().err
