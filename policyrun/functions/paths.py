"""POSIX path functions: dirname, basename, component-wise containment and glob patterns.

Paths are strings as probes report them (repository-relative, `/`-separated); nothing here reads
the file system.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable
from functools import lru_cache
from typing import Any

import re2  # type: ignore[import-untyped]  # google-re2 ships no type information

from policyrun.functions.base import fail
from policyrun.functions.regex import compile_re2, regex_options


def _strip_trailing(path: str) -> str:
    stripped = path.rstrip("/")
    return stripped if stripped or not path else "/"


def dirname(path: str) -> str:
    return posixpath.dirname(_strip_trailing(path))


def basename(path: str) -> str:
    return posixpath.basename(_strip_trailing(path))


def _components(path: str) -> tuple[bool, list[str]]:
    norm = posixpath.normpath(path) if path else "."
    return norm.startswith("/"), [c for c in norm.split("/") if c and c != "."]


def path_under(path: str, prefix: str) -> bool:
    absolute, parts = _components(path)
    prefix_absolute, prefix_parts = _components(prefix)
    if absolute != prefix_absolute or parts[:len(prefix_parts)] != prefix_parts:
        return False
    # After normalisation `..` can only lead; one left past the prefix climbs out of it.
    return ".." not in parts[len(prefix_parts):]


def glob_match(path: str, pattern: str) -> bool:
    return glob_matcher("glob_match", (pattern,))(path) is not None


def glob_matcher(fn: str, patterns: tuple[str, ...]) -> Callable[[str], Any]:
    """A function of a path that is not None when the whole path matches any of `patterns`."""
    if not patterns:
        return lambda path: None
    return _glob_set(fn, patterns).Match  # type: ignore[no-any-return]


@lru_cache(maxsize=256)
def _glob_set(fn: str, patterns: tuple[str, ...]) -> Any:
    # An RE2 set matches a path against every pattern in one linear pass, and costs about a
    # microsecond a call where a compiled pattern's fullmatch costs several in the wrapper.
    matcher = re2.Set.FullMatchSet(regex_options())
    for pattern in patterns:
        regex = _translate(fn, pattern)
        compile_re2(fn, regex, shown=pattern)  # a pattern RE2 refuses gets a message naming it
        matcher.Add(regex)
    matcher.Compile()
    return matcher


def _translate(fn: str, pattern: str) -> str:
    components = pattern.split("/")
    out = []
    for i, comp in enumerate(components):
        last = i == len(components) - 1
        if comp == "**":
            # `**/` is zero or more whole directories; a final `**` is everything below.
            out.append(".*" if last else "(?:[^/]*/)*")
            continue
        out.append(_component(fn, pattern, comp))
        if not last:
            out.append("/")
    return "".join(out)


def _component(fn: str, pattern: str, comp: str) -> str:
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
            cls, i = _bracket(fn, pattern, comp, i)
            out.append(cls)
            continue
        elif c == "\\":
            if i + 1 == len(comp):
                fail(f"{fn}: pattern '{pattern}' ends with a lone backslash")
            i += 1
            out.append(_literal(comp[i]))
        else:
            out.append(_literal(c))
        i += 1
    return "".join(out)


def _bracket(fn: str, pattern: str, comp: str, start: int) -> tuple[str, int]:
    """Translate `[...]` starting at `start`; returns the RE2 class and the index after `]`."""
    i = start + 1
    negate = i < len(comp) and comp[i] in "!^"
    if negate:
        i += 1
    items: list[str] = []
    first = True
    while True:
        if i >= len(comp):
            fail(f"{fn}: pattern '{pattern}' has a '[' without its closing ']'")
        c = comp[i]
        if c == "]" and not first:
            break
        first = False
        if c == "\\" and i + 1 < len(comp):
            i += 1
            c = comp[i]
        if i + 2 < len(comp) and comp[i + 1] == "-" and comp[i + 2] != "]":
            hi = comp[i + 2]
            if hi == "\\" and i + 3 < len(comp):
                hi = comp[i + 3]
                i += 1
            if hi < c:
                fail(f"{fn}: pattern '{pattern}' has the empty range '{c}-{hi}'")
            if not negate and c <= "/" <= hi:
                fail(f"{fn}: pattern '{pattern}': a [...] class never matches '/' (use ** or */ for directories)")
            items.append(f"{_literal(c)}-{_literal(hi)}")
            i += 3
            continue
        items.append(_literal(c))
        i += 1
    body = "".join(items)
    return (f"[^/{body}]" if negate else f"[{body}]"), i + 1


def _literal(c: str) -> str:
    if c.isalnum() or c == "_" or ord(c) > 127:
        return c
    return f"\\x{{{ord(c):x}}}"
