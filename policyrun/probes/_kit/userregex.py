"""A rulebook author's regular expression, compiled with RE2 for a probe parameter.

Every probe that takes a pattern from a rulebook compiles it here, so a bad pattern is refused the
same way everywhere: a ProbeError with the probe's own code, naming the parameter, saying why RE2
refused it (no backreferences, no lookaround: RE2 runs in linear time, which is why it is used),
and never a line RE2 itself prints to stderr.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol

from policyrun.probes.base import ProbeError


class Match(Protocol):
    def group(self, index: int | str = 0, /) -> str | None: ...
    def start(self, index: int | str = 0, /) -> int: ...
    def end(self, index: int | str = 0, /) -> int: ...


class Regex(Protocol):
    groups: int
    groupindex: Mapping[str, int]

    def search(self, text: str, pos: int = 0, endpos: int = ..., /) -> Match | None: ...


def user_regex(pattern: str, where: str, *, code: str, groups: int = 0) -> Regex:
    """A rulebook's pattern compiled with RE2, or a ProbeError naming the parameter."""
    import re2  # type: ignore[import-untyped]  # google-re2 ships no type information

    options = re2.Options()
    options.log_errors = False  # RE2 would print each bad pattern to stderr; the error says it
    try:
        regex: Regex = re2.compile(pattern, options)
    except re2.error as exc:
        why = exc.args[0].decode("utf-8", "replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise ProbeError(code, f"{where}: {pattern!r} is not a valid RE2 regular expression ({why}); RE2 has "
                               "no backreferences or lookaround") from None
    if regex.groups < groups:
        raise ProbeError(code, f"{where}: {pattern!r} needs {groups} capturing group(s), it has {regex.groups}")
    return regex
