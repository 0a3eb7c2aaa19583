"""Repository probes: state, refs, ancestry, diffs, first-parent logs, files at a revision, worktrees.

Strictly read-only. Every git command runs with `GIT_OPTIONAL_LOCKS=0` (so `git status` does not
refresh and rewrite `.git/index`), never fetches, never takes a lock, and ignores `GIT_DIR`-style
variables inherited from a hook so the `path` parameter alone decides which repository is read.
GitPython finds the repository (worktrees, gitfiles, parent directories) without a subprocess;
the commands themselves go through `subprocess` so each probe runs as few of them as possible.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from policyrun.probes.base import ProbeContext, ProbeError, ProbeResult

# Environment for every git command: no optional locks (no index refresh), no prompts, English
# messages (errors are classified by their text), no pager.
READ_ONLY_ENV = {
    "GIT_OPTIONAL_LOCKS": "0",
    "GIT_TERMINAL_PROMPT": "0",
    "GIT_PAGER": "cat",
    "LC_ALL": "C.UTF-8",
    "LANGUAGE": "",
}
# Config that could make a read start a daemon, run a hook, change output paths or hide ambiguity.
READ_ONLY_CONFIG = (
    "-c", "core.fsmonitor=false",
    "-c", "core.warnAmbiguousRefs=true",
    "-c", "gc.auto=0",
    "-c", "maintenance.auto=false",
    "-c", "grep.fullName=false",
    "-c", "grep.column=false",
    "-c", "color.ui=false",
)
# Inherited GIT_* variables that may stay; the rest (GIT_DIR, GIT_WORK_TREE, GIT_INDEX_FILE, ...)
# would point git at another repository than the one the rulebook names.
_KEEP_GIT_ENV = frozenset({
    "GIT_EXEC_PATH", "GIT_CEILING_DIRECTORIES", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM",
    "GIT_CONFIG_NOSYSTEM", "GIT_CONFIG_COUNT", "GIT_SSL_CAINFO", "GIT_ASKPASS",
})

_REV_PATTERN = r"^[^-\s][^\s]*$"  # no leading '-': a rev must never be read as an option
_FULL_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_HEX = re.compile(r"[0-9a-fA-F]{4,64}")


def git_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("GIT_") or k in _KEEP_GIT_ENV or k.startswith("GIT_CONFIG_")}
    env.update(extra or {})
    env.update(READ_ONLY_ENV)
    return env


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
    handle: Any  # GitPython's Repo, for reading refs without a subprocess
    commands: list[str] = field(default_factory=list)

    @property
    def shallow(self) -> bool:
        return (self.common_dir / "shallow").is_file()

    def shallow_commits(self) -> set[str]:
        try:
            return set((self.common_dir / "shallow").read_text().split())
        except OSError:
            return set()

    @property
    def is_linked_worktree(self) -> bool:
        return self.git_dir != self.common_dir

    def head(self) -> str | None:
        from git.refs.symbolic import SymbolicReference

        try:
            return str(SymbolicReference.dereference_recursive(self.handle, "HEAD"))
        except (ValueError, OSError):  # unborn branch or unreadable HEAD
            return None

    def run(self, args: Sequence[str], *, cwd: Path | None = None, stdin: bytes | None = None,
            ok: tuple[int, ...] = (0,)) -> subprocess.CompletedProcess[bytes]:
        from git import Git

        where = cwd or self.root
        shown = shlex.join(["git", "-C", str(where), *args])
        self.commands.append(shown)
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            raise self.timeout(shown)
        try:
            proc = subprocess.run([Git.GIT_PYTHON_GIT_EXECUTABLE or "git", *READ_ONLY_CONFIG, *args],
                                  cwd=where, input=stdin, capture_output=True, env=self.env,
                                  timeout=remaining, stdin=None if stdin is not None else subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise self.timeout(shown) from None
        except OSError as exc:
            raise ProbeError("git.not_installed", f"cannot run git: {exc.strerror}; install git or put it on PATH",
                             commands=self.commands) from None
        if proc.returncode not in ok:
            raise self.error(proc.stderr.decode(errors="replace"), shown)
        return proc

    def timeout(self, command: str) -> ProbeError:
        return ProbeError("probe.timeout", f"`{command}` did not finish within the probe's {self.timeout_s:g}s; "
                                           "raise the probe's timeout_s", commands=self.commands)

    def error(self, stderr: str, command: str) -> ProbeError:
        """A failed git command as a ProbeError whose code names the cause."""
        first = next((ln.strip() for ln in stderr.splitlines() if ln.startswith(("fatal:", "error:"))),
                     stderr.strip().splitlines()[0] if stderr.strip() else "no message")
        if "dubious ownership" in stderr:
            return ProbeError("git.dubious_ownership",
                              f"git refuses {self.root}: it is owned by another user; if you trust it, run "
                              f"`git config --global --add safe.directory {self.root}`", commands=self.commands)
        if "not a git repository" in stderr:
            return ProbeError("git.not_a_repository", f"{self.root} is not a git repository ({first})",
                              commands=self.commands)
        return ProbeError("git.failed", f"`{command}` failed: {first}", commands=self.commands)

    def result(self, value: Any) -> ProbeResult:
        return ProbeResult(value=value, commands=list(self.commands), repo_path=str(self.root),
                           repo_head=self.head())


def open_repo(path: str, ctx: ProbeContext) -> GitRepo:
    """Find the repository containing `path` (like git does, searching parent directories)."""
    try:
        import git
    except ImportError as exc:  # GitPython refuses to import when it cannot run `git --version`
        raise ProbeError("git.not_installed", f"cannot use git: {exc}; install git or put it on PATH") from None

    where = ctx.resolve(path)
    if not where.exists():
        raise ProbeError("git.not_a_repository", f"{where} does not exist; check the path parameter")
    try:
        handle = git.Repo(where, search_parent_directories=True, expand_vars=False)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise ProbeError("git.not_a_repository",
                         f"{where} is not inside a git repository; point `path` at a clone") from None
    git_dir = Path(handle.git_dir).resolve()
    common_dir = Path(handle.common_dir).resolve()
    bare = handle.bare
    root = git_dir if bare or handle.working_tree_dir is None else Path(handle.working_tree_dir).resolve()
    return GitRepo(root=root, git_dir=git_dir, common_dir=common_dir, bare=bare,
                   deadline=time.monotonic() + ctx.timeout_s, timeout_s=ctx.timeout_s,
                   env=git_env(ctx.env), handle=handle)


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
        found = [r for r in proc.stdout.decode().split() if r in patterns]
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
    return proc.stdout.decode().split()[: len(revs)]


def _history_cut(repo: GitRepo, tips: Sequence[str]) -> bool:
    """Whether the history behind `tips` reaches a shallow boundary (so it is incomplete)."""
    cut = repo.shallow_commits()
    if not cut:
        return False
    proc = repo.run(["rev-list", *tips, "--"])
    return not cut.isdisjoint(proc.stdout.decode().split())


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
    )

    def collect(self, repo: GitRepo, params: Mapping[str, Any]) -> Any:
        value: dict[str, Any] = {
            "path": str(repo.root), "branch": None, "head": None, "detached": False, "unborn": False,
            "upstream": None, "ahead": None, "behind": None, "dirty": [], "staged": [], "conflicted": [],
            "untracked": [], "clean": True, "is_worktree": repo.is_linked_worktree, "bare": repo.bare,
            "shallow": repo.shallow,
        }
        if repo.bare:
            head = repo.head()
            value.update(head=head, unborn=head is None, branch=_current_branch(repo))
            value["detached"] = value["branch"] is None and head is not None
            return value
        proc = repo.run(["status", "--porcelain=v2", "-z", "--branch",
                         f"--untracked-files={params.get('untracked', 'normal')}"])
        _parse_status(proc.stdout.decode(errors="surrogateescape"), value)
        value["clean"] = not value["dirty"] and not value["untracked"]
        return value


def _current_branch(repo: GitRepo) -> str | None:
    try:
        head = (repo.git_dir / "HEAD").read_text().strip()
    except OSError:
        return None
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
        lines = [ln for ln in proc.stdout.decode().splitlines() if ln != "--"]
        obj, peeled = lines[0], lines[1]
        full_name = lines[2] if len(lines) > 2 and lines[2].startswith("refs/") else None
        return {"ref": ref, "sha": peeled, "object": obj, "kind": _ref_kind(ref, full_name, obj),
                "annotated": obj != peeled, "full_name": full_name}


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
        bases = repo.run(["merge-base", "--all", anc, desc], ok=(0, 1)).stdout.decode().split()
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
            bases = repo.run(["merge-base", base, head], ok=(0, 1)).stdout.decode().split()
            if not bases:
                if _history_cut(repo, [base, head]):
                    raise _shallow_error(repo, "no merge base found")
                raise ProbeError("git.no_merge_base", f"{params['base']} and {params['head']} have no common "
                                                      "ancestor", commands=repo.commands)
            base = bases[0]
        proc = repo.run([*args, base, head, "--", *params.get("paths", [])])
        files = parse_raw_numstat(proc.stdout)
        value = summarise_diff(files)
        value.update(base=params["base"], head=params["head"], base_sha=base, head_sha=head,
                     renames_complete="rename detection was skipped" not in proc.stderr.decode(errors="replace"))
        return value


def parse_raw_numstat(out: bytes) -> list[dict[str, Any]]:
    """Parse `git diff --raw --numstat -z`: the raw records, then numstat records in the same order."""
    tokens = out.decode(errors="surrogateescape").split("\0")
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
        proc = repo.run(["cat-file", "--batch"], stdin=f"{commit}:{file}\n".encode())
        header, _, body = proc.stdout.partition(b"\n")
        parts = header.decode(errors="replace").split()
        if parts[-1] == "missing" or len(parts) != 3:
            raise ProbeError("git.missing_object", f"{file} does not exist at {rev} ({commit[:12]}) in {repo.root}",
                             commands=repo.commands)
        blob, obj_type, size = parts[0], parts[1], int(parts[2])
        if obj_type != "blob":
            raise ProbeError("git.missing_object", f"{file} at {rev} is a {obj_type}, not a file",
                             commands=repo.commands)
        if size > limit:
            raise ProbeError("file.too_large", f"{file} at {rev} is {size} bytes, over max_bytes={limit}",
                             commands=repo.commands)
        data = body[:size]
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
        for block in proc.stdout.decode(errors="surrogateescape").split("\n\n"):
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


PROBES: list[Any] = [RepoProbe(), ResolveProbe(), AncestryProbe(), DiffProbe(), LogProbe(), ShowProbe(),
                     WorktreesProbe()]
