"""Load YAML into plain data while remembering where every node came from.

PyYAML's composer gives us nodes with marks; we build the Python values ourselves so we can
reject what a policy file must never contain (duplicate keys, non-string keys, object-building
tags, alias bombs, nesting beyond a bound, numbers too long to convert) with an error at the
exact line and column. Merge keys (`<<: *base`) are resolved here too, so that a key written next
to them overrides the merged one instead of counting as a duplicate, and merged keys keep the
position where they were written.

Every YAML document policyrun reads goes through this module (rulebooks, inputs, test files,
template context, `results` files): nothing calls `yaml.load` on its own.

Two schemas. policyrun's own files (rulebooks, tests, inputs, waivers, template context) keep
PyYAML's YAML 1.1 resolution, where `on`, `yes` and `no` are booleans, so an unquoted `on:` key is
an error (Y002) the author fixes by quoting. Files policyrun does not own (`file.read`,
`attestation`, `results`, CI workflows) are read with the YAML 1.2 core schema (`data=True`), as
the tools that write them read them: `on:` and `yes` are strings, `0o17` is octal and `017`
decimal, `1e3` a float, a date a string. The same bounds apply to both.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from policyrun import limits
from policyrun.errors import Location, RulebookError

MAX_BYTES = limits.POLICY_BYTES
MAX_NODES = limits.POLICY_NODES
MAX_DEPTH = limits.POLICY_DEPTH

NodePath = tuple[str | int, ...]

_PLAIN_TAGS = {
    "tag:yaml.org,2002:str", "tag:yaml.org,2002:int", "tag:yaml.org,2002:float",
    "tag:yaml.org,2002:bool", "tag:yaml.org,2002:null",
}
_NUMBER_TAGS = {"tag:yaml.org,2002:int", "tag:yaml.org,2002:float"}
_TIMESTAMP = "tag:yaml.org,2002:timestamp"
_MERGE = "tag:yaml.org,2002:merge"


@dataclass
class SourceMap:
    """Positions of the nodes of one document, by path from the root."""

    file: str
    values: dict[NodePath, tuple[int, int]] = field(default_factory=dict)
    keys: dict[NodePath, tuple[int, int]] = field(default_factory=dict)
    styles: dict[NodePath, str | None] = field(default_factory=dict)  # scalar style: None, "'", '"', "|", ">"
    ends: dict[NodePath, int] = field(default_factory=dict)  # a scalar's last line (1-based)
    text: str = ""

    def locate_in_scalar(self, path: NodePath, line: int, column: int) -> Location:
        """Map a 1-based line/column inside a string scalar's value to the file position.

        Exact for plain and quoted single-line scalars, literal blocks (`|`) and folded blocks
        (`>`) of plain lines; for multi-line flow scalars the line is exact and the column
        approximate.
        """
        base = self.locate(path)
        style = self.styles.get(tuple(path))
        if style == ">":
            return self._in_folded(base, line, column)
        if style == "|":
            file_line = base.line + line
            lines = self.text.splitlines()
            indent = 0
            if 0 < file_line <= len(lines):
                row = lines[file_line - 1]
                indent = len(row) - len(row.lstrip(" "))
            return Location(self.file, file_line, indent + column)
        quote = 1 if style in ("'", '"') else 0
        if line == 1:
            return Location(self.file, base.line, base.column + quote + column - 1)
        return Location(self.file, base.line + line - 1, column)

    def _in_folded(self, base: Location, line: int, column: int) -> Location:
        """A position in a folded block's value, where each run of non-blank lines is one line
        (its lines joined by a space) and each blank line ends one: walk the file's lines."""
        lines = self.text.splitlines()
        i = base.line  # 0-based index of the block's first line (base is its header, 1-based)
        for _ in range(line - 1):  # skip the value's earlier lines: each ends at a blank line
            while i < len(lines) and lines[i].strip():
                i += 1
            i += 1
        column = max(column, 1)
        while i < len(lines):
            row = lines[i]
            indent = len(row) - len(row.lstrip(" "))
            content = row[indent:]
            last = i + 1 >= len(lines) or not lines[i + 1].strip() or \
                len(lines[i + 1]) - len(lines[i + 1].lstrip(" ")) < indent
            if column <= len(content) + 1 or last:
                return Location(self.file, i + 1, indent + column)
            column -= len(content) + 1  # the line and the space that joined it to the next
            i += 1
        return base

    def locate(self, path: NodePath, *, key: bool = False) -> Location:
        """The location of `path`, or of its nearest ancestor that has one."""
        table = self.keys if key else self.values
        p = tuple(path)
        while p:
            if p in table:
                return Location(self.file, *table[p])
            if not key and p in self.keys:
                return Location(self.file, *self.keys[p])
            p = p[:-1]
        return Location(self.file, *self.values.get((), (1, 1)))


