"""`search.regex` / `search.literal`: find a pattern in a tree or at a revision.

Patterns use Python `re` syntax and match within one line. Inside a git repository `git grep`
(PCRE, `-P`) selects the candidate lines fast, and Python's `re` then re-runs on those lines
alone to give columns and groups, so the results follow Python semantics whatever git's regex
dialect. `re.ASCII` keeps `\\d`, `\\w`, `\\s` as narrow as PCRE's, so git never drops a line
Python would match. When git cannot compile the pattern, or the root is not in a repository,
the files are read and scanned in Python instead.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from policyrun.probes.base import ProbeContext, ProbeError, ProbeResult
from policyrun.probes.git import GitRepo, open_repo, resolve_commits, rev_param

MAX_TEXT = 500  # a hit keeps at most this many characters of its line (minified files)
_BINARY_SNIFF = 8000  # like git: a NUL in the first 8000 bytes makes a file binary

Line = tuple[str, int, str]  # path relative to root, 1-based line number, text


def glob_regex(glob: str) -> re.Pattern[str]:
    """A git-style glob as a regex over root-relative paths.

    `*` and `?` stay within a path segment, `**` crosses segments, a glob without `/` matches at
    any depth (like .gitignore), and matching a directory covers everything below it.
    """
    g = glob[1:] if glob.startswith("/") else glob if "/" in glob else f"**/{glob}"
    out: list[str] = []
    i = 0
    while i < len(g):
        if g.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif g.startswith("**", i):
            out.append(".*")
            i += 2
        elif g[i] == "*":
            out.append("[^/]*")
            i += 1
        elif g[i] == "?":
            out.append("[^/]")
            i += 1
        elif g[i] == "[" and (end := g.find("]", i + 2)) > 0:
            body = g[i + 1:end]
            out.append("[" + ("^" + body[1:] if body.startswith("!") else body).replace("\\", "\\\\") + "]")
            i = end + 1
        else:
            out.append(re.escape(g[i]))
            i += 1
    return re.compile("".join(out).rstrip("/") + "(?:/.*)?")


def glob_pathspec(glob: str, *, exclude: bool = False) -> str:
    """The same glob as a git pathspec (`:(glob)` magic)."""
    g = glob[1:] if glob.startswith("/") else glob if "/" in glob else f"**/{glob}"
    return f":({'exclude,' if exclude else ''}glob){g}"


class PathFilter:
    def __init__(self, include: Iterable[str], exclude: Iterable[str]) -> None:
        self.include = [glob_regex(g) for g in include]
        self.exclude = [glob_regex(g) for g in exclude]

    def __call__(self, path: str) -> bool:
        if self.include and not any(r.fullmatch(path) for r in self.include):
            return False
        return not any(r.fullmatch(path) for r in self.exclude)


def _as_list(value: Any) -> list[str]:
    return [value] if isinstance(value, str) else list(value or [])


def _text_lines(path: str, data: bytes) -> Iterator[Line]:
    if b"\0" in data[:_BINARY_SNIFF]:
        return
    for number, text in enumerate(data.decode("utf-8", "replace").split("\n"), start=1):
        yield path, number, text


def walk_files(root: Path, keep: PathFilter) -> list[tuple[str, Path]]:
    """Files under `root` (outside any repository), skipping `.git`, in git's order (by full path)."""
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for name in filenames:
            full = Path(dirpath) / name
            rel = full.relative_to(root).as_posix()
            if keep(rel):
                found.append((rel, full))
    return sorted(found)


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except OSError:  # vanished or unreadable: git grep would skip it too
        return None


