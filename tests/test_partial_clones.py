"""Repositories whose object store lacks blobs: partial clones (`--filter=blob:none`,
`blob:limit` with a sparse checkout) and a store with one blob removed.

What the probes must do: a blob no probe reads changes nothing (the facts equal a full clone's);
a blob a probe needs is `git.object_missing` naming the path and the revision, never a crash, a
silent skip, a hang or a fetch.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from policyrun.probes.base import ProbeError
from tests.gitfixtures import BASE_ENV, GitRepo, git_dir_files, init_repo, run_probe

BINARY = "assets/engine.bin"


def _plugin(path: Path) -> GitRepo:
    """v1 and HEAD of a small plugin: a version constant, a pin, a marked patch, a large binary."""
    repo = init_repo(path)
    repo.write("pyproject.toml", '[project]\nname = "plug"\ndependencies = ["vllm==0.6.3"]\n')
    repo.write("plug/__init__.py", "VLLM_VERSION = '0.6.3'\n")
    repo.write("plug/patch.py", "# PATCH START\nimport vllm\nvllm.x = 1\n# PATCH END\n")
    repo.write("README.md", "Supports vLLM 0.6.3 on GPU.\n")
    repo.write(BINARY, os.urandom(64 * 1024))
    repo.commit("v1")
    repo.git("tag", "v1")
    repo.write("pyproject.toml", '[project]\nname = "plug"\ndependencies = ["vllm==0.7.0"]\n')
    repo.write("plug/__init__.py", "VLLM_VERSION = '0.7.0'\n")
    repo.write("README.md", "Supports vLLM 0.7.0 on GPU.\n")
    repo.write(BINARY, os.urandom(64 * 1024))
    repo.commit("v2")
    repo.git("config", "uploadpack.allowFilter", "true")
    return repo


@pytest.fixture
def full(tmp_path: Path) -> GitRepo:
    return _plugin(tmp_path / "full")


def _clone(full: GitRepo, dest: Path, *args: str) -> GitRepo:
    full.git("clone", "-q", *args, f"file://{full.path}", str(dest))
    return GitRepo(dest, full.clock)


def _blob_none(full: GitRepo, dest: Path) -> GitRepo:
    """Only HEAD's blobs (checked out by the clone) are in the store."""
    return _clone(full, dest, "--filter=blob:none")


def _sparse_without_binary(full: GitRepo, dest: Path) -> GitRepo:
    """Blobs over 16 KiB are left out and the sparse checkout does not want the binary, so HEAD's
    binary is absent while every other file of HEAD is there."""
    clone = _clone(full, dest, "--filter=blob:limit=16k", "--no-checkout")
    clone.git("sparse-checkout", "set", "--no-cone", "/*", f"!/{BINARY}")
    clone.git("checkout", "-q", "main")
    return clone


def _absent(repo: GitRepo, rev: str) -> bool:
    """Whether the blob at rev:path is absent, asked of git without letting it fetch."""
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("GIT_")}, **BASE_ENV,
           "GIT_ALLOW_PROTOCOL": ""}
    return subprocess.run(["git", "cat-file", "-e", rev], cwd=repo.path, env=env, capture_output=True).returncode != 0


# Every probe kind that reads a revision's blobs, with parameters whose files exclude the binary.
READERS: list[tuple[str, dict[str, Any]]] = [
    ("python.constants", {"names": ["VLLM_VERSION"]}),
    ("python.imports", {"packages": ["vllm"]}),
    ("markers", {"start": "PATCH START", "end": "PATCH END", "include": "**/*.py"}),
    ("docs.claims", {"include": "README.md", "subject": "vLLM"}),
    ("search.regex", {"pattern": "vllm==([0-9.]+)", "include": "pyproject.toml"}),
]


def _collect(kind: str, params: dict[str, Any], repo: GitRepo, rev: str) -> Any:
    return run_probe(kind, {"root": str(repo.path), "rev": rev, **params}, repo.path).value


def _error(kind: str, params: dict[str, Any], repo: GitRepo) -> ProbeError:
    with pytest.raises(ProbeError) as info:
        run_probe(kind, {"path": str(repo.path), **params}, repo.path)
    return info.value


def _root_free(value: Any, repo: GitRepo) -> Any:
    """The value with the repository's own path written `<root>` (the clones live elsewhere)."""
    if isinstance(value, dict):
        return {k: _root_free(v, repo) for k, v in value.items()}
    if isinstance(value, list):
        return [_root_free(v, repo) for v in value]
    return value.replace(str(repo.path), "<root>") if isinstance(value, str) else value