def _loc(file: str, node: Node) -> Location:
    return Location(file, node.start_mark.line + 1, node.start_mark.column + 1)


class _Builder:
    def __init__(self, file: str, loader: Any, *, max_depth: int = MAX_DEPTH, max_nodes: int = MAX_NODES) -> None:
        self.file = file
        self.loader = loader
        self.smap = SourceMap(file)
        self.count = 0
        self.max_depth = max_depth
        self.max_nodes = max_nodes

    def fail(self, node: Node, code: str, message: str) -> RulebookError:
        return RulebookError(message, code=code, location=_loc(self.file, node))

    def tick(self, node: Node) -> None:
        self.count += 1
        if self.count > self.max_nodes:
            raise self.fail(node, "Y005", f"document expands to more than {self.max_nodes} nodes "
                                          "(alias expansion?); remove the aliases or split the file")

    def build(self, node: Node, path: NodePath, depth: int = 0) -> Any:
        self.tick(node)
        self.smap.values.setdefault(path, (node.start_mark.line + 1, node.start_mark.column + 1))
        if isinstance(node, ScalarNode):
            self.smap.styles[path] = node.style
            # The end mark is just past the scalar: at column 0 of the next line after a block scalar.
            self.smap.ends[path] = node.end_mark.line + (0 if node.end_mark.column == 0 else 1)
            if node.tag == _TIMESTAMP:
                return node.value  # keep dates as written; policy compares strings
            if node.tag not in _PLAIN_TAGS:
                raise self.fail(node, "Y003", f"tag {node.tag!r} is not allowed; policy files hold plain "
                                              "strings, numbers, booleans, lists and mappings")
            if node.tag in _NUMBER_TAGS and len(node.value) > limits.NUMBER_CHARS:
                # Python refuses to convert an integer of more than 4,300 digits (a bare ValueError);
                # the same bound as every JSON number (jsonfile), long before that.
                raise self.fail(node, "Y009", f"a number of {len(node.value):,} characters: numbers are limited to "
                                              f"{limits.NUMBER_CHARS} characters; quote it to make it a string")
            return self.loader.construct_object(node)
        if depth >= self.max_depth:
            raise self.fail(node, "Y008", f"lists and mappings nest deeper than {self.max_depth} levels here; "
                                          "flatten the document")
        if isinstance(node, SequenceNode):
            if node.tag != "tag:yaml.org,2002:seq":
                raise self.fail(node, "Y003", f"tag {node.tag!r} is not allowed on a list")
            return [self.build(child, (*path, i), depth + 1) for i, child in enumerate(node.value)]
        if isinstance(node, MappingNode):
            if node.tag != "tag:yaml.org,2002:map":
                raise self.fail(node, "Y003", f"tag {node.tag!r} is not allowed on a mapping")
            return self.mapping(node, path, depth)
        raise self.fail(node, "Y003", "unsupported YAML node")

    def mapping(self, node: MappingNode, path: NodePath, depth: int) -> dict[str, Any]:
        explicit: dict[str, tuple[Node, Node]] = {}
        merged: list[tuple[Node, Node]] = []
        for key_node, value_node in node.value:
            if key_node.tag == _MERGE:
                merged.extend(self.merge_pairs(value_node))
                continue
            key = self.key(key_node)
            if key in explicit:
                first = explicit[key][0].start_mark
                raise self.fail(key_node, "Y001", f"duplicate key {key!r} (first defined at line "
                                                  f"{first.line + 1}); remove one of them")
            explicit[key] = (key_node, value_node)
        # Explicit keys override merged ones; among merged mappings the first one wins (YAML's
        # merge-key rule). A merged key is never a duplicate, and keeps the position it was written at.
        pairs: dict[str, tuple[Node, Node]] = {}
        for key_node, value_node in merged:
            key = self.key(key_node)
            if key not in explicit:
                pairs.setdefault(key, (key_node, value_node))
        pairs.update(explicit)
        out: dict[str, Any] = {}
        for key, (key_node, value_node) in pairs.items():
            self.smap.keys[(*path, key)] = (key_node.start_mark.line + 1, key_node.start_mark.column + 1)
            out[key] = self.build(value_node, (*path, key), depth + 1)
        return out

    def merge_pairs(self, value: Node) -> list[tuple[Node, Node]]:
        """The (key, value) nodes `<<: value` brings in, highest precedence first."""
        sources = value.value if isinstance(value, SequenceNode) else [value]
        out: list[tuple[Node, Node]] = []
        for source in sources:
            if not isinstance(source, MappingNode):
                raise self.fail(source, "Y010", "`<<` merges a mapping or a list of mappings (`<<: *name`)")
            nested: list[tuple[Node, Node]] = []
            for key_node, value_node in source.value:
                self.tick(key_node)
                if key_node.tag == _MERGE:
                    nested.extend(self.merge_pairs(value_node))
                else:
                    out.append((key_node, value_node))
            out.extend(nested)
        return out

    def key(self, node: Node) -> str:
        if not isinstance(node, ScalarNode) or node.tag != "tag:yaml.org,2002:str":
            raise self.fail(node, "Y002", "mapping keys must be strings; quote the key")
        return str(node.value)


