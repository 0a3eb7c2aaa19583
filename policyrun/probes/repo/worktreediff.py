"""`git.worktree_diff`: the uncommitted changes of a working tree against a revision.

What `git diff BASE` and `git status` show, as a fact: every change from `base` (default HEAD) to
the files on disk, split into staged (`base` → index) and unstaged (index → working tree), with
line counts and renames, plus the untracked files. Read-only like every git probe: only plumbing
that never writes the index runs (`diff-index`, `diff-files`, `ls-files`). Porcelain `git diff`
would refresh a stale index and rewrite `.git/index` even under GIT_OPTIONAL_LOCKS=0; plumbing
instead reports a file whose mtime changed but whose content did not as modified ("stat-dirty"),
so such a candidate is dropped when git's numstat saw no change or its bytes hash to the other
side's blob. Index flags (assume-unchanged, skip-worktree) are not trusted, as in git.repo.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from policyrun.probes._kit.bounded import display_path
from policyrun.probes._kit.gitclient import GitRepo, resolve_commits, rev_param
from policyrun.probes.repo.git import DIFF_FILE, summarise_diff
from policyrun.probes.repo.gitprobe import PATHS, SHA, GitProbe, fact_object, prop, repo_params
from policyrun.probes.repo.gitstate import matches_index

_NULL_SHA = "0" * 40
_DIFF_ARGS = ["-z", "--no-abbrev", "--no-ext-diff", "--no-textconv", "--no-color"]

_SIDE = prop("object", "One side of the change, in the same shape as the top level: files, totals, changed_paths, "
                        "added_paths, deleted_paths, modified_paths, renamed.",
              properties={"files": prop("array", "Changed files.", items=DIFF_FILE),
                          "totals": prop("object", "As git.diff's totals."),
                          "changed_paths": PATHS, "added_paths": PATHS, "deleted_paths": PATHS,
                          "modified_paths": PATHS,
                          "renamed": prop("object", "Old path → new path.",
                                           additionalProperties={"type": "string"})})


def _raw(out: bytes) -> list[dict[str, Any]]:
    """`--raw -z` records with their modes and shas (`src_mode`, `dst_mode`, `src_sha`, `dst_sha`)."""
    tokens = out.decode("utf-8", "backslashreplace").split("\0")
    files: list[dict[str, Any]] = []
    i = 0
    while i + 1 < len(tokens) and tokens[i].startswith(":"):
        src_mode, dst_mode, src_sha, dst_sha, status = tokens[i][1:].split(" ")[:5]
        entry: dict[str, Any] = {"status": status[0], "old_path": None, "path": tokens[i + 1], "similarity": None,
                 "src_mode": src_mode, "dst_mode": dst_mode, "src_sha": src_sha, "dst_sha": dst_sha}
        if status[0] in "RC":
            entry.update(old_path=tokens[i + 1], path=tokens[i + 2], similarity=int(status[1:]) if status[1:] else None)
            i += 3
        else:
            i += 2
        files.append(entry)
    return files


def _numstat(out: bytes) -> dict[str, tuple[int | None, int | None]]:
    """`--numstat -z` by (new) path. A file git found unchanged in content has no entry."""
    tokens = out.decode("utf-8", "backslashreplace").split("\0")
    stats: dict[str, tuple[int | None, int | None]] = {}
    i = 0
    while i < len(tokens) and tokens[i]:
        plus, minus, path = tokens[i].split("\t", 2)
        if not path:  # a rename: old and new paths follow
            path, i = tokens[i + 2], i + 3
        else:
            i += 1
        stats[path] = (None if plus == "-" else int(plus), None if minus == "-" else int(minus))
    return stats


def _flagged_changes(repo: GitRepo, paths: list[str]) -> list[dict[str, Any]]:
    """Index entries flagged assume-unchanged or skip-worktree, which diff-files never compares,
    whose file on disk differs from the index (as git.repo decides: a sparse-checkout file absent
    from disk is not a change). Line counts are unknown: git was not asked to diff them."""
    out: list[dict[str, Any]] = []
    entries = repo.run(["ls-files", "-z", "--stage", "-v", "--full-name", "--", *paths]).stdout
    for record in entries.split(b"\0"):
        meta, _, raw_path = record.partition(b"\t")
        if not record or len(meta.split(b" ")) != 4:
            continue
        tag, mode, oid, _stage = meta.decode("ascii", "replace").split(" ")
        assume, skip = tag.islower(), tag.upper() == "S"
        if mode == "160000" or not (assume or skip):
            continue
        if skip and not assume and not os.path.lexists(repo.root / os.fsdecode(raw_path)):
            continue
        if not matches_index(repo, raw_path, mode, oid):
            out.append({"status": "M", "path": display_path(raw_path), "old_path": None, "similarity": None,
                        "added": None, "deleted": None, "binary": False})
    return out


def _diff(repo: GitRepo, args: list[str], paths: list[str]) -> tuple[list[dict[str, Any]], bool]:
    """(files, renames complete) of one plumbing diff, stat-only changes dropped."""
    raw = repo.run([*args[:1], "--raw", *_DIFF_ARGS, *args[1:], "--", *paths])
    stats = _numstat(repo.run([*args[:1], "--numstat", *_DIFF_ARGS, *args[1:], "--", *paths]).stdout)
    entries = _raw(raw.stdout)
    # A working-tree side git has not hashed (its sha printed as zeros) may be the same content
    # with a new mtime: git's own numstat leaves it out when it compared the text; anything else
    # (a binary file) is hashed from disk the way git.repo checks flagged entries (raw bytes,
    # never following a link, never opening a device) and dropped when it equals the other side.
    kept: list[dict[str, Any]] = []
    for e in entries:
        added, deleted = stats.get(e["path"], (0, 0))
        e.update(added=added, deleted=deleted, binary=added is None)
        stat_only = e["status"] == "M" and e["dst_sha"] == _NULL_SHA and e["src_mode"] == e["dst_mode"]
        # A name shown with escapes (`\\xNN`: not UTF-8) is not mapped back to bytes: it stays a change.
        if stat_only and (e["path"] not in stats or ("\\" not in e["path"] and matches_index(
                repo, e["path"].encode("utf-8"), e["src_mode"], e["src_sha"]))):
            continue
        kept.append(e)
    files = [{k: e[k] for k in ("status", "path", "old_path", "similarity", "added", "deleted", "binary")}
             for e in kept]
    return files, "rename detection was skipped" not in raw.stderr.decode(errors="replace")


class WorktreeDiffProbe(GitProbe):
    kind = "git.worktree_diff"
    summary = ("Uncommitted changes: base (default HEAD) to the working tree, staged and unstaged apart, with line "
               "counts and renames; untracked files listed. Never writes the index.")
    params_schema = repo_params(
        [], base=rev_param("The revision to compare the working tree with.") | {"default": "HEAD"},
        paths=prop("array", "Limit to these pathspecs (repository-relative).", items={"type": "string"}),
        untracked=prop("boolean", "List untracked (not ignored) files.", default=True),
        rename_limit=prop("integer", "git's diff.renameLimit for this diff (0: no limit).", minimum=0),
    )
    fact_schema = fact_object(
        "Changes from base to the working tree.",
        base=prop("string", "As given."), base_sha=SHA,
        files=prop("array", "Every change from base to the files on disk, in git's order.", items=DIFF_FILE),
        totals=prop("object", "As git.diff's totals."),
        changed_paths=PATHS | {"description": "Every path touched, on either side of a rename, sorted."},
        added_paths=PATHS, deleted_paths=PATHS, modified_paths=PATHS,
        renamed=prop("object", "Old path → new path.", additionalProperties={"type": "string"}),
        renames_complete=prop("boolean", "False when git skipped inexact rename detection (too many files)."),
        staged=_SIDE | {"description": "base → index: what `git commit` would record."},
        unstaged=_SIDE | {"description": "index → working tree: changes not staged."},
        untracked=PATHS | {"description": "Untracked, not ignored files (each file, not collapsed to folders)."},
        clean=prop("boolean", "No change from base and no untracked file."),
    )

    def collect(self, repo: GitRepo, params: Mapping[str, Any]) -> Any:
        base = params.get("base", "HEAD")
        (base_sha,) = resolve_commits(repo, [base])
        paths = list(params.get("paths", []))
        limit = [f"-l{params['rename_limit']}"] if "rename_limit" in params else []
        everything, complete = _diff(repo, ["diff-index", "-M", *limit, base_sha], paths)
        staged, _ = _diff(repo, ["diff-index", "--cached", "-M", *limit, base_sha], paths)
        unstaged, _ = _diff(repo, ["diff-files"], paths)
        # diff-files and diff-index trust the index's assume-unchanged / skip-worktree flags, which
        # a repository under audit sets itself: those entries are compared by hash instead.
        flagged = [f for f in _flagged_changes(repo, paths) if f["path"] not in {u["path"] for u in unstaged}]
        unstaged += flagged
        everything += [f for f in flagged if f["path"] not in {e["path"] for e in everything}]
        untracked: list[str] = []
        if params.get("untracked", True):
            out = repo.run(["ls-files", "-z", "--others", "--exclude-standard", "--", *paths]).stdout
            untracked = sorted(p for p in out.decode("utf-8", "backslashreplace").split("\0") if p)
        value = summarise_diff(everything)
        value.update(base=base, base_sha=base_sha, renames_complete=complete, staged=summarise_diff(staged),
                     unstaged=summarise_diff(unstaged), untracked=untracked,
                     clean=not everything and not untracked)
        return value


PROBES: list[Any] = [WorktreeDiffProbe()]
