"""The fixture sources under tests/data/afd and the histories tests/afdfixtures.py lays them in.

The SHAs the examples and the rulebook's snapshots cite come from these files; the reproducibility
tests (tests/test_flagship_rulebook.py, tests/test_flagship_examples.py) catch a changed byte.
What they cannot see is a file no commit takes (it would silently not be in the repository) or a
commit naming a file that is not there, nor a pytest run straying into the folder.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

from tests import afdfixtures as fx

ROOT = Path(__file__).resolve().parent.parent

HISTORIES = {
    "vllm": fx.VLLM_HISTORY,
    "plugin": [*fx.PLUGIN_HISTORY, ("upgraded", [*fx.UPGRADE_STEPS, fx.LESSON_COMMIT])],
}


@pytest.mark.parametrize("name", list(HISTORIES))
def test_every_file_of_a_state_folder_is_committed_and_every_named_file_exists(name: str) -> None:
    states = HISTORIES[name]
    assert sorted(p.name for p in (fx.DATA / name).iterdir()) == sorted(state for state, _ in states)
    for state, commits in states:
        files = set(fx.read_state(fx.DATA / name / state))
        named = {rel for c in commits for rel in c.files}
        assert named <= files, (state, sorted(named - files))
        if all(c.files for c in commits):  # no commit takes the whole folder
            assert files == named, (state, sorted(files - named))


def test_the_python_sources_are_python() -> None:
    sources = sorted(fx.DATA.rglob("*.py"))
    assert len(sources) > 40
    for path in sources:
        ast.parse(path.read_text(encoding="utf-8"), filename=str(path))  # a SyntaxError names file:line


def test_the_data_is_tracked_by_git() -> None:
    """The README's test command runs from a fresh clone: nothing under tests/data/afd may be ignored."""
    files = [str(p.relative_to(ROOT)) for p in fx.DATA.rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    proc = subprocess.run(["git", "check-ignore", "--no-index", *files], cwd=ROOT, capture_output=True, text=True)
    if proc.returncode == 128:
        pytest.skip(f"not a git checkout: {proc.stderr.strip()}")
    assert proc.stdout == "", f"ignored by .gitignore: {proc.stdout}"


def test_pytest_never_collects_the_fixture_plugins_own_tests() -> None:
    proc = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                           str(fx.DATA.parent)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert "no tests collected" in proc.stdout, proc.stdout + proc.stderr
    assert "test_version" not in proc.stdout


def test_a_copy_has_the_built_repositorys_shas(afd_repos: fx.FixtureRepos, tmp_path: Path) -> None:
    """What lets a test edit its own copy instead of building one: the same commits, and a variant
    committed on the copy gets the SHA a fresh build with that variant gets."""
    built = fx.build_plugin(tmp_path / "built", variant=fx.DISAGREEING_CONSTANT)
    copy = afd_repos.copy_plugin(tmp_path / "copy", variant=fx.DISAGREEING_CONSTANT)
    assert (copy.base_sha, copy.head_sha, copy.commits) == (built.base_sha, built.head_sha, built.commits)
    assert copy.path != afd_repos.plugin().path and fx.changes_to(copy.path, copy.head_sha) is None
    assert afd_repos.plugin().head_sha == built.base_sha  # the shared one kept its HEAD
