"""Probe descriptions: every registered probe kind (built-in and plugins), its `with:`
parameters, the shape of the fact it produces and its side effects."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ParamDescription:
    name: str
    type: str
    required: bool
    default: Any
    description: str


@dataclass(frozen=True)
class FieldDescription:
    name: str
    type: str
    description: str


@dataclass(frozen=True)
class ProbeDescription:
    kind: str
    summary: str
    side_effects: list[str]
    params: list[ParamDescription]
    facts_shape: str  # a one-line picture of the fact, e.g. `{sha, ref, kind}`
    fact_fields: list[FieldDescription]  # the fact's top-level fields (of its rows, for a list)
    params_schema: dict[str, Any]
    fact_schema: dict[str, Any]

    def as_json(self) -> dict[str, Any]:
        """What `policyrun probes --json` prints for the kind."""
        return {"kind": self.kind, "summary": self.summary, "side_effects": self.side_effects,
                "params": [vars(p) for p in self.params], "params_schema": self.params_schema,
                "fact_schema": self.fact_schema}


def probe_kinds(kind: str | None = None) -> list[Any]:
    """The registered probes, sorted by kind, or the one named (U008, with a suggestion, when none is)."""
    import difflib

    from policyrun.errors import UsageError
    from policyrun.probes.registry import registry

    kinds = registry()
    if kind is None:
        return [kinds[k] for k in sorted(kinds)]
    if kind not in kinds:
        hint = difflib.get_close_matches(kind, list(kinds), n=1)
        extra = f"did you mean {hint[0]!r}? " if hint else ""
        raise UsageError(f"no probe kind {kind!r}; {extra}run `policyrun probes` to list them", code="U008")
    return [kinds[kind]]


def describe_probes(kind: str | None = None) -> list[ProbeDescription]:
    return [describe(p) for p in probe_kinds(kind)]


def describe(probe: Any) -> ProbeDescription:
    schema = probe.fact_schema
    props = schema.get("properties") or (schema.get("items") or {}).get("properties", {})
    return ProbeDescription(
        kind=probe.kind, summary=probe.summary, side_effects=side_effects_of(probe), params=params_of(probe),
        facts_shape=shape(schema),
        fact_fields=[FieldDescription(k, type_text(v), v.get("description", "")) for k, v in props.items()],
        params_schema=dict(probe.params_schema), fact_schema=dict(schema))


def type_text(schema: Mapping[str, Any]) -> str:
    if "enum" in schema:
        return "|".join(json.dumps(v) if not isinstance(v, str) else v for v in schema["enum"])
    t = schema.get("type", "any")
    return "|".join(t) if isinstance(t, list) else str(t)


def params_of(probe: Any) -> list[ParamDescription]:
    schema = probe.params_schema
    required = set(schema.get("required", []))
    return [ParamDescription(name, type_text(prop), name in required, prop.get("default"), prop.get("description", ""))
            for name, prop in schema.get("properties", {}).items()]


def shape(schema: Mapping[str, Any]) -> str:
    """A one-line picture of a fact: `{a, b, c}`, `[{path, head}]`, or the schema's description."""
    if "properties" in schema:
        return "{" + ", ".join(schema["properties"]) + "}"
    items = schema.get("items")
    if schema.get("type") == "array" and isinstance(items, Mapping):
        return f"[{shape(items)}]"
    return str(schema.get("description") or type_text(schema))


def side_effects_of(probe: Any) -> list[str]:
    try:
        return sorted(probe.side_effects({}))
    except Exception:  # some probes need parameters to say; the listing must not fail over it
        return ["(depends on parameters)"]
