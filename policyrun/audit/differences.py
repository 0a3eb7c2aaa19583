"""Where two JSON values differ, leaf by leaf: a claimed trace against its re-evaluation, or a
signed statement against the one the trace (or evaluating again) gives.

Kept apart from re-evaluation: comparing is pure and knows nothing of rulebooks or facts, and
both the trace and the envelope checks of `policyrun verify` read its lines.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from policyrun.trace.model import Trace

ABSENT: Any = type("Absent", (), {"__repr__": lambda self: "(absent)"})()
IGNORED = frozenset({"generated_at", "run"})  # who ran it, where and when: not a claim about the facts


@dataclass(frozen=True)
class Difference:
    path: str
    claimed: Any
    evaluated: Any

    def line(self, claimed: str = "trace", evaluated: str = "evaluation") -> str:
        return f"{self.path}: {claimed} has {show(self.claimed)}, {evaluated} gives {show(self.evaluated)}"


def trace_differences(claimed: Trace, evaluated: Trace) -> list[Difference]:
    return differences(claimed.model_dump(mode="json"), evaluated.model_dump(mode="json"), ignore=IGNORED)


def differences(claimed: Any, evaluated: Any, path: str = "", *, ignore: Iterable[str] = ()) -> list[Difference]:
    """Every leaf where two JSON values differ. Lists of records are matched by their identity
    (phase, kind:id, probe, path or name) when it is unique, so one inserted check does not shift
    every later one; otherwise by position."""
    return list(_walk(claimed, evaluated, path, frozenset(ignore)))


def _walk(a: Any, b: Any, path: str, ignore: frozenset[str]) -> Iterator[Difference]:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in [*a, *(k for k in b if k not in a)]:
            sub = f"{path}.{key}" if path else str(key)
            if sub in ignore:
                continue
            yield from _walk(a.get(key, ABSENT), b.get(key, ABSENT), sub, ignore)
    elif isinstance(a, list) and isinstance(b, list):
        yield from _walk_list(a, b, path, ignore)
    elif a != b or type(a) is not type(b):
        yield Difference(path, a, b)


_IDENTITIES = ("phase", "id", "probe", "path", "name")


def _identities(items: list[Any], ident: str) -> list[str] | None:
    keys = [f"{i['kind']}:{i[ident]}" if ident == "id" and "kind" in i else str(i[ident]) for i in items]
    return keys if len(set(keys)) == len(keys) else None


def _walk_list(a: list[Any], b: list[Any], path: str, ignore: frozenset[str]) -> Iterator[Difference]:
    both = a + b
    ident = next((f for f in _IDENTITIES if both and all(isinstance(i, dict) and f in i for i in both)), None)
    keys_a = _identities(a, ident) if ident else None
    keys_b = _identities(b, ident) if ident else None
    if keys_a is None or keys_b is None:
        for i in range(max(len(a), len(b))):
            yield from _walk(a[i] if i < len(a) else ABSENT, b[i] if i < len(b) else ABSENT, f"{path}[{i}]", ignore)
        return
    by_b = dict(zip(keys_b, b, strict=True))
    by_a = dict(zip(keys_a, a, strict=True))
    common_a = [k for k in keys_a if k in by_b]
    common_b = [k for k in keys_b if k in by_a]
    if common_a != common_b:
        yield Difference(f"{path} order", common_a, common_b)
    for key in [*keys_a, *(k for k in keys_b if k not in by_a)]:
        yield from _walk(by_a.get(key, ABSENT), by_b.get(key, ABSENT), f"{path}[{key}]", ignore)


_BARE = re.compile(r"[\w.:/@+<>-]+")
_JSON_LOOKALIKE = re.compile(r"null|true|false|-?[0-9][0-9.eE+-]*")  # quoted, so "1" never reads as 1


def show(value: Any, limit: int = 200) -> str:
    """A value in one line: simple strings bare, anything else as compact JSON, cut at `limit`."""
    if value is ABSENT:
        return "(absent)"
    if isinstance(value, str) and _BARE.fullmatch(value) and not _JSON_LOOKALIKE.fullmatch(value):
        text = value
    else:
        text = json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(", ", ": "))
    return text if len(text) <= limit else text[:limit - 1] + "…"
