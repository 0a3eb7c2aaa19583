"""`json(text)`: a JSON document read by the one guarded reader (policyrun/jsonfile.py), so a
document a check parses is held to the bounds of a facts file: no NaN or Infinity, no duplicate
keys, numbers of at most `limits.NUMBER_CHARS` characters, nesting at most `limits.FACTS_DEPTH`."""

from __future__ import annotations

from typing import Any

from policyrun import limits
from policyrun.errors import UsageError
from policyrun.language.functions.base import MAX_STRING_BYTES, fail

# CEL integers are 64-bit: a larger JSON integer could not come back into the expression.
_INT_MIN, _INT_MAX = -(1 << 63), (1 << 64) - 1


def json_(text: str) -> Any:
    if len(text) > MAX_STRING_BYTES // 4 and len(text.encode()) > MAX_STRING_BYTES:
        fail(f"json: the text is longer than {MAX_STRING_BYTES:,} bytes (MAX_STRING_BYTES)")
    try:
        data = _parse(text)
    except UsageError as exc:
        loc = exc.location
        where = f"line {loc.line}, column {loc.column}: " if loc is not None and loc.line else ""
        fail(f"json: {where}{exc.message}")
    _check_ints(data)
    return data


def _parse(text: str) -> Any:
    from policyrun.jsonfile import parse_json

    return parse_json(text, "<json>", what="the text", code="json", max_depth=limits.FACTS_DEPTH)


def _check_ints(data: Any) -> None:
    stack = [data]
    while stack:
        node = stack.pop()
        if type(node) is int and not _INT_MIN <= node <= _INT_MAX:
            fail(f"json: the integer {node} does not fit in 64 bits; CEL integers are 64-bit")
        elif type(node) is dict:
            stack.extend(node.values())
        elif type(node) is list:
            stack.extend(node)
