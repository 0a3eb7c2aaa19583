"""What every library function shares: errors, bounds, CEL type names, value keys, row keys."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NoReturn

UNKNOWN_MARKER = "policyrun.unknown: "
LIMIT_MARKER = "policyrun.limit: "

# A result longer than these is refused: a policy that builds a million-row list has a bug, and
# the runtime would convert every item back into CEL before anyone saw the mistake.
MAX_ITEMS = 1_000_000
MAX_STRING_BYTES = 16 * 1024 * 1024


class FunctionError(ValueError):
    """A library function refused its arguments (the message starts with the function's name)."""


class LimitError(FunctionError):
    """A result would exceed MAX_ITEMS or MAX_STRING_BYTES."""


def fail(message: str) -> NoReturn:
    raise FunctionError(message)


def over_limit(fn: str, items: int, exact: bool = True) -> NoReturn:
    raise LimitError(f"{LIMIT_MARKER}{fn}: the result would have {'' if exact else 'at least '}{items:,} items; "
                     f"the bound is {MAX_ITEMS:,} (MAX_ITEMS)")


def check_bounds(fn: str, result: Any) -> None:
    kind = type(result)
    if kind is list or kind is dict:
        if len(result) > MAX_ITEMS:
            over_limit(fn, len(result))
    elif kind is str and len(result) > MAX_STRING_BYTES // 4:  # UTF-8 needs at most 4 bytes a character
        size = len(result.encode())
        if size > MAX_STRING_BYTES:
            raise LimitError(f"{LIMIT_MARKER}{fn}: the result is a string of {size:,} bytes; "
                             f"the bound is {MAX_STRING_BYTES:,} (MAX_STRING_BYTES)")


_CEL_TYPES = {bool: "bool", int: "int", float: "double", str: "string", type(None): "null", list: "list",
              dict: "map", bytes: "bytes", bytearray: "bytes"}


def cel_type(value: Any) -> str:
    name = _CEL_TYPES.get(type(value))
    if name is not None:
        return name
    return {"datetime": "timestamp", "timedelta": "duration"}.get(type(value).__name__, type(value).__name__)


def show(value: Any) -> str:
    """A value as a message shows it: its CEL type and a short CEL-like rendering."""
    kind = cel_type(value)
    if value is None:
        return "null"
    if kind == "list":
        return f"a list of {len(value)} item{'' if len(value) == 1 else 's'}"
    if kind == "map":
        return f"a map of {len(value)} entr{'y' if len(value) == 1 else 'ies'}"
    text = literal(value)
    return f"{'an' if kind[0] in 'aeiou' else 'a'} {kind} ({text if len(text) <= 60 else text[:57] + '...'})"


def literal(value: Any) -> str:
    """A plain value written as a CEL literal (maps with sorted keys), for messages and docs."""
    if value is None:
        return "null"
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, str):
        return "'" + value.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n") + "'"
    if isinstance(value, list):
        return "[" + ", ".join(literal(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{literal(k)}: {literal(value[k])}" for k in sorted(value, key=key_order)) + "}"
    if isinstance(value, (bytes, bytearray)):
        return "b" + literal(bytes(value).decode("utf-8", "replace"))
    return repr(value)


_KEY_RANK = {bool: 0, int: 1, str: 2}


def key_order(key: Any) -> tuple[int, Any]:
    """Sort order of map keys (bool, then int, then string): CEL maps have no order of their own."""
    return _KEY_RANK.get(type(key), 3), key


# --- equality keys ---------------------------------------------------------------------------------
# Python's equality differs from CEL's in one place that matters: True == 1 in Python, but
# `true == 1` is false in CEL. Numbers compare by value in both (`1 == 1.0`), strings and null as
# expected. `hkey` maps a value to a hashable key with CEL's equality.

class _Tag:
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


_BOOL, _NULL, _LIST, _MAP, _BYTES = _Tag("bool"), _Tag("null"), _Tag("list"), _Tag("map"), _Tag("bytes")
PLAIN_KEYS = frozenset({str, int, float})  # types whose values are their own CEL equality key
NULL_KEY = _NULL


def hkey(value: Any) -> Any:
    kind = type(value)
    if kind is str or kind is int or kind is float:
        return value
    if kind is bool:
        return (_BOOL, value)
    if value is None:
        return _NULL
    if kind is list:
        return (_LIST, tuple(hkey(v) for v in value))
    if kind is dict:
        return (_MAP, frozenset((hkey(k), hkey(v)) for k, v in value.items()))
    if kind is bytes or kind is bytearray:
        return (_BYTES, bytes(value))
    try:
        hash(value)
    except TypeError:
        fail(f"values of type {cel_type(value)} cannot be compared")
    return value


def hkeys(values: list[Any]) -> list[Any]:
    """`hkey` of every value, without the per-value call when none needs it."""
    if set(map(type, values)) <= PLAIN_KEYS:
        return values
    return [hkey(v) for v in values]


# --- row keys --------------------------------------------------------------------------------------

_ABSENT = object()


def column(fn: str, rows: list[Any], key: str, label: str = "row") -> list[Any]:
    """The value of `key` in every row: the field named `key` if the row has it, else the
    dotted path `key` into nested maps. A row without it is an error (fail closed)."""
    if not key:
        fail(f"{fn}: the key is empty; name a field or a dotted path such as 'left.path'")
    try:
        return [row[key] for row in rows]  # the common case: every row is a map with the field
    except (KeyError, TypeError, IndexError):
        pass
    parts = key.split(".")
    out = []
    for i, row in enumerate(rows):
        if type(row) is not dict:
            fail(f"{fn}: {label} {i} is {show(row)}, not a map; the rows must be a list of maps")
        value = row[key] if key in row else _walk(row, parts)
        if value is _ABSENT:
            fail(f"{fn}: {label} {i} has no key '{key}'{_why_absent(row, parts)}; "
                 f"keep only the rows that have it with where_has(rows, '{key}')")
        out.append(value)
    return out


def _walk(node: Any, parts: list[str]) -> Any:
    if len(parts) < 2:
        return _ABSENT
    for part in parts:
        if type(node) is not dict or part not in node:
            return _ABSENT
        node = node[part]
    return node


def _why_absent(row: dict[Any, Any], parts: list[str]) -> str:
    node: Any = row
    for depth, part in enumerate(parts[:-1]):
        if part not in node:
            return ""
        node = node[part]
        if type(node) is not dict:
            return f" ('{'.'.join(parts[:depth + 1])}' is {show(node)})"
    return ""


def present(rows: list[Any], key: str) -> list[bool]:
    """Whether each row has `key` (as `column` reads it) with a value other than null."""
    parts = key.split(".")
    out = []
    for row in rows:
        if type(row) is not dict:
            out.append(False)
            continue
        value = row.get(key, _ABSENT) if key in row else _walk(row, parts)
        out.append(value is not _ABSENT and value is not None)
    return out


MAP_KEY_TYPES = frozenset({str, int, bool})


def check_map_keys(fn: str, values: list[Any], what: Callable[[int], str]) -> None:
    """Values that will become keys of a result map must be CEL map keys (string, int, bool),
    and the binding cannot hold both `true` and `1` (or `false` and `0`) in one Python dict."""
    kinds = set(map(type, values))
    if kinds <= {str}:
        return
    if not kinds <= MAP_KEY_TYPES:
        i = next(i for i, v in enumerate(values) if type(v) not in MAP_KEY_TYPES)
        fail(f"{fn}: {what(i)} is {show(values[i])}; map keys must be strings, ints or bools")
    if bool in kinds and int in kinds:
        bools = {v for v in values if type(v) is bool}
        ints = {v for v in values if type(v) is int and v in (0, 1)}
        for b in sorted(bools):
            if int(b) in ints:
                fail(f"{fn}: both {literal(b)} and {int(b)} occur as keys, and one result map cannot hold "
                     f"both (the CEL binding merges them)")


def require_kinds(fn: str, values: list[Any], allowed: frozenset[type], what: Callable[[int], str],
                  expected: str) -> None:
    if set(map(type, values)) <= allowed:
        return
    i = next(i for i, v in enumerate(values) if type(v) not in allowed)
    fail(f"{fn}: {what(i)} is {show(values[i])}; expected {expected}")