class SearchProbe:
    summary = ""
    fact_schema: Mapping[str, Any] = {
        "type": "object",
        "properties": {
            "root": {"type": "string"}, "rev": {"type": ["string", "null"]},
            "rev_sha": {"type": ["string", "null"]}, "pattern": {"type": "string"},
            "hits": {"type": "array", "description": f"At most max_hits; text cut at {MAX_TEXT} characters.",
                     "items": {"type": "object", "properties": {
                         "path": {"type": "string"}, "line": {"type": "integer"}, "column": {"type": "integer"},
                         "text": {"type": "string"}, "match": {"type": "string"},
                         "groups": {"type": "array", "items": {"type": ["string", "null"]}}}}},
            "counts": {"type": "object", "description": "Matches per file (all of them, not only max_hits).",
                       "additionalProperties": {"type": "integer"}},
            "total": {"type": "integer", "description": "All matches."},
            "files_matched": {"type": "integer"},
            "distinct": {"type": "array", "items": {"type": "string"},
                         "description": "Sorted distinct values of the captured group (of every match)."},
            "truncated": {"type": "boolean", "description": "hits holds fewer than total."},
        },
    }

    def __init__(self, kind: str, literal: bool) -> None:
        self.kind = kind
        self.literal = literal
        self.summary = ("Literal text" if literal else "A Python regular expression") + \
            " searched line by line in tracked files of a tree or a revision (any tree outside git)."
        props: dict[str, Any] = {
            "root": {"type": "string", "default": ".", "minLength": 1,
                     "description": "Directory to search; paths in results are relative to it."},
            "pattern": {"type": "string", "minLength": 1, "description": "What to find (within one line)."},
            "rev": rev_param("Search this revision instead of the working tree (read from git objects)."),
            "include": {"type": ["string", "array"], "items": {"type": "string"},
                        "description": "Globs to search (`*.py`, `src/**/*.toml`); default: everything."},
            "exclude": {"type": ["string", "array"], "items": {"type": "string"}, "description": "Globs to skip."},
            "untracked": {"type": "boolean", "default": False,
                          "description": "Also search untracked (not ignored) files."},
            "ignore_case": {"type": "boolean", "default": False},
            "max_hits": {"type": "integer", "minimum": 0, "default": 1000,
                         "description": "Keep at most this many hits; counts, total and distinct cover all."},
            "group": {"type": ["integer", "string"], "description":
                      "Group whose values make `distinct` (number or name); default 1, or 0 without groups."},
        }
        if not literal:
            props["literal"] = {"type": "boolean", "default": False, "description": "Treat pattern as text."}
        self.params_schema: Mapping[str, Any] = {"type": "object", "properties": props, "required": ["pattern"],
                                                 "additionalProperties": False}

    def side_effects(self, params: Mapping[str, Any]) -> frozenset[str]:
        return frozenset()

    def run(self, params: Mapping[str, Any], ctx: ProbeContext) -> ProbeResult:
        literal = self.literal or bool(params.get("literal"))
        regex, group = _compile(params["pattern"], literal, bool(params.get("ignore_case")), params.get("group"))
        root = ctx.resolve(params.get("root", ".")).resolve()
        if not root.is_dir():
            raise ProbeError("file.not_found", f"search root {root} is not a directory; check the root parameter")
        rev = params.get("rev")
        if rev and params.get("untracked"):
            raise ProbeError("params.invalid", "`untracked` applies to the working tree; drop it or `rev`")
        include, exclude = _as_list(params.get("include")), _as_list(params.get("exclude"))
        try:
            repo: GitRepo | None = open_repo(str(root), ctx)
        except ProbeError as exc:
            if exc.code != "git.not_a_repository" or rev:
                raise
            repo = None
        rev_sha = None
        if repo is None:
            keep = PathFilter(include, exclude)
            lines: Iterable[Line] = (line for rel, full in walk_files(root, keep)
                                     if (data := _read(full)) is not None for line in _text_lines(rel, data))
            commands = [f"python walk of {root}"]
        else:
            if rev:
                (rev_sha,) = resolve_commits(repo, [rev])
            lines = _git_lines(repo, root, params, literal, rev_sha, include, exclude)
            commands = repo.commands
        value = _summarise(lines, regex, group, params.get("max_hits", 1000))
        value.update(root=str(root), rev=rev, rev_sha=rev_sha, pattern=params["pattern"])
        return ProbeResult(value=value, commands=commands, sources=[str(root)],
                           repo_path=str(repo.root) if repo else None, repo_head=repo.head() if repo else None)


def _compile(pattern: str, literal: bool, ignore_case: bool,
             group: int | str | None) -> tuple[re.Pattern[str], int | str]:
    flags = re.ASCII | (re.IGNORECASE if ignore_case else 0)
    try:
        regex = re.compile(re.escape(pattern) if literal else pattern, flags)
    except re.error as exc:
        raise ProbeError("search.invalid_pattern", f"pattern {pattern!r} is not a valid Python regular "
                                                   f"expression: {exc}") from None
    if group is None:
        return regex, 1 if regex.groups else 0
    if isinstance(group, str) and group not in regex.groupindex:
        raise ProbeError("search.invalid_pattern", f"pattern {pattern!r} has no group named {group!r}")
    if isinstance(group, int) and group > regex.groups:
        raise ProbeError("search.invalid_pattern", f"pattern {pattern!r} has {regex.groups} group(s), not {group}")
    return regex, group


