"""`python.constants`: module-level constants by name (annotated ones included), their literal
values, and (optionally) every place each is read, with the context of the read — so "the plugin
checks the installed vLLM against TARGET_VLLM_VERSION at runtime" is one CEL expression."""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Iterator, Mapping
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

from policyrun.gcpause import gc_paused
from policyrun.probes.base import ProbeContext, ProbeError, ProbeResult
from policyrun.probes._kit.gitclient import rev_param
from policyrun.probes.python.imports import SOURCE_ROOTS, statements
from policyrun.probes.python.resolve import ModuleInfo, Resolver, module_statements
from policyrun.probes.python.source import (PARSE_ERROR_SCHEMA, SKIPPED_SCHEMA, absolute_module, as_list, import_binds,
                                       object_schema, open_tree, schema_list, skipped_facts, source_text, unparse)
from policyrun.probes._kit.paths import PathFilter

CONTEXTS = ("compare", "call_arg", "call_receiver", "format", "other")
# A reference counts as a runtime check when it is compared, or passed to / called on one of these.
CHECK_METHODS = frozenset({"startswith", "endswith"})
_OPS = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Is: "is",
        ast.IsNot: "is not", ast.In: "in", ast.NotIn: "not in"}
_INT64 = 2 ** 63


@dataclass(frozen=True)
class Constant:
    file: str
    line: int
    name: str
    node: ast.Assign | ast.AnnAssign

    @property
    def site(self) -> str:
        return f"{self.file}:{self.line}"


def json_literal(node: ast.expr) -> tuple[bool, Any]:
    """(is a literal, its JSON value): strings, numbers, booleans, None, and lists/tuples/dicts of them."""
    try:
        value = ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False, None
    return _jsonable(value)


def _jsonable(value: Any) -> tuple[bool, Any]:
    if value is None or isinstance(value, (str, bool)):
        return True, value
    if isinstance(value, int):
        return -_INT64 <= value < _INT64, value if -_INT64 <= value < _INT64 else None
    if isinstance(value, float):
        return math.isfinite(value), value if math.isfinite(value) else None
    if isinstance(value, (list, tuple)):
        items = [_jsonable(v) for v in value]
        return (True, [v for _, v in items]) if all(ok for ok, _ in items) else (False, None)
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        pairs = {k: _jsonable(v) for k, v in value.items()}
        return (True, {k: v for k, (_, v) in pairs.items()}) if all(ok for ok, _ in pairs.values()) else (False, None)
    return False, None  # bytes, complex, sets, Ellipsis: not JSON


def find_constants(info: ModuleInfo, wanted: Any) -> Iterator[Constant]:
    """Module-level `NAME = value` / `NAME: T = value` (also inside module-level if/try/with)."""
    tree = info.syntax()
    if tree is None:
        return
    for stmt, _ in module_statements(tree.body):
        if isinstance(stmt, ast.Assign):
            for target in stmt.targets:  # `A = B = 1` binds both; tuple targets are not constants
                if isinstance(target, ast.Name) and wanted(target.id):
                    yield Constant(info.path, stmt.lineno, target.id, stmt)
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None and isinstance(stmt.target, ast.Name) \
                and wanted(stmt.target.id):
            yield Constant(info.path, stmt.lineno, stmt.target.id, stmt)


def constant_row(c: Constant, text: str) -> dict[str, Any]:
    value_node = c.node.value
    assert value_node is not None  # find_constants keeps annotated assignments with a value only
    literal, value = json_literal(value_node)
    annotation = c.node.annotation if isinstance(c.node, ast.AnnAssign) else None
    return {"site": c.site, "file": c.file, "line": c.line, "name": c.name, "value": value, "literal": literal,
            "source": ast.get_source_segment(text, value_node) or unparse(value_node),
            "annotation": unparse(annotation) if annotation is not None else None}


# --- references ---------------------------------------------------------------------------------

class _Scope:
    """What names in one file refer to: constants (defined here or imported), or modules."""

    def __init__(self, info: ModuleInfo, resolver: Resolver, index: dict[tuple[str, str], Constant]) -> None:
        self.resolver = resolver
        self.index = index
        self.names: dict[str, Constant] = {}
        self.modules: dict[str, str] = {}
        for (file, name), c in index.items():
            if file == info.path:
                self.names[name] = c
        tree = info.syntax()
        assert tree is not None
        for stmt, _ in statements(tree.body):
            if isinstance(stmt, ast.Import):
                for alias in stmt.names:
                    name, module = import_binds(alias)
                    self.modules[name] = module
            elif isinstance(stmt, ast.ImportFrom):
                source = absolute_module(stmt.module, stmt.level, info.package)
                if source is None or not resolver.has_package(source):
                    continue
                for alias in stmt.names:
                    if alias.name == "*":
                        continue
                    local = alias.asname or alias.name
                    target = resolver.resolve(source, alias.name)
                    if not target.found or not target.defining_file:
                        continue
                    if target.kind == "module":
                        self.modules[local] = resolver.namer.module_of(target.defining_file)[0]
                    elif target.name and (target.defining_file, target.name) in index:
                        self.names[local] = index[(target.defining_file, target.name)]

    def of(self, node: ast.AST) -> tuple[Constant, str] | None:
        """The constant a Name or Attribute read refers to, and the local spelling."""
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load) and node.id in self.names:
            return self.names[node.id], node.id
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load):
            dotted = _dotted(node.value)
            if dotted is None:
                return None
            head, _, rest = dotted.partition(".")
            if head not in self.modules:
                return None
            module = self.modules[head] + (f".{rest}" if rest else "")
            if not self.resolver.has_package(module):
                return None
            target = self.resolver.resolve(module, node.attr)
            if target.found and target.defining_file and target.name:
                c = self.index.get((target.defining_file, target.name))
                if c is not None:
                    return c, f"{dotted}.{node.attr}"
        return None


