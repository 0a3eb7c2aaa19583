"""Read a JSON document into a model, with errors that name the file, the position and the fix.

Stricter than `json.loads`, because a facts file or a trace is evidence: NaN and Infinity are
refused (NaN compares false with everything, so `!(x < 0.85)` would pass on a broken metric), and
so is a number that overflows to Infinity (`1e400`); so are numbers longer than
`limits.NUMBER_CHARS` (a 5,000-digit integer would otherwise stop the decoder with Python's own
int-conversion ValueError), duplicate keys (one reader keeps the first, another the last), nesting beyond a bound,
a format version this policyrun does not know, and anything but a regular file of bounded size.

Parsing runs on the C decoder; only when something is wrong does a slower scanner walk the text to
find the line and column to report.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any, NoReturn, TypeVar

from pydantic import BaseModel, ValidationError

from policyrun import limits
from policyrun.errors import Location, UsageError, display_path

M = TypeVar("M", bound=BaseModel)

JsonPath = tuple[str | int, ...]
Event = tuple[Any, ...]

# The decoder's own string scanner: (decoded string, end) from the position after the opening quote.
scanstring: Callable[[str, int], tuple[str, int]] = getattr(json.decoder, "scanstring")


def load_json_model(path: Path, model: type[M], *, what: str, code: str, hint: str,
                    max_bytes: int = limits.FACTS_BYTES, max_depth: int = limits.FACTS_DEPTH,
                    upgrade: Callable[[Any], Any] | None = None) -> M:
    """`code` is a prefix ("F", "T"): 001 unreadable, 002 not acceptable JSON, 003 wrong shape.

    A model's `policyrun_*` integer field is its format version: the file may omit it, but must
    not carry another value (a newer policyrun's file is refused, not misread). `upgrade` turns
    the parsed data of an earlier format this policyrun still reads into the current one first.
    """
    name = display_path(path)
    text = read_json_text(path, what=what, code=f"{code}001", max_bytes=max_bytes)
    data = parse_json(text, name, what=what, code=f"{code}002", max_depth=max_depth)
    if upgrade is not None:
        data = upgrade(data)
    if isinstance(data, dict):
        for key, field in model.model_fields.items():
            expected = field.default
            if key.startswith("policyrun_") and isinstance(expected, int) and key in data \
                    and (type(data[key]) is not int or data[key] != expected):
                raise UsageError(f"unsupported {what} format version {data[key]!r}; this policyrun reads "
                                 f"`{key}: {expected}`; {hint}", code=f"{code}003",
                                 location=locate(text, name, (key,)))
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = tuple(first["loc"])
        at = " → ".join(str(p) for p in loc) or "(top level)"
        if first["type"] == "missing":
            where, message = loc[:-1], f"missing key {str(loc[-1])!r}"
        elif first["type"] == "extra_forbidden":
            where, message = loc, f"unknown key {str(loc[-1])!r}"
        else:
            where, message = loc, first["msg"]
        raise UsageError(f"{what} does not match its schema at {at}: {message}; {hint}", code=f"{code}003",
                         location=locate(text, name, where, key=first["type"] == "extra_forbidden")) from None


def read_json_text(path: Path, *, what: str, code: str, max_bytes: int) -> str:
    """A bounded regular file as strict UTF-8; errors located (the bad byte's line and column)."""
    name = display_path(path)
    try:
        data = limits.read_limited(path, max_bytes)
    except limits.Unreadable as exc:
        raise UsageError(f"cannot read {what}: {exc.reason}", code=code, location=Location(name)) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        col = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise UsageError(f"{what} is not valid UTF-8 (byte 0x{data[exc.start]:02x}); write it as UTF-8",
                         code=code, location=Location(name, line, col)) from None


class _Refused(Exception):
    pass


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out = dict(pairs)
    if len(out) != len(pairs):
        raise _Refused
    return out


def _refuse_constant(name: str) -> Any:
    raise _Refused


def _bounded_int(literal: str) -> int:
    if len(literal) > limits.NUMBER_CHARS:
        raise _Refused
    return int(literal)


def _bounded_float(literal: str) -> float:
    if len(literal) > limits.NUMBER_CHARS:
        raise _Refused
    value = float(literal)
    if math.isinf(value):
        raise _Refused
    return value


def _bounded_float_nonfinite(literal: str) -> float:
    if len(literal) > limits.NUMBER_CHARS:
        raise _Refused
    return float(literal)


def parse_json(text: str, file: str, *, what: str, code: str, max_depth: int,
               allow_nonfinite: bool = False, depth_code: str | None = None) -> Any:
    """JSON text → data, refusing duplicate keys, nesting deeper than `max_depth` (`depth_code`,
    default `code`), numbers longer than `limits.NUMBER_CHARS` and (unless `allow_nonfinite`)
    NaN/Infinity, written or overflowing, each with a `UsageError` at the offending line and column.
    The one JSON reader for data policyrun did not write in this process."""
    try:
        if allow_nonfinite:
            data = json.loads(text, object_pairs_hook=_unique_pairs, parse_int=_bounded_int,
                              parse_float=_bounded_float_nonfinite)
        else:
            data = json.loads(text, object_pairs_hook=_unique_pairs, parse_constant=_refuse_constant,
                              parse_int=_bounded_int, parse_float=_bounded_float)
    except json.JSONDecodeError as exc:
        raise UsageError(f"{what} is not valid JSON: {exc.msg}", code=code,
                         location=Location(file, exc.lineno, exc.colno)) from None
    except (_Refused, RecursionError):
        _raise_first_problem(text, file, what=what, code=code, max_depth=max_depth, allow_nonfinite=allow_nonfinite,
                             depth_code=depth_code or code)
    if limits.depth_exceeds(data, max_depth):
        _raise_first_problem(text, file, what=what, code=code, max_depth=max_depth, allow_nonfinite=allow_nonfinite,
                             depth_code=depth_code or code)
    return data


def _raise_first_problem(text: str, file: str, *, what: str, code: str, max_depth: int,
                         allow_nonfinite: bool, depth_code: str) -> NoReturn:
    for event in _events(text):
        kind, path, pos = event[0], event[1], event[2]
        where = Location(file, *_line_col(text, pos))
        if kind == "deep" and event[3] > max_depth:
            raise UsageError(f"{what} nests deeper than {max_depth} levels (at {_path_text(path)}); policyrun "
                             "refuses such documents instead of crashing on them", code=depth_code, location=where)
        if kind == "duplicate":
            first_line, _ = _line_col(text, event[4])
            raise UsageError(f"duplicate key {event[3]!r} (first at line {first_line}) in {_path_text(path)}; "
                             f"keys must be unique, or readers disagree on the value", code=code, location=where)
        if kind == "constant" and not allow_nonfinite:
            raise UsageError(f"{event[3]} at {_path_text(path)}: numbers must be finite (NaN compares false with "
                             "everything, so a check could pass on a broken value); write null or a number",
                             code=code, location=where)
        if kind == "overflow" and not allow_nonfinite:
            raise UsageError(f"{event[3]} at {_path_text(path)} overflows to Infinity: numbers must be finite "
                             "(a check could pass on a broken value); write null or a number in range",
                             code=code, location=where)
        if kind == "long":
            raise UsageError(f"a number of {event[3]:,} characters at {_path_text(path)}: numbers are limited to "
                             f"{limits.NUMBER_CHARS} characters (checks compute with 64-bit integers); write the "
                             "value as a string, or fix what wrote it", code=code, location=where)
    raise UsageError(f"{what} could not be read as JSON", code=code, location=Location(file))  # not reached


def locate(text: str, file: str, path: JsonPath, *, key: bool = False) -> Location:
    """Where `path` (or its nearest ancestor) is in a JSON text; `key`: the member's key, not its value."""
    wanted = {path[:i] for i in range(len(path) + 1)}
    found: dict[JsonPath, int] = {}
    for kind, at, pos, *_ in _events(text):
        if kind == "key" and key and at == path:
            return Location(file, *_line_col(text, pos))
        if kind == "value" and at in wanted and at not in found:
            found[at] = pos
            if at == path and not key:
                break
    best = max(found, key=len, default=None)
    return Location(file, *_line_col(text, found[best])) if best is not None else Location(file)


def _line_col(text: str, pos: int) -> tuple[int, int]:
    return text.count("\n", 0, pos) + 1, pos - text.rfind("\n", 0, pos)


def _path_text(path: JsonPath) -> str:
    return " → ".join(str(p) for p in path) or "the top level"


_WS = re.compile(r"[ \t\n\r]*")
_SCALAR = re.compile(r"(NaN|-?Infinity)|true|false|null|-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?")


def _events(text: str) -> Iterator[Event]:
    """Walk a JSON text without recursion, yielding what error reporting needs:
    ("value", path, pos), ("key", path, pos), ("deep", path, pos, level), ("duplicate", object path,
    pos, key, first pos), ("constant", path, pos, token), ("overflow", path, pos, token) and
    ("long", path, pos, length) for a number literal longer than `limits.NUMBER_CHARS`. Stops quietly at text it cannot read:
    it only runs on documents the decoder already parsed (or refused for one of these reasons)."""
    stack: list[tuple[bool, JsonPath, dict[str, int], list[int]]] = []  # (object?, path, keys, [index])
    path: JsonPath = ()
    pos = _WS.match(text, 0).end()  # type: ignore[union-attr]
    try:
        while True:
            yield ("value", path, pos)
            ch = text[pos]
            if ch in "[{":
                yield ("deep", path, pos, len(stack) + 1)
                is_object = ch == "{"
                stack.append((is_object, path, {}, [0]))
                pos = _WS.match(text, pos + 1).end()  # type: ignore[union-attr]
                if text[pos] not in "]}":
                    path, pos = yield from _member(text, pos, stack[-1])
                    continue
                stack.pop()
                pos += 1
            elif ch == '"':
                pos = scanstring(text, pos + 1)[1]
            else:
                m = _SCALAR.match(text, pos)
                if m is None:
                    return
                token = m.group(0)
                if m.group(1):
                    yield ("constant", path, pos, m.group(1))
                elif len(token) > limits.NUMBER_CHARS:
                    yield ("long", path, pos, len(token))
                elif token[-1].isdigit() and not token.lstrip("-").isdigit() and math.isinf(float(token)):
                    yield ("overflow", path, pos, token)
                pos = m.end()
            while True:  # after a value: the next member, or close containers
                if not stack:
                    return
                pos = _WS.match(text, pos).end()  # type: ignore[union-attr]
                if text[pos] == ",":
                    pos = _WS.match(text, pos + 1).end()  # type: ignore[union-attr]
                    path, pos = yield from _member(text, pos, stack[-1])
                    break
                if text[pos] not in "]}":
                    return
                stack.pop()
                pos += 1
    except (IndexError, ValueError):
        return


def _member(text: str, pos: int, frame: tuple[bool, JsonPath, dict[str, int], list[int]]
            ) -> Generator[Event, None, tuple[JsonPath, int]]:
    """Step into the next member of the container `frame`; returns (its path, its value's position)."""
    is_object, base, keys, index = frame
    if not is_object:
        path = (*base, index[0])
        index[0] += 1
        return path, pos
    key, end = scanstring(text, pos + 1)
    path = (*base, key)
    yield ("key", path, pos)
    if key in keys:
        yield ("duplicate", base, pos, key, keys[key])
    keys.setdefault(key, pos)
    end = _WS.match(text, end).end()  # type: ignore[union-attr]
    return path, _WS.match(text, end + 1).end()  # type: ignore[union-attr]
