"""`rev:` on the probes that read files of a repository (file.read, pins.package, pins.constant):
read from git objects, never checked out; the working tree, the index and the refs stay as they were."""

from __future__ import annotations

from pathlib import Path

import pytest

from policyrun.collection.run import collect
from policyrun.model import Rulebook
from policyrun.probes.base import ProbeError
from policyrun.probes.repo.pins import glob_match
from tests.gitfixtures import GitRepo, init_repo, run_probe, snapshot


@pytest.fixture
def repo(tmp_path: Path) -> GitRepo:
    """Baseline commit (tag `base`) with a lock file, a workflow-ish YAML and a constant; the
    working tree then upgrades them, one change staged, the lock file deleted and the constants
    file edited but not staged."""
    repo = init_repo(tmp_path / "r")
    repo.write("pyproject.toml", '[project]\nname = "p"\ndependencies = ["vllm==0.26.0", "torch>=2.9"]\n')
    repo.write("uv.lock", 'version = 1\n\n[[package]]\nname = "vllm"\nversion = "0.26.0"\n')
    repo.write("requirements/gpu.txt", "vllm==0.26.0 \\\n  --hash=sha256:00\n")
    repo.write("conf/settings.yaml", "name: ci\nversion: 0.26\n")
    repo.write("src/pins.py", "TARGET_VLLM_VERSION = '0.26.0'\n")
    repo.commit("baseline")
    repo.git("tag", "base")
    repo.write("pyproject.toml", '[project]\nname = "p"\ndependencies = ["vllm==0.27.0", "torch>=2.9"]\n')
    repo.git("add", "pyproject.toml")
    (repo.path / "uv.lock").unlink()
    repo.write("conf/settings.yaml", "name: ci\nversion: 0.27\n")
    repo.write("src/pins.py", "TARGET_VLLM_VERSION = '0.27.0'\n")
    return repo


def test_file_read_at_a_revision(repo: GitRepo) -> None:
    now = run_probe("file.read", {"path": "conf/settings.yaml"}, repo.path)
    then = run_probe("file.read", {"path": "conf/settings.yaml", "rev": "base"}, repo.path)
    assert now.value["version"] == 0.27 and then.value["version"] == 0.26
    assert then.sources == [f"{repo.path.resolve()}/conf/settings.yaml@{repo.sha('base')}"]
    assert any("cat-file" in c for c in then.commands) and then.repo_path == str(repo.path.resolve())
    # A file deleted from the working tree is still there at the revision.
    lock = run_probe("file.read", {"path": "uv.lock", "format": "toml", "rev": "base"}, repo.path).value
    assert lock["package"][0]["version"] == "0.26.0"


def test_file_read_at_a_revision_errors(repo: GitRepo, tmp_path: Path) -> None:
    with pytest.raises(ProbeError) as info:
        run_probe("file.read", {"path": "conf/nope.yaml", "rev": "base"}, repo.path)
    assert info.value.code == "file.not_found" and "conf/nope.yaml at base" in info.value.message
    with pytest.raises(ProbeError) as info:
        run_probe("file.read", {"path": "conf", "format": "yaml", "rev": "base"}, repo.path)
    assert info.value.code == "file.unreadable" and "is a folder" in info.value.message
    with pytest.raises(ProbeError) as info:
        run_probe("file.read", {"path": "conf/settings.yaml", "rev": "no-such-tag"}, repo.path)
    assert info.value.code == "git.unknown_ref"
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "a.yaml").write_text("a: 1\n")
    with pytest.raises(ProbeError) as info:
        run_probe("file.read", {"path": "a.yaml", "rev": "HEAD"}, plain)
    assert info.value.code == "git.not_a_repository"


