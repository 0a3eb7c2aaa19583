"""Text files of a tree, read from the working tree or from a revision's git objects.

Probes that parse whole files (patch markers, Markdown claims) share this: inside a repository
the file list is git's (tracked files, optionally untracked ones; at a revision `git ls-tree`),
and a revision's contents come from one `git cat-file --batch` process, so nothing is checked
out and the repository is never written. Outside a repository every file under the root is read
(`.git` directories skipped). Symbolic links, submodules, devices and FIFOs, binary files (a NUL
in the first 8000 bytes, as git decides) and files over 8 MiB are not read, and each is listed in
`skipped` with the reason — never silently. Working-tree files are opened beneath the root without
following links (policyrun.probes._kit.bounded), and a file that exists but cannot be read makes the
fact an error (`file.unreadable`): a probe that could not read a file must not report it clean.
Paths are relative to the root, `/`-separated, sorted.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from policyrun.probes.base import ProbeContext, ProbeError
from policyrun.probes._kit.bounded import Skipped, display_path, read_beneath
from policyrun.probes._kit.gitclient import GitRepo, open_root, resolve_commits, rev_param
from policyrun.probes._kit.gitobjects import TreeEntry, list_tree, object_missing, read_blobs
from policyrun.probes._kit.paths import PathFilter, walk_tree

_BINARY_SNIFF = 8000
MAX_FILE_BYTES = 8 * 1024 * 1024
# For fact schemas: what was not read, and why.
SKIPPED_SCHEMA: dict[str, Any] = {
    "type": "array", "description": "Files selected but not read, and why: symlink, special (device, FIFO, "
                                    "socket), directory, submodule, binary, too_large, missing.",
    "items": {"type": "object", "properties": {"path": {"type": "string"}, "reason": {"type": "string"},
                                               "size": {"type": ["integer", "null"]}}}}

# The parameters every probe built on this module accepts, for its params_schema.
TREE_PARAMS: dict[str, Any] = {
    "root": {"type": "string", "default": ".", "minLength": 1,
             "description": "Directory to read; paths in the fact are relative to it."},
    "rev": rev_param("Read this revision's git objects instead of the working tree."),
    "include": {"type": ["string", "array"], "items": {"type": "string"},
                "description": "Globs of files to read (git-style: `*.py` at any depth, `docs/**/*.md`, "
                               "`/README*.md` at the root only)."},
    "exclude": {"type": ["string", "array"], "items": {"type": "string"}, "description": "Globs to skip."},
    "untracked": {"type": "boolean", "default": False,
                  "description": "In a working tree, also read untracked (not ignored) files."},
}


@dataclass
class TreeFiles:
    root: Path
    rev: str | None
    rev_sha: str | None
    files: list[tuple[str, str]] = field(default_factory=list)  # (path relative to root, text)
    skipped: list[dict[str, Any]] = field(default_factory=list)  # {path, reason, size}
    commands: list[str] = field(default_factory=list)
    repo_path: str | None = None
    repo_head: str | None = None


def as_list(value: Any) -> list[str]:
    return [value] if isinstance(value, str) else list(value or [])


def _text(data: bytes) -> str | None:
    if b"\0" in data[:_BINARY_SNIFF]:
        return None
    return data.decode("utf-8", "replace")


def read_tree(params: Mapping[str, Any], ctx: ProbeContext, default_include: list[str]) -> TreeFiles:
    """The text files under `params.root` that `include`/`exclude` keep, at `params.rev` if given."""
    rev = params.get("rev")
    if rev and params.get("untracked"):
        raise ProbeError("params.invalid", "`untracked` applies to the working tree; drop it or `rev`")
    root, repo = open_root(params.get("root", "."), rev, ctx)
    include = as_list(params["include"]) if "include" in params else default_include
    keep = PathFilter(include, as_list(params.get("exclude")))
    out = TreeFiles(root=root, rev=rev, rev_sha=None)
    if repo is None:
        readable = []
        entries = walk_tree(root)
        for i in keep.kept([raw for raw, _ in entries]):
            raw, why = entries[i]
            rel = display_path(raw)
            if why == "unreadable":
                raise ProbeError("file.unreadable", f"cannot list {rel or root}: permission denied; fix its "
                                 "permissions (an unread file is never reported clean)")
            if why is None:
                readable.append(os.fsdecode(raw))
            elif why != "directory":
                out.skipped.append({"path": rel, "reason": why, "size": None})
        _read_all(root, readable, out)
        out.commands = [f"python walk of {root}"]
        return out
    if rev:
        (out.rev_sha,) = resolve_commits(repo, [rev])
        out.files = _at_revision(repo, root, out.rev_sha, rev, keep, out)
    else:
        _working_tree(repo, root, keep, bool(params.get("untracked")), out)
    out.commands, out.repo_path, out.repo_head = repo.commands, str(repo.root), repo.head()
    return out


def _read_all(root: Path, rels: list[str], out: TreeFiles) -> None:
    """Read each file beneath the root (no link followed, no device opened), noting what is not read."""
    root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for rel in sorted(set(rels)):
            try:
                got = read_beneath(root_fd, os.fsencode(rel), MAX_FILE_BYTES)
            except OSError as exc:
                raise ProbeError("file.unreadable", f"cannot read {display_path(rel)} under {root}: "
                                 f"{exc.strerror}; fix its permissions (an unread file is never reported "
                                 "clean)") from None
            if isinstance(got, Skipped):
                if got.reason != "missing":  # listed by git but deleted in the working tree: not there
                    out.skipped.append({"path": display_path(rel), "reason": got.reason, "size": got.size})
                continue
            text = _text(got)
            if text is None:
                out.skipped.append({"path": display_path(rel), "reason": "binary", "size": len(got)})
                continue
            out.files.append((rel, text))
    finally:
        os.close(root_fd)


def _working_tree(repo: GitRepo, root: Path, keep: PathFilter, untracked: bool, out: TreeFiles) -> None:
    args = ["ls-files", "-z", "--cached"] + (["--others", "--exclude-standard"] if untracked else [])
    names = repo.run(args, cwd=root).stdout.decode("utf-8", "surrogateescape")
    _read_all(root, keep.select([p for p in names.split("\0") if p]), out)


def _at_revision(repo: GitRepo, root: Path, sha: str, rev: str, keep: PathFilter,
                 out_tree: TreeFiles) -> list[tuple[str, str]]:
    # Listed in `root`: that subtree, with paths relative to it.
    entries = list_tree(repo, sha, cwd=root)
    wanted: list[TreeEntry] = []
    for i in keep.kept([e.path for e in entries]):
        entry = entries[i]
        if entry.regular:
            wanted.append(entry)
        else:  # symlinks and submodules are not sources
            out_tree.skipped.append({"path": entry.path, "reason": "symlink" if entry.kind == "blob" else "submodule",
                                     "size": None})
    blobs = read_blobs(repo, [e for e in wanted if (e.size or 0) <= MAX_FILE_BYTES])
    files = []
    for entry in sorted(wanted, key=lambda e: e.path):
        if entry.size is None or (entry.size <= MAX_FILE_BYTES and entry.oid not in blobs):
            raise object_missing(repo, entry.path, rev, sha, entry.oid)
        text = _text(blobs[entry.oid]) if entry.size <= MAX_FILE_BYTES else None
        if text is None:
            out_tree.skipped.append({"path": entry.path, "reason": "binary" if entry.size <= MAX_FILE_BYTES
                                     else "too_large", "size": entry.size})
        else:
            files.append((entry.path, text))
    return files


@dataclass
class RevFile:
    """One file read from a revision's git objects, with what provenance needs."""

    data: bytes
    rel: str  # path from the repository's top level
    rev: str
    sha: str  # the commit
    repo: GitRepo

    @property
    def source(self) -> str:
        return f"{self.repo.root / self.rel}@{self.sha}"


