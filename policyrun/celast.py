"""The checked CEL syntax tree, read from the runtime's own serialisation.

`Expression.serialize()` returns a `google.protobuf.Any` holding a `cel.expr.CheckedExpr`. No
maintained Python package ships the `cel.expr` message classes (googleapis-common-protos dropped
`google.api.expr`), and protobuf itself is not a dependency of the CEL wheel, so this module
decodes the few messages it needs straight from the wire format: Expr, Constant, SourceInfo.
Which facts an expression reads, and where, then comes from the parser that evaluates it, never
from a second lexer (a comment or a string that looks like `facts.x` is not a read).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

# --- protobuf wire format ------------------------------------------------------------------------


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def _fields(buf: bytes) -> Iterator[tuple[int, int, Any]]:
    """(field number, wire type, value): ints for varints/fixed, bytes for length-delimited."""
    pos, end = 0, len(buf)
    while pos < end:
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        value: Any
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 1:
            value, pos = buf[pos:pos + 8], pos + 8
        elif wire == 2:
            length, pos = _varint(buf, pos)
            value, pos = buf[pos:pos + length], pos + length
        elif wire == 5:
            value, pos = buf[pos:pos + 4], pos + 4
        else:  # groups are not used by the CEL protos
            raise ValueError(f"unsupported protobuf wire type {wire}")
        yield number, wire, value


def _signed(v: int) -> int:
    return v - (1 << 64) if v >= 1 << 63 else v


# --- the tree ------------------------------------------------------------------------------------

@dataclass
class Node:
    """One expression node. `kind` is const, ident, select, call, list, struct or comprehension."""

    id: int
    kind: str
    name: str = ""  # ident name, selected field, or called function
    value: Any = None  # constant value
    target: Node | None = None  # select operand or method receiver
    args: list[Node] = field(default_factory=list)  # call args, list elements, struct values
    keys: list[Node | str] = field(default_factory=list)  # struct/map entry keys
    test_only: bool = False  # `has(a.b)`
    # comprehension parts
    iter_var: str = ""
    iter_var2: str = ""
    accu_var: str = ""
    iter_range: Node | None = None
    accu_init: Node | None = None
    loop_condition: Node | None = None
    loop_step: Node | None = None
    result: Node | None = None

    def children(self) -> Iterator[Node]:
        for child in (self.target, self.iter_range, self.accu_init, self.loop_condition, self.loop_step,
                      self.result):
            if child is not None:
                yield child
        yield from self.args
        for key in self.keys:
            if isinstance(key, Node):
                yield key


@dataclass
class CheckedAst:
    root: Node
    positions: dict[int, int]  # node id → offset (code points) into the source
    line_offsets: list[int]  # offset of the start of each line after the first
    macro_calls: dict[int, Node]  # comprehension node id → the macro call as written

    def location(self, node_id: int) -> tuple[int, int]:
        """(line, column), both 1-based, of a node in the source text."""
        offset = self.positions.get(node_id, 0)
        line, start = 1, 0
        for i, line_start in enumerate(self.line_offsets):
            if offset >= line_start:
                line, start = i + 2, line_start
            else:
                break
        return line, offset - start + 1

    def offset(self, node_id: int) -> int:
        return self.positions.get(node_id, 0)


def _const(buf: bytes) -> Any:
    for number, _wire, value in _fields(buf):
        if number == 1:
            return None
        if number == 2:
            return bool(value)
        if number in (3,):
            return _signed(value)
        if number == 4:
            return value
        if number == 5:
            return struct.unpack("<d", value)[0]
        if number == 6:
            return value.decode("utf-8")
        if number == 7:
            return bytes(value)
    return None


def _expr(buf: bytes) -> Node:
    node = Node(id=0, kind="unset")
    for number, _wire, value in _fields(buf):
        if number == 2:
            node.id = value
        elif number == 3:
            node.kind, node.value = "const", _const(value)
        elif number == 4:
            node.kind = "ident"
            node.name = next((v.decode() for n, _w, v in _fields(value) if n == 1), "")
        elif number == 5:
            node.kind = "select"
            for n, _w, v in _fields(value):
                if n == 1:
                    node.target = _expr(v)
                elif n == 2:
                    node.name = v.decode()
                elif n == 3:
                    node.test_only = bool(v)
        elif number == 6:
            node.kind = "call"
            for n, _w, v in _fields(value):
                if n == 1:
                    node.target = _expr(v)
                elif n == 2:
                    node.name = v.decode()
                elif n == 3:
                    node.args.append(_expr(v))
        elif number == 7:
            node.kind = "list"
            node.args = [_expr(v) for n, _w, v in _fields(value) if n == 1]
        elif number == 8:
            node.kind = "struct"
            for n, _w, v in _fields(value):
                if n == 2:
                    key: Node | str = ""
                    val: Node | None = None
                    for en, _ew, ev in _fields(v):
                        if en == 2:
                            key = ev.decode()
                        elif en == 3:
                            key = _expr(ev)
                        elif en == 4:
                            val = _expr(ev)
                    node.keys.append(key)
                    node.args.append(val if val is not None else Node(0, "const"))
        elif number == 9:
            node.kind = "comprehension"
            for n, _w, v in _fields(value):
                if n == 1:
                    node.iter_var = v.decode()
                elif n == 2:
                    node.iter_range = _expr(v)
                elif n == 3:
                    node.accu_var = v.decode()
                elif n == 4:
                    node.accu_init = _expr(v)
                elif n == 5:
                    node.loop_condition = _expr(v)
                elif n == 6:
                    node.loop_step = _expr(v)
                elif n == 7:
                    node.result = _expr(v)
                elif n == 8:
                    node.iter_var2 = v.decode()
    return node


def _source_info(buf: bytes) -> tuple[dict[int, int], list[int], dict[int, Node]]:
    positions: dict[int, int] = {}
    line_offsets: list[int] = []
    macros: dict[int, Node] = {}
    for number, wire, value in _fields(buf):
        if number == 3:
            if wire == 2:  # packed
                pos = 0
                while pos < len(value):
                    v, pos = _varint(value, pos)
                    line_offsets.append(v)
            else:
                line_offsets.append(value)
        elif number in (4, 5):
            key, entry = 0, None
            for n, _w, v in _fields(value):
                if n == 1:
                    key = v
                elif n == 2:
                    entry = v
            if number == 4:
                positions[key] = entry if isinstance(entry, int) else 0
            elif isinstance(entry, bytes):
                macros[key] = _expr(entry)
    return positions, line_offsets, macros


def parse_serialized(data: bytes) -> CheckedAst:
    """Decode `Expression.serialize()` output: an Any wrapping a CheckedExpr (expr = field 4,
    source_info = field 5; reference and type maps are not needed here)."""
    inner = next((value for number, _wire, value in _fields(data) if number == 2), data)
    root: Node | None = None
    positions: dict[int, int] = {}
    line_offsets: list[int] = []
    macros: dict[int, Node] = {}
    for number, _wire, value in _fields(inner):
        if number == 4:
            root = _expr(value)
        elif number == 5:
            positions, line_offsets, macros = _source_info(value)
    if root is None:
        raise ValueError("serialized CEL expression holds no syntax tree")
    return CheckedAst(root, positions, line_offsets, macros)


# --- variable paths ------------------------------------------------------------------------------

@dataclass(frozen=True)
class PathRead:
    """A read of `root.a.b…` (field selections, constant string/int indexes, optional `.?x`)."""

    parts: tuple[str, ...]
    node_id: int  # the node of the full path (its position is where the path ends)
    root_id: int  # the identifier node (its position is where the path starts)
    dynamic: bool = False  # followed by an index that is not a constant: the path's whole value is read
    test_only: bool = False  # the path is a `has(...)` presence test

    @property
    def path(self) -> str:
        return ".".join(self.parts)


def _path_of(node: Node) -> tuple[list[str], Node] | None:
    """If `node` is a chain of selections/constant indexes over an identifier: (parts, ident)."""
    parts: list[str] = []
    cur = node
    while True:
        if cur.kind == "ident":
            parts.append(cur.name)
            parts.reverse()
            return parts, cur
        if cur.kind == "select" and cur.target is not None:
            parts.append(cur.name)
            cur = cur.target
        elif cur.kind == "call" and cur.name in ("_[_]", "_?._", "_[?_]") and len(cur.args) == 2 \
                and cur.target is None and cur.args[1].kind == "const" \
                and isinstance(cur.args[1].value, (str, int)) and not isinstance(cur.args[1].value, bool):
            parts.append(str(cur.args[1].value))
            cur = cur.args[0]
        else:
            return None


def variable_reads(ast: CheckedAst, roots: frozenset[str]) -> list[PathRead]:
    """Maximal paths rooted at one of `roots`, in source order. A comprehension variable that
    shadows a root name is not a read of it."""
    out: list[PathRead] = []

    def visit(node: Node, shadowed: frozenset[str]) -> None:
        found = _path_of(node)
        if found is not None:
            parts, ident = found
            if parts[0] in roots and parts[0] not in shadowed:
                out.append(PathRead(tuple(parts), node.id, ident.id, test_only=node.kind == "select"
                                    and node.test_only))
            return
        if node.kind == "call" and node.name in ("_[_]", "_[?_]") and len(node.args) == 2:
            inner = _path_of(node.args[0])
            if inner is not None and inner[0][0] in roots and inner[0][0] not in shadowed:
                out.append(PathRead(tuple(inner[0]), node.args[0].id, inner[1].id, dynamic=True))
                visit(node.args[1], shadowed)
                return
        if node.kind == "comprehension":
            if node.iter_range is not None:
                visit(node.iter_range, shadowed)
            if node.accu_init is not None:
                visit(node.accu_init, shadowed)
            inner_shadow = shadowed | {v for v in (node.iter_var, node.iter_var2, node.accu_var) if v}
            for part in (node.loop_condition, node.loop_step, node.result):
                if part is not None:
                    visit(part, inner_shadow)
            return
        for child in node.children():
            visit(child, shadowed)

    visit(ast.root, frozenset())
    out.sort(key=lambda r: ast.offset(r.root_id))
    return out
