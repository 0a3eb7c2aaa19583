"""`search.regex` / `search.literal`: find a pattern in a tree or at a revision.

Patterns are RE2 (linear time, like CEL's `matches`: a catastrophic pattern cannot stall a probe
past its timeout) and match within one line. Working-tree mode reads what is on disk: the file
list comes from `git ls-files` (tracked, plus untracked when asked), and each file is opened
beneath the root without following symbolic links; git's attributes (`binary`, `-diff`) and
index flags (assume-unchanged, skip-worktree) play no part. A revision is read from git objects
(`git ls-tree`, `git cat-file --batch`). Outside a repository every file under the root is read.

Nothing is skipped silently: symbolic links, devices, FIFOs, directories where a file was
expected, binary files and files over `max_file_bytes` are listed in the fact's `skipped`, and a
file that exists but cannot be read makes the whole fact an error (`file.unreadable`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import re2  # type: ignore[import-untyped]  # google-re2 ships no type information

from policyrun.probes.base import ProbeContext, ProbeError, ProbeResult
from policyrun.probes._kit.bounded import Skipped, display_path, read_beneath
from policyrun.probes._kit.gitclient import GitRepo, open_root, resolve_commits, rev_param
from policyrun.probes._kit.gitobjects import TreeEntry, list_tree, object_missing, read_blobs
from policyrun.probes._kit.linescan import Span, raw_spans
from policyrun.probes._kit.paths import PathFilter, as_list, re2_error, re2_options, walk_tree

MAX_TEXT = 500  # a hit keeps at most this many characters of its line (minified files)
MAX_FILE_BYTES = 8 * 1024 * 1024  # default per-file cap; a larger file is listed in `skipped`
_BINARY_SNIFF = 8000  # like git: a NUL in the first 8000 bytes makes a file binary
_LISTED_UNREADABLE = 20  # named in the error message; the count says how many more


# --- matching -----------------------------------------------------------------------------------

@dataclass
class Matcher:
    regex: Any  # RE2, compiled with (?m) and never_nl, run over the bytes of whole files
    group: int
    _spans: Callable[[bytes, int, int], list[Span]] = field(init=False)

    def __post_init__(self) -> None:
        # One call per match with every group's byte span: a pattern such as `^` pays it once per
        # line of the tree.
        self._spans = raw_spans(self.regex)

    def lines(self, data: bytes) -> Iterator[tuple[int, int, list[list[Span]]]]:
        """(line number, line start offset, each match's group spans) for every line with a match."""
        spans_at = self._spans
        pos, end = 0, len(data)
        line_no, line_start = 1, 0
        current: list[list[Span]] = []
        while pos <= end:
            spans = spans_at(data, pos, end)
            start, stop = spans[0]
            if start < 0:
                break
            newlines = data.count(b"\n", line_start, start)
            if newlines:
                if current:
                    yield line_no, line_start, current
                    current = []
                line_no += newlines
                line_start = data.rindex(b"\n", line_start, start) + 1
            current.append(spans)
            pos = stop if stop > start else _next_char(data, start)
        if current:
            yield line_no, line_start, current


def _next_char(data: bytes, pos: int) -> int:
    pos += 1
    while pos < len(data) and data[pos] & 0xC0 == 0x80:  # a UTF-8 continuation byte
        pos += 1
    return pos


def _compile(pattern: str, literal: bool, ignore_case: bool, group: int | str | None) -> Matcher:
    try:
        regex = re2.compile("(?m)" + (re2.escape(pattern) if literal else pattern),
                            re2_options(case_sensitive=not ignore_case))
    except re2.error as exc:
        raise ProbeError("search.invalid_pattern",
                         f"parameter `pattern`: {pattern!r} is not a pattern RE2 accepts ({re2_error(exc)}). "
                         "Patterns are RE2, as in CEL's matches(): no lookbehind or lookahead ((?<=, (?<!, (?=, "
                         "(?!), no backreferences; match the neighbouring character instead, e.g. "
                         "`(?:^|[^0-9.])0\\.26\\.0(?:[^0-9]|$)` for `(?<![0-9.])0\\.26\\.0(?![0-9])`") from None
    groups: int = regex.groups
    if group is None:
        return Matcher(regex, 1 if groups else 0)
    if isinstance(group, str):
        index = regex.groupindex.get(group)
        if index is None:
            raise ProbeError("search.invalid_pattern", f"pattern {pattern!r} has no group named {group!r}")
        return Matcher(regex, int(index))
    if group > groups:
        raise ProbeError("search.invalid_pattern", f"pattern {pattern!r} has {groups} group(s), not {group}")
    return Matcher(regex, group)


@dataclass
class Summary:
    max_hits: int
    hits: list[dict[str, Any]] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=dict)
    distinct: set[str] = field(default_factory=set)
    total: int = 0
    files_searched: int = 0
    skipped: list[dict[str, Any]] = field(default_factory=list)
    unreadable: list[str] = field(default_factory=list)

    def skip(self, path: str, reason: str, size: int | None = None) -> None:
        self.skipped.append({"path": path, "reason": reason, "size": size})

    def scan(self, path: str, data: bytes, matcher: Matcher) -> None:
        if b"\0" in data[:_BINARY_SNIFF]:
            self.skip(path, "binary", len(data))
            return
        self.files_searched += 1
        group = matcher.group
        for number, start, matches in matcher.lines(data):
            if len(matches) > 1:  # an empty match (`x*`) counts once per line, never once per position
                matches = [m for m in matches if m[0][1] > m[0][0]] or matches[:1]
            self.total += len(matches)
            self.counts[path] = self.counts.get(path, 0) + len(matches)
            line: bytes | None = None
            for spans in matches:
                g_start, g_end = spans[group]
                if g_start >= 0:
                    self.distinct.add(data[g_start:g_end].decode("utf-8", "replace"))
                if len(self.hits) >= self.max_hits:
                    continue
                if line is None:
                    line_end = data.find(b"\n", start)
                    line = data[start:line_end if line_end >= 0 else len(data)]
                m_start, m_end = spans[0]
                self.hits.append({
                    "path": path, "line": number,
                    "column": len(data[start:m_start].decode("utf-8", "replace")) + 1,
                    "text": line.decode("utf-8", "replace")[:MAX_TEXT],
                    "match": data[m_start:m_end].decode("utf-8", "replace"),
                    "groups": [data[a:b].decode("utf-8", "replace") if a >= 0 else None for a, b in spans[1:]]})

    def value(self) -> dict[str, Any]:
        return {"hits": self.hits, "counts": self.counts, "total": self.total, "files_matched": len(self.counts),
                "distinct": sorted(self.distinct), "truncated": self.total > len(self.hits),
                "files_searched": self.files_searched, "skipped": self.skipped}