def read_file_at(path_param: str, rev: str, ctx: ProbeContext, *, limit: int, param: str = "path") -> RevFile:
    """The file named by `path_param` (resolved like a working-tree path) as it is at `rev`, from
    git objects: nothing is checked out, the index and working tree are not touched. The file need
    not exist in the working tree (deleted since); the repository is the one holding its nearest
    existing folder. Symbolic links, submodules and folders are refused, as `file.read` refuses
    them on disk."""
    from policyrun.probes._kit.gitclient import open_repo

    wanted = Path(os.path.abspath(ctx.resolve(path_param)))
    folder, rest = wanted.parent, [wanted.name]
    while not folder.is_dir() and folder != folder.parent:
        folder, rest = folder.parent, [folder.name, *rest]
    repo = open_repo(str(folder), ctx)
    try:
        rel = (folder.resolve() / Path(*rest)).relative_to(repo.root).as_posix()
    except ValueError:
        raise ProbeError("params.invalid", f"{param} {path_param} is not inside the repository at {repo.root}; "
                                           "`rev` reads files of the repository that holds them") from None
    (sha,) = resolve_commits(repo, [rev])
    listing = repo.run(["ls-tree", "-l", "-z", "--full-tree", sha, "--", rel]).stdout.decode("utf-8", "surrogateescape")
    records = [r.partition("\t") for r in listing.split("\0") if r]
    entry = next((meta.split() for meta, _, name in records if name == rel), None)
    shown = f"{path_param} at {rev} ({sha[:12]})"
    if entry is None:
        raise ProbeError("file.not_found", f"{shown} does not exist; check the {param} parameter and the revision",
                         commands=repo.commands)
    mode, kind, blob, size = entry
    if kind != "blob" or mode == "120000":
        what = {"tree": "a folder", "commit": "a submodule"}.get(kind, "a symbolic link")
        raise ProbeError("file.unreadable", f"{shown} is {what}, not a regular file; policyrun reads only regular "
                                            "files", commands=repo.commands)
    if int(size) > limit:
        raise ProbeError("file.too_large", f"{shown} is {size} bytes, over the {limit}-byte limit for files "
                                           "policyrun parses", commands=repo.commands)
    data = repo.run(["cat-file", "blob", blob]).stdout[:int(size)]
    return RevFile(data, rel, rev, sha, repo)
