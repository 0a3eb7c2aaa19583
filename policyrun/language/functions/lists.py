"""Functions over plain lists and maps: distinct values, ordering, totals, set operations."""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable
from typing import Any

from policyrun.language.functions.base import (MAX_ITEMS, check_map_keys, fail, hkeys, key_order, over_limit, require_kinds,
                                      show)

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

# Values of one family compare with each other (ints with doubles, as in CEL); nothing else does.
_FAMILY = {int: "number", float: "number", str: "string", bool: "bool", bytes: "bytes", bytearray: "bytes"}


def element(i: int) -> str:
    return f"element {i}"


def check_orderable(fn: str, values: list[Any], what: Callable[[int], str] = element) -> None:
    """All values of one comparable family (numbers, strings, bools or bytes), and no NaN."""
    families = {_FAMILY.get(t) for t in set(map(type, values))}
    if None in families:
        i = next(i for i, v in enumerate(values) if type(v) not in _FAMILY)
        fail(f"{fn}: {what(i)} is {show(values[i])}, which has no order; "
             "order numbers, strings, bools or bytes")
    if len(families) > 1:
        first = _FAMILY[type(values[0])]
        i = next(i for i, v in enumerate(values) if _FAMILY[type(v)] != first)
        fail(f"{fn}: {what(i)} is {show(values[i])} but {what(0)} is {show(values[0])}; "
             "values of different types cannot be ordered")
    if float in set(map(type, values)):
        for i, v in enumerate(values):
            if v != v:
                fail(f"{fn}: {what(i)} is NaN, which has no order")


def distinct(values: list[Any]) -> list[Any]:
    keys = hkeys(values)
    if keys is values:
        return list(dict.fromkeys(values))
    seen: set[Any] = set()
    out = []
    for v, k in zip(values, keys):
        if k not in seen:
            seen.add(k)
            out.append(v)
    return out


def duplicates(values: list[Any]) -> list[Any]:
    keys = hkeys(values)
    counts = Counter(keys)
    out = []
    for v, k in zip(values, keys):
        if counts[k] > 1:
            counts[k] = 0  # report each value once, where it first occurs
            out.append(v)
    return out


def sorted_(values: list[Any]) -> list[Any]:
    check_orderable("sorted", values)
    return sorted(values)


def flatten(lists: list[Any]) -> list[Any]:
    require_kinds("flatten", lists, frozenset({list}), element, "a list (flatten takes a list of lists)")
    total = sum(map(len, lists))
    if total > MAX_ITEMS:
        over_limit("flatten", total)
    return list(itertools.chain.from_iterable(lists))


_NUMBERS = frozenset({int, float})


def sum_(values: list[Any]) -> int | float:
    require_kinds("sum", values, _NUMBERS, element, "an int or a double")
    total: int | float = sum(values)
    if type(total) is int and not INT64_MIN <= total <= INT64_MAX:
        fail(f"sum: the total {total} overflows a 64-bit int")
    return total


def min_(values: list[Any]) -> Any:
    if not values:
        fail("min: the list is empty; check size(list) > 0 first")
    check_orderable("min", values)
    return min(values)


def max_(values: list[Any]) -> Any:
    if not values:
        fail("max: the list is empty; check size(list) > 0 first")
    check_orderable("max", values)
    return max(values)


def union(a: list[Any], b: list[Any]) -> list[Any]:
    return distinct(a + b)


def intersect(a: list[Any], b: list[Any]) -> list[Any]:
    wanted = set(hkeys(b))
    return [v for v, k in zip(*_distinct_keyed(a)) if k in wanted]


def difference(a: list[Any], b: list[Any]) -> list[Any]:
    unwanted = set(hkeys(b))
    return [v for v, k in zip(*_distinct_keyed(a)) if k not in unwanted]


def owners(ids: list[Any], names: list[Any]) -> list[Any]:
    """The names that are a dotted prefix of some id (the id equals the name or continues it with
    `.` or `::`), each once, in the names' order. A pytest node id's path (`tests/unit/test_a.py`,
    what report-logs give) counts as its dotted module (`tests.unit.test_a`), as JUnit writes it.
    One pass over each id's prefixes: O(total length)."""
    require_kinds("owners", ids, frozenset({str}), element, "a string id")
    require_kinds("owners", names, frozenset({str}), lambda i: f"name {i}", "a string name")
    prefixes: set[str] = set()
    for test_id in ids:
        head = test_id.split("::", 1)[0]
        if head.endswith(".py"):
            head = head[:-len(".py")].replace("/", ".")
        prefixes.add(head)
        at = head.find(".")
        while at >= 0:
            prefixes.add(head[:at])
            at = head.find(".", at + 1)
    return [n for n in distinct(names) if n in prefixes]


def _distinct_keyed(values: list[Any]) -> tuple[list[Any], list[Any]]:
    out = distinct(values)
    return out, hkeys(out)


def keys(m: dict[Any, Any]) -> list[Any]:
    return sorted(m, key=key_order)


def values(m: dict[Any, Any]) -> list[Any]:
    return [m[k] for k in sorted(m, key=key_order)]


def select_keys(m: dict[Any, Any], wanted: list[Any]) -> dict[Any, Any]:
    check_map_keys("select_keys", wanted, element)
    return {k: m[k] for k in wanted if k in m}


def has_any(m: dict[Any, Any], wanted: list[Any]) -> bool:
    check_map_keys("has_any", wanted, element)
    return any(k in m for k in wanted)

