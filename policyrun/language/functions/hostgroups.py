"""Functions over a map of host label → value (the `hosts.<probe>` variable): which hosts agree."""

from __future__ import annotations

import json
from typing import Any

from policyrun.language.functions.base import fail


def _pick(fn: str, value: Any, key: str | None) -> Any:
    """The value at dotted `key` inside one host's value (null where a step is absent)."""
    if key is None or key == "":
        return value
    for step in key.split("."):
        if not isinstance(value, dict):
            return None
        value = value.get(step)
    return value


def _canon(value: Any) -> str:
    # Values of any JSON shape group by their canonical text (ints and equal doubles differ: a
    # version `12` and `12.0` are different reports).
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def group_hosts(by_host: dict[str, Any], key: str | None = None) -> list[dict[str, Any]]:
    """Hosts grouped by their value (or the value at `key`): `[{'value': v, 'hosts': [labels]}]`,
    the largest group first, ties in order of the first host label."""
    if not isinstance(by_host, dict):
        fail("group_hosts: expects a map of host label → value, such as hosts.<probe>")
    groups: dict[str, dict[str, Any]] = {}
    for label in sorted(by_host):
        value = _pick("group_hosts", by_host[label], key)
        groups.setdefault(_canon(value), {"value": value, "hosts": []})["hosts"].append(label)
    return sorted(groups.values(), key=lambda g: (-len(g["hosts"]), g["hosts"][0]))


def disagreeing(by_host: dict[str, Any], key: str | None = None) -> list[str]:
    """The hosts whose value (or value at `key`) differs from the largest group's, sorted; empty
    when every host agrees. With a tie, the group of the first host label is taken as the norm."""
    groups = group_hosts(by_host, key)
    return sorted(label for g in groups[1:] for label in g["hosts"])