# libyaml's parser when available: same nodes and marks, an order of magnitude faster.
_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Yaml12Loader(_Loader):  # type: ignore[valid-type,misc]
    """The YAML 1.2 core schema (spec 1.2.2, 10.3.2) on PyYAML's loader: a fixed table of plain
    scalar forms, so no second YAML library (and no second copy of the bounds above) is needed.
    libyaml parses; resolution and construction are these Python tables."""

    yaml_implicit_resolvers: dict[str | None, list[tuple[str, re.Pattern[str]]]] = {}


def _construct_int12(loader: Any, node: ScalarNode) -> int:
    text = str(node.value)
    sign, digits = (-1, text[1:]) if text[:1] == "-" else (1, text.lstrip("+"))
    if digits.startswith("0o"):
        return sign * int(digits[2:], 8)
    if digits.startswith("0x"):
        return sign * int(digits[2:], 16)
    return sign * int(digits, 10)  # `017` is seventeen in YAML 1.2, not octal


for _tag, _regex, _first in (
    ("tag:yaml.org,2002:null", r"^(?:~|null|Null|NULL|)$", ["~", "n", "N", ""]),
    ("tag:yaml.org,2002:bool", r"^(?:true|True|TRUE|false|False|FALSE)$", list("tTfF")),
    ("tag:yaml.org,2002:int", r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$", list("-+0123456789")),
    ("tag:yaml.org,2002:float", r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
                                r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$", list("-+.0123456789")),
    ("tag:yaml.org,2002:merge", r"^<<$", ["<"]),
):
    _Yaml12Loader.add_implicit_resolver(_tag, re.compile(_regex), _first)
_Yaml12Loader.add_constructor("tag:yaml.org,2002:int", _construct_int12)


def load_yaml_text(text: str, file: str, *, max_depth: int = MAX_DEPTH,
                   max_nodes: int = MAX_NODES, data: bool = False) -> tuple[Any, SourceMap]:
    """`data`: a file policyrun does not own, read with the YAML 1.2 core schema (module docstring)."""
    loader = (_Yaml12Loader if data else _Loader)(text)
    try:
        node = loader.get_single_node()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (0, 0)
        if "nesting depth" in str(exc.problem):  # libyaml's own bound (1000) is far above ours
            raise RulebookError(f"lists and mappings nest deeper than {max_depth} levels; flatten the document",
                                code="Y008", location=Location(file, line, col)) from None
        raise RulebookError(f"YAML syntax error: {exc.problem or exc}", code="Y000",
                            location=Location(file, line, col)) from None
    except yaml.YAMLError as exc:
        raise RulebookError(f"YAML error: {exc}", code="Y000", location=Location(file)) from None
    except RecursionError:  # the pure-Python composer, on nesting libyaml would have refused
        raise RulebookError(f"lists and mappings nest deeper than {max_depth} levels; flatten the document",
                            code="Y008", location=Location(file)) from None
    finally:
        loader.dispose()
    if node is None:
        return None, SourceMap(file)
    builder = _Builder(file, loader, max_depth=max_depth, max_nodes=max_nodes)
    return builder.build(node, ()), builder.smap


def read_text(path: Path, file: str | None = None, *, max_bytes: int = MAX_BYTES) -> str:
    """Read a policy file: a regular file, bounded size, strict UTF-8, errors located."""
    name = file or str(path)
    try:
        data = limits.read_limited(path, max_bytes)
    except limits.TooLarge as exc:
        raise RulebookError(f"file is {exc.reason}; split it", code="Y006", location=Location(name)) from None
    except limits.Unreadable as exc:
        raise RulebookError(f"cannot read file: {exc.reason}", code="Y007", location=Location(name)) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        col = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise RulebookError(f"invalid UTF-8 (byte 0x{data[exc.start]:02x}); save the file as UTF-8",
                            code="Y004", location=Location(name, line, col)) from None


def load_yaml_file(path: Path, file: str | None = None) -> tuple[Any, SourceMap]:
    return load_yaml_text(read_text(path, file), file or str(path))
