"""`path`: whether paths exist and what they are (type, size, mtime, mode, access, symlink target),
optionally listing a directory by globs.

It uses lstat/stat and readlink only: no file or device is opened. With `root`, every path must lie
inside it and a symbolic link leading out of it is reported, never followed. A module of its own:
it shares nothing with `command` or `env` beyond being a kind for policy authors.
"""

from __future__ import annotations

import os
import stat
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime, timezone
from typing import Any

from policyrun.globs import GlobError, anchored_source
from policyrun.probes.base import ProbeContext, ProbeError, ProbeResult
from policyrun.probes._kit.bounded import display_path
from policyrun.probes._kit.userregex import user_regex

DEFAULT_MAX_ENTRIES = 1000
MAX_SCANNED = 100_000  # directory entries looked at while listing one path, matched or not
_TYPES = ("file", "dir", "symlink", "fifo", "socket", "char_device", "block_device", "other")

_PATH_PARAMS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "paths": {"type": "array", "minItems": 1, "uniqueItems": True, "items": {"type": "string", "minLength": 1},
                  "description": "Paths to look at, relative to the working directory (absolute allowed)."},
        "root": {"type": "string", "description": "If given, every path must lie inside it, and a symbolic link "
                                                  "leading out of it is reported (`escapes_root`), never followed."},
        "list": {"type": "array", "items": {"type": "string", "minLength": 1},
                 "description": "Globs of entries to list under each path that is a directory: `*` and `?` "
                                "within a name, `**` across directories (`*.json`, `**/config.json`)."},
        "max_entries": {"type": "integer", "minimum": 1, "maximum": 100_000, "default": DEFAULT_MAX_ENTRIES,
                        "description": "Entries listed per path at most (then `truncated`)."},
        "follow_symlinks": {"type": "boolean", "default": False,
                            "description": "Describe what a symbolic link points to instead of the link itself."},
    },
    "required": ["paths"],
    "additionalProperties": False,
}

_PATH_ENTRY: dict[str, Any] = {"type": "object", "properties": {
    "path": {"type": "string", "description": "The absolute path looked at."},
    "exists": {"type": ["boolean", "null"], "description": "null when it could not be looked at (escapes_root, error)."},
    "type": {"type": ["string", "null"], "enum": [*_TYPES, None]},
    "size": {"type": ["integer", "null"]},
    "mtime": {"type": ["string", "null"], "description": "ISO-8601 UTC, seconds."},
    "mode": {"type": ["string", "null"], "description": "Permission bits in octal, e.g. \"0755\"."},
    "readable": {"type": ["boolean", "null"], "description": "For policyrun's user (access(2)); null for a link not "
                                                             "followed."},
    "writable": {"type": ["boolean", "null"]},
    "is_symlink": {"type": "boolean", "description": "The path itself is a symbolic link."},
    "target": {"type": ["string", "null"], "description": "The link's target as written (readlink)."},
    "escapes_root": {"type": "boolean", "description": "The path leads out of `root` through a symbolic link; "
                                                       "not followed."},
    "entries": {"type": ["array", "null"], "items": {"type": "string"},
                "description": "With `list`, for a directory: matching entries, relative, sorted."},
    "truncated": {"type": "boolean", "description": "The listing stopped at max_entries (or the scan bound)."},
    "error": {"type": ["string", "null"], "description": "Why it could not be looked at (e.g. permission denied)."},
}}

_PATH_FACT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "paths": {"type": "object", "additionalProperties": _PATH_ENTRY,
                  "description": "Keyed by the path as given in `paths`."},
        "missing": {"type": "array", "items": {"type": "string"}, "description": "Paths (as given) that do not exist."},
        "root": {"type": ["string", "null"]},
    },
}


def _type_of(mode: int) -> str:
    for test, name in ((stat.S_ISREG, "file"), (stat.S_ISDIR, "dir"), (stat.S_ISLNK, "symlink"),
                       (stat.S_ISFIFO, "fifo"), (stat.S_ISSOCK, "socket"), (stat.S_ISCHR, "char_device"),
                       (stat.S_ISBLK, "block_device")):
        if test(mode):
            return name
    return "other"


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _list_regex(glob: str) -> Any:
    """A glob anchored at the listed directory, as RE2: unlike search's gitignore-style globs, `*`
    lists that directory only and a match does not cover what is below it."""
    try:
        source = anchored_source(glob)
    except GlobError as exc:
        raise ProbeError("path.bad_glob", f"parameter `list`: pattern '{glob}' {exc}") from None
    return user_regex(source, "parameter `list`", code="path.bad_glob")


