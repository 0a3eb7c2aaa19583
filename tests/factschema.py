"""Check a fact value against its probe kind's fact schema the way type-aware lint reads it.

Lint (policyrun.language.typecheck) treats an object schema that lists `properties` without
`additionalProperties` as closed: a path to any other field is L028. So a probe that emits a field
its schema does not list makes lint reject a rulebook that reads a real fact. Here every such object
is closed for JSON Schema validation, so each emitted field must be listed and each value must have
the listed type.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jsonschema

from policyrun.probes.registry import registry


def closed(schema: Any) -> Any:
    """The schema with every object that lists `properties` closed, as lint reads it."""
    if isinstance(schema, Mapping):
        out = {k: closed(v) for k, v in schema.items()}
        if isinstance(out.get("properties"), Mapping) and "additionalProperties" not in out:
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [closed(v) for v in schema]
    return schema


_validators: dict[str, Any] = {}


def problems(kind: str, value: Any) -> list[str]:
    """Where `value` breaks the kind's closed fact schema, one line each (empty when it fits)."""
    validator = _validators.get(kind)
    if validator is None:
        probe = registry()[kind]
        validator = _validators[kind] = jsonschema.Draft202012Validator(closed(dict(probe.fact_schema)))
    out = []
    for error in validator.iter_errors(value):
        where = "/".join(str(p) for p in error.absolute_path) or "(the value)"
        out.append(f"{kind} {where}: {error.message[:300]}")
    return sorted(set(out))


def snapshot_problems(facts: Mapping[str, Any]) -> list[str]:
    """Problems of every collected fact of a facts file's `facts` map (failed facts have no value)."""
    kinds = registry()
    out = []
    for pid, fact in facts.items():
        kind = fact.get("provenance", {}).get("kind")
        if fact.get("error") is None and kind in kinds:
            out += [f"{pid}: {p}" for p in problems(kind, fact.get("value"))]
    return out
