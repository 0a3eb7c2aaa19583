"""The hardened git client every probe that reads a repository goes through.

Strictly read-only, and nothing from the repository runs. Every git command runs with
`GIT_OPTIONAL_LOCKS=0` (so `git status` does not refresh and rewrite `.git/index`), never
fetches (no transport is allowed, so a partial clone cannot fetch lazily), never takes a lock,
ignores `GIT_DIR`-style variables inherited from a hook so the `path` parameter alone decides
which repository is read, and overrides every configuration key that could make it run a
program: the static ones (policyrun.probes._kit.gitenv), and the filter drivers the repository's
configuration declares (read with `git config --list`, which runs nothing). docs/security.md lists
them and why.
Commands run through `bounded.run_child`: their own process group, killed at the deadline.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import stat
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from policyrun.probes._kit.bounded import (ChildOutputTooLarge, ChildResult, ChildTimeout, Skipped, read_regular,
                                           run_child)
from policyrun.probes._kit.gitenv import (FILTER_OVERRIDES, READ_ONLY_CONFIG, config_value, declared_filters,
                                          git_env, partial_clone, with_config)
from policyrun.probes._kit.gitobjects import ObjectMissing
from policyrun.probes.base import ProbeContext, ProbeError, ProbeResult

REV_PATTERN = r"^[^-\s][^\s]*$"  # no leading '-': a rev must never be read as an option
FULL_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
HEX = re.compile(r"[0-9a-fA-F]{4,64}")
INDEX_FILE_BYTES = 1 << 30  # a copy of .git/index (split index) larger than this is refused
# Commands that load the index (and so, in a split-index repository, freshen the shared index).
INDEX_COMMANDS = frozenset({"status", "ls-files", "diff-files", "diff-index", "grep", "check-attr", "check-ignore"})


@dataclass
class GitRepo:
    """One repository opened for reading, with the log of commands run against it."""

    root: Path  # the working tree's top level; the git directory of a bare repository
    git_dir: Path
    common_dir: Path
    bare: bool
    deadline: float
    timeout_s: float
    env: dict[str, str]
    head_sha: str | None = None
    object_format: str = "sha1"
    split_index: bool = False  # reading the index would freshen .git/sharedindex.* (see run)
    partial_clone: bool = False  # has a promisor remote: reading an absent object would fetch (gitobjects)
    commands: list[str] = field(default_factory=list)

    @property
    def shallow(self) -> bool:
        return (self.common_dir / "shallow").is_file()

    def shallow_commits(self) -> set[str]:
        data = read_regular(self.common_dir / "shallow", INDEX_FILE_BYTES) if self.shallow else b""
        return set(data.decode("ascii", "replace").split()) if isinstance(data, bytes) else set()

    @property
    def is_linked_worktree(self) -> bool:
        return self.git_dir != self.common_dir

    def head(self) -> str | None:
        return self.head_sha

    def run(self, args: Sequence[str], *, cwd: Path | None = None, stdin: bytes | None = None,
            ok: tuple[int, ...] = (0,), reads_index: bool = False) -> ChildResult:
        """Run one git command; `reads_index` for a command outside INDEX_COMMANDS that loads the index."""
        where = cwd or self.root
        shown = shlex.join(["git", "-C", str(where), *args])
        self.commands.append(shown)
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            raise self.timeout(shown)
        argv = [git_executable(), *READ_ONLY_CONFIG, *args]
        try:
            if self.split_index and (reads_index or (args and args[0] in INDEX_COMMANDS)):
                with self._index_overlay() as env:
                    proc = run_child(argv, cwd=where, env=env, timeout_s=remaining, stdin=stdin)
            else:
                proc = run_child(argv, cwd=where, env=self.env, timeout_s=remaining, stdin=stdin)
        except ChildTimeout:
            raise self.timeout(shown) from None
        except ChildOutputTooLarge:
            raise ProbeError("git.failed", f"`{shown}` printed more than policyrun reads from one command",
                             commands=self.commands) from None
        except OSError as exc:
            raise ProbeError("git.not_installed", f"cannot run git: {exc.strerror}; install git or put it on PATH",
                             commands=self.commands) from None
        if proc.returncode not in ok or (proc.returncode != 0 and b"dubious ownership" in proc.stderr):
            raise self.error(proc.stderr.decode(errors="replace"), shown)
        return proc

    def _index_overlay(self) -> _IndexOverlay:
        return _IndexOverlay(self)

    def timeout(self, command: str) -> ProbeError:
        return ProbeError("probe.timeout", f"`{command}` did not finish within the probe's {self.timeout_s:g}s; "
                                           "raise the probe's timeout_s", commands=self.commands)

    def error(self, stderr: str, command: str) -> ProbeError:
        """A failed git command as a ProbeError whose code names the cause."""
        return git_error(stderr, command, self.root, self.commands)

    def result(self, value: Any) -> ProbeResult:
        return ProbeResult(value=value, commands=list(self.commands), repo_path=str(self.root),
                           repo_head=self.head())


def git_error(stderr: str, command: str, where: Path, commands: list[str]) -> ProbeError:
    first = next((ln.strip() for ln in stderr.splitlines() if ln.startswith(("fatal:", "error:"))),
                 stderr.strip().splitlines()[0] if stderr.strip() else "no message")
    if "dubious ownership" in stderr:
        # git's own advice, quoted; policyrun never adds a safe.directory exception itself.
        advice = re.search(r"git config --global --add safe\.directory (\S.*)", stderr)
        target = advice.group(1).strip() if advice else str(where)
        return ProbeError("git.dubious_ownership",
                          f"git refuses {where}: the repository is owned by another user (git: \"{first}\"). "
                          f"If you trust it, run `git config --global --add safe.directory {target}` "
                          "(policyrun never bypasses this check)", commands=commands)
    if "not a git repository" in stderr:
        return ProbeError("git.not_a_repository", f"{where} is not a git repository ({first})", commands=commands)
    absent = re.search(r"could not fetch ([0-9a-f]{40,64}) from promisor remote|unable to read ([0-9a-f]{40,64})",
                       stderr)
    if absent:
        # A git before 2.44 dies on an object it may not fetch; gitobjects.locate_missing names the file.
        return ObjectMissing(absent.group(1) or absent.group(2),
                             f"`{command}` needs object {absent.group(1) or absent.group(2)}, which the object "
                             f"store of {where} lacks (a partial clone, and policyrun never fetches; or a damaged "
                             f"store); fetch it there or audit a full clone (git: \"{first}\")", commands)
    return ProbeError("git.failed", f"`{command}` failed: {first}", commands=commands)


class _IndexOverlay:
    """A private git directory holding copies of HEAD and the (split) index, for one command.

    Reading a split index makes git bump the mtime of `.git/sharedindex.<sha>` ("freshen" it so
    it is not expired). git looks for the shared index in the git directory it was given, so it
    is given this one: `commondir` points objects, refs and config at the real repository, and
    git freshens the copy. The real `.git` is only read.
    """

    def __init__(self, repo: GitRepo) -> None:
        self.repo = repo
        self.tmp: tempfile.TemporaryDirectory[str] | None = None

    def __enter__(self) -> dict[str, str]:
        self.tmp = tempfile.TemporaryDirectory(prefix="policyrun-index-")
        overlay = Path(self.tmp.name)
        names = ["HEAD", "index", "config.worktree"]
        names += [p.name for p in self.repo.git_dir.iterdir() if p.name.startswith("sharedindex.")]
        for name in names:
            data = read_regular(self.repo.git_dir / name, INDEX_FILE_BYTES)
            if isinstance(data, Skipped):
                if data.reason == "missing":
                    continue
                raise ProbeError("git.failed", f"{self.repo.git_dir / name} is not a regular file ({data.reason}); "
                                               "policyrun does not read it", commands=self.repo.commands)
            (overlay / name).write_bytes(data)
        (overlay / "commondir").write_text(str(self.repo.common_dir))
        return {**self.repo.env, "GIT_DIR": str(overlay), "GIT_WORK_TREE": str(self.repo.root)}

    def __exit__(self, *exc: object) -> None:
        if self.tmp is not None:
            self.tmp.cleanup()


def git_executable() -> str:
    """The git program on PATH. Not finding it is not an error here: running it then fails with
    OSError, which each caller reports as `git.not_installed`."""
    return shutil.which("git") or "git"


def open_root(root_param: str, rev: str | None, ctx: ProbeContext, *,
              what: str = "root") -> tuple[Path, GitRepo | None]:
    """A probe's source root (an existing directory) and the repository holding it; None for a
    plain folder, which is only readable as it is on disk (so an error when `rev` is asked for).
    `what` names the parameter in the error."""
    root = ctx.resolve(root_param).resolve()
    if not root.is_dir():
        raise ProbeError("file.not_found", f"{what} {root} is not a directory; check the {what} parameter")
    try:
        return root, open_repo(str(root), ctx)
    except ProbeError as exc:
        if exc.code != "git.not_a_repository" or rev:
            raise
        return root, None


def open_repo(path: str, ctx: ProbeContext) -> GitRepo:
    """Find the repository containing `path` (like git does, searching parent directories).

    Discovery is one `git rev-parse`; the configuration is one `git config --list`, which lists
    every scope (include files followed) and runs nothing. Neither policyrun nor a library reads
    the repository's configuration files itself: an `include.path` naming /dev/zero or a FIFO
    then costs a git process the deadline kills, not policyrun's memory.
    """
    where = ctx.resolve(path)
    if not where.exists():
        raise ProbeError("git.not_a_repository", f"{where} does not exist; check the path parameter")
    if not where.is_dir():
        where = where.parent
    where = where.resolve()
    probe = GitRepo(root=where, git_dir=where, common_dir=where, bare=False,
                    deadline=time.monotonic() + ctx.timeout_s, timeout_s=ctx.timeout_s, env=git_env(ctx.env))
    proc = probe.run(["rev-parse", "--absolute-git-dir", "--git-common-dir", "--is-bare-repository",
                      "--is-inside-work-tree", "--show-cdup", "HEAD"], cwd=where, ok=(0, 128))
    lines = proc.stdout.decode("utf-8", "surrogateescape").split("\n")
    stderr = proc.stderr.decode(errors="replace")
    if len(lines) < 4 or not lines[0]:
        if "not a git repository" in stderr:
            raise ProbeError("git.not_a_repository",
                             f"{where} is not inside a git repository; point `path` at a clone",
                             commands=probe.commands)
        raise probe.error(stderr, probe.commands[-1])
    git_dir = Path(lines[0]).resolve()
    common_dir = (where / lines[1]).resolve()
    # Lines 3-5 are git's own view of the work tree, which the repository's configuration steers
    # (below): kept in the provenance, not trusted. --show-cdup prints a line only inside one.
    rest = lines[5:] if lines[3] == "true" else lines[4:]
    head = rest[0] if rest and FULL_SHA.fullmatch(rest[0]) else None
    # The work tree is the directory whose `.git` led git to git_dir, whatever the repository's
    # configuration says: `core.bare=true` would make git report no work tree at all (nothing
    # dirty, nothing untracked) and `core.worktree` would point it at another directory (a clean
    # copy). Neither can be overridden with `-c` (git reads core.bare with the repository format,
    # before command-line configuration), so every command gets GIT_WORK_TREE instead.
    work_tree = _work_tree(where, git_dir)
    root = work_tree or git_dir
    probe.root, probe.git_dir, probe.common_dir, probe.bare, probe.head_sha = \
        root, git_dir, common_dir, work_tree is None, head
    if work_tree is not None:
        probe.env["GIT_WORK_TREE"] = str(work_tree)
    listing = probe.run(["config", "-z", "--list"], cwd=where, ok=(0, 1)).stdout
    probe.env = with_config(probe.env, [(f"filter.{name}.{var}", value) for name in declared_filters(listing)
                                        for var, value in FILTER_OVERRIDES])
    probe.object_format = (config_value(listing, "extensions.objectformat") or "sha1").lower()
    probe.partial_clone = partial_clone(listing)
    try:
        probe.split_index = any(n.startswith("sharedindex.") for n in os.listdir(git_dir))
    except OSError:
        probe.split_index = False
    return probe


def _work_tree(where: Path, git_dir: Path) -> Path | None:
    """The nearest directory at or above `where` holding a `.git` (a directory, or a `gitdir:` file
    of a linked worktree or submodule) that is git_dir; None when there is none (a bare repository,
    or `where` inside a git directory that no work tree's `.git` names)."""
    for candidate in (where, *where.parents):
        dot_git = candidate / ".git"
        try:
            st = os.lstat(dot_git)
        except OSError:
            continue
        if stat.S_ISDIR(st.st_mode):
            target = dot_git
        elif stat.S_ISREG(st.st_mode):
            data = read_regular(dot_git, 1 << 16)
            text = data.decode("utf-8", "surrogateescape") if isinstance(data, bytes) else ""
            if not text.startswith("gitdir:"):
                continue
            target = candidate / text[len("gitdir:"):].strip()
        else:
            continue
        try:
            if target.resolve() == git_dir:
                return candidate
        except OSError:
            continue
    return None


# --- resolving revisions ------------------------------------------------------------------------

def check_rev(rev: str) -> None:
    if not rev or rev.startswith("-") or any(c.isspace() for c in rev):
        raise ProbeError("git.unknown_ref", f"{rev!r} is not a revision name")


def ambiguous_ref_error(repo: GitRepo, stderr: str) -> ProbeError | None:
    m = re.search(r"refname '([^']+)' is ambiguous", stderr)
    if m:
        name = m.group(1)
        patterns = [f"refs/{name}", f"refs/tags/{name}", f"refs/heads/{name}", f"refs/remotes/{name}"]
        proc = repo.run(["for-each-ref", "--format=%(refname)", *patterns], ok=(0, 1, 128))
        found = [r for r in proc.stdout.decode("utf-8", "backslashreplace").split() if r in patterns]
        full = ", ".join(found) or "several refs"
        return ProbeError("git.ambiguous_ref", f"ref {name!r} is ambiguous in {repo.root}: it names {full}; "
                                               "write the one you mean in full", commands=repo.commands)
    m = re.search(r"short (?:object ID|SHA1) (\S+) is ambiguous", stderr)
    if m:
        return ProbeError("git.ambiguous_ref", f"abbreviated sha {m.group(1)!r} matches several objects in "
                                               f"{repo.root}; give more hex digits", commands=repo.commands)
    return None


def unresolved_error(repo: GitRepo, rev: str, stderr: str) -> ProbeError:
    ambiguous = ambiguous_ref_error(repo, stderr)
    if ambiguous:
        return ambiguous
    if "expected commit type" in stderr:
        return ProbeError("git.unknown_ref", f"{rev!r} in {repo.root} is not a commit", commands=repo.commands)
    if repo.shallow and (HEX.fullmatch(rev) or re.search(r"[~^]", rev)):
        return ProbeError("git.shallow", f"{rev!r} is not in {repo.root}, a shallow clone: the history it needs "
                                         "is cut; run `git fetch --unshallow` there", commands=repo.commands)
    hint = " (this clone is shallow, so it may not have been fetched)" if repo.shallow else ""
    return ProbeError("git.unknown_ref", f"unknown revision {rev!r} in {repo.root}: no branch, tag or commit "
                                         f"of that name{hint}; check the spelling or fetch it",
                      commands=repo.commands)


def resolve_commits(repo: GitRepo, revs: Sequence[str]) -> list[str]:
    """Full commit shas for `revs`, in one `git rev-parse`; ambiguous names are errors."""
    for rev in revs:
        check_rev(rev)
    proc = repo.run(["rev-parse", *(f"{r}^{{commit}}" for r in revs), "--"], ok=(0, 128))
    stderr = proc.stderr.decode(errors="replace")
    if proc.returncode != 0:
        bad = re.search(r"bad revision '(.*)\^\{commit\}'", stderr) or re.search(r"'(.*)\^\{commit\}'", stderr)
        raise unresolved_error(repo, bad.group(1) if bad else revs[0], stderr)
    ambiguous = ambiguous_ref_error(repo, stderr)
    if ambiguous:
        raise ambiguous
    return proc.stdout.decode("utf-8", "backslashreplace").split()[: len(revs)]


def history_cut(repo: GitRepo, tips: Sequence[str]) -> bool:
    """Whether the history behind `tips` reaches a shallow boundary (so it is incomplete)."""
    cut = repo.shallow_commits()
    if not cut:
        return False
    proc = repo.run(["rev-list", *tips, "--"])
    return not cut.isdisjoint(proc.stdout.decode("utf-8", "backslashreplace").split())


def shallow_error(repo: GitRepo, what: str) -> ProbeError:
    return ProbeError("git.shallow", f"{what}: the history needed is cut by a shallow clone of {repo.root}; "
                                     "run `git fetch --unshallow` there", commands=repo.commands)


def rev_param(description: str) -> dict[str, Any]:
    """The JSON Schema of a probe parameter naming a revision: never one git could read as an option."""
    return {"type": "string", "description": description, "pattern": REV_PATTERN}
