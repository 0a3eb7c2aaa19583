"""What lint needs of each probe kind, without importing the probes that implement them.

Lint validates `with:` against a kind's parameter schema, checks fact paths against its fact
schema and, for the few kinds that have one, asks for the fact on empty input (`empty_value`).
Importing every built-in probe module for that cost a cold lint about 40 ms, so the built-in
kinds' schemas are kept in `declarations.json` beside this file, generated from the registry by
`python -m policyrun.schemas` together with a fingerprint of the probe sources (and the limits
they may read). When the fingerprint does not match the sources here (a probe edited, the file not
regenerated), lint falls back to the registry itself: a stale table is never used. Plugin kinds
(the `policyrun.probes` entry points) are always loaded as the registry loads them.
"""

from __future__ import annotations

import hashlib
import importlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

TABLE = Path(__file__).with_name("declarations.json")


@dataclass(frozen=True)
class Declared:
    """A kind's schemas, and its `empty_value` (loaded from its module when first called), or None."""

    kind: str
    module: str
    params_schema: Mapping[str, Any]
    fact_schema: Mapping[str, Any]
    has_empty_value: bool

    @property
    def empty_value(self) -> Callable[[Mapping[str, Any]], Any] | None:
        if not self.has_empty_value:
            return None
        probe = next(p for p in importlib.import_module(self.module).PROBES if p.kind == self.kind)
        return probe.empty_value  # type: ignore[no-any-return]


def fingerprint(here: Path = Path(__file__).parent) -> str:
    """sha256 over the built-in probe sources under `here` (every family's folder too) and
    policyrun/limits.py beside it: what the schemas are built from."""
    digest = hashlib.sha256()
    for path in [*sorted(here.rglob("*.py")), here.parent / "limits.py"]:
        # The path below the package, not the bare name: two families may hold a file of one name.
        digest.update(path.relative_to(here.parent).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def table_text() -> str:
    """The table `python -m policyrun.schemas` writes: the built-in kinds, in registry order."""
    from policyrun.probes.registry import builtin_kinds

    kinds = {probe.kind: {"module": module, "params_schema": probe.params_schema,
                          "fact_schema": probe.fact_schema,
                          "empty_value": callable(getattr(probe, "empty_value", None))}
             for module, probe in builtin_kinds()}
    return json.dumps({"fingerprint": fingerprint(), "kinds": kinds}, indent=1, ensure_ascii=False) + "\n"


def _builtin() -> dict[str, Any] | None:
    """The built-in kinds from the table, or None when it is missing or does not match the sources."""
    try:
        table = json.loads(TABLE.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(table, dict) or table.get("fingerprint") != fingerprint():
        return None
    return {kind: Declared(kind, d["module"], d["params_schema"], d["fact_schema"], bool(d["empty_value"]))
            for kind, d in table["kinds"].items()}


@cache
def declarations() -> Mapping[str, Any]:
    """Kind → an object with `params_schema`, `fact_schema` and `empty_value` (None when the kind
    has none): the built-ins from the table when it is current, the registry's own probes otherwise,
    plugins as the registry loads them (a built-in kind wins over a plugin of the same name)."""
    from policyrun.probes.registry import plugin_kinds, registry

    builtin = _builtin()
    if builtin is None:
        return registry()
    for kind, probe in plugin_kinds():
        builtin.setdefault(kind, probe)
    return builtin