def test_pins_package_at_a_revision(repo: GitRepo) -> None:
    now = run_probe("pins.package", {"package": "vllm"}, repo.path).value
    then = run_probe("pins.package", {"package": "vllm", "rev": "base"}, repo.path).value
    assert now["distinct"] == ["0.26.0", "0.27.0"] and "uv.lock" not in now["files"]
    assert then["files"] == ["pyproject.toml", "requirements/gpu.txt", "uv.lock"]
    assert then["distinct"] == ["0.26.0"]
    assert [(s["file"], s["line"], s["section"]) for s in then["sources"]] == [
        ("pyproject.toml", 3, "project.dependencies"), ("requirements/gpu.txt", 1, None), ("uv.lock", 4, "package")]
    only_lock = run_probe("pins.package", {"package": "VLLM", "rev": "base", "files": ["*.lock"]}, repo.path).value
    assert only_lock["files"] == ["uv.lock"]


def test_pins_constant_at_a_revision(repo: GitRepo) -> None:
    now = run_probe("pins.constant", {"file": "src/pins.py", "name": "TARGET_VLLM_VERSION"}, repo.path)
    then = run_probe("pins.constant", {"file": "src/pins.py", "name": "TARGET_VLLM_VERSION", "rev": "base"},
                     repo.path)
    assert (now.value["value"], then.value["value"]) == ("0.27.0", "0.26.0")
    assert then.sources == [f"{repo.path.resolve()}/src/pins.py@{repo.sha('base')}:1"]


def test_reading_revisions_changes_nothing(repo: GitRepo, tmp_path: Path) -> None:
    before = snapshot(repo)
    p = str(repo.path)
    probes = {"doc": {"uses": "file.read", "with": {"path": f"{p}/conf/settings.yaml", "rev": "base"}},
              "pins": {"uses": "pins.package", "with": {"package": "vllm", "root": p, "rev": "base"}},
              "const": {"uses": "pins.constant", "with": {"file": f"{p}/src/pins.py", "name": "TARGET_VLLM_VERSION",
                                                          "rev": "base"}}}
    rulebook = Rulebook.model_validate({"policyrun": 1, "name": "ro", "modes": {"m": {"phases": ["P"]}},
                                        "phases": [{"id": "P"}], "probes": probes})
    facts = collect(rulebook, "m", {}, base_dir=tmp_path).facts
    assert all(f.ok for f in facts.values()), {k: f.error for k, f in facts.items()}
    assert snapshot(repo) == before
    assert (repo.path / "src/pins.py").read_text() == "TARGET_VLLM_VERSION = '0.27.0'\n"
    assert not (repo.path / "uv.lock").exists()


@pytest.mark.parametrize(("rel", "pattern", "expected"), [
    ("requirements.txt", "requirements*.txt", True),
    ("sub/requirements.txt", "requirements*.txt", False),  # pathlib: a glob without `/` is one level
    ("requirements/gpu.txt", "requirements/*.txt", True),
    ("a/b/uv.lock", "**/uv.lock", True),
    ("uv.lock", "**/uv.lock", True),
    ("a/b/c.txt", "a/*.txt", False),
])
def test_glob_match_is_pathlibs(rel: str, pattern: str, expected: bool, tmp_path: Path) -> None:
    assert glob_match(rel, pattern) is expected
    (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / rel).write_text("")
    assert (tmp_path / rel in set(tmp_path.glob(pattern))) is expected  # what the working tree finds


def test_a_large_lock_file_at_a_revision_is_read_like_on_disk(repo: GitRepo) -> None:
    # Python sources at a revision are capped at 1 MiB; a lock file gets the document limit.
    filler = "".join(f'[[package]]\nname = "pkg{i}"\nversion = "1.0.{i}"\n\n' for i in range(40_000))
    repo.write("uv.lock", filler + '[[package]]\nname = "vllm"\nversion = "0.26.0"\n')
    repo.commit("big lock")
    assert (repo.path / "uv.lock").stat().st_size > 1024 * 1024
    v = run_probe("pins.package", {"package": "vllm", "rev": "HEAD", "files": ["uv.lock"]}, repo.path).value
    assert v["distinct"] == ["0.26.0"]
