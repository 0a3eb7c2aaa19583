"""Load YAML into plain data while remembering where every node came from.

PyYAML's composer gives us nodes with marks; we build the Python values ourselves so we can
reject what a policy file must never contain (duplicate keys, non-string keys, object-building
tags, alias bombs) with an error at the exact line and column.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from policyrun.errors import Location, RulebookError

MAX_BYTES = 4 * 1024 * 1024
MAX_NODES = 200_000  # after alias expansion; a "billion laughs" document trips this early

NodePath = tuple[str | int, ...]

_PLAIN_TAGS = {
    "tag:yaml.org,2002:str", "tag:yaml.org,2002:int", "tag:yaml.org,2002:float",
    "tag:yaml.org,2002:bool", "tag:yaml.org,2002:null",
}
_TIMESTAMP = "tag:yaml.org,2002:timestamp"


@dataclass
class SourceMap:
    """Positions of the nodes of one document, by path from the root."""

    file: str
    values: dict[NodePath, tuple[int, int]] = field(default_factory=dict)
    keys: dict[NodePath, tuple[int, int]] = field(default_factory=dict)
    styles: dict[NodePath, str | None] = field(default_factory=dict)  # scalar style: None, "'", '"', "|", ">"
    text: str = ""

    def locate_in_scalar(self, path: NodePath, line: int, column: int) -> Location:
        """Map a 1-based line/column inside a string scalar's value to the file position.

        Exact for plain and quoted single-line scalars and for literal blocks (`|`); for folded
        or multi-line flow scalars the line is exact and the column approximate.
        """
        base = self.locate(path)
        style = self.styles.get(tuple(path))
        if style in ("|", ">"):
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
    def __init__(self, file: str, loader: Any) -> None:
        self.file = file
        self.loader = loader
        self.smap = SourceMap(file)
        self.count = 0

    def fail(self, node: Node, code: str, message: str) -> RulebookError:
        return RulebookError(message, code=code, location=_loc(self.file, node))

    def build(self, node: Node, path: NodePath) -> Any:
        self.count += 1
        if self.count > MAX_NODES:
            raise self.fail(node, "Y005", f"document expands to more than {MAX_NODES} nodes "
                                          "(alias expansion?); remove the aliases or split the file")
        self.smap.values.setdefault(path, (node.start_mark.line + 1, node.start_mark.column + 1))
        if isinstance(node, ScalarNode):
            self.smap.styles[path] = node.style
            if node.tag == _TIMESTAMP:
                return node.value  # keep dates as written; policy compares strings
            if node.tag not in _PLAIN_TAGS:
                raise self.fail(node, "Y003", f"tag {node.tag!r} is not allowed; policy files hold plain "
                                              "strings, numbers, booleans, lists and mappings")
            return self.loader.construct_object(node)
        if isinstance(node, SequenceNode):
            if node.tag != "tag:yaml.org,2002:seq":
                raise self.fail(node, "Y003", f"tag {node.tag!r} is not allowed on a list")
            return [self.build(child, (*path, i)) for i, child in enumerate(node.value)]
        if isinstance(node, MappingNode):
            if node.tag != "tag:yaml.org,2002:map":
                raise self.fail(node, "Y003", f"tag {node.tag!r} is not allowed on a mapping")
            self.loader.flatten_mapping(node)  # resolve `<<` merge keys
            out: dict[str, Any] = {}
            for key_node, value_node in node.value:
                if not isinstance(key_node, ScalarNode) or key_node.tag != "tag:yaml.org,2002:str":
                    raise self.fail(key_node, "Y002", "mapping keys must be strings; quote the key")
                key = key_node.value
                if key in out:
                    first = self.smap.keys.get((*path, key), (0, 0))
                    raise self.fail(key_node, "Y001", f"duplicate key {key!r} (first defined at line "
                                                      f"{first[0]}); remove one of them")
                self.smap.keys[(*path, key)] = (key_node.start_mark.line + 1, key_node.start_mark.column + 1)
                out[key] = self.build(value_node, (*path, key))
            return out
        raise self.fail(node, "Y003", "unsupported YAML node")


# libyaml's parser when available: same nodes and marks, an order of magnitude faster.
_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_yaml_text(text: str, file: str) -> tuple[Any, SourceMap]:
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line, col = (mark.line + 1, mark.column + 1) if mark else (0, 0)
        raise RulebookError(f"YAML syntax error: {exc.problem or exc}", code="Y000",
                            location=Location(file, line, col)) from None
    except yaml.YAMLError as exc:
        raise RulebookError(f"YAML error: {exc}", code="Y000", location=Location(file)) from None
    finally:
        loader.dispose()
    if node is None:
        return None, SourceMap(file)
    builder = _Builder(file, loader)
    return builder.build(node, ()), builder.smap


def read_text(path: Path, file: str | None = None) -> str:
    """Read a policy file: bounded size, strict UTF-8, errors located."""
    name = file or str(path)
    try:
        size = path.stat().st_size
        if size > MAX_BYTES:
            raise RulebookError(f"file is {size} bytes, over the {MAX_BYTES}-byte limit for policy files",
                                code="Y006", location=Location(name))
        data = path.read_bytes()
    except OSError as exc:
        raise RulebookError(f"cannot read file: {exc.strerror}", code="Y007", location=Location(name)) from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        col = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        raise RulebookError(f"invalid UTF-8 (byte 0x{data[exc.start]:02x}); save the file as UTF-8",
                            code="Y004", location=Location(name, line, col)) from None


def load_yaml_file(path: Path, file: str | None = None) -> tuple[Any, SourceMap]:
    return load_yaml_text(read_text(path, file), file or str(path))
