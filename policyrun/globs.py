"""Glob patterns over '/'-separated paths, translated to RE2 source.

One translation serves CEL's `glob_match`/`where_glob` and the probes' `include`/`exclude`, so a
list of globs means the same in a probe's parameters and in a check: a path matches a pattern when
a `.gitignore` holding that pattern would make git ignore the path (tests/test_globs.py checks a
table of cases against `git check-ignore`). Host's `path` probe lists entries with the anchored
form (`anchored_source`), where a pattern covers neither other depths nor what is below a match.

Cases git resolves silently (an empty pattern, a comment, a negation, an unescaped trailing
space, an unclosed `[`) are refused with a reason instead: in a policy they are mistakes.
"""

from __future__ import annotations

# Any number of whole directories; `[^/]` also matches a newline, which a file name may hold.
_DIRS = "(?:[^/]*/)*"
_REST = "(?s:.*)"  # everything below a directory
_POSIX_CLASSES = frozenset({"alnum", "alpha", "blank", "cntrl", "digit", "graph", "lower", "print", "punct",
                            "space", "upper", "xdigit"})


class GlobError(ValueError):
    """A pattern that is not a valid glob; the message completes "pattern 'X' ..."."""


def gitignore_source(pattern: str) -> str:
    """RE2 source matching, whole, each path that the .gitignore line `pattern` would ignore.

    A pattern without a '/' (other than a trailing one) matches a name at any depth; with one it is
    anchored at the root (a leading '/' only anchors). A match on a directory covers everything
    below it, and a trailing '/' matches directories only. `*` and `?` stay within a name, `**` as
    a whole component crosses directories. A path's own leading '/' is taken as the root.
    """
    body = _check_whole(pattern)
    dir_only = body.endswith("/")
    body = body.rstrip("/") if dir_only else body
    if not body:
        raise GlobError("names no path (only '/')")
    anchored = "/" in body
    if body.startswith("/"):
        body = body[1:]
    prefix = "/?" if anchored else "/?" + _DIRS
    return prefix + _components(body) + ("/" + _REST if dir_only else f"(?:/{_REST})?")


def anchored_source(pattern: str) -> str:
    """RE2 source for a glob matched against a whole path, from its start, with nothing implied:
    `*.json` is a name at the top only, and a directory does not cover what is below it."""
    if not pattern:
        raise GlobError("is empty")
    return _components(pattern)


def _check_whole(pattern: str) -> str:
    if not pattern:
        raise GlobError("is empty; it would match nothing")
    if pattern[0] == "!":
        raise GlobError("starts with '!': negation is not supported (list the paths to drop in `exclude`, or "
                        "negate in the expression); write '\\!' for a literal '!'")
    if pattern[0] == "#":
        raise GlobError("starts with '#', which makes a .gitignore line a comment; write '\\#' for a literal '#'")
    if pattern.endswith(" ") and not _escapes_last(pattern[:-1]):
        raise GlobError("ends with a space, which .gitignore drops; remove it, or write '\\ ' to keep it")
    return pattern


def _escapes_last(text: str) -> bool:
    """Whether the character after `text` is escaped (an odd run of backslashes ends `text`)."""
    return (len(text) - len(text.rstrip("\\"))) % 2 == 1


def _components(body: str) -> str:
    parts = body.split("/")
    if "" in parts:
        raise GlobError("has an empty component ('//'), which no path has")
    out: list[str] = []
    for i, comp in enumerate(parts):
        last = i == len(parts) - 1
        if comp == "**":
            # `**/` is zero or more whole directories; a final `**` is everything below.
            out.append(_REST if last else _DIRS)
            continue
        out.append(_component(comp))
        if not last:
            out.append("/")
    return "".join(out)


def _component(comp: str) -> str:
    out = []
    i = 0
    while i < len(comp):
        c = comp[i]
        if c == "*":
            while i + 1 < len(comp) and comp[i + 1] == "*":
                i += 1  # `**` inside a name is an ordinary `*`, as in .gitignore
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            cls, i = _bracket(comp, i)
            out.append(cls)
            continue
        elif c == "\\":
            if i + 1 == len(comp):
                raise GlobError("ends with a lone backslash")
            i += 1
            out.append(_literal(comp[i]))
        else:
            out.append(_literal(c))
        i += 1
    return "".join(out)


def _bracket(comp: str, start: int) -> tuple[str, int]:
    """Translate `[...]` starting at `start`; returns the RE2 class and the index after `]`."""
    i = start + 1
    negate = i < len(comp) and comp[i] in "!^"
    if negate:
        i += 1
    items: list[str] = []
    first = True
    while True:
        if i >= len(comp):
            raise GlobError("has a '[' without its closing ']'")
        c = comp[i]
        if c == "]" and not first:
            break
        first = False
        if c == "[" and comp.startswith(":", i + 1) and (end := comp.find(":]", i + 2)) > 0:
            name = comp[i + 2:end]
            if name not in _POSIX_CLASSES:
                raise GlobError(f"names the unknown class '[:{name}:]' (known: {', '.join(sorted(_POSIX_CLASSES))})")
            items.append(f"[:{name}:]")
            i = end + 2
            continue
        if c == "\\" and i + 1 < len(comp):
            i += 1
            c = comp[i]
        if i + 2 < len(comp) and comp[i + 1] == "-" and comp[i + 2] != "]":
            hi = comp[i + 2]
            if hi == "\\" and i + 3 < len(comp):
                hi = comp[i + 3]
                i += 1
            if hi < c:
                raise GlobError(f"has the empty range '{c}-{hi}'")
            if not negate and c <= "/" <= hi:
                raise GlobError("has a [...] range over '/', which never matches '/' (use ** or */ for directories)")
            items.append(f"{_literal(c)}-{_literal(hi)}")
            i += 3
            continue
        items.append(_literal(c))
        i += 1
    body = "".join(items)
    # No class matches '/', negated or not (git's wildmatch in pathname mode).
    return (f"[^/{body}]" if negate else f"[{body}]"), i + 1


def _literal(c: str) -> str:
    if c.isalnum() or c == "_" or ord(c) > 127:
        return c
    return f"\\x{{{ord(c):x}}}"