def _walk(top: str, max_depth: int | None) -> Iterator[str]:
    """Relative names under `top` (shown as text), level by level in sorted order; a directory
    reached through a symbolic link is not entered, so nothing outside `top` is listed."""
    pending: deque[tuple[bytes, str, int]] = deque([(b"", "", 1)])
    base = os.fsencode(top)
    while pending:
        raw_dir, shown_dir, depth = pending.popleft()
        try:
            with os.scandir(os.path.join(base, raw_dir) if raw_dir else base) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            continue  # unreadable: its entries are not listed
        for entry in entries:
            raw = os.path.join(raw_dir, entry.name) if raw_dir else entry.name
            shown = f"{shown_dir}/{display_path(entry.name)}" if shown_dir else display_path(entry.name)
            yield shown
            if (max_depth is None or depth < max_depth) and entry.is_dir(follow_symlinks=False):
                pending.append((raw, shown, depth + 1))


def _listing(top: str, globs: Sequence[str], max_entries: int) -> tuple[list[str], bool]:
    regexes = [_list_regex(g) for g in globs]
    depth = None if any("**" in g for g in globs) else max(g.count("/") + 1 for g in globs)
    found: list[str] = []
    for scanned, rel in enumerate(_walk(top, depth), 1):
        if scanned > MAX_SCANNED:
            return sorted(found), True
        if any(r.fullmatch(rel) for r in regexes):
            if len(found) == max_entries:
                return sorted(found), True
            found.append(rel)
    return sorted(found), False


def _mtime(st: os.stat_result) -> str:
    return datetime.fromtimestamp(int(st.st_mtime), timezone.utc).isoformat().replace("+00:00", "Z")


def _describe(path: str, *, root: str | None, follow: bool, globs: Sequence[str], max_entries: int) -> dict[str, Any]:
    entry: dict[str, Any] = {"path": display_path(path), "exists": None, "type": None, "size": None, "mtime": None,
                             "mode": None, "readable": None, "writable": None, "is_symlink": False, "target": None,
                             "escapes_root": False, "entries": None, "truncated": False, "error": None}
    if root is not None and not _inside(os.path.realpath(os.path.dirname(path)), root) and \
            os.path.realpath(path) != root:  # the root itself is inside it, wherever its parent is
        entry["escapes_root"] = True  # a directory on the way is a link out of root: not looked at
        return entry
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        entry["exists"] = False
        return entry
    except OSError as exc:
        entry["error"] = exc.strerror or str(exc)
        return entry
    if stat.S_ISLNK(st.st_mode):
        entry["is_symlink"] = True
        try:
            entry["target"] = display_path(os.readlink(os.fsencode(path)))
        except OSError as exc:
            entry["error"] = exc.strerror or str(exc)
        if follow:
            if root is not None and not _inside(os.path.realpath(path), root):
                entry["escapes_root"] = True
                return entry
            try:
                st = os.stat(path)
            except (FileNotFoundError, NotADirectoryError):
                entry["exists"] = False  # a dangling link: nothing to follow to
                return entry
            except OSError as exc:
                entry["error"] = exc.strerror or str(exc)
                return entry
    kind = _type_of(st.st_mode)
    entry.update(exists=True, type=kind, size=st.st_size, mtime=_mtime(st), mode=f"{stat.S_IMODE(st.st_mode):04o}")
    if kind != "symlink":  # access(2) follows links; for a link not followed it would describe the target
        entry["readable"] = os.access(path, os.R_OK)
        entry["writable"] = os.access(path, os.W_OK)
    if globs and kind == "dir":
        entry["entries"], entry["truncated"] = _listing(path, globs, max_entries)
    return entry


class PathProbe:
    kind = "path"
    summary = ("Whether paths exist and what they are (type, size, mtime, mode, access, symlink target), optionally "
               "listing a directory by globs; never opens a file or device.")
    params_schema: Mapping[str, Any] = _PATH_PARAMS
    fact_schema: Mapping[str, Any] = _PATH_FACT

    def side_effects(self, params: Mapping[str, Any]) -> frozenset[str]:
        return frozenset()

    def run(self, params: Mapping[str, Any], ctx: ProbeContext) -> ProbeResult:
        root: str | None = None  # resolved: what a path must stay inside after following links
        root_named = ""  # as written (normalised): what a given path must lie inside
        if params.get("root") is not None:
            root_path = ctx.resolve(str(params["root"]))
            if not root_path.is_dir():
                raise ProbeError("path.bad_root", f"root {str(root_path)!r} is not an existing directory; fix the "
                                 "probe's `root` parameter")
            root, root_named = os.path.realpath(root_path), os.path.normpath(root_path)
        globs = list(params.get("list") or [])
        max_entries = int(params.get("max_entries", DEFAULT_MAX_ENTRIES))
        out: dict[str, Any] = {}
        for given in params["paths"]:
            path = os.path.normpath(ctx.resolve(str(given)))
            if root is not None and not (_inside(path, root_named) or _inside(path, root)):
                raise ProbeError("path.outside_root", f"{given!r} ({path}) is not inside root {root!r}; every path "
                                 "must lie inside `root`")
            out[given] = _describe(path, root=root, follow=bool(params.get("follow_symlinks", False)), globs=globs,
                                   max_entries=max_entries)
        missing = [given for given, e in out.items() if e["exists"] is False]
        return ProbeResult(value={"paths": out, "missing": missing, "root": root},
                           sources=[e["path"] for e in out.values()])


PROBES = [PathProbe()]