def _git_lines(repo: GitRepo, root: Path, params: Mapping[str, Any], literal: bool, rev_sha: str | None,
               include: list[str], exclude: list[str]) -> Iterator[Line]:
    args = ["grep", "--no-color", "-I", "-n", "--null", "-F" if literal else "-P"]
    if params.get("ignore_case"):
        args.append("-i")
    if params.get("untracked"):
        args.append("--untracked")
    args += ["-e", params["pattern"], *([rev_sha] if rev_sha else []), "--"]
    args += [glob_pathspec(g) for g in include] + [glob_pathspec(g, exclude=True) for g in exclude]
    proc = repo.run(args, cwd=root, ok=(0, 1, 128))
    if proc.returncode == 128:
        stderr = proc.stderr.decode(errors="replace")
        # "command line, '<pattern>': <why>" is git's report of a pattern PCRE cannot compile.
        if not re.search(r"command line, '|pcre|perl-compatible", stderr, re.IGNORECASE):
            raise repo.error(stderr, repo.commands[-1])
        # git cannot compile this pattern (or lacks PCRE): read the same files and scan in Python.
        yield from _scan_git_files(repo, root, params, rev_sha, PathFilter(include, exclude))
        return
    yield from _grep_records(proc.stdout, f"{rev_sha}:" if rev_sha else "")


def _grep_records(out: bytes, prefix: str) -> Iterator[Line]:
    """Parse `git grep -n --null` output: `path NUL line NUL text LF` per matching line."""
    text = out.decode("utf-8", "replace")  # NUL and LF survive; only undecodable bytes become U+FFFD
    cut, pos = len(prefix), 0
    for record in text.split("\n"):
        parts = record.split("\0", 2)
        if len(parts) == 3:
            yield parts[0][cut:], int(parts[1]), parts[2]
        elif record:  # a path with a newline in it: parse the rest the slow, exact way
            yield from _grep_records_exact(text[pos:].encode("utf-8"), prefix)
            return
        pos += len(record) + 1


def _grep_records_exact(out: bytes, prefix: str) -> Iterator[Line]:
    pos, end = 0, len(out)
    while pos < end:
        a = out.index(b"\0", pos)
        b = out.index(b"\0", a + 1)
        e = out.find(b"\n", b + 1)
        e = end if e < 0 else e
        path = out[pos:a].decode("utf-8", "replace")[len(prefix):]
        yield path, int(out[a + 1:b]), out[b + 1:e].decode("utf-8", "replace")
        pos = e + 1


def _scan_git_files(repo: GitRepo, root: Path, params: Mapping[str, Any], rev_sha: str | None,
                    keep: PathFilter) -> Iterator[Line]:
    if rev_sha:
        listing = repo.run(["ls-tree", "-r", "-z", "--name-only", rev_sha], cwd=root).stdout
        paths = [p for p in listing.decode("utf-8", "surrogateescape").split("\0") if p and keep(p)]
        prefix = root.relative_to(repo.root).as_posix()
        prefix = "" if prefix == "." else prefix + "/"
        batch = "".join(f"{rev_sha}:{prefix}{p}\n" for p in paths).encode("utf-8", "surrogateescape")
        out = repo.run(["cat-file", "--batch"], stdin=batch).stdout
        pos = 0
        for path in paths:
            header_end = out.index(b"\n", pos)
            size = int(out[pos:header_end].split()[2])
            yield from _text_lines(path, out[header_end + 1:header_end + 1 + size])
            pos = header_end + 1 + size + 1
        return
    args = ["ls-files", "-z", "--cached"] + (["--others", "--exclude-standard"] if params.get("untracked") else [])
    names = repo.run(args, cwd=root).stdout.decode("utf-8", "surrogateescape")
    for path in sorted(set(p for p in names.split("\0") if p and keep(p))):
        data = _read(root / path)
        if data is not None:
            yield from _text_lines(path, data)


def _summarise(lines: Iterable[Line], regex: re.Pattern[str], group: int | str, max_hits: int) -> dict[str, Any]:
    hits: list[dict[str, Any]] = []
    counts: dict[str, int] = {}
    distinct: set[str] = set()
    total = 0
    finditer = regex.finditer
    for path, number, text in lines:
        matches = list(finditer(text))
        if len(matches) > 1:  # an empty match (`x*`) counts once per line, never once per position
            matches = [m for m in matches if m.end() > m.start()] or matches[:1]
        elif not matches:
            continue
        total += len(matches)
        counts[path] = counts.get(path, 0) + len(matches)
        for m in matches:
            captured = m.group(group)
            if captured is not None:
                distinct.add(captured)
            if len(hits) < max_hits:
                hits.append({"path": path, "line": number, "column": m.start() + 1, "text": text[:MAX_TEXT],
                             "match": m.group(0), "groups": list(m.groups())})
    return {"hits": hits, "counts": counts, "total": total, "files_matched": len(counts),
            "distinct": sorted(distinct), "truncated": total > len(hits)}


PROBES: list[Any] = [SearchProbe("search.regex", literal=False), SearchProbe("search.literal", literal=True)]
