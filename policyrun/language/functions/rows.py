"""Functions over rows (lists of maps) addressed by a key: indexes, groups, filters and joins.

Each runs in linear time (sorting in n log n) so that a policy never needs the nested
comprehensions that exhaust the CEL runtime's budget of 10,000 iterations.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from policyrun.language.functions.base import (MAP_KEY_TYPES, MAX_ITEMS, NULL_KEY, PLAIN_KEYS, check_map_keys, column, fail,
                                      hkey, hkeys, literal, over_limit, present, require_kinds, show)
from policyrun.language.functions.lists import check_orderable, element
from policyrun.language.functions.paths import glob_matcher


def _of(key: str, label: str = "row") -> Callable[[int], str]:
    return lambda i: f"'{key}' of {label} {i}"


def index_by(rows: list[Any], key: str) -> dict[Any, Any]:
    keys = column("index_by", rows, key)
    check_map_keys("index_by", keys, _of(key))
    out = dict(zip(keys, rows))
    if len(out) != len(rows):
        first: dict[Any, int] = {}
        for i, k in enumerate(keys):
            if k in first:
                fail(f"index_by: rows {first[k]} and {i} both have {key} = {literal(k)}; an index needs "
                     f"unique keys (group_by(rows, '{key}') keeps every row)")
            first[k] = i
    return out


def group_by(rows: list[Any], key: str) -> dict[Any, list[Any]]:
    keys = column("group_by", rows, key)
    check_map_keys("group_by", keys, _of(key))
    groups: dict[Any, list[Any]] = {}
    for k, row in zip(keys, rows):
        group = groups.get(k)
        if group is None:
            groups[k] = [row]
        else:
            group.append(row)
    return groups


def count_values(values: list[Any]) -> dict[Any, int]:
    check_map_keys("count_by", values, element)
    return dict(Counter(values))


def count_by(rows: list[Any], key: str) -> dict[Any, int]:
    keys = column("count_by", rows, key)
    check_map_keys("count_by", keys, _of(key))
    return dict(Counter(keys))


def unique_by(rows: list[Any], key: str) -> list[Any]:
    keys = hkeys(column("unique_by", rows, key))
    seen: set[Any] = set()
    out = []
    for k, row in zip(keys, rows):
        if k not in seen:
            seen.add(k)
            out.append(row)
    return out


def sort_by(rows: list[Any], key: str) -> list[Any]:
    keys = column("sort_by", rows, key)
    check_orderable("sort_by", keys, _of(key))
    order = sorted(range(len(rows)), key=keys.__getitem__)  # sorted() is stable
    return [rows[i] for i in order]


def pluck(rows: list[Any], key: str) -> list[Any]:
    return column("pluck", rows, key)


def _matching(fn: str, rows: list[Any], key: str, values: list[Any]) -> list[bool]:
    keys = column(fn, rows, key)
    wanted = {hkey(v) for v in values}
    if set(map(type, keys)) <= PLAIN_KEYS:
        return [k in wanted for k in keys]
    return [hkey(k) in wanted for k in keys]


def where(rows: list[Any], key: str, values: list[Any]) -> list[Any]:
    return [row for row, hit in zip(rows, _matching("where", rows, key, values)) if hit]


def where_not(rows: list[Any], key: str, values: list[Any]) -> list[Any]:
    return [row for row, hit in zip(rows, _matching("where_not", rows, key, values)) if not hit]


def where_has(rows: list[Any], key: str) -> list[Any]:
    if not key:
        fail("where_has: the key is empty; name a field or a dotted path such as 'left.path'")
    require_kinds("where_has", rows, frozenset({dict}), lambda i: f"row {i}", "a map (rows must be maps)")
    return [row for row, has in zip(rows, present(rows, key)) if has]


def _globs(fn: str, patterns: list[Any]) -> Callable[[str], Any]:
    require_kinds(fn, patterns, frozenset({str}), lambda i: f"pattern {i}", "a string")
    return glob_matcher(fn, tuple(patterns))


def where_glob_paths(paths: list[Any], patterns: list[Any]) -> list[Any]:
    matches = _globs("where_glob", patterns)
    require_kinds("where_glob", paths, frozenset({str}), element, "a string path")
    return [p for p in paths if matches(p) is not None]


def where_glob(rows: list[Any], key: str, patterns: list[Any]) -> list[Any]:
    matches = _globs("where_glob", patterns)
    paths = column("where_glob", rows, key)
    require_kinds("where_glob", paths, frozenset({str}), _of(key), "a string path")
    return [row for row, p in zip(rows, paths) if matches(p) is not None]


def lookup(rows: list[Any], key: str, index: dict[Any, Any]) -> list[Any]:
    keys = column("lookup", rows, key)
    kinds = set(map(type, keys))
    if kinds <= {str}:
        return [index[k] for k in keys if k in index]
    if not kinds <= MAP_KEY_TYPES | {type(None)}:
        i = next(i for i, k in enumerate(keys) if type(k) not in MAP_KEY_TYPES and k is not None)
        fail(f"lookup: '{key}' of row {i} is {show(keys[i])}; index keys are strings, ints or bools")
    # Python finds True under the key 1 (and 1 under True); CEL does not, so ints and bools are
    # looked up by (is it a bool, value).
    typed = {(type(k) is bool, k): v for k, v in index.items() if type(k) is not str}
    out = []
    for k in keys:
        if k is None:
            continue
        if type(k) is str:
            if k in index:
                out.append(index[k])
        else:
            hit = typed.get((type(k) is bool, k), typed)
            if hit is not typed:
                out.append(hit)
    return out


def inner_join(left: list[Any], lkey: str, right: list[Any], rkey: str) -> list[dict[str, Any]]:
    lkeys = hkeys(column("inner_join", left, lkey, "left row"))
    rkeys = hkeys(column("inner_join", right, rkey, "right row"))
    unique = dict(zip(rkeys, right))
    unique.pop(NULL_KEY, None)  # as in SQL, null never joins
    if len(unique) == len(right) - (NULL_KEY in rkeys):
        # Unique keys on the right (the common case): at most one pair per left row.
        return [{"left": row, "right": unique[k]} for k, row in zip(lkeys, left) if k in unique]
    index: dict[Any, list[Any]] = {}
    for k, row in zip(rkeys, right):
        bucket = index.get(k)
        if bucket is None:
            index[k] = [row]
        else:
            bucket.append(row)
    index.pop(NULL_KEY, None)
    found = [index.get(k) for k in lkeys]
    # Count before building: equal keys on both sides multiply, and 100,000 x 100,000 pairs
    # must fail here rather than after allocating them.
    total = sum(len(m) for m in found if m is not None)
    if total > MAX_ITEMS:
        over_limit("inner_join", total)
    out: list[dict[str, Any]] = []
    for row, matches in zip(left, found):
        if matches is not None:
            out.extend({"left": row, "right": match} for match in matches)
    return out
