"""Which files of a tree a probe reads: `include`/`exclude` globs as one RE2 scan, and the regular
files under a root that is not a repository.

The search, tree-file and Python-source probes all take `include` and `exclude`, with the rules
of .gitignore (policyrun/globs.py, the same as CEL's glob_match); one filter serves them all.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import re2  # type: ignore[import-untyped]  # google-re2 ships no type information

from policyrun.globs import GlobError, gitignore_source
from policyrun.probes._kit.bounded import display_path
from policyrun.probes._kit.linescan import LineScan
from policyrun.probes.base import ProbeError


def re2_options(*, case_sensitive: bool = True) -> Any:
    options = re2.Options()
    options.log_errors = False  # RE2 would print every bad pattern to stderr; the error says it
    options.never_nl = True  # a match never crosses a line break: lines are the unit
    options.case_sensitive = case_sensitive
    return options


def re2_error(exc: Exception) -> str:
    why = exc.args[0] if exc.args else exc
    return why.decode("utf-8", "replace") if isinstance(why, bytes) else str(why)


def glob_regex(glob: str) -> Any:
    """A glob as an RE2 regex over root-relative paths, with .gitignore's rules (policyrun/globs.py,
    the same as CEL's glob_match): `*` and `?` stay within a path segment, `**` crosses segments, a
    glob without `/` matches at any depth, and matching a directory covers everything below it.
    """
    options = re2.Options()
    options.log_errors = False
    try:
        return re2.compile(gitignore_source(glob), options)
    except (GlobError, re2.error) as exc:
        why = f"pattern '{glob}' {exc}" if isinstance(exc, GlobError) else re2_error(exc)
        raise ProbeError("params.invalid", f"glob {glob!r} is not valid: {why}") from None


def _any_of(regexes: list[Any]) -> LineScan | None:
    """One whole-path scan for a list of glob regexes (compiled alike), or None for no globs."""
    if not regexes:
        return None
    if len(regexes) == 1:
        return LineScan(regexes[0], anchored=True)
    either = "|".join(f"(?:{r.pattern})" for r in regexes)
    return LineScan(re2.compile(either, regexes[0].options), anchored=True)


class PathFilter:
    """Which paths `include` globs keep and `exclude` globs drop (no include: every path)."""

    def __init__(self, include: Iterable[str], exclude: Iterable[str]) -> None:
        self._include = _any_of([glob_regex(g) for g in include])
        self._exclude = _any_of([glob_regex(g) for g in exclude])

    def kept(self, paths: Sequence[str | bytes]) -> list[int]:
        """Indices of the paths kept, ascending, from one scan per glob list (see linescan: one RE2
        call per path is slow under threads). A path is matched as shown: RE2 takes UTF-8, so an
        undecodable file name is matched in its `\\xNN` form."""
        shown = [display_path(p) for p in paths]
        index = list(range(len(shown)))
        if self._include is not None:
            index = self._include.matching(shown)
        if self._exclude is not None and index:
            dropped = set(self._exclude.matching([shown[i] for i in index]))
            index = [i for k, i in enumerate(index) if k not in dropped]
        return index

    def select(self, paths: Sequence[str]) -> list[str]:
        """The paths kept, in their order."""
        return [paths[i] for i in self.kept(paths)]


def as_list(value: Any) -> list[str]:
    return [value] if isinstance(value, str) else list(value or [])


def walk_files(root: Path, keep: PathFilter) -> list[tuple[str, Path]]:
    """Regular files under `root` (outside any repository), skipping `.git`, in git's order.

    Symbolic links (to files or directories) are not followed and not listed; nor are devices,
    FIFOs or sockets.
    """
    files = [rel for rel, why in walk_tree(root) if why is None]
    return [(display_path(files[i]), root / os.fsdecode(files[i])) for i in keep.kept(files)]


def walk_tree(root: Path) -> list[tuple[bytes, str | None]]:
    """Every entry under `root` with why it is not a file to read (None for a regular file), sorted."""
    found: list[tuple[bytes, str | None]] = []
    pending = [b""]
    base = os.fsencode(root)
    while pending:
        rel_dir = pending.pop()
        try:
            entries = list(os.scandir(os.path.join(base, rel_dir) if rel_dir else base))
        except OSError:
            found.append((rel_dir, "unreadable"))
            continue
        for entry in entries:
            name = os.fsencode(entry.name)
            rel = rel_dir + b"/" + name if rel_dir else name
            if entry.is_symlink():
                found.append((rel, "symlink"))
            elif entry.is_dir(follow_symlinks=False):
                if name != b".git":
                    pending.append(rel)
            elif entry.is_file(follow_symlinks=False):
                found.append((rel, None))
            else:
                found.append((rel, "special"))
    return sorted(found)
