"""Type-aware lint: fact paths and comparison operands checked against the probes' fact schemas.

CEL sees every fact as `dyn`, so `facts.unit.totals.faild` and `facts.unit.totals.passed > "0"`
compile cleanly and only fail (BLOCKED) at run time. Each probe kind documents its value as a
JSON Schema (`fact_schema`); this walks each expression's syntax tree with those schemas —
through field selections, constant indexes and comprehension variables — and reports:
- L028: a field the schema does not have (with a did-you-mean), for fields of objects whose
  schema lists its properties;
- L029: a comparison of a field whose schema type is known with a constant of another type.
A probe with `for_each` has a map from element keys to the kind's values: `facts.p[key].field`.
Attestation documents are checked against the schema the rulebook declares for them. Where a
schema is open (no `properties`, `additionalProperties: true`) nothing below it is checked.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from policyrun.language.celast import Node
from policyrun.language.expr import Compiled, ExprError, compile_expr

Schema = Mapping[str, Any]
_COMPARISONS = {"_==_", "_!=_", "_<_", "_<=_", "_>_", "_>=_"}
_JSON_OF_CONST = {bool: "boolean", int: "integer", float: "number", str: "string"}


@dataclass(frozen=True)
class TypeFinding:
    code: str
    message: str
    line: int  # inside the expression, 1-based
    column: int


@dataclass(frozen=True)
class _Root:
    """The `facts` map itself: selecting a probe id gives that probe's fact schema."""


_FACTS = _Root()


class SchemaView:
    """One JSON Schema with `$ref`s resolved against its root."""

    def __init__(self, schema: Schema, root: Schema | None = None) -> None:
        self.schema = schema
        self.root = root if root is not None else schema

    def _resolve(self, schema: Schema) -> Schema:
        seen = 0
        while isinstance(schema, Mapping) and "$ref" in schema and seen < 32:
            ref = str(schema["$ref"])
            node: Any = self.root
            if not ref.startswith("#/"):
                return {}
            for part in ref[2:].split("/"):
                node = node.get(part, {}) if isinstance(node, Mapping) else {}
            schema = node
            seen += 1
        return schema if isinstance(schema, Mapping) else {}

    def branches(self) -> Iterator[Schema]:
        """The schema, or each alternative of an anyOf/oneOf (recursively)."""
        schema = self._resolve(self.schema)
        alts = list(schema.get("anyOf", [])) + list(schema.get("oneOf", []))
        if alts:
            for alt in alts:
                yield from SchemaView(alt, self.root).branches()
            rest = {k: v for k, v in schema.items() if k not in ("anyOf", "oneOf")}
            if "properties" in rest or "items" in rest or "type" in rest:
                yield rest
        else:
            yield schema

    def types(self) -> set[str]:
        out: set[str] = set()
        for b in self.branches():
            t = b.get("type")
            if t is None:
                if "enum" in b:
                    out |= {_JSON_OF_CONST.get(type(v), "null") for v in b["enum"]}
                elif "const" in b:
                    out.add(_JSON_OF_CONST.get(type(b["const"]), "null"))
                else:
                    return set()  # unconstrained: any type
            elif isinstance(t, list):
                out |= set(t)
            else:
                out.add(str(t))
        return out

    def field(self, name: str) -> tuple[SchemaView | None, list[str] | None]:
        """(schema of field `name`, None) or (None, the known fields) when the schema has no
        such field; (None, None) when the schema is open."""
        known: list[str] = []
        closed_somewhere = False
        for b in self.branches():
            props = b.get("properties")
            extra = b.get("additionalProperties")
            if isinstance(props, Mapping) and name in props:
                return SchemaView(props[name], self.root), None
            if isinstance(extra, Mapping):
                return SchemaView(extra, self.root), None
            if isinstance(props, Mapping) and extra is not True:
                closed_somewhere = True
                known.extend(props)
            elif not isinstance(props, Mapping) and b.get("type") in (None, "object") and "items" not in b:
                return None, None  # an open object: nothing to check
        return (None, sorted(set(known))) if closed_somewhere else (None, None)

    def items(self) -> SchemaView | None:
        for b in self.branches():
            if isinstance(b.get("items"), Mapping):
                return SchemaView(b["items"], self.root)
        return None


def fact_schemas(model: Any) -> dict[str, SchemaView]:
    """Probe id → the schema of its fact value (attestation documents get their declared schema)."""
    from policyrun.probes.declared import declarations

    kinds = declarations() if model.probes else {}
    out: dict[str, SchemaView] = {}
    for pid, spec in model.probes.items():
        probe = kinds.get(spec.uses)
        if probe is None:
            continue
        schema: dict[str, Any] = dict(probe.fact_schema)
        named = spec.with_.get("schema") if spec.uses == "attestation" else None
        # `schema:` names an entry of `schemas:`, or is an inline schema (a mapping) itself.
        doc_schema = model.schemas.get(named) if isinstance(named, str) else named
        if isinstance(doc_schema, Mapping) and isinstance(schema.get("properties"), Mapping):
            schema["properties"] = {**schema["properties"], "document": doc_schema}
        if spec.for_each is not None:
            # A fan-out's fact maps each element's key to one value of the kind: facts.p[key].field.
            # `$defs` stay at the root, where the element schema's `$ref`s point.
            element = {k: v for k, v in schema.items() if k != "$defs"}
            schema = {"type": "object", "additionalProperties": element,
                      **({"$defs": schema["$defs"]} if "$defs" in schema else {})}
        out[pid] = SchemaView(schema)
    return out


