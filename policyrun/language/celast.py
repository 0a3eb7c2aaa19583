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
    b = buf[pos]
    if b < 0x80:
        return b, pos + 1
    result, shift = b & 0x7F, 7
    while True:
        pos += 1
        b = buf[pos]
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos + 1
        shift += 7


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


def _skip(buf: bytes, pos: int, wire: int) -> int:
    """The offset after a field's value (of wire type `wire`) that starts at `pos`."""
    if wire == 0:
        return _varint(buf, pos)[1]
    if wire == 1:
        return pos + 8
    if wire == 2:
        length, pos = _varint(buf, pos)
        return pos + length
    if wire == 5:
        return pos + 4
    raise ValueError(f"unsupported protobuf wire type {wire}")  # groups are not used by the CEL protos


# The decoders below walk (buf, start, end) offsets instead of slicing out each sub-message, and
# read one-byte keys and lengths inline: lint decodes every expression of a rulebook (hundreds of
# kilobytes for the flagship), and a generator per message made this the largest part of a cold lint.

def _string(buf: bytes, pos: int, end: int, want: int) -> str:
    """Field `want` (a string) of the message in buf[pos:end]; '' when absent."""
    out = ""
    while pos < end:
        key = buf[pos]
        if key < 0x80:
            pos += 1
        else:
            key, pos = _varint(buf, pos)
        if key == (want << 3) | 2:
            length, pos = _varint(buf, pos)
            out = buf[pos:pos + length].decode("utf-8")
            pos += length
        else:
            pos = _skip(buf, pos, key & 7)
    return out


def _const(buf: bytes, pos: int, end: int) -> Any:
    out: Any = None
    while pos < end:
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(buf, pos)
            if number == 2:
                return bool(value)
            if number == 3:
                return _signed(value)
            if number == 4:
                return value
            if number == 1:
                return None
        elif wire == 1:
            raw = buf[pos:pos + 8]
            pos += 8
            if number == 5:
                return struct.unpack("<d", raw)[0]
        elif wire == 2:
            length, pos = _varint(buf, pos)
            raw = buf[pos:pos + length]
            pos += length
            if number == 6:
                return raw.decode("utf-8")
            if number == 7:
                return bytes(raw)
        else:
            pos = _skip(buf, pos, wire)
    return out


def _expr(buf: bytes, pos: int = 0, end: int | None = None) -> Node:
    """One Expr message in buf[pos:end]."""
    if end is None:
        end = len(buf)
    node = Node(id=0, kind="unset")
    while pos < end:
        key = buf[pos]
        if key < 0x80:
            pos += 1
        else:
            key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire != 2:
            if number == 2 and wire == 0:
                node.id, pos = _varint(buf, pos)
            else:
                pos = _skip(buf, pos, wire)
            continue
        length = buf[pos]
        if length < 0x80:
            pos += 1
        else:
            length, pos = _varint(buf, pos)
        start, pos = pos, pos + length
        if number == 3:
            node.kind, node.value = "const", _const(buf, start, pos)
        elif number == 4:
            node.kind = "ident"
            node.name = _string(buf, start, pos, 1)
        elif number == 5:
            node.kind = "select"
            _select(buf, start, pos, node)
        elif number == 6:
            node.kind = "call"
            _call(buf, start, pos, node)
        elif number == 7:
            node.kind = "list"
            node.args = [_expr(buf, s, e) for n, s, e in _submessages(buf, start, pos) if n == 1]
        elif number == 8:
            node.kind = "struct"
            _struct(buf, start, pos, node)
        elif number == 9:
            node.kind = "comprehension"
            _comprehension(buf, start, pos, node)
    return node


def _submessages(buf: bytes, pos: int, end: int) -> Iterator[tuple[int, int, int]]:
    """(field number, start, end) of each length-delimited field in buf[pos:end]; other fields skipped."""
    while pos < end:
        key = buf[pos]
        if key < 0x80:
            pos += 1
        else:
            key, pos = _varint(buf, pos)
        if key & 7 != 2:
            pos = _skip(buf, pos, key & 7)
            continue
        length = buf[pos]
        if length < 0x80:
            pos += 1
        else:
            length, pos = _varint(buf, pos)
        yield key >> 3, pos, pos + length
        pos += length


