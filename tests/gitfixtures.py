"""Fixture repositories built with the git CLI in tmp_path: fixed identities and dates, no user config."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from policyrun.probes.base import ProbeContext, ProbeResult
from policyrun.probes.registry import get

BASE_ENV = {
    "GIT_AUTHOR_NAME": "Ada Lovelace", "GIT_AUTHOR_EMAIL": "ada@example.com",
    "GIT_COMMITTER_NAME": "Ada Lovelace", "GIT_COMMITTER_EMAIL": "ada@example.com",
    "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_TERMINAL_PROMPT": "0",
}


@dataclass
class GitRepo:
    path: Path
    clock: list[int] = field(default_factory=lambda: [1_700_000_000])

    def git(self, *args: str, check: bool = True) -> str:
        self.clock[0] += 60
        date = f"@{self.clock[0]} +0000"
        env = {**{k: v for k, v in os.environ.items() if not k.startswith("GIT_")}, **BASE_ENV,
               "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
        proc = subprocess.run(["git", *args], cwd=self.path, env=env, capture_output=True, text=True)
        if check and proc.returncode != 0:
            raise AssertionError(f"git {' '.join(args)} failed: {proc.stderr}")
        return proc.stdout.strip()

    def write(self, rel: str, content: str | bytes) -> Path:
        target = self.path / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content)
        return target

    def commit(self, message: str) -> str:
        self.git("add", "-A")
        self.git("commit", "-q", "-m", message)
        return self.sha("HEAD")

    def sha(self, rev: str) -> str:
        return self.git("rev-parse", rev)


def init_repo(path: Path) -> GitRepo:
    path.mkdir(parents=True, exist_ok=True)
    repo = GitRepo(path)
    repo.git("init", "-q", "-b", "main")
    repo.git("config", "commit.gpgsign", "false")
    repo.git("config", "tag.gpgsign", "false")
    return repo


def history_repo(path: Path) -> GitRepo:
    """v1 (annotated) and light-v1 (lightweight) on the first commit; v2 (annotated) after a commit with
    a rename (with an edit), a deletion, a modification, an added text file and an added binary file."""
    repo = init_repo(path)
    repo.write("README.md", "# demo\n\nvllm==0.6.3 is the current pin\n")
    repo.write("src/old_name.py", "".join(f"line {i}\n" for i in range(20)))
    repo.write("docs/gone.md", "to be deleted\nsecond line\n")
    repo.write("src/keep.py", "TARGET_VLLM_VERSION = '0.6.3'\n")
    repo.commit("first")
    repo.git("tag", "-a", "v1", "-m", "release 1")
    repo.git("tag", "light-v1")
    repo.git("mv", "src/old_name.py", "src/new_name.py")
    repo.write("src/new_name.py", "".join(f"line {i}\n" for i in range(20)) + "one more\n")
    repo.git("rm", "-q", "docs/gone.md")
    repo.write("README.md", "# demo\n\nvllm==0.7.0 is the current pin\nnew line\n")
    repo.write("data/new.txt", "fresh\n")
    repo.write("data/blob.bin", b"\x00\x01\x02binary\x00")
    repo.commit("second")
    repo.write("CHANGELOG.md", "v2\n")
    repo.commit("third")
    repo.git("tag", "-a", "v2", "-m", "release 2")
    return repo


def copy_of(repo: GitRepo, dest: Path) -> GitRepo:
    """The whole repository (.git included) in `dest`, its clock carried on: the same commits, and
    the same dates for the ones a test adds, as a repository built in `dest` would have."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.copytree(repo.path, dest, symlinks=True)
    return GitRepo(dest, [repo.clock[0]])


def run_probe(kind: str, params: Mapping[str, Any], base: Path, timeout_s: float = 30) -> ProbeResult:
    probe = get(kind)
    assert probe is not None, kind
    return probe.run(dict(params), ProbeContext(base_dir=base, timeout_s=timeout_s))


@dataclass(frozen=True)
class RepoSnapshot:
    """What a read-only probe must leave exactly as it was."""

    status: str
    head: str
    refs: str
    index_sha256: str
    index_mtime_ns: int
    git_files: frozenset[tuple[str, int, int, str]]  # every file under .git: path, size, mtime_ns, sha256


def git_dir_files(git_dir: Path) -> frozenset[tuple[str, int, int, str]]:
    """(path, size, mtime_ns, sha256) of every regular file under a git directory (links not followed)."""
    out = set()
    for p in git_dir.rglob("*"):
        st = p.lstat()
        if p.is_file() and not p.is_symlink():
            out.add((str(p.relative_to(git_dir)), st.st_size, st.st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest()))
    return frozenset(out)


def snapshot(repo: GitRepo) -> RepoSnapshot:
    git_dir = Path(repo.git("rev-parse", "--absolute-git-dir"))
    index = git_dir / "index"
    # Read the index stats before running status ourselves (GIT_OPTIONAL_LOCKS=0 keeps status from writing).
    data, mtime = index.read_bytes(), index.stat().st_mtime_ns
    files = git_dir_files(git_dir)
    env_status = subprocess.run(["git", "status", "--porcelain"], cwd=repo.path, capture_output=True, text=True,
                                env={**os.environ, **BASE_ENV, "GIT_OPTIONAL_LOCKS": "0"}).stdout
    return RepoSnapshot(status=env_status, head=repo.sha("HEAD"), refs=repo.git("for-each-ref"),
                        index_sha256=hashlib.sha256(data).hexdigest(), index_mtime_ns=mtime, git_files=files)