def check_expression(compiled: Compiled, schemas: Mapping[str, SchemaView],
                     roots: Mapping[str, SchemaView] | None = None) -> list[TypeFinding]:
    """Findings for the fact paths of an expression; `roots` gives other variables a schema (a
    check's `violations` rows, policyrun.language.checks)."""
    findings: list[TypeFinding] = []
    ast = compiled.ast

    def at(node: Node) -> tuple[int, int]:
        return ast.location(node.id)

    def schema_of(node: Node, env: Mapping[str, Any], path: str) -> tuple[Any, str]:
        """(schema view, _FACTS or None; the path text so far) of a path-like node, flagging
        unknown fields on the way."""
        if node.kind == "ident":
            if node.name in env:
                return env[node.name], node.name
            return (_FACTS if node.name == "facts" else None), node.name
        name: str | None = None
        target: Node | None = None
        flag = True
        if node.kind == "select" and node.target is not None:
            name, target, flag = node.name, node.target, not node.test_only
        elif node.kind == "call" and node.name in ("_[_]", "_?._", "_[?_]") and len(node.args) == 2 \
                and node.args[1].kind == "const":
            target = node.args[0]
            key = node.args[1].value
            if isinstance(key, int) and not isinstance(key, bool):
                parent, text = schema_of(target, env, path)
                if isinstance(parent, SchemaView):
                    return parent.items(), f"{text}[{key}]"
                return None, text
            name = str(key)
        if target is None or name is None:
            return None, path
        parent, text = schema_of(target, env, path)
        text = f"{text}.{name}"
        if parent is _FACTS:
            return schemas.get(name), text
        if not isinstance(parent, SchemaView):
            return None, text
        sub, known = parent.field(name)
        if sub is None and known is not None and flag:
            hint = difflib.get_close_matches(name, known, n=1)
            tip = f"; did you mean {hint[0]!r}?" if hint else f"; its fields: {', '.join(known[:12])}"
            line, col = at(node)
            findings.append(TypeFinding("L028", f"{text.rsplit('.', 1)[0]} has no field {name!r}{tip}", line, col))
        return sub, text

    def chain_base(node: Node) -> Node | None:
        """The node under a chain of selections/constant indexes, or None if it is not a chain."""
        cur, moved = node, False
        while True:
            if cur.kind == "select" and cur.target is not None:
                cur, moved = cur.target, True
            elif cur.kind == "call" and cur.name in ("_[_]", "_?._", "_[?_]") and len(cur.args) == 2 \
                    and cur.args[1].kind == "const":
                cur, moved = cur.args[0], True
            else:
                return cur if moved else None

    def visit(node: Node, env: Mapping[str, Any]) -> None:
        base = chain_base(node)
        if base is not None:
            schema_of(node, env, "")  # checks every field along the chain once
            if base.kind != "ident":
                visit(base, env)
            return
        if node.kind == "call" and node.name in _COMPARISONS and len(node.args) == 2:
            _compare(node, env)
        if node.kind == "comprehension":
            if node.iter_range is not None:
                visit(node.iter_range, env)
                rng, _ = schema_of(node.iter_range, env, "")
                inner = dict(env)
                if isinstance(rng, SchemaView):
                    types = rng.types()
                    if "array" in types:
                        inner[node.iter_var] = rng.items()
                    elif "object" in types:
                        inner[node.iter_var] = SchemaView({"type": "string"})
                    else:
                        inner[node.iter_var] = None
                else:
                    inner[node.iter_var] = None
                inner[node.accu_var] = None
                if node.iter_var2:
                    inner[node.iter_var2] = None
                for part in (node.accu_init, node.loop_condition, node.loop_step, node.result):
                    if part is not None:
                        visit(part, inner)
            return
        for child in node.children():
            visit(child, env)

    def _compare(node: Node, env: Mapping[str, Any]) -> None:
        left, right = node.args
        for path_node, const_node in ((left, right), (right, left)):
            if const_node.kind != "const" or const_node.value is None:
                continue
            schema, text = schema_of(path_node, env, "")
            if not isinstance(schema, SchemaView):
                continue
            types = schema.types() - {"null"}
            const_type = _JSON_OF_CONST.get(type(const_node.value))
            if not types or const_type is None:
                continue
            compatible = const_type in types or (const_type in ("integer", "number")
                                                 and types & {"integer", "number"})
            if not compatible:
                line, col = at(node)
                findings.append(TypeFinding(
                    "L029", f"compares {text} ({'/'.join(sorted(types))}) with a {const_type} constant "
                            f"{const_node.value!r}; the comparison fails at run time", line, col))

    visit(ast.root, dict(roots or {}))
    unique = {(f.code, f.line, f.column, f.message): f for f in findings}
    return list(unique.values())


def check_source(source: str, schemas: Mapping[str, SchemaView]) -> list[TypeFinding]:
    try:
        return check_expression(compile_expr(source), schemas)
    except ExprError:
        return []  # reported by the expression checks


def rows_schema(fields: tuple[str, ...]) -> SchemaView:
    """A `violations` list of rows with exactly the declared fields (`row:`), each of any type."""
    return SchemaView({"type": "array", "items": {"type": "object", "properties": {f: {} for f in fields},
                                                  "additionalProperties": False}})
