"""Text files of a tree, read from the working tree or from a revision's git objects.

Probes that parse whole files (patch markers, Markdown claims) share this: inside a repository
the file list is git's (tracked files, optionally untracked ones; at a revision `git ls-tree`),
and a revision's contents come from one `git cat-file --batch` process, so nothing is checked
out and the repository is never written. Outside a repository every file under the root is read
(`.git` directories skipped). Symbolic links, submodules and binary files (a NUL in the first
8000 bytes, as git decides) are left out. Paths are relative to the root, `/`-separated, sorted.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from policyrun.probes.base import ProbeContext, ProbeError
from policyrun.probes.git import GitRepo, open_repo, resolve_commits, rev_param
from policyrun.probes.search import PathFilter, walk_files

_BINARY_SNIFF = 8000

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
    root = ctx.resolve(params.get("root", ".")).resolve()
    if not root.is_dir():
        raise ProbeError("file.not_found", f"root {root} is not a directory; check the root parameter")
    rev = params.get("rev")
    if rev and params.get("untracked"):
        raise ProbeError("params.invalid", "`untracked` applies to the working tree; drop it or `rev`")
    include = as_list(params["include"]) if "include" in params else default_include
    keep = PathFilter(include, as_list(params.get("exclude")))
    try:
        repo: GitRepo | None = open_repo(str(root), ctx)
    except ProbeError as exc:
        if exc.code != "git.not_a_repository" or rev:
            raise
        repo = None
    out = TreeFiles(root=root, rev=rev, rev_sha=None)
    if repo is None:
        for rel, full in walk_files(root, keep):
            if not full.is_symlink() and (data := _read(full)) is not None and (text := _text(data)) is not None:
                out.files.append((rel, text))
        out.commands = [f"python walk of {root}"]
        return out
    if rev:
        (out.rev_sha,) = resolve_commits(repo, [rev])
        out.files = _at_revision(repo, root, out.rev_sha, keep)
    else:
        out.files = _working_tree(repo, root, keep, bool(params.get("untracked")))
    out.commands, out.repo_path, out.repo_head = repo.commands, str(repo.root), repo.head()
    return out


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:  # vanished, unreadable, or a submodule's directory
        return None


def _working_tree(repo: GitRepo, root: Path, keep: PathFilter, untracked: bool) -> list[tuple[str, str]]:
    args = ["ls-files", "-z", "--cached"] + (["--others", "--exclude-standard"] if untracked else [])
    names = repo.run(args, cwd=root).stdout.decode("utf-8", "surrogateescape")
    files = []
    for rel in sorted({p for p in names.split("\0") if p and keep(p)}):
        full = root / rel
        if not full.is_symlink() and (data := _read(full)) is not None and (text := _text(data)) is not None:
            files.append((rel, text))
    return files


def _at_revision(repo: GitRepo, root: Path, sha: str, keep: PathFilter) -> list[tuple[str, str]]:
    # Run in `root`: ls-tree then lists that subtree, with paths relative to it.
    listing = repo.run(["ls-tree", "-r", "-z", sha], cwd=root).stdout.decode("utf-8", "surrogateescape")
    wanted: list[tuple[str, str]] = []  # (path, blob sha)
    for record in listing.split("\0"):
        if not record:
            continue
        meta, _, path = record.partition("\t")
        mode, kind, blob = meta.split()
        if kind == "blob" and mode != "120000" and keep(path):  # no symlinks, no submodules
            wanted.append((path, blob))
    if not wanted:
        return []
    out = repo.run(["cat-file", "--batch"], stdin="".join(f"{blob}\n" for _, blob in wanted).encode()).stdout
    by_blob: dict[str, str | None] = {}
    pos = 0
    for _, blob in wanted:
        header_end = out.index(b"\n", pos)
        size = int(out[pos:header_end].split()[2])
        by_blob[blob] = _text(out[header_end + 1:header_end + 1 + size])
        pos = header_end + 1 + size + 1
    return [(path, text) for path, blob in sorted(wanted) if (text := by_blob[blob]) is not None]
