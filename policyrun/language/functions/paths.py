"""POSIX path functions: dirname, basename, component-wise containment (of paths, and of dotted
names and release lines) and glob patterns (the
gitignore rules of policyrun/globs.py, shared with the probes' include/exclude).

Paths are strings as probes report them (repository-relative, `/`-separated); nothing here reads
the file system.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable
from functools import lru_cache
from typing import Any

import re2  # type: ignore[import-untyped]  # google-re2 ships no type information

from policyrun.language.functions.base import fail
from policyrun.language.functions.regex import compile_re2, regex_options
from policyrun.globs import GlobError, gitignore_source


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


def dotted_under(text: str, prefix: str) -> bool:
    # Textual on purpose: rulebooks compare release lines (`0.26` of `0.26.1`) and Python dotted
    # names (`vllm.a` of `vllm.a.b`) exactly as written; PEP 440 or import normalisation would
    # make `0.26` cover `0.26.0`'s neighbours or fold names that differ.
    return text == prefix or text.startswith(prefix + ".")


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
        try:
            regex = gitignore_source(pattern)
        except GlobError as exc:
            fail(f"{fn}: pattern '{pattern}' {exc}")
        compile_re2(fn, regex, shown=pattern)  # a pattern RE2 refuses gets a message naming it
        matcher.Add(regex)
    matcher.Compile()
    return matcher
