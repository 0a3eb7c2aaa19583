"""JSON Schemas generated from the models; checked in under schemas/ (a test catches drift)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pydantic import BaseModel


def schema_for(which: str) -> dict[str, Any]:
    from policyrun.facts import FactsSnapshot
    from policyrun.model import Rulebook
    from policyrun.trace.model import Trace
    from policyrun.language.waivers import WaiverFile

    models: dict[str, type[BaseModel]] = {"rulebook": Rulebook, "facts": FactsSnapshot, "trace": Trace,
                                          "waivers": WaiverFile}
    model = models[which]
    schema = model.model_json_schema(by_alias=True)
    if which == "rulebook":
        _allow_short_forms(schema)
        _probe_kinds(schema)
    return {"$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": f"urn:policyrun:schema:{which}:1", **schema}


def _allow_short_forms(schema: dict[str, Any]) -> None:
    """The models accept a bare string for a precondition and for a mode's phase; say so in the
    schema too, so editors do not flag what policyrun accepts."""
    defs = schema["$defs"]
    pre = defs["Phase"]["properties"]["preconditions"]
    pre["items"] = {"anyOf": [{"type": "string", "minLength": 1}, pre["items"]]}
    phases = defs["Mode"]["properties"]["phases"]
    phases["items"] = {"anyOf": [{"type": "string"}, phases["items"]]}


def _probe_kinds(schema: dict[str, Any]) -> None:
    """`uses` is one of the registered kinds, and `with` takes that kind's parameter names, so an
    editor flags `uses: test.junit` or a misspelt parameter as people type. Parameter *values*
    are not typed here: any of them may be a `${...}` template, checked after interpolation."""
    from policyrun.probes.registry import registry

    kinds = registry()
    spec = schema["$defs"]["ProbeSpec"]
    spec["properties"]["uses"]["enum"] = sorted(kinds)
    spec["properties"]["uses"]["description"] += (" Kinds added by installed plugins are included when this "
                                                  "schema is generated with `policyrun schema rulebook`.")
    branches = []
    for name in sorted(kinds):
        params = kinds[name].params_schema
        props = params.get("properties", {})
        with_schema: dict[str, Any] = {
            "type": "object",
            "properties": {k: {"description": v.get("description", "")} if isinstance(v, dict) else {}
                           for k, v in props.items()},
            "additionalProperties": params.get("additionalProperties", True) is not False,
        }
        if params.get("required"):
            with_schema["required"] = list(params["required"])
        branches.append({"if": {"properties": {"uses": {"const": name}}, "required": ["uses"]},
                         "then": {"properties": {"with": with_schema}}})
    spec["allOf"] = branches


def schema_text(which: str) -> str:
    return json.dumps(schema_for(which), indent=2, ensure_ascii=False) + "\n"


def write_all(folder: str = "schemas") -> None:
    from pathlib import Path

    out = Path(folder)
    out.mkdir(exist_ok=True)
    for which in ("rulebook", "facts", "trace", "waivers"):
        (out / f"{which}.schema.json").write_text(schema_text(which), encoding="utf-8")


def write_declarations() -> None:
    """policyrun/probes/declarations.json: the built-in probe kinds' schemas, which lint reads
    instead of importing every probe (policyrun.probes.declared)."""
    from policyrun.probes.declared import TABLE, table_text

    TABLE.write_text(table_text(), encoding="utf-8")


if __name__ == "__main__":
    write_all()
    write_declarations()