def _select(buf: bytes, pos: int, end: int, node: Node) -> None:
    while pos < end:
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(buf, pos)
            if number == 3:
                node.test_only = bool(value)
        elif wire == 2:
            length, pos = _varint(buf, pos)
            if number == 1:
                node.target = _expr(buf, pos, pos + length)
            elif number == 2:
                node.name = buf[pos:pos + length].decode("utf-8")
            pos += length
        else:
            pos = _skip(buf, pos, wire)


def _call(buf: bytes, pos: int, end: int, node: Node) -> None:
    for number, start, stop in _submessages(buf, pos, end):
        if number == 1:
            node.target = _expr(buf, start, stop)
        elif number == 2:
            node.name = buf[start:stop].decode("utf-8")
        elif number == 3:
            node.args.append(_expr(buf, start, stop))


def _struct(buf: bytes, pos: int, end: int, node: Node) -> None:
    for number, start, stop in _submessages(buf, pos, end):
        if number != 2:
            continue
        key: Node | str = ""
        val: Node | None = None
        for n, s, e in _submessages(buf, start, stop):
            if n == 2:
                key = buf[s:e].decode("utf-8")
            elif n == 3:
                key = _expr(buf, s, e)
            elif n == 4:
                val = _expr(buf, s, e)
        node.keys.append(key)
        node.args.append(val if val is not None else Node(0, "const"))


def _comprehension(buf: bytes, pos: int, end: int, node: Node) -> None:
    for number, start, stop in _submessages(buf, pos, end):
        if number == 1:
            node.iter_var = buf[start:stop].decode("utf-8")
        elif number == 2:
            node.iter_range = _expr(buf, start, stop)
        elif number == 3:
            node.accu_var = buf[start:stop].decode("utf-8")
        elif number == 4:
            node.accu_init = _expr(buf, start, stop)
        elif number == 5:
            node.loop_condition = _expr(buf, start, stop)
        elif number == 6:
            node.loop_step = _expr(buf, start, stop)
        elif number == 7:
            node.result = _expr(buf, start, stop)
        elif number == 8:
            node.iter_var2 = buf[start:stop].decode("utf-8")


def _source_info(buf: bytes, pos: int, end: int) -> tuple[dict[int, int], list[int]]:
    """Positions (SourceInfo field 4, a map<int64, int32>) and line offsets (field 3). The macro
    calls (field 5) are not decoded: nothing reads them."""
    positions: dict[int, int] = {}
    line_offsets: list[int] = []
    while pos < end:
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        if number == 4 and wire == 2:
            length = buf[pos]
            if length < 0x80:
                pos += 1
            else:
                length, pos = _varint(buf, pos)
            stop = pos + length
            entry_key, entry = 0, 0
            while pos < stop:
                tag = buf[pos]
                pos += 1
                if tag & 7:  # not a varint: no such field in a map<int64, int32> entry
                    pos = _skip(buf, pos, tag & 7)
                    continue
                value = buf[pos]
                if value < 0x80:
                    pos += 1
                else:
                    value, pos = _varint(buf, pos)
                if tag == 0x08:
                    entry_key = value
                elif tag == 0x10:
                    entry = value
            positions[entry_key] = entry
        elif number == 3 and wire == 2:  # packed
            length, pos = _varint(buf, pos)
            stop = pos + length
            while pos < stop:
                v, pos = _varint(buf, pos)
                line_offsets.append(v)
        elif number == 3 and wire == 0:
            v, pos = _varint(buf, pos)
            line_offsets.append(v)
        else:
            pos = _skip(buf, pos, wire)
    return positions, line_offsets


def parse_serialized(data: bytes) -> CheckedAst:
    """Decode `Expression.serialize()` output: an Any wrapping a CheckedExpr (expr = field 4,
    source_info = field 5; reference and type maps are not needed here)."""
    inner = next(((s, e) for number, s, e in _submessages(data, 0, len(data)) if number == 2), (0, len(data)))
    root: Node | None = None
    positions: dict[int, int] = {}
    line_offsets: list[int] = []
    for number, start, stop in _submessages(data, *inner):
        if number == 4:
            root = _expr(data, start, stop)
        elif number == 5:
            positions, line_offsets = _source_info(data, start, stop)
    if root is None:
        raise ValueError("serialized CEL expression holds no syntax tree")
    return CheckedAst(root, positions, line_offsets)


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