# --- the probe ----------------------------------------------------------------------------------

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
            "files_searched": {"type": "integer", "description": "Text files read and searched."},
            "distinct": {"type": "array", "items": {"type": "string"},
                         "description": "Sorted distinct values of the captured group (of every match)."},
            "truncated": {"type": "boolean", "description": "hits holds fewer than total."},
            "skipped": {"type": "array", "description": "Files selected but not searched, and why: symlink, "
                        "special (device, FIFO, socket), directory, submodule, binary, too_large.",
                        "items": {"type": "object", "properties": {
                            "path": {"type": "string"}, "reason": {"type": "string"},
                            "size": {"type": ["integer", "null"]}}}},
        },
    }

    def __init__(self, kind: str, literal: bool) -> None:
        self.kind = kind
        self.literal = literal
        self.summary = ("Literal text" if literal else "An RE2 regular expression") + \
            " searched line by line in tracked files of a tree or a revision (any tree outside git)."
        props: dict[str, Any] = {
            "root": {"type": "string", "default": ".", "minLength": 1,
                     "description": "Directory to search; paths in results are relative to it."},
            "pattern": {"type": "string", "minLength": 1,
                        "description": "What to find (within one line); RE2 syntax unless literal."},
            "rev": rev_param("Search this revision instead of the working tree (read from git objects)."),
            "include": {"type": ["string", "array"], "items": {"type": "string"},
                        "description": "Globs to search (`*.py`, `src/**/*.toml`); default: everything."},
            "exclude": {"type": ["string", "array"], "items": {"type": "string"}, "description": "Globs to skip."},
            "untracked": {"type": "boolean", "default": False,
                          "description": "Also search untracked (not ignored) files."},
            "ignore_case": {"type": "boolean", "default": False},
            "max_hits": {"type": "integer", "minimum": 0, "default": 1000,
                         "description": "Keep at most this many hits; counts, total and distinct cover all."},
            "max_file_bytes": {"type": "integer", "minimum": 1, "default": MAX_FILE_BYTES,
                               "description": "Larger files are not searched; they are listed in `skipped`."},
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
        deadline = time.monotonic() + ctx.timeout_s
        literal = self.literal or bool(params.get("literal"))
        matcher = _compile(params["pattern"], literal, bool(params.get("ignore_case")), params.get("group"))
        rev = params.get("rev")
        if rev and params.get("untracked"):
            raise ProbeError("params.invalid", "`untracked` applies to the working tree; drop it or `rev`")
        root, repo = open_root(params.get("root", "."), rev, ctx)
        keep = PathFilter(as_list(params.get("include")), as_list(params.get("exclude")))
        summary = Summary(params.get("max_hits", 1000))
        limit = params.get("max_file_bytes", MAX_FILE_BYTES)
        rev_sha = None
        if repo is not None and rev:
            (rev_sha,) = resolve_commits(repo, [rev])
            _search_revision(repo, root, rev, rev_sha, keep, matcher, summary, limit, deadline)
        else:
            if repo is None:
                listing: list[tuple[bytes, str | None]] = walk_tree(root)
            else:
                listing = [(p, None) for p in _tracked(repo, root, bool(params.get("untracked")))]
            _search_disk(root, listing, keep, matcher, summary, limit, deadline, ctx.timeout_s)
        if summary.unreadable:
            shown = "; ".join(summary.unreadable[:_LISTED_UNREADABLE])
            more = len(summary.unreadable) - _LISTED_UNREADABLE
            raise ProbeError("file.unreadable",
                             f"cannot read {len(summary.unreadable)} file(s) under {root}, so the search would be "
                             f"incomplete: {shown}{f'; and {more} more' if more > 0 else ''}. Make them readable or "
                             "leave them out with `exclude`", commands=repo.commands if repo else [])
        value = summary.value()
        value.update(root=str(root), rev=rev, rev_sha=rev_sha, pattern=params["pattern"])
        commands = repo.commands if repo is not None else [f"python walk of {root}"]
        return ProbeResult(value=value, commands=commands, sources=[str(root)],
                           repo_path=str(repo.root) if repo else None, repo_head=repo.head() if repo else None)


def _tracked(repo: GitRepo, root: Path, untracked: bool) -> list[bytes]:
    args = ["ls-files", "-z", "--cached"] + (["--others", "--exclude-standard"] if untracked else [])
    out = repo.run(args, cwd=root).stdout
    return sorted(set(p for p in out.split(b"\0") if p))  # unmerged paths are listed once per stage


def _check_deadline(deadline: float, timeout_s: float, root: Path) -> None:
    if time.monotonic() > deadline:
        raise ProbeError("probe.timeout", f"searching {root} took longer than the probe's {timeout_s:g}s; "
                                          "raise the probe's timeout_s or narrow `include`")


def _search_disk(root: Path, listing: list[tuple[bytes, str | None]], keep: PathFilter, matcher: Matcher,
                 summary: Summary, limit: int, deadline: float, timeout_s: float) -> None:
    root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for i in keep.kept([raw for raw, _ in listing]):
            raw, why = listing[i]
            path = display_path(raw)
            _check_deadline(deadline, timeout_s, root)
            if why == "unreadable":
                summary.unreadable.append(f"{path}/ (directory cannot be listed)")
                continue
            if why is not None:
                summary.skip(path, why)
                continue
            try:
                got = read_beneath(root_fd, raw, limit)
            except OSError as exc:
                summary.unreadable.append(f"{path} ({exc.strerror or exc})")
                continue
            if isinstance(got, Skipped):
                if got.reason != "missing":  # deleted in the working tree: nothing on disk to search
                    summary.skip(path, got.reason, got.size)
                continue
            summary.scan(path, got, matcher)
    finally:
        os.close(root_fd)


def _search_revision(repo: GitRepo, root: Path, rev: str, rev_sha: str, keep: PathFilter, matcher: Matcher,
                     summary: Summary, limit: int, deadline: float) -> None:
    # Listed in `root`: that subtree, with paths relative to it, and blob sizes, so a blob over
    # the limit is never read (nor is a blob the object store lacks, unless it is searched).
    entries = list_tree(repo, rev_sha, cwd=root)
    wanted: list[TreeEntry] = []
    for i in keep.kept([e.path for e in entries]):
        entry = entries[i]
        path = display_path(entry.path)
        if entry.kind == "blob" and not entry.regular:
            summary.skip(path, "symlink")
        elif entry.kind != "blob":
            summary.skip(path, "submodule")
        elif entry.size is None:
            raise object_missing(repo, path, rev, rev_sha, entry.oid)
        elif entry.size > limit:
            summary.skip(path, "too_large", entry.size)
        else:
            wanted.append(entry)
    blobs = read_blobs(repo, wanted)
    for entry in wanted:
        if time.monotonic() > deadline:
            raise repo.timeout(repo.commands[-1])
        if entry.oid not in blobs:
            raise object_missing(repo, display_path(entry.path), rev, rev_sha, entry.oid)
        summary.scan(display_path(entry.path), blobs[entry.oid], matcher)


PROBES: list[Any] = [SearchProbe("search.regex", literal=False), SearchProbe("search.literal", literal=True)]
