"""search.regex / search.literal: hits with Python-regex columns and groups, counts that cover
every match, tracked-only by default, revisions, globs, and the same answers outside git."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from policyrun.probes.base import ProbeError
from tests.gitfixtures import GitRepo, init_repo, run_probe

PIN = r"vllm==([0-9][^\s\"']*)"


@pytest.fixture
def repo(tmp_path: Path) -> GitRepo:
    repo = init_repo(tmp_path / "repo")
    repo.write("pyproject.toml", 'dependencies = ["vllm==0.6.3", "torch"]\n')
    repo.write("requirements/cuda.txt", "# gpu\nvllm==0.6.3\ntorch==2.4\n")
    repo.write("docs/upgrade.md", "Move from vllm==0.6.3 to vllm==0.7.0 soon.\n")
    repo.write("src/é.py", "x = 'é vllm==0.6.4'\n")
    repo.write("src/pkg/mod.py", "VLLM = 'vllm==0.6.3'\n")
    repo.write("data/blob.bin", b"\x00vllm==9.9.9\x00")
    repo.commit("init")
    return repo


def search(root: Path, kind: str = "search.regex", **params: Any) -> Any:
    return run_probe(kind, {"root": str(root), **params}, root).value


def test_hits_counts_and_distinct(repo: GitRepo) -> None:
    v = search(repo.path, pattern=PIN)
    assert v["counts"] == {"docs/upgrade.md": 2, "pyproject.toml": 1, "requirements/cuda.txt": 1,
                           "src/pkg/mod.py": 1, "src/é.py": 1}
    assert (v["total"], v["files_matched"], v["truncated"]) == (6, 5, False)
    assert v["distinct"] == ["0.6.3", "0.6.4", "0.7.0"]
    doc = [h for h in v["hits"] if h["path"] == "docs/upgrade.md"]
    assert [(h["line"], h["column"], h["match"], h["groups"]) for h in doc] == [
        (1, 11, "vllm==0.6.3", ["0.6.3"]), (1, 26, "vllm==0.7.0", ["0.7.0"])]
    accent = next(h for h in v["hits"] if h["path"] == "src/é.py")
    assert (accent["column"], accent["text"]) == (8, "x = 'é vllm==0.6.4'")  # columns count characters


def test_binary_files_are_skipped(repo: GitRepo) -> None:
    assert "data/blob.bin" not in search(repo.path, pattern=PIN)["counts"]


def test_named_group_and_group_number(repo: GitRepo) -> None:
    v = search(repo.path, pattern=r"(?P<pkg>vllm|torch)==(?P<ver>[0-9.]+\d)", group="ver")
    assert v["distinct"] == ["0.6.3", "0.6.4", "0.7.0", "2.4"]
    assert search(repo.path, pattern=r"(vllm|torch)==", group=1)["distinct"] == ["torch", "vllm"]
    assert search(repo.path, pattern="torch")["distinct"] == ["torch"]  # no groups: the whole match


def test_tracked_only_unless_untracked(repo: GitRepo) -> None:
    repo.write("scratch.txt", "vllm==1.0\n")
    assert "scratch.txt" not in search(repo.path, pattern=PIN)["counts"]
    assert search(repo.path, pattern=PIN, untracked=True)["counts"]["scratch.txt"] == 1


def test_include_exclude_globs(repo: GitRepo) -> None:
    assert set(search(repo.path, pattern=PIN, include="*.py")["counts"]) == {"src/é.py", "src/pkg/mod.py"}
    assert set(search(repo.path, pattern=PIN, include=["src/pkg"])["counts"]) == {"src/pkg/mod.py"}
    v = search(repo.path, pattern=PIN, exclude=["docs/**", "*.toml"])
    assert set(v["counts"]) == {"requirements/cuda.txt", "src/é.py", "src/pkg/mod.py"}


def test_ignore_case_and_literal(repo: GitRepo) -> None:
    assert search(repo.path, pattern="vllm =")["total"] == 0
    assert search(repo.path, pattern="vllm =", ignore_case=True)["counts"] == {"src/pkg/mod.py": 1}
    # '.' is a literal dot: "0.6.3" matches, nothing else does.
    literal = search(repo.path, "search.literal", pattern="0.6.3")
    assert literal["total"] == 4 and literal["distinct"] == ["0.6.3"]
    assert search(repo.path, pattern="0.6.3", literal=True)["total"] == 4
    assert search(repo.path, pattern="0.6.3")["total"] == 4
    assert search(repo.path, pattern="0x6x3")["total"] == 0 and search(repo.path, "search.literal",
                                                                         pattern="0.6.")["total"] == 5


def test_odd_file_names(repo: GitRepo) -> None:
    repo.write("odd\nname.txt", "vllm==1.1\n")
    repo.write("zz.txt", "vllm==1.2\n")
    repo.commit("odd")
    v = search(repo.path, pattern=PIN, include=["odd*", "zz.txt"])
    assert v["counts"] == {"odd\nname.txt": 1, "zz.txt": 1}


def test_root_subdirectory_paths_are_relative(repo: GitRepo) -> None:
    v = search(repo.path / "src", pattern=PIN)
    assert set(v["counts"]) == {"é.py", "pkg/mod.py"}


def test_search_a_revision(history: GitRepo) -> None:
    repo = history
    old = search(repo.path, pattern=PIN, rev="v1")
    assert old["distinct"] == ["0.6.3"] and old["rev_sha"] == repo.sha("v1^{commit}")
    assert "docs/gone.md" in search(repo.path, pattern="deleted", rev="v1")["counts"]
    assert search(repo.path, pattern=PIN)["distinct"] == ["0.7.0"]
    sub = search(repo.path / "src", pattern="TARGET", rev="v1")
    assert sub["counts"] == {"keep.py": 1}


def test_patterns_are_re2(repo: GitRepo) -> None:
    # RE2 syntax, as in CEL's matches(): named groups both ways, classes, \b, (?i); columns in characters.
    v = search(repo.path, pattern=r"(?i)'\x{e9} (?P<pkg>VLLM)")
    assert v["counts"] == {"src/é.py": 1} and v["hits"][0]["column"] == 5 and v["distinct"] == ["vllm"]
    at_rev = search(repo.path / "src", pattern=r"\x{e9} vllm", rev="HEAD")
    assert at_rev["counts"] == {"é.py": 1}
    # A match never crosses a line break, whatever the pattern says.
    assert search(repo.path, pattern=r"vllm==0\.6\.3\s+torch")["total"] == 0
    assert search(repo.path, pattern=r"(?s)gpu.vllm")["total"] == 0
    assert search(repo.path, pattern=r"^torch==(\S+)$")["distinct"] == ["2.4"]


def test_max_hits_keeps_counts_complete(repo: GitRepo) -> None:
    v = search(repo.path, pattern=PIN, max_hits=2)
    assert len(v["hits"]) == 2 and v["total"] == 6 and v["truncated"] is True
    assert v["distinct"] == ["0.6.3", "0.6.4", "0.7.0"]


def test_outside_git_gives_the_same_answers(repo: GitRepo, tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    shutil.copytree(repo.path, plain, ignore=shutil.ignore_patterns(".git"))
    in_git, outside = search(repo.path, pattern=PIN), search(plain, pattern=PIN)
    assert outside["hits"] == in_git["hits"] and outside["counts"] == in_git["counts"]
    assert set(search(plain, pattern=PIN, include="*.py", exclude="src/pkg/**")["counts"]) == {"src/é.py"}


def test_errors(repo: GitRepo, tmp_path: Path) -> None:
    def err(root: Path, **params: Any) -> ProbeError:
        with pytest.raises(ProbeError) as info:
            search(root, **params)
        return info.value

    bad = err(repo.path, pattern="vllm==(")
    assert bad.code == "search.invalid_pattern" and "vllm==(" in bad.message
    behind = err(repo.path, pattern=r"(?<![0-9.])0\.6\.3")
    assert behind.code == "search.invalid_pattern" and "RE2" in behind.message and "lookbehind" in behind.message
    assert err(repo.path, pattern="(a)", group="ver").code == "search.invalid_pattern"
    assert err(tmp_path / "missing", pattern="x").code == "file.not_found"
    (tmp_path / "plain").mkdir()
    assert err(tmp_path / "plain", pattern="x", rev="HEAD").code == "git.not_a_repository"
    assert err(repo.path, pattern="x", rev="nope").code == "git.unknown_ref"
