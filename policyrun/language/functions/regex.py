"""RE2 patterns (the engine of CEL's own `matches`: linear time, no backtracking), compiled once."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import re2  # type: ignore[import-untyped]  # google-re2 ships no type information

from policyrun.language.functions.base import MAX_ITEMS, fail, over_limit


def regex_options() -> Any:
    options = re2.Options()
    options.log_errors = False  # RE2 would print every bad pattern to stderr; the error says it
    return options


@lru_cache(maxsize=512)
def _compiled(pattern: str) -> Any:
    return re2.compile(pattern, regex_options())


def compile_re2(fn: str, pattern: str, shown: str | None = None) -> Any:
    try:
        return _compiled(pattern)
    except re2.error as exc:
        why = exc.args[0].decode("utf-8", "replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        fail(f"{fn}: invalid regular expression '{shown or pattern}': {why} (RE2 syntax, as in matches())")


def capture(s: str, pattern: str) -> list[str]:
    regex = compile_re2("capture", pattern)
    m = regex.search(s)
    if m is None:
        return []
    if regex.groups == 0:
        return [m.group(0)]
    return [g if g is not None else "" for g in m.groups()]


def find_all(s: str, pattern: str) -> list[str]:
    regex = compile_re2("find_all", pattern)
    group = 1 if regex.groups else 0
    out = []
    # Matching the UTF-8 bytes halves the wrapper's per-match cost (no character offsets to
    # recompute); RE2 matches whole UTF-8 characters, so every group decodes cleanly.
    for m in regex.finditer(s.encode()):
        found = m.group(group)
        out.append(found.decode("utf-8", "replace") if found is not None else "")
        if len(out) > MAX_ITEMS:
            over_limit("find_all", len(out), exact=False)
    return out