@pytest.mark.parametrize("make", [_blob_none, _sparse_without_binary], ids=["blob-none", "sparse-no-binary"])
@pytest.mark.parametrize("kind,params", READERS, ids=[k for k, _ in READERS])
def test_a_partial_clone_reads_head_exactly_as_a_full_clone(full: GitRepo, tmp_path: Path, make: Any, kind: str,
                                                            params: dict[str, Any]) -> None:
    clone = make(full, tmp_path / "clone")
    assert _absent(clone, f"v1:{BINARY}")  # the fixture is what it claims: v1's blobs are not there
    before = git_dir_files(clone.path / ".git")
    assert _root_free(_collect(kind, params, clone, "HEAD"), clone) == _root_free(
        _collect(kind, params, full, "HEAD"), full)
    assert git_dir_files(clone.path / ".git") == before  # nothing fetched, nothing written


@pytest.mark.parametrize("kind,params", READERS, ids=[k for k, _ in READERS])
def test_a_blob_the_probe_needs_is_a_located_object_missing(full: GitRepo, tmp_path: Path, kind: str,
                                                            params: dict[str, Any]) -> None:
    clone = _blob_none(full, tmp_path / "clone")
    before = git_dir_files(clone.path / ".git")
    with pytest.raises(ProbeError) as info:
        _collect(kind, params, clone, "v1")
    err = info.value
    assert err.code == "git.object_missing", err.message
    assert " at v1 (" in err.message and "never fetches" in err.message
    assert err.message.split(" at v1 (")[0] in {"plug/__init__.py", "plug/patch.py", "README.md", "pyproject.toml"}
    assert git_dir_files(clone.path / ".git") == before


def test_a_sparse_clone_without_the_binary_searches_and_shows_it_as_missing(full: GitRepo, tmp_path: Path) -> None:
    clone = _sparse_without_binary(full, tmp_path / "clone")
    assert not (clone.path / BINARY).exists() and _absent(clone, f"HEAD:{BINARY}")
    err = _error("git.show", {"rev": "HEAD", "file": BINARY}, clone)
    assert err.code == "git.object_missing" and err.message.startswith(f"{BINARY} at HEAD (")
    with pytest.raises(ProbeError) as info:  # a search that includes the binary cannot call it clean
        _collect("search.regex", {"pattern": "vllm"}, clone, "HEAD")
    assert info.value.code == "git.object_missing" and info.value.message.startswith(f"{BINARY} at HEAD (")
    shown = run_probe("git.show", {"path": str(clone.path), "file": "README.md"}, clone.path).value
    assert shown["content"] == "Supports vLLM 0.7.0 on GPU.\n"


def test_a_diff_that_needs_an_absent_blob_names_it(full: GitRepo, tmp_path: Path) -> None:
    clone = _blob_none(full, tmp_path / "clone")
    err = _error("git.diff", {"base": "v1", "head": "HEAD"}, clone)
    assert err.code == "git.object_missing", err.message
    assert " at v1 (" in err.message and "never fetches" in err.message
    # Paths alone need no blob: the first-parent log and ancestry work as in a full clone.
    log = run_probe("git.log", {"path": str(clone.path), "base": "v1", "head": "HEAD"}, clone.path).value
    assert [c["subject"] for c in log["commits"]] == ["v2"]


def _remove_blob(repo: GitRepo, rev: str) -> str:
    """Take one blob out of a full clone's store (unpacked first so it is one loose file)."""
    oid = repo.sha(rev)
    repo.git("repack", "-a", "-d", "-q")
    pack = next((repo.path / ".git/objects/pack").glob("*.pack"))
    moved = pack.rename(pack.parent.parent / "all.pack")
    pack.with_suffix(".idx").unlink()
    subprocess.run(["git", "unpack-objects", "-q"], cwd=repo.path, stdin=moved.open("rb"), check=True,
                   env={**{k: v for k, v in os.environ.items() if not k.startswith("GIT_")}, **BASE_ENV})
    moved.unlink()
    (repo.path / ".git/objects" / oid[:2] / oid[2:]).unlink()
    return oid


def test_a_store_missing_one_binary_blob_audits_everything_else(full: GitRepo, tmp_path: Path) -> None:
    damaged = GitRepo(Path(shutil.copytree(full.path, tmp_path / "damaged", symlinks=True)), full.clock)
    oid = _remove_blob(damaged, f"HEAD:{BINARY}")
    # Before: `git ls-tree -l` printed BAD for its size and python.constants crashed on it.
    for kind, params in READERS:
        assert _root_free(_collect(kind, params, damaged, "HEAD"), damaged) == _root_free(
            _collect(kind, params, full, "HEAD"), full), kind
    err = _error("git.show", {"rev": "HEAD", "file": BINARY}, damaged)
    assert err.code == "git.object_missing" and f"(blob {oid[:12]})" in err.message and "git fsck" in err.message
    err = _error("git.diff", {"base": "v1", "head": "HEAD"}, damaged)
    assert err.code == "git.object_missing" and err.message.startswith(f"{BINARY} at HEAD (")
