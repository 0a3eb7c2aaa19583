"""A misspelt rulebook path gets a did-you-mean naming the file it most likely meant."""

from __future__ import annotations

from pathlib import Path

import pytest

from policyrun.cli import main
from policyrun.didyoumean import similar_path


@pytest.fixture()
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "release-gate.yaml").write_text("policyrun: 1\n")
    (tmp_path / "policies" / "nightly.yaml").write_text("policyrun: 1\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize(("ref", "meant"), [
    ("policies/release-gaet.yaml", "policies/release-gate.yaml"),
    ("polices/release-gate.yaml", "policies/release-gate.yaml"),  # the folder is misspelt
    ("policies/release-gate.yml", "policies/release-gate.yaml"),
    ("policies/nightli.yaml", "policies/nightly.yaml"),
    ("policies/unrelated.yaml", None), ("elsewhere/release-gate.yaml", None),
])
def test_similar_path(tree: Path, ref: str, meant: str | None) -> None:
    assert similar_path(ref) == meant
    absolute = similar_path(str(tree / ref))
    assert absolute == (str(tree / meant) if meant else None)


@pytest.mark.parametrize("command", [["lint"], ["evaluate"], ["collect"]])
def test_commands_name_the_file_a_misspelt_path_meant(tree: Path, capsys: pytest.CaptureFixture[str],
                                                      command: list[str]) -> None:
    assert main([*command, "polices/release-gaet.yaml"]) == 3
    assert ("U001 rulebook 'polices/release-gaet.yaml' is not a file; "
            "did you mean 'policies/release-gate.yaml'?") in capsys.readouterr().err


def test_a_misspelt_shipped_name_still_gets_the_shipped_name(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["lint", "upgrade-gpu-verison"]) == 3
    assert "did you mean 'upgrade-gpu-version'?" in capsys.readouterr().err
    assert main(["lint", "policies/nothing-like-it.yaml"]) == 3
    assert "; shipped rulebooks are named without a folder or suffix (gpu-cell-preflight, gpu-node-preflight, upgrade-gpu-version, upgrade-python-deps, upgrade-vllm-plugin)" in capsys.readouterr().err


def test_the_example_in_docs_cli_is_what_policyrun_prints(capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    root = Path(__file__).resolve().parent.parent
    text = " ".join((root / "docs" / "cli.md").read_text(encoding="utf-8").split())
    assert "`rulebook/upgrade-gpu-verison.yaml` → `did you mean 'rulebooks/upgrade-gpu-version.yaml'?`" in text
    monkeypatch.chdir(root)
    assert main(["lint", "rulebook/upgrade-gpu-verison.yaml"]) == 3
    assert "did you mean 'rulebooks/upgrade-gpu-version.yaml'?" in capsys.readouterr().err
