"""`git.repo`: the state of a working tree (branch, HEAD, dirty, staged, conflicted and untracked
paths, upstream, shallow), with index flags and populated submodules checked rather than trusted.
"""

from __future__ import annotations

import hashlib
import os
import stat
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from policyrun.probes._kit.bounded import display_path, read_regular
from policyrun.probes._kit.gitclient import GitRepo, open_repo
from policyrun.probes._kit.gitenv import READ_ONLY_ENV
from policyrun.probes.base import ProbeContext
from policyrun.probes.repo.gitprobe import NULLABLE_SHA, PATHS, GitProbe, fact_object, prop, repo_params


class RepoProbe(GitProbe):
    kind = "git.repo"
    summary = "Repository state: branch, HEAD, dirty and untracked paths, upstream, worktree, shallow."
    params_schema = repo_params([], untracked=prop("string", "How to list untracked files: `normal` collapses "
                                                          "untracked directories to `dir/`, `all` lists every file, "
                                                          "`no` skips them.", enum=["normal", "all", "no"],
                                                          default="normal"))
    fact_schema = fact_object(
        "The repository as it is now.",
        path=prop("string", "Working tree top level (git directory when bare)."),
        branch=prop(["string", "null"], "Checked-out branch; null when detached."),
        head=NULLABLE_SHA, detached=prop("boolean", "HEAD is not on a branch."),
        unborn=prop("boolean", "The branch has no commit yet."),
        upstream=prop(["string", "null"], "Upstream branch, e.g. origin/main."),
        ahead=prop(["integer", "null"], "Commits ahead of upstream."),
        behind=prop(["integer", "null"], "Commits behind upstream."),
        dirty=PATHS | {"description": "Tracked paths with staged or unstaged changes."},
        staged=PATHS | {"description": "Paths with staged changes."},
        conflicted=PATHS | {"description": "Unmerged paths."},
        untracked=PATHS | {"description": "Untracked, not ignored paths."},
        clean=prop("boolean", "No dirty and no untracked paths."),
        is_worktree=prop("boolean", "A linked worktree (`git worktree add`), not the main one."),
        bare=prop("boolean", "A bare repository."), shallow=prop("boolean", "A shallow clone."),
        assume_unchanged=PATHS | {"description": "Index entries flagged assume-unchanged (their content on "
                                                 "disk is compared by hash, not trusted)."},
        skip_worktree=PATHS | {"description": "Index entries flagged skip-worktree (compared by hash when "
                                              "present on disk; absent ones are a sparse checkout)."},
        submodules=PATHS | {"description": "Populated submodules, each inspected as a repository of its own."},
    )

    def collect(self, repo: GitRepo, params: Mapping[str, Any]) -> Any:
        value: dict[str, Any] = {
            "path": str(repo.root), "branch": None, "head": None, "detached": False, "unborn": False,
            "upstream": None, "ahead": None, "behind": None, "dirty": [], "staged": [], "conflicted": [],
            "untracked": [], "clean": True, "is_worktree": repo.is_linked_worktree, "bare": repo.bare,
            "shallow": repo.shallow, "assume_unchanged": [], "skip_worktree": [], "submodules": [],
        }
        if repo.bare:
            head = repo.head()
            value.update(head=head, unborn=head is None, branch=_current_branch(repo))
            value["detached"] = value["branch"] is None and head is not None
            return value
        _worktree_state(repo, params.get("untracked", "normal"), value, depth=0)
        value["clean"] = not value["dirty"] and not value["untracked"]
        return value


MAX_SUBMODULE_DEPTH = 8


def _worktree_state(repo: GitRepo, untracked: str, value: dict[str, Any], depth: int) -> None:
    # --ignore-submodules=dirty: git compares each submodule's HEAD with the recorded commit but
    # does not run `git status` inside it (that child would read the submodule's own
    # configuration, whose filter drivers were not neutralised); policyrun inspects each
    # populated submodule itself below. On the command line it also overrides a repository's
    # `submodule.<name>.ignore = all`, which would hide even a moved submodule.
    proc = repo.run(["status", "--porcelain=v2", "-z", "--branch", "--ignore-submodules=dirty",
                     f"--untracked-files={untracked}"])
    _parse_status(proc.stdout.decode("utf-8", "backslashreplace"), value)
    entries = repo.run(["ls-files", "-z", "--stage", "-v", "--full-name"]).stdout
    dirty = set(value["dirty"])
    for record in entries.split(b"\0"):
        if not record:
            continue
        meta, _, raw_path = record.partition(b"\t")
        tag, mode, oid, _stage = meta.decode("ascii", "replace").split(" ")
        path = display_path(raw_path)
        if mode == "160000":
            populated = _populated(repo, raw_path)
            if populated and "submodules" in value:
                value["submodules"].append(path)
            if populated and depth < MAX_SUBMODULE_DEPTH and _submodule_changed(repo, raw_path, depth):
                dirty.add(path)
            continue
        assume, skip = tag.islower(), tag.upper() == "S"
        if not (assume or skip):
            continue
        value["assume_unchanged" if assume else "skip_worktree"].append(path)
        if skip and not assume and not os.path.lexists(repo.root / os.fsdecode(raw_path)):
            continue  # a sparse checkout leaves skip-worktree files out on purpose
        if not matches_index(repo, raw_path, mode, oid):
            dirty.add(path)
    value["dirty"] = sorted(dirty)


