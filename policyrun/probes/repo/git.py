"""Repository probes: state, refs, ancestry, diffs, first-parent logs, files at a revision, worktrees.

Strictly read-only, and nothing from the repository runs. Every git command runs with
`GIT_OPTIONAL_LOCKS=0` (so `git status` does not refresh and rewrite `.git/index`), never
fetches (no transport is allowed, so a partial clone cannot fetch lazily), never takes a lock,
ignores `GIT_DIR`-style variables inherited from a hook so the `path` parameter alone decides
which repository is read, and overrides every configuration key that could make it run a
program: the static ones below, and the filter drivers the repository's configuration declares
(read with `git config --list`, which runs nothing). docs/security.md lists them and why.
Commands run through `bounded.run_child`: their own process group, killed at the deadline.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import shutil
import stat
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from policyrun.probes.base import ProbeContext, ProbeError, ProbeResult
from policyrun.probes._kit.bounded import (ChildOutputTooLarge, ChildResult, ChildTimeout, Skipped, display_path,
                                      read_regular, run_child)
from policyrun.probes._kit.gitobjects import ObjectMissing, list_tree, locate_missing, object_missing, read_blobs

# Environment for every git command: no optional locks (no index refresh), no prompts, English
# messages (errors are classified by their text), no pager, no transport of any kind (an empty
# allow-list: a partial clone would otherwise fetch missing objects through the repository's
# remote URL, `ext::` commands and core.sshCommand included), no replace refs (a repository
# could otherwise substitute what a commit, tree or blob reads as).
READ_ONLY_ENV = {
    "GIT_OPTIONAL_LOCKS": "0",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_PAGER": "cat",
    "LC_ALL": "C.UTF-8",
    "LANGUAGE": "",
    "GIT_ALLOW_PROTOCOL": "",
    "GIT_NO_LAZY_FETCH": "1",
    "GIT_NO_REPLACE_OBJECTS": "1",
}
# Configuration overridden on every command, whatever the repository (or an included file) says.
NEUTRALISED_CONFIG: tuple[tuple[str, str], ...] = (
    ("core.fsmonitor", "false"),  # a hook program, or a daemon started on demand
    ("core.hooksPath", os.devnull),  # no hook can be found (none of the commands used runs one anyway)
    ("core.pager", "cat"),
    ("log.showSignature", "false"),  # would run gpg.program on every signed commit git log prints
    ("gpg.program", os.devnull), ("gpg.openpgp.program", os.devnull), ("gpg.x509.program", os.devnull),
    ("gpg.ssh.program", os.devnull),
    ("credential.helper", ""),  # an empty value resets the list of helpers
    ("core.askPass", ""),
    ("core.sshCommand", os.devnull),
    ("protocol.allow", "never"),
    ("submodule.recurse", "false"),
    ("core.useReplaceRefs", "false"),
    ("gc.auto", "0"),
    ("maintenance.auto", "false"),
    ("core.warnAmbiguousRefs", "true"),
    ("grep.fullName", "false"),
    ("grep.column", "false"),
    ("color.ui", "false"),
    # What `git status` reports about the work tree. A repository could otherwise hide an edit
    # (`core.checkStat=minimal` + `core.trustctime=false`: a same-size edit with its mtime put back
    # compares equal; `core.ignoreStat`: edits are not looked for), an untracked file (a forged
    # untracked cache in the index; `core.ignoreCase` on a case-sensitive file system), or a
    # `chmod +x` (`core.fileMode=false`). Overriding errs towards a false alarm on an unusual file
    # system (no executable bits, case-insensitive), never towards a false clean.
    ("core.checkStat", "default"),
    ("core.trustctime", "true"),
    ("core.ignoreStat", "false"),
    ("core.untrackedCache", "false"),
    ("core.fileMode", "true"),
    ("core.ignoreCase", "false"),
)
READ_ONLY_CONFIG = tuple(arg for key, value in NEUTRALISED_CONFIG for arg in ("-c", f"{key}={value}"))
# A filter driver's programs run when git converts a working-tree file (`git status` compares a
# stale entry's content through its clean filter). Every driver the configuration declares gets
# these, so no clean, smudge or long-running process filter is ever started.
FILTER_OVERRIDES = (("clean", ""), ("smudge", ""), ("process", ""), ("required", "false"))
# Inherited GIT_* variables that may stay; the rest (GIT_DIR, GIT_WORK_TREE, GIT_INDEX_FILE, GIT_SSH,
# GIT_EXTERNAL_DIFF, GIT_TRACE2*, ...) would point git at another repository or run something.
_KEEP_GIT_ENV = frozenset({
    "GIT_EXEC_PATH", "GIT_CEILING_DIRECTORIES", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM",
    "GIT_CONFIG_NOSYSTEM", "GIT_CONFIG_COUNT", "GIT_SSL_CAINFO", "GIT_ASKPASS",
})

_REV_PATTERN = r"^[^-\s][^\s]*$"  # no leading '-': a rev must never be read as an option
_FULL_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_HEX = re.compile(r"[0-9a-fA-F]{4,64}")
INDEX_FILE_BYTES = 1 << 30  # a copy of .git/index (split index) larger than this is refused
# Commands that load the index (and so, in a split-index repository, freshen the shared index).
INDEX_COMMANDS = frozenset({"status", "ls-files", "diff-files", "diff-index", "grep", "check-attr", "check-ignore"})


def git_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("GIT_") or k in _KEEP_GIT_ENV or k.startswith("GIT_CONFIG_")}
    env.update(extra or {})
    env.update(READ_ONLY_ENV)
    return env


def with_config(env: Mapping[str, str], pairs: Sequence[tuple[str, str]]) -> dict[str, str]:
    """`env` plus `pairs` as GIT_CONFIG_KEY_n / GIT_CONFIG_VALUE_n, after any inherited ones (later wins).

    The environment carries keys and values separately, so a driver name git would mis-split on
    the command line (one holding `=`) is still overridden exactly.
    """
    out = dict(env)
    try:
        count = int(out.get("GIT_CONFIG_COUNT", "0"))
    except ValueError:
        count = 0
    for key, value in pairs:
        out[f"GIT_CONFIG_KEY_{count}"] = key
        out[f"GIT_CONFIG_VALUE_{count}"] = value
        count += 1
    out["GIT_CONFIG_COUNT"] = str(count)
    return out


def declared_filters(config_listing: bytes) -> list[str]:
    """Filter driver names declared in `git config -z --list` output (every scope, includes followed)."""
    names = set()
    for record in config_listing.split(b"\0"):
        key = record.split(b"\n", 1)[0].decode("utf-8", "surrogateescape")
        if key.lower().startswith("filter.") and key.count(".") >= 2:
            names.add(key[len("filter."):key.rindex(".")])
    return sorted(names)


def _partial_clone(config_listing: bytes) -> bool:
    """Whether git would fetch an absent object lazily: `extensions.partialClone`, or any
    `remote.<name>.promisor` set true (either makes a promisor remote)."""
    for record in config_listing.split(b"\0"):
        key, _, raw = record.partition(b"\n")
        name = key.decode("utf-8", "replace").lower()
        if name == "extensions.partialclone" and raw.strip():
            return True
        if name.startswith("remote.") and name.endswith(".promisor") and raw.strip().lower() in (
                b"true", b"yes", b"on", b"1", b""):
            return True
    return False


def _config_value(config_listing: bytes, wanted: str) -> str | None:
    value = None
    for record in config_listing.split(b"\0"):
        key, _, raw = record.partition(b"\n")
        if key.decode("utf-8", "replace").lower() == wanted:
            value = raw.decode("utf-8", "replace")
    return value


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
    head = rest[0] if rest and _FULL_SHA.fullmatch(rest[0]) else None
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
    probe.object_format = (_config_value(listing, "extensions.objectformat") or "sha1").lower()
    probe.partial_clone = _partial_clone(listing)
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

def _check_rev(rev: str) -> None:
    if not rev or rev.startswith("-") or any(c.isspace() for c in rev):
        raise ProbeError("git.unknown_ref", f"{rev!r} is not a revision name")


def _ambiguous(repo: GitRepo, stderr: str) -> ProbeError | None:
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


def _unresolved(repo: GitRepo, rev: str, stderr: str) -> ProbeError:
    ambiguous = _ambiguous(repo, stderr)
    if ambiguous:
        return ambiguous
    if "expected commit type" in stderr:
        return ProbeError("git.unknown_ref", f"{rev!r} in {repo.root} is not a commit", commands=repo.commands)
    if repo.shallow and (_HEX.fullmatch(rev) or re.search(r"[~^]", rev)):
        return ProbeError("git.shallow", f"{rev!r} is not in {repo.root}, a shallow clone: the history it needs "
                                         "is cut; run `git fetch --unshallow` there", commands=repo.commands)
    hint = " (this clone is shallow, so it may not have been fetched)" if repo.shallow else ""
    return ProbeError("git.unknown_ref", f"unknown revision {rev!r} in {repo.root}: no branch, tag or commit "
                                         f"of that name{hint}; check the spelling or fetch it",
                      commands=repo.commands)


def resolve_commits(repo: GitRepo, revs: Sequence[str]) -> list[str]:
    """Full commit shas for `revs`, in one `git rev-parse`; ambiguous names are errors."""
    for rev in revs:
        _check_rev(rev)
    proc = repo.run(["rev-parse", *(f"{r}^{{commit}}" for r in revs), "--"], ok=(0, 128))
    stderr = proc.stderr.decode(errors="replace")
    if proc.returncode != 0:
        bad = re.search(r"bad revision '(.*)\^\{commit\}'", stderr) or re.search(r"'(.*)\^\{commit\}'", stderr)
        raise _unresolved(repo, bad.group(1) if bad else revs[0], stderr)
    ambiguous = _ambiguous(repo, stderr)
    if ambiguous:
        raise ambiguous
    return proc.stdout.decode("utf-8", "backslashreplace").split()[: len(revs)]


def _history_cut(repo: GitRepo, tips: Sequence[str]) -> bool:
    """Whether the history behind `tips` reaches a shallow boundary (so it is incomplete)."""
    cut = repo.shallow_commits()
    if not cut:
        return False
    proc = repo.run(["rev-list", *tips, "--"])
    return not cut.isdisjoint(proc.stdout.decode("utf-8", "backslashreplace").split())


def _shallow_error(repo: GitRepo, what: str) -> ProbeError:
    return ProbeError("git.shallow", f"{what}: the history needed is cut by a shallow clone of {repo.root}; "
                                     "run `git fetch --unshallow` there", commands=repo.commands)


# --- probe kinds --------------------------------------------------------------------------------

def _prop(type_: str | list[str], description: str, **extra: Any) -> dict[str, Any]:
    return {"type": type_, "description": description, **extra}


PATH_PARAM = _prop("string", "Directory inside the repository (relative to the working directory).",
                   default=".", minLength=1)


def rev_param(description: str) -> dict[str, Any]:
    return _prop("string", description, pattern=_REV_PATTERN)


def _params(required: list[str], **props: Any) -> dict[str, Any]:
    return {"type": "object", "properties": {"path": PATH_PARAM, **props}, "required": required,
            "additionalProperties": False}


def _fact(description: str, **props: Any) -> dict[str, Any]:
    return {"type": "object", "description": description, "properties": props}


SHA = _prop("string", "Full 40-hex commit sha.")
NULLABLE_SHA = _prop(["string", "null"], "Full sha, or null.")
PATHS = _prop("array", "Repository-relative paths.", items={"type": "string"})


class GitProbe:
    """Shared behaviour: no side effects, open the repository, time-box the commands."""

    kind = ""
    summary = ""
    params_schema: Mapping[str, Any] = {}
    fact_schema: Mapping[str, Any] = {}

    def side_effects(self, params: Mapping[str, Any]) -> frozenset[str]:
        return frozenset()  # read-only by construction; see the module docstring

    def run(self, params: Mapping[str, Any], ctx: ProbeContext) -> ProbeResult:
        repo = open_repo(params.get("path", "."), ctx)
        return repo.result(self.collect(repo, params))

    def collect(self, repo: GitRepo, params: Mapping[str, Any]) -> Any:
        raise NotImplementedError


class RepoProbe(GitProbe):
    kind = "git.repo"
    summary = "Repository state: branch, HEAD, dirty and untracked paths, upstream, worktree, shallow."
    params_schema = _params([], untracked=_prop("string", "How to list untracked files: `normal` collapses "
                                                          "untracked directories to `dir/`, `all` lists every file, "
                                                          "`no` skips them.", enum=["normal", "all", "no"],
                                                          default="normal"))
    fact_schema = _fact(
        "The repository as it is now.",
        path=_prop("string", "Working tree top level (git directory when bare)."),
        branch=_prop(["string", "null"], "Checked-out branch; null when detached."),
        head=NULLABLE_SHA, detached=_prop("boolean", "HEAD is not on a branch."),
        unborn=_prop("boolean", "The branch has no commit yet."),
        upstream=_prop(["string", "null"], "Upstream branch, e.g. origin/main."),
        ahead=_prop(["integer", "null"], "Commits ahead of upstream."),
        behind=_prop(["integer", "null"], "Commits behind upstream."),
        dirty=PATHS | {"description": "Tracked paths with staged or unstaged changes."},
        staged=PATHS | {"description": "Paths with staged changes."},
        conflicted=PATHS | {"description": "Unmerged paths."},
        untracked=PATHS | {"description": "Untracked, not ignored paths."},
        clean=_prop("boolean", "No dirty and no untracked paths."),
        is_worktree=_prop("boolean", "A linked worktree (`git worktree add`), not the main one."),
        bare=_prop("boolean", "A bare repository."), shallow=_prop("boolean", "A shallow clone."),
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
        if not _matches_index(repo, raw_path, mode, oid):
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


def _matches_index(repo: GitRepo, raw_path: bytes, mode: str, oid: str) -> bool:
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


_REF_KINDS = (("refs/heads/", "branch"), ("refs/tags/", "tag"), ("refs/remotes/", "remote_branch"))


def _ref_kind(ref: str, full_name: str | None, obj: str) -> str:
    if full_name and full_name in (ref, f"refs/{ref}", f"refs/tags/{ref}", f"refs/heads/{ref}",
                                   f"refs/remotes/{ref}", f"refs/remotes/{ref}/HEAD"):
        return next((kind for prefix, kind in _REF_KINDS if full_name.startswith(prefix)), "other")
    lowered = ref.lower()
    if _FULL_SHA.fullmatch(lowered):
        return "sha"
    if _HEX.fullmatch(ref) and obj.startswith(lowered):
        return "abbrev_sha"
    return "other"


class ResolveProbe(GitProbe):
    kind = "git.resolve"
    summary = "A ref (branch, tag, sha, abbreviated sha, HEAD~n...) resolved to a full sha; tags peeled."
    params_schema = _params(["ref"], ref=rev_param("Any revision git understands."))
    fact_schema = _fact(
        "The resolved ref.",
        ref=_prop("string", "The ref as given."),
        sha=_prop("string", "Full sha of the object the ref names, annotated tags peeled (usually a commit)."),
        object=_prop("string", "Full sha before peeling (the tag object for an annotated tag)."),
        kind=_prop("string", "How the ref was written.",
                   enum=["branch", "tag", "sha", "abbrev_sha", "remote_branch", "other"]),
        annotated=_prop("boolean", "The ref is an annotated tag."),
        full_name=_prop(["string", "null"], "Full ref name (refs/tags/v1), null for a sha."),
    )

    def collect(self, repo: GitRepo, params: Mapping[str, Any]) -> Any:
        ref = params["ref"]
        _check_rev(ref)
        proc = repo.run(["rev-parse", ref, f"{ref}^{{}}", "--symbolic-full-name", ref, "--"], ok=(0, 128))
        stderr = proc.stderr.decode(errors="replace")
        if proc.returncode != 0:
            raise _unresolved(repo, ref, stderr)
        ambiguous = _ambiguous(repo, stderr)
        if ambiguous:
            raise ambiguous
        lines = [ln for ln in proc.stdout.decode("utf-8", "backslashreplace").splitlines() if ln != "--"]
        obj, peeled = lines[0], lines[1]
        full_name = lines[2] if len(lines) > 2 and lines[2].startswith("refs/") else None
        return {"ref": ref, "sha": peeled, "object": obj, "kind": _ref_kind(ref, full_name, obj),
                "annotated": obj != peeled, "full_name": full_name}


class CommitsProbe(GitProbe):
    kind = "git.commits"
    summary = ("Several commit ids (full or abbreviated hex, as annotations and messages quote them) looked up "
               "at once; one the repository does not hold is reported, never an error.")
    params_schema = _params(["shas"], shas=_prop("array", "Commit ids to look up (hex, 4 to 64 digits); "
                                                          "anything else is reported as not a commit id.",
                                                  items={"type": "string"}, maxItems=10000))
    fact_schema = _fact(
        "Each id, found or not.",
        commits=_prop("array", "One row per distinct id, in the order given: `{ref, found, sha, reason}`; "
                      "`reason` is `missing`, `ambiguous` or `not_hex` when not found.",
                      items={"type": "object", "properties": {
                          "ref": {"type": "string"}, "found": {"type": "boolean"},
                          "sha": {"type": ["string", "null"]}, "reason": {"type": ["string", "null"]}}}),
        by_ref=_prop("object", "id → full commit sha, or null when the repository does not hold it.",
                     additionalProperties={"type": ["string", "null"]}),
        unresolved=_prop("array", "The ids the repository does not hold (or not unambiguously).",
                         items={"type": "string"}),
    )

    def collect(self, repo: GitRepo, params: Mapping[str, Any]) -> Any:
        refs = list(dict.fromkeys(params["shas"]))
        hexes = [r for r in refs if _HEX.fullmatch(r)]
        answers: dict[str, tuple[str | None, str | None]] = {r: (None, "not_hex") for r in refs if r not in hexes}
        if hexes:
            # One batch for every id; `^{commit}` peels a tag and refuses a tree or blob.
            proc = repo.run(["cat-file", "--batch-check"],
                            stdin="".join(f"{r.lower()}^{{commit}}\n" for r in hexes).encode())
            lines = proc.stdout.decode("utf-8", "replace").splitlines()
            for ref, line in zip(hexes, lines, strict=False):
                parts = line.split()
                if len(parts) == 3 and parts[1] == "commit":
                    answers[ref] = (parts[0], None)
                else:
                    answers[ref] = (None, "ambiguous" if parts[-1:] == ["ambiguous"] else "missing")
            for ref in hexes[len(lines):]:
                answers[ref] = (None, "missing")
        rows = [{"ref": r, "found": answers[r][0] is not None, "sha": answers[r][0], "reason": answers[r][1]}
                for r in refs]
        return {"commits": rows, "by_ref": {r["ref"]: r["sha"] for r in rows},
                "unresolved": [r["ref"] for r in rows if not r["found"]]}


class AncestryProbe(GitProbe):
    kind = "git.ancestry"
    summary = "Whether one commit is an ancestor of another, and their merge base."
    params_schema = _params(["ancestor", "descendant"], ancestor=rev_param("The presumed ancestor."),
                            descendant=rev_param("The presumed descendant."))
    fact_schema = _fact(
        "Ancestry between two commits.",
        ancestor=_prop("string", "As given."), descendant=_prop("string", "As given."),
        ancestor_sha=SHA, descendant_sha=SHA,
        is_ancestor=_prop("boolean", "`ancestor` is reachable from `descendant` (a commit is its own ancestor)."),
        merge_base=NULLABLE_SHA, merge_bases=PATHS | {"description": "Every best common ancestor (criss-cross)."},
    )

    def collect(self, repo: GitRepo, params: Mapping[str, Any]) -> Any:
        anc, desc = resolve_commits(repo, [params["ancestor"], params["descendant"]])
        bases = repo.run(["merge-base", "--all", anc, desc], ok=(0, 1)).stdout.decode("utf-8", "backslashreplace").split()
        # A is an ancestor of D exactly when the merge base of the two is A itself.
        is_ancestor = anc in bases
        if not is_ancestor and _history_cut(repo, [anc, desc]):
            raise _shallow_error(repo, f"cannot tell whether {params['ancestor']} is an ancestor of "
                                       f"{params['descendant']}")
        return {"ancestor": params["ancestor"], "descendant": params["descendant"], "ancestor_sha": anc,
                "descendant_sha": desc, "is_ancestor": is_ancestor, "merge_base": bases[0] if bases else None,
                "merge_bases": bases}


_DIFF_FILE = {"type": "object", "properties": {
    "status": {"enum": ["A", "M", "D", "R", "C", "T", "U", "X"]}, "path": {"type": "string"},
    "old_path": {"type": ["string", "null"]}, "similarity": {"type": ["integer", "null"]},
    "added": {"type": ["integer", "null"], "description": "Lines added; null for a binary file."},
    "deleted": {"type": ["integer", "null"]}, "binary": {"type": "boolean"}}}


class DiffProbe(GitProbe):
    kind = "git.diff"
    summary = "Rename-aware changes between two revisions, with per-file line counts."
    params_schema = _params(
        ["base", "head"], base=rev_param("Old side."), head=rev_param("New side."),
        from_merge_base=_prop("boolean", "Diff from the merge base of base and head (`base...head`).",
                              default=False),
        paths=_prop("array", "Limit to these pathspecs (repository-relative).", items={"type": "string"}),
        find_copies=_prop("boolean", "Also detect copies (-C).", default=False),
        rename_limit=_prop("integer", "git's diff.renameLimit for this diff (0: no limit).", minimum=0),
    )
    fact_schema = _fact(
        "Changes from base to head.",
        base=_prop("string", "As given."), head=_prop("string", "As given."), base_sha=SHA, head_sha=SHA,
        files=_prop("array", "One entry per changed file, in git's order.", items=_DIFF_FILE),
        totals=_prop("object", "files, added, deleted (lines), added_files, deleted_files, modified_files, "
                               "renamed, copied, type_changed, binary_files."),
        changed_paths=PATHS | {"description": "Every path touched, on either side of a rename, sorted."},
        added_paths=PATHS, deleted_paths=PATHS, modified_paths=PATHS,
        renamed=_prop("object", "Old path → new path.", additionalProperties={"type": "string"}),
        renames_complete=_prop("boolean", "False when git skipped inexact rename detection (too many files)."),
    )

    def collect(self, repo: GitRepo, params: Mapping[str, Any]) -> Any:
        base, head = resolve_commits(repo, [params["base"], params["head"]])
        args = ["diff", "--raw", "--numstat", "-z", "-M", "--no-ext-diff", "--no-textconv", "--no-relative",
                "--no-color"]
        if params.get("find_copies"):
            args.append("-C")
        if "rename_limit" in params:
            args.append(f"-l{params['rename_limit']}")
        if params.get("from_merge_base"):
            bases = repo.run(["merge-base", base, head], ok=(0, 1)).stdout.decode("utf-8", "backslashreplace").split()
            if not bases:
                if _history_cut(repo, [base, head]):
                    raise _shallow_error(repo, "no merge base found")
                raise ProbeError("git.no_merge_base", f"{params['base']} and {params['head']} have no common "
                                                      "ancestor", commands=repo.commands)
            base = bases[0]
        try:
            proc = repo.run([*args, base, head, "--", *params.get("paths", [])])
        except ObjectMissing as exc:  # line counts read both sides' blobs
            raise locate_missing(repo, exc, {base: params["base"], head: params["head"]}) from None
        files = parse_raw_numstat(proc.stdout)
        value = summarise_diff(files)
        value.update(base=params["base"], head=params["head"], base_sha=base, head_sha=head,
                     renames_complete="rename detection was skipped" not in proc.stderr.decode(errors="replace"))
        return value


def parse_raw_numstat(out: bytes) -> list[dict[str, Any]]:
    """Parse `git diff --raw --numstat -z`: the raw records, then numstat records in the same order."""
    tokens = out.decode("utf-8", "backslashreplace").split("\0")
    files: list[dict[str, Any]] = []
    stats: list[tuple[int | None, int | None]] = []
    i = 0
    while i < len(tokens) and tokens[i]:
        tok = tokens[i]
        if tok.startswith(":"):
            status = tok.split(" ")[4]
            letter = status[0]
            if letter in "RC":
                entry = {"status": letter, "old_path": tokens[i + 1], "path": tokens[i + 2],
                         "similarity": int(status[1:]) if status[1:] else None}
                i += 3
            else:
                entry = {"status": letter, "old_path": None, "path": tokens[i + 1], "similarity": None}
                i += 2
            files.append(entry)
        else:
            plus, minus, path = tok.split("\t", 2)
            stats.append((None if plus == "-" else int(plus), None if minus == "-" else int(minus)))
            i += 1 if path else 3  # a rename's numstat has an empty path followed by old and new paths
    for entry, (added, deleted) in zip(files, stats, strict=True):
        entry.update(added=added, deleted=deleted, binary=added is None)
    return files


def summarise_diff(files: list[dict[str, Any]]) -> dict[str, Any]:
    by_status: dict[str, list[dict[str, Any]]] = {}
    for f in files:
        by_status.setdefault(f["status"], []).append(f)
    changed = {f["path"] for f in files} | {f["old_path"] for f in by_status.get("R", [])}
    totals = {
        "files": len(files),
        "added": sum(f["added"] or 0 for f in files),
        "deleted": sum(f["deleted"] or 0 for f in files),
        "added_files": len(by_status.get("A", [])),
        "deleted_files": len(by_status.get("D", [])),
        "modified_files": len(by_status.get("M", [])),
        "renamed": len(by_status.get("R", [])),
        "copied": len(by_status.get("C", [])),
        "type_changed": len(by_status.get("T", [])),
        "binary_files": sum(1 for f in files if f["binary"]),
    }
    return {
        "files": files, "totals": totals, "changed_paths": sorted(changed),
        "added_paths": sorted(f["path"] for f in by_status.get("A", []) + by_status.get("C", [])),
        "deleted_paths": sorted(f["path"] for f in by_status.get("D", [])),
        "modified_paths": sorted(f["path"] for f in by_status.get("M", []) + by_status.get("T", [])),
        "renamed": {f["old_path"]: f["path"] for f in by_status.get("R", [])},
    }


_LOG_FORMAT = "%H%x1f%s%x1f%an%x1f%ae%x1f%aI"


class LogProbe(GitProbe):
    kind = "git.log"
    summary = "First-parent commits reachable from head and not from base (`git log --first-parent base..head`)."
    params_schema = _params(["head"], base=rev_param("Exclude commits reachable from this revision."),
                            head=rev_param("Newest revision."),
                            max_count=_prop("integer", "At most this many commits.", minimum=1))
    fact_schema = _fact(
        "First-parent history, newest first.",
        base=_prop(["string", "null"], "As given."), head=_prop("string", "As given."),
        base_sha=NULLABLE_SHA, head_sha=SHA,
        commits=_prop("array", "Commits, newest first.", items={"type": "object", "properties": {
            "sha": {"type": "string"}, "subject": {"type": "string"}, "author": {"type": "string"},
            "email": {"type": "string"}, "date": {"type": "string", "description": "Author date, ISO 8601."}}}),
        count=_prop("integer", "Number of commits."),
    )

    def collect(self, repo: GitRepo, params: Mapping[str, Any]) -> Any:
        base_rev = params.get("base")
        shas = resolve_commits(repo, [params["head"], *([base_rev] if base_rev else [])])
        args = ["log", "--first-parent", "-z", f"--format={_LOG_FORMAT}", "--no-color"]
        if "max_count" in params:
            args.append(f"--max-count={params['max_count']}")
        proc = repo.run([*args, shas[0], *([f"^{shas[1]}"] if base_rev else []), "--"])
        commits = []
        for record in proc.stdout.decode(errors="replace").split("\0"):
            if record.strip():
                sha, subject, author, email, date = record.strip("\n").split("\x1f")
                commits.append({"sha": sha, "subject": subject, "author": author, "email": email, "date": date})
        # --first-parent stops at a shallow commit (it looks parentless); unless max_count was reached
        # there, the walk would have gone on, so the list is incomplete.
        limit = params.get("max_count")
        if commits and commits[-1]["sha"] in repo.shallow_commits() and (limit is None or len(commits) < limit):
            raise _shallow_error(repo, f"the log of {params['head']} stops at a shallow boundary")
        return {"base": base_rev, "head": params["head"], "base_sha": shas[1] if base_rev else None,
                "head_sha": shas[0], "commits": commits, "count": len(commits)}


class ShowProbe(GitProbe):
    kind = "git.show"
    summary = "A file's content at a revision (`git cat-file`), without checking anything out."
    params_schema = _params(["file"], rev=rev_param("Revision to read from.") | {"default": "HEAD"},
                            file=_prop("string", "Path from the repository root.", minLength=1,
                                       pattern=r"^[^\n]+$"),
                            max_bytes=_prop("integer", "Refuse larger files.", minimum=1, default=1048576))
    fact_schema = _fact(
        "The file at the revision.",
        rev=_prop("string", "As given."), commit=SHA, file=_prop("string", "As given."),
        blob=_prop("string", "Blob sha."), size=_prop("integer", "Bytes."),
        binary=_prop("boolean", "Not UTF-8 text; content is null."),
        content=_prop(["string", "null"], "UTF-8 text."), sha256=_prop("string", "Of the bytes."),
    )

    def collect(self, repo: GitRepo, params: Mapping[str, Any]) -> Any:
        rev, file = params.get("rev", "HEAD"), params["file"].lstrip("/")
        (commit,) = resolve_commits(repo, [rev])
        limit = params.get("max_bytes", 1048576)
        # The tree entry first (`ls-tree` reads no blob): a blob over max_bytes (a 5 GB one) is
        # refused without being read, and one the object store lacks is told from no such file.
        entries = list_tree(repo, commit, path_filter=file)
        entry = next((e for e in entries if e.path == file), None)
        if entry is None:
            is_dir = any(e.path.startswith(file.rstrip("/") + "/") for e in entries)
            raise ProbeError("file.not_found", f"{file} {'is a directory' if is_dir else 'does not exist'} at "
                                               f"{rev} ({commit[:12]}) in {repo.root}", commands=repo.commands)
        if entry.kind != "blob":  # a submodule's commit (a symbolic link's blob is read: its target)
            raise ProbeError("file.not_found", f"{file} at {rev} is a submodule, not a file", commands=repo.commands)
        if entry.size is None:
            raise object_missing(repo, file, rev, commit, entry.oid)
        blob, size = entry.oid, entry.size
        if size > limit:
            raise ProbeError("file.too_large", f"{file} at {rev} is {size} bytes, over max_bytes={limit}",
                             commands=repo.commands)
        if blob not in (got := read_blobs(repo, [entry])):
            raise object_missing(repo, file, rev, commit, blob)
        data = got[blob]
        try:
            content: str | None = data.decode("utf-8")
        except UnicodeDecodeError:
            content = None
        if content is not None and "\0" in content:
            content = None
        return {"rev": rev, "commit": commit, "file": file, "blob": blob, "size": size,
                "binary": content is None, "content": content, "sha256": hashlib.sha256(data).hexdigest()}


class WorktreesProbe(GitProbe):
    kind = "git.worktrees"
    summary = "Every worktree of the repository (main first): path, HEAD, branch."
    params_schema = _params([])
    fact_schema = {"type": "array", "description": "One entry per worktree, the main one first.",
                   "items": {"type": "object", "properties": {
                       "path": {"type": "string"}, "head": {"type": ["string", "null"]},
                       "branch": {"type": ["string", "null"], "description": "Short name; null when detached."},
                       "detached": {"type": "boolean"}, "bare": {"type": "boolean"}, "main": {"type": "boolean"},
                       "locked": {"type": "boolean"}, "prunable": {"type": "boolean"}}}}

    def collect(self, repo: GitRepo, params: Mapping[str, Any]) -> Any:
        proc = repo.run(["worktree", "list", "--porcelain"])
        out: list[dict[str, Any]] = []
        for block in proc.stdout.decode("utf-8", "backslashreplace").split("\n\n"):
            lines = [ln for ln in block.splitlines() if ln]
            if not lines:
                continue
            attrs = dict((ln.split(" ", 1) + [""])[:2] for ln in lines)
            branch = attrs.get("branch")
            out.append({"path": attrs.get("worktree", ""), "head": attrs.get("HEAD"),
                        "branch": branch.removeprefix("refs/heads/") if branch else None,
                        "detached": "detached" in attrs, "bare": "bare" in attrs, "main": not out,
                        "locked": "locked" in attrs, "prunable": "prunable" in attrs})
        return out


PROBES: list[Any] = [RepoProbe(), ResolveProbe(), CommitsProbe(), AncestryProbe(), DiffProbe(), LogProbe(), ShowProbe(),
                     WorktreesProbe()]
