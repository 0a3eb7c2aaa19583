"""search.regex and git.repo on the real corpus: RE2 over files read from disk (or git objects)
agrees with an independent scan (git plumbing + Python's `re`, line by line), the RE2 form of the
flagship's old-version pattern finds the same lines as its lookbehind form, and hostile index
states on a real clone neither hide an edit nor change a byte under .git."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

from tests.gitfixtures import git_dir_files, run_probe
from tests.real.conftest import copy_repo, git

DEFS = r"^\s*(?:async\s+def|def|class)\s+(\w+)"


def _worktree_blobs(repo: Path) -> dict[str, bytes]:
    paths = [p for p in git(repo, "ls-files", "-z").split("\0") if p]
    return {p: (repo / p).read_bytes() for p in paths}


def _revision_blobs(repo: Path, rev: str) -> dict[str, bytes]:
    listing = git(repo, "ls-tree", "-r", "-z", rev)
    entries = [(rec.split("\t", 1)[1], rec.split()[2]) for rec in listing.split("\0") if rec]
    out = subprocess.run(["git", "cat-file", "--batch"], cwd=repo, capture_output=True, check=True,
                         input="".join(f"{oid}\n" for _, oid in entries).encode()).stdout
    blobs, pos = {}, 0
    for path, _ in entries:
        header_end = out.index(b"\n", pos)
        size = int(out[pos:header_end].split()[2])
        blobs[path] = out[header_end + 1:header_end + 1 + size]
        pos = header_end + 2 + size
    return blobs


def _scan(blobs: dict[str, bytes], pattern: str) -> tuple[dict[str, int], set[str], set[str]]:
    """counts per file, distinct group 1, binary files: line by line with Python's re."""
    rx = re.compile(pattern.encode(), re.ASCII)
    counts: dict[str, int] = {}
    distinct: set[str] = set()
    binary = set()
    for path, data in blobs.items():
        if b"\0" in data[:8000]:
            binary.add(path)
            continue
        for line in data.split(b"\n"):
            for m in rx.finditer(line):
                counts[path] = counts.get(path, 0) + 1
                distinct.add(m.group(1).decode())
    return counts, distinct, binary


def _search(root: Path, **params: Any) -> Any:
    return run_probe("search.regex", {"root": str(root), **params}, root, timeout_s=300).value


def test_definitions_in_the_vllm_working_tree_match_an_independent_scan(vllm_repo: Path) -> None:
    counts, distinct, binary = _scan(_worktree_blobs(vllm_repo), DEFS)
    v = _search(vllm_repo, pattern=DEFS, max_hits=0)
    assert v["counts"] == counts and set(v["distinct"]) == distinct
    assert v["total"] == sum(counts.values()) > 50_000
    assert {s["path"] for s in v["skipped"]} == binary  # the PNGs; nothing else was left out
    assert {s["reason"] for s in v["skipped"]} == {"binary"}


def test_definitions_at_a_real_tag_match_an_independent_scan(vllm_repo: Path) -> None:
    counts, distinct, binary = _scan(_revision_blobs(vllm_repo, "v0.26.0"), DEFS)
    v = _search(vllm_repo, pattern=DEFS, rev="v0.26.0", max_hits=0)
    assert v["counts"] == counts and set(v["distinct"]) == distinct
    assert v["rev_sha"] == git(vllm_repo, "rev-parse", "v0.26.0^{commit}").strip()
    assert {s["path"] for s in v["skipped"]} == binary


def _lines(blobs: dict[str, bytes], pattern: str) -> set[tuple[str, int]]:
    rx = re.compile(pattern.encode(), re.ASCII)
    return {(path, n) for path, data in blobs.items() if b"\0" not in data[:8000]
            for n, line in enumerate(data.split(b"\n"), start=1) if rx.search(line)}


def test_the_re2_form_of_the_old_version_pattern_finds_the_lookbehind_forms_lines(afd_repo: Path,
                                                                                  vllm_repo: Path) -> None:
    lookbehind = r"(?<![0-9.])0\.26\.0(?![0-9])"
    re2_form = r"(?:^|[^0-9.])0\.26\.0(?:[^0-9]|$)"
    for root, rev, blobs in ((afd_repo, None, _worktree_blobs(afd_repo)),
                             (vllm_repo, "v0.27.0", _revision_blobs(vllm_repo, "v0.27.0"))):
        expected = _lines(blobs, lookbehind)
        assert expected, root  # the corpus does mention the old version
        v = _search(root, pattern=re2_form, max_hits=100_000, **({"rev": rev} if rev else {}))
        assert {(h["path"], h["line"]) for h in v["hits"]} == expected


def test_a_real_clone_in_hostile_index_states(afd_repo: Path, tmp_path: Path) -> None:
    repo = copy_repo(afd_repo, tmp_path / "afd")
    git(repo, "update-index", "--split-index")
    target = "pyproject.toml"
    git(repo, "update-index", "--assume-unchanged", target)
    original = (repo / target).read_text()
    assert "vllm==0.26.0" in original
    (repo / target).write_text(original.replace("vllm==0.26.0", "vllm==0.27.0"))
    before = git_dir_files(repo / ".git")
    state = run_probe("git.repo", {"path": str(repo)}, repo).value
    assert state["dirty"] == [target] and state["assume_unchanged"] == [target] and not state["clean"]
    v = _search(repo, pattern=r"vllm==([0-9.]+)", include=target)
    assert "0.27.0" in v["distinct"] and "0.26.0" not in v["distinct"]
    assert git_dir_files(repo / ".git") == before  # split index: not even the shared index's mtime