def _populated(repo: GitRepo, raw_path: bytes) -> bool:
    """Whether a submodule is checked out (a directory, not a link, holding a `.git`)."""
    where = repo.root / os.fsdecode(raw_path)
    return not os.path.islink(where) and os.path.isdir(where) and os.path.lexists(where / ".git")


def _submodule_changed(repo: GitRepo, raw_path: bytes, depth: int) -> bool:
    """Whether a populated submodule has changes or untracked files of its own (recursively)."""
    where = repo.root / os.fsdecode(raw_path)
    remaining = max(repo.deadline - time.monotonic(), 0.001)
    sub = open_repo(str(where), ProbeContext(base_dir=repo.root, timeout_s=remaining,
                                             env=_inherited(repo.env)))
    sub.commands = repo.commands  # one provenance log for the whole probe
    if sub.root != where.resolve():
        return False  # the directory is not a repository of its own
    value: dict[str, Any] = {"dirty": [], "staged": [], "conflicted": [], "untracked": [],
                             "assume_unchanged": [], "skip_worktree": []}
    _worktree_state(sub, "normal", value, depth + 1)
    return bool(value["dirty"] or value["untracked"])


def _inherited(env: Mapping[str, str]) -> dict[str, str]:
    """What a nested repository's commands start from: our environment minus this repository's overrides."""
    return {k: v for k, v in env.items() if not k.startswith(("GIT_CONFIG_KEY_", "GIT_CONFIG_VALUE_"))
            and k not in ("GIT_CONFIG_COUNT", "GIT_WORK_TREE") and k not in READ_ONLY_ENV}


def matches_index(repo: GitRepo, raw_path: bytes, mode: str, oid: str) -> bool:
    """Whether the file on disk hashes to the blob the index records (no filter runs: raw bytes)."""
    full = repo.root / os.fsdecode(raw_path)
    try:
        st = os.lstat(full)
        if stat.S_ISLNK(st.st_mode):
            if mode != "120000":
                return False
            data = os.fsencode(os.readlink(full))
        elif stat.S_ISREG(st.st_mode) and mode in ("100644", "100755"):
            return _blob_hash_of_file(repo, full, st.st_size) == oid
        else:
            return False
    except OSError:
        return False  # deleted, or unreadable: not provably unchanged
    return _blob_hash(repo.object_format, data) == oid


def _blob_hash(object_format: str, data: bytes) -> str:
    h = hashlib.new("sha256" if object_format == "sha256" else "sha1")
    h.update(b"blob %d\0" % len(data))
    h.update(data)
    return h.hexdigest()


def _blob_hash_of_file(repo: GitRepo, full: Path, size: int) -> str | None:
    h = hashlib.new("sha256" if repo.object_format == "sha256" else "sha1")
    h.update(b"blob %d\0" % size)
    read = 0
    fd = os.open(full, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    with open(fd, "rb", closefd=True) as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return None
        while chunk := f.read(1 << 20):
            read += len(chunk)
            h.update(chunk)
            if time.monotonic() > repo.deadline:
                raise repo.timeout(f"hashing {full}")
    return h.hexdigest() if read == size else None


def _current_branch(repo: GitRepo) -> str | None:
    data = read_regular(repo.git_dir / "HEAD", 1 << 16)
    if not isinstance(data, bytes):
        return None
    head = data.decode("utf-8", "backslashreplace").strip()
    return head.removeprefix("ref: refs/heads/") if head.startswith("ref: refs/heads/") else None


def _parse_status(text: str, value: dict[str, Any]) -> None:
    fields = iter(text.split("\0"))
    for entry in fields:
        if entry.startswith("# branch.oid "):
            oid = entry[len("# branch.oid "):]
            value["head"], value["unborn"] = (None, True) if oid == "(initial)" else (oid, False)
        elif entry.startswith("# branch.head "):
            name = entry[len("# branch.head "):]
            value["branch"], value["detached"] = (None, True) if name == "(detached)" else (name, False)
        elif entry.startswith("# branch.upstream "):
            value["upstream"] = entry[len("# branch.upstream "):]
        elif entry.startswith("# branch.ab "):
            ahead, behind = entry[len("# branch.ab "):].split()
            value["ahead"], value["behind"] = int(ahead), -int(behind)
        elif entry.startswith(("1 ", "2 ")):
            xy = entry[2:4]
            path = entry.split(" ", 8 if entry[0] == "1" else 9)[-1]
            if entry[0] == "2":
                next(fields, None)  # the rename's original path
            value["dirty"].append(path)
            if xy[0] != ".":
                value["staged"].append(path)
        elif entry.startswith("u "):
            path = entry.split(" ", 10)[-1]
            value["dirty"].append(path)
            value["conflicted"].append(path)
        elif entry.startswith("? "):
            value["untracked"].append(entry[2:])


PROBES: list[Any] = [RepoProbe()]