def _dotted(node: ast.expr) -> str | None:
    """`a.b.c` for a chain of attributes on a name (iterative: a chain can be thousands long)."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return ".".join([node.id, *reversed(parts)])


def context_of(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> dict[str, Any]:
    """compare when any enclosing expression of the statement is a comparison (`f(x) == f(T)`);
    else the nearest of: an argument of a call, the receiver of a method call, an f-string."""
    compare: ast.Compare | None = None
    nearest: str | None = None
    call: ast.Call | None = None
    child = node
    while (parent := parents.get(child)) is not None and not isinstance(parent, ast.stmt):
        if isinstance(parent, ast.Compare):
            compare = compare or parent
        elif isinstance(parent, ast.Call) and child is not parent.func and call is None:
            call, nearest = parent, nearest or "call_arg"
        elif (isinstance(parent, ast.Attribute) and child is parent.value and call is None
              and isinstance(grand := parents.get(parent), ast.Call) and grand.func is parent):
            call, nearest = grand, nearest or "call_receiver"
        elif isinstance(parent, ast.JoinedStr):
            nearest = nearest or "format"
        child = parent
    func = call.func if call is not None else None
    return {
        "context": "compare" if compare is not None else nearest or "other",
        "callee": unparse(func) if func is not None else None,
        "method": func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None,
        "ops": [_OPS.get(type(op), type(op).__name__) for op in compare.ops] if compare is not None else [],
    }


def find_references(info: ModuleInfo, scope: _Scope) -> Iterator[dict[str, Any]]:
    tree = info.syntax()
    assert tree is not None
    parents: dict[ast.AST, ast.AST] = {}
    for parent in ast.walk(tree):
        for child in ast.iter_child_nodes(parent):
            parents[child] = parent
    lines = source_text(info.source).splitlines()
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Name, ast.Attribute)):
            continue
        hit = scope.of(node)
        if hit is None:
            continue
        c, local = hit
        line = getattr(node, "lineno", 0)
        row = {"site": f"{info.path}:{line}", "file": info.path, "line": line, "column": node.col_offset + 1,
               "name": c.name, "local": local, "constant": c.site, **context_of(node, parents),
               "text": lines[line - 1].strip() if 0 < line <= len(lines) else ""}
        yield row


def is_check(ref: Mapping[str, Any]) -> bool:
    return ref["context"] == "compare" or (ref["context"] in ("call_arg", "call_receiver")
                                          and ref["method"] in CHECK_METHODS)


# --- the probe ----------------------------------------------------------------------------------

_CONSTANT = object_schema("One module-level assignment.", {
    "site": {"type": "string", "description": "`file:line`."},
    "file": {"type": "string"}, "line": {"type": "integer"}, "name": {"type": "string"},
    "value": {"type": ["string", "number", "integer", "boolean", "array", "object", "null"],
              "description": "The value when it is a JSON-able literal (ast.literal_eval), else null."},
    "literal": {"type": "boolean", "description": "value holds the literal (false: an expression; value null)."},
    "source": {"type": "string", "description": "Source text of the value."},
    "annotation": {"type": ["string", "null"], "description": "`Final[str]` for `X: Final[str] = ...`."},
})
_REFERENCE = object_schema("One read of a constant.", {
    "site": {"type": "string"}, "file": {"type": "string"}, "line": {"type": "integer"},
    "column": {"type": "integer", "description": "1-based."},
    "name": {"type": "string", "description": "The constant's name where it is defined."},
    "local": {"type": "string", "description": "How this file spells it (an import alias, `mod.NAME`)."},
    "constant": {"type": "string", "description": "Site of the constant's definition."},
    "context": {"type": "string", "enum": list(CONTEXTS), "description": "compare, call_arg, call_receiver, format or other."},
    "callee": {"type": ["string", "null"], "description": "The call it is an argument or receiver of "
                                                          "(`version_text.startswith`)."},
    "method": {"type": ["string", "null"], "description": "Last name of callee (`startswith`)."},
    "ops": {"type": "array", "items": {"type": "string"}, "description": "Operators of the comparison (`==`)."},
    "text": {"type": "string", "description": "The source line, stripped."},
})

FACT_SCHEMA: Mapping[str, Any] = object_schema("Module-level constants and their reads.", {
    "root": {"type": "string"}, "rev": {"type": ["string", "null"]}, "rev_sha": {"type": ["string", "null"]},
    "files_scanned": {"type": "integer"},
    "parse_errors": {"type": "array", "items": PARSE_ERROR_SCHEMA},
    "skipped": SKIPPED_SCHEMA,
    "constants": {"type": "array", "items": _CONSTANT, "description": "By file, then line."},
    "by_name": {"type": "object", "additionalProperties": {"type": "array", "items": _CONSTANT},
                "description": "Name → its rows."},
    "references": {"type": "array", "items": _REFERENCE, "description": "With references: true; else empty."},
    "checks": {"type": "array", "items": _REFERENCE,
               "description": "References that are runtime checks: context compare, or an argument or receiver "
                              "of startswith/endswith."},
})

PARAMS_SCHEMA: Mapping[str, Any] = {
    "type": "object", "additionalProperties": False, "required": ["root"],
    "anyOf": [{"required": ["names"]}, {"required": ["name_pattern"]}],
    "properties": {
        "root": {"type": "string", "minLength": 1, "description": "Directory to scan."},
        "rev": rev_param("Read this revision's git objects instead of the working tree."),
        "include": schema_list("Globs relative to root.", default=["**/*.py"]),
        "exclude": schema_list("Globs to skip."),
        "names": {"type": "array", "items": {"type": "string", "minLength": 1}, "description": "Exact names."},
        "name_pattern": {"type": "string", "minLength": 1,
                         "description": "Python regular expression a name must match in full."},
        "references": {"type": "boolean", "default": False,
                       "description": "Also list every read of each constant (imports followed)."},
        "source_roots": SOURCE_ROOTS,
    },
}


class ConstantsProbe:
    kind = "python.constants"
    summary = "Module-level Python constants (annotated too) with literal values, and where each is read."
    params_schema = PARAMS_SCHEMA
    fact_schema = FACT_SCHEMA

    def side_effects(self, params: Mapping[str, Any]) -> frozenset[str]:
        return frozenset()

    def run(self, params: Mapping[str, Any], ctx: ProbeContext) -> ProbeResult:
        wanted = _matcher(params)
        with ExitStack() as stack:
            stack.enter_context(gc_paused())
            tree = stack.enter_context(open_tree(params["root"], params.get("rev"), ctx))
            resolver = Resolver(tree, as_list(params.get("source_roots")) or ["."])
            keep = PathFilter(as_list(params.get("include")) or ["**/*.py"], as_list(params.get("exclude")))
            infos = [resolver.info(p) for p in tree.select(keep) if p.endswith(".py")]
            found: list[Constant] = []
            rows: list[dict[str, Any]] = []
            for info in infos:
                text = source_text(info.source)
                for c in find_constants(info, wanted):
                    found.append(c)
                    rows.append(constant_row(c, text))
            references: list[dict[str, Any]] = []
            if params.get("references") and found:
                references = _references(infos, resolver, found)
            by_name: dict[str, list[dict[str, Any]]] = {}
            for row in rows:
                by_name.setdefault(row["name"], []).append(row)
            value = {"root": str(tree.root), "rev": tree.rev, "rev_sha": tree.rev_sha, "files_scanned": len(infos),
                     "parse_errors": [info.error.as_fact() for info in infos if info.error],
                     "skipped": skipped_facts(info.error for info in infos if info.error),
                     "constants": rows, "by_name": by_name, "references": references,
                     "checks": [r for r in references if is_check(r)]}
            return ProbeResult(value=value, sources=[str(tree.root)],
                               commands=list(tree.repo.commands) if tree.repo else [f"python walk of {tree.root}"],
                               repo_path=str(tree.repo.root) if tree.repo else None,
                               repo_head=tree.repo.head() if tree.repo else None)


def _matcher(params: Mapping[str, Any]) -> Any:
    names = set(params.get("names") or [])
    pattern = params.get("name_pattern")
    if not names and not pattern:
        raise ProbeError("params.invalid", "python.constants needs `names` or `name_pattern`")
    regex = None
    if pattern:
        try:
            regex = re.compile(pattern)
        except re.error as exc:
            raise ProbeError("params.invalid", f"name_pattern {pattern!r} is not a valid Python regular "
                                               f"expression: {exc}") from None
    return lambda name: name in names or (regex is not None and regex.fullmatch(name) is not None)


def _references(infos: list[ModuleInfo], resolver: Resolver, found: list[Constant]) -> list[dict[str, Any]]:
    index: dict[tuple[str, str], Constant] = {}
    for c in found:
        index.setdefault((c.file, c.name), c)  # the first definition stands for a name bound twice in a file
    needles = {c.name.encode() for c in found}
    out: list[dict[str, Any]] = []
    for info in infos:
        # A file that never spells a constant's name cannot read it (an import names it first).
        if not info.parsed or not any(n in info.source for n in needles):
            continue
        out += find_references(info, _Scope(info, resolver, index))
    return sorted(out, key=lambda r: (r["file"], r["line"], r["column"]))
