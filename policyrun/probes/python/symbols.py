"""`python.symbols`: where classes, functions and methods are defined and their signatures, at one
revision and (with `compare_rev`) at another, so a patched function whose upstream signature
changed is found."""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any

from policyrun.gcpause import gc_paused
from policyrun.probes.base import ProbeContext, ProbeError, ProbeResult
from policyrun.probes._kit.gitclient import rev_param
from policyrun.probes.python.imports import SOURCE_ROOTS
from policyrun.probes.python.resolve import ModuleInfo, Resolver, module_statements
from policyrun.probes.python.shape import code_hash, shape
from policyrun.probes.python.source import (PARSE_ERROR_SCHEMA, SKIPPED_SCHEMA, as_list, object_schema, open_tree,
                                       schema_list, skipped_facts, unparse)
from policyrun.probes._kit.paths import PathFilter

SYMBOL_KINDS = ("module", "class", "function", "async function", "method", "async method", "assignment",
                "import", "lazy")
_DEFS = (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
# Bodies are hashed for functions and methods: a class's hash would change with any of its methods
# (each is compared on its own), and hashing whole classes of vLLM's size was most of the time.
_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)


@dataclass
class Symbol:
    found: bool
    file: str | None = None
    line: int | None = None
    kind: str | None = None
    signature: str | None = None
    decorators: list[str] = field(default_factory=list)
    chain: list[str] = field(default_factory=list)
    reason: str | None = None
    shape: str | None = None
    body_hash: str | None = None

    def as_fact(self) -> dict[str, Any]:
        return {"found": self.found, "file": self.file, "line": self.line, "kind": self.kind,
                "signature": self.signature, "decorators": self.decorators, "chain": self.chain,
                "reason": self.reason, "shape": self.shape, "body_hash": self.body_hash}


def signature(node: ast.AST) -> str | None:
    """`(a, b: int=1, *, c) -> str` for a function, `(Base, metaclass=M)` for a class: ast.unparse
    normalises spacing, quotes, line breaks and trailing commas, so only real changes differ."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        returns = f" -> {unparse(node.returns)}" if node.returns else ""
        return f"({unparse(node.args)}){returns}"
    if isinstance(node, ast.ClassDef):
        return "(" + ", ".join([unparse(b) for b in node.bases] + [unparse(k) for k in node.keywords]) + ")"
    return None


def describe(node: ast.AST | None, *, in_class: bool) -> tuple[str | None, str | None, list[str]]:
    """(kind, signature, decorators) of a definition node."""
    if isinstance(node, ast.ClassDef):
        return "class", signature(node), [unparse(d) for d in node.decorator_list]
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        kind = ("async " if isinstance(node, ast.AsyncFunctionDef) else "") + ("method" if in_class else "function")
        return kind, signature(node), [unparse(d) for d in node.decorator_list]
    if isinstance(node, (ast.Assign, ast.AnnAssign)):
        return "assignment", None, []
    return None, None, []


def class_member(cls: ast.ClassDef, name: str) -> ast.stmt | None:
    """The member `name` of a class body (last unconditional definition, else the first conditional)."""
    found: list[tuple[ast.stmt, bool]] = []
    for stmt, conditional in module_statements(cls.body):
        if isinstance(stmt, _DEFS) and stmt.name == name:
            found.append((stmt, conditional))
        elif isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in stmt.targets):
            found.append((stmt, conditional))
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.target.id == name:
            found.append((stmt, conditional))
    unconditional = [s for s, c in found if not c]
    return unconditional[-1] if unconditional else (found[0][0] if found else None)


def find_symbol(resolver: Resolver, qualname: str, depth: int = 0, *, body: bool = True) -> Symbol:
    """A dotted name: the longest prefix that is a module, then names resolved through re-exports,
    then class members."""
    parts = qualname.split(".")
    for cut in range(len(parts), 0, -1):
        exists, path = resolver.namer.file_of(".".join(parts[:cut]))
        if exists:
            break
    else:
        return Symbol(False, reason="no_module")
    if cut == len(parts):
        return Symbol(True, path, 1 if path else None, "module", chain=[path] if path else [])
    target = resolver.resolve(".".join(parts[:cut]), parts[cut])
    if not target.found:
        return Symbol(False, target.defining_file or target.module_file, chain=target.chain, reason=target.reason)
    rest = parts[cut + 1:]
    if target.kind == "module" and target.defining_file and rest and depth < 4:
        # reached a submodule through a re-export (`from . import x`): continue from its own name
        module = resolver.namer.module_of(target.defining_file)[0]
        inner = find_symbol(resolver, ".".join([module, *rest]), depth + 1, body=body)
        inner.chain = target.chain + [p for p in inner.chain if p not in target.chain]
        return inner
    node = target.node
    in_class = False
    for attr in rest:
        if not isinstance(node, ast.ClassDef):
            return Symbol(False, target.defining_file, chain=target.chain, reason="not_defined")
        node = class_member(node, attr)
        in_class = True
        if node is None:
            return Symbol(False, target.defining_file, chain=target.chain, reason="not_defined")
    kind, sig, decorators = describe(node, in_class=in_class)
    line = getattr(node, "lineno", None) if rest else target.line
    if not rest and isinstance(target.node, _DEFS):
        node = target.node
    return Symbol(True, target.defining_file, line, kind or target.kind, sig, decorators, target.chain,
                  shape=shape(node), body_hash=code_hash(node) if body and isinstance(node, _FUNCS) else None)


def defined_in(info: ModuleInfo) -> Iterator[tuple[str, ast.AST, bool]]:
    """(qualified name, node, in a class) of every class, function and method a module defines
    (not functions nested in functions)."""
    tree = info.syntax()
    if tree is None:
        return

    def walk(body: list[ast.stmt], prefix: str, in_class: bool) -> Iterator[tuple[str, ast.AST, bool]]:
        for stmt, _ in module_statements(body):
            if isinstance(stmt, _DEFS):
                name = f"{prefix}.{stmt.name}"
                yield name, stmt, in_class
                if isinstance(stmt, ast.ClassDef):
                    yield from walk(stmt.body, name, True)

    yield from walk(tree.body, info.module, False)


# --- the probe ----------------------------------------------------------------------------------

_SYMBOL_PROPS: dict[str, Any] = {
    "found": {"type": "boolean"},
    "file": {"type": ["string", "null"], "description": "Defining file (relative to path)."},
    "line": {"type": ["integer", "null"], "description": "Line of the `def`/`class` (not its decorators)."},
    "kind": {"type": ["string", "null"], "enum": [*SYMBOL_KINDS, None]},
    "signature": {"type": ["string", "null"], "description": "`(params) -> return` of a function or method, "
                                                            "`(bases)` of a class, normalised by ast.unparse."},
    "decorators": {"type": "array", "items": {"type": "string"}},
    "chain": {"type": "array", "items": {"type": "string"}, "description": "Files from the module to the "
                                                                          "definition (re-exports)."},
    "reason": {"type": ["string", "null"], "description": "Why not found: no_module, not_defined, cycle, "
                                                         "depth_limit, parse_error."},
    "shape": {"type": ["string", "null"], "description": "A function's parameters without annotations "
                                                        "(`(self, x, y=1, *, z, **kw)`); null otherwise."},
    "body_hash": {"type": ["string", "null"], "description": "16 hex of sha256 over a function's or method's AST "
                                                            "without docstrings (comments and layout never count); "
                                                            "null for a class or anything else."},
}
_ROW = object_schema("One symbol.", {
    "name": {"type": "string", "description": "Qualified name (`pkg.mod.Class.method`)."},
    **_SYMBOL_PROPS,
    "compare": object_schema("The same name at compare_rev; absent without compare_rev.", _SYMBOL_PROPS),
    "signature_changed": {"type": ["boolean", "null"],
                          "description": "Found at both revisions with different signatures; null without "
                                         "compare_rev."},
    "removed": {"type": ["boolean", "null"], "description": "Found at rev, not at compare_rev; null without "
                                                           "compare_rev."},
    "body_changed": {"type": ["boolean", "null"], "description": "Found at both revisions with different "
                                                                "body_hash; null without compare_rev."},
})
_NAMES = {"type": "array", "items": {"type": "string"}}

FACT_SCHEMA: Mapping[str, Any] = object_schema("Definitions and their signatures.", {
    "path": {"type": "string"}, "rev": {"type": ["string", "null"]}, "rev_sha": {"type": ["string", "null"]},
    "compare_rev": {"type": ["string", "null"]}, "compare_sha": {"type": ["string", "null"]},
    "symbols": {"type": "array", "items": _ROW, "description": "The `symbols` asked for, in order, then every "
                                                               "definition of `files`."},
    "by_name": {"type": "object", "additionalProperties": _ROW, "description": "Qualified name → its row."},
    "changed": _NAMES | {"description": "Names whose signature differs at compare_rev."},
    "removed": _NAMES | {"description": "Names found at rev and missing at compare_rev."},
    "not_found": _NAMES | {"description": "Names not found at rev."},
    "parse_errors": {"type": "array", "items": PARSE_ERROR_SCHEMA | {"properties": {
        **PARSE_ERROR_SCHEMA["properties"], "rev": {"type": ["string", "null"]}}},
                     "description": "Files the lookups needed that are not valid Python."},
    "skipped": {**SKIPPED_SCHEMA, "items": object_schema("A file not parsed.", {
        **SKIPPED_SCHEMA["items"]["properties"], "rev": {"type": ["string", "null"]}}),
        "description": "Files the lookups needed, not parsed for their size (in parse_errors too)."},
})

PARAMS_SCHEMA: Mapping[str, Any] = {
    "type": "object", "additionalProperties": False, "required": ["path"],
    "anyOf": [{"required": ["symbols"]}, {"required": ["files"]}],
    "properties": {
        "path": {"type": "string", "minLength": 1, "description": "Source tree (e.g. the upstream repository)."},
        "rev": rev_param("Read this revision's git objects instead of the working tree."),
        "compare_rev": rev_param("Also look every symbol up at this revision."),
        "symbols": {"type": "array", "items": {"type": "string", "minLength": 1},
                    "description": "Qualified names, e.g. vllm.v1.engine.core.EngineCoreProc.run_engine_core."},
        "files": schema_list("Files (globs relative to path) whose every class, function and method is listed."),
        "bodies": {"type": "array", "items": {"type": "string"},
                   "description": "The names of `symbols` whose body_hash to compute (default: all); hashing "
                                  "large methods costs, and names only looked up need none."},
        "source_roots": SOURCE_ROOTS,
    },
}


class SymbolsProbe:
    kind = "python.symbols"
    summary = "Classes, functions and methods: defining file, line, kind and signature, compared between revisions."
    params_schema = PARAMS_SCHEMA
    fact_schema = FACT_SCHEMA

    def side_effects(self, params: Mapping[str, Any]) -> frozenset[str]:
        return frozenset()

    def run(self, params: Mapping[str, Any], ctx: ProbeContext) -> ProbeResult:
        if not params.get("symbols") and not params.get("files"):
            raise ProbeError("params.invalid", "python.symbols needs `symbols` (qualified names) or `files`")
        with ExitStack() as stack:
            stack.enter_context(gc_paused())
            tree = stack.enter_context(open_tree(params["path"], params.get("rev"), ctx, what="path"))
            compare = None
            if params.get("compare_rev"):
                if tree.repo is None:
                    raise ProbeError("params.invalid", "compare_rev needs path in a git repository")
                compare = stack.enter_context(open_tree(params["path"], params["compare_rev"], ctx, what="path"))
            roots = as_list(params.get("source_roots")) or ["."]
            cache: dict[str, ModuleInfo] = {}
            here = Resolver(tree, roots, cache)
            there = Resolver(compare, roots, cache) if compare is not None else None
            bodies = set(params["bodies"]) if "bodies" in params else None
            names: list[str] = list(params.get("symbols") or [])
            rows: list[dict[str, Any]] = [{} for _ in names]
            for i in in_module_order(names):
                rows[i] = {"name": names[i], **find_symbol(here, names[i], body=bodies is None or names[i] in bodies)
                           .as_fact()}
            rows += _file_rows(here, as_list(params.get("files")))
            for i in in_module_order([row["name"] for row in rows]):
                compare_symbol(rows[i], there, bodies)
            value = {
                "path": str(tree.root), "rev": tree.rev, "rev_sha": tree.rev_sha,
                "compare_rev": compare.rev if compare else None, "compare_sha": compare.rev_sha if compare else None,
                "symbols": rows, "by_name": _by_name(rows),
                "changed": [r["name"] for r in rows if r["signature_changed"]],
                "removed": [r["name"] for r in rows if r["removed"]],
                "not_found": [r["name"] for r in rows if not r["found"]],
                "parse_errors": [{**e.as_fact(), "rev": r.tree.rev} for r in (here, there) if r is not None
                                 for e in r.errors.values()],
                "skipped": [entry for r in (here, there) if r is not None
                            for entry in skipped_facts(r.errors.values(), rev=r.tree.rev)],
            }
            commands = list(tree.repo.commands) if tree.repo else [f"python walk of {tree.root}"]
            if compare is not None and compare.repo is not None:
                commands += compare.repo.commands
            return ProbeResult(value=value, commands=commands, sources=[str(tree.root)],
                               repo_path=str(tree.repo.root) if tree.repo else None,
                               repo_head=tree.repo.head() if tree.repo else None)


def _file_rows(resolver: Resolver, globs: list[str]) -> list[dict[str, Any]]:
    if not globs:
        return []
    keep = PathFilter(globs, [])
    rows: list[dict[str, Any]] = []
    for path in resolver.tree.select(keep):
        if not path.endswith(".py"):
            continue
        info = resolver.info(path)
        for name, node, in_class in defined_in(info):
            kind, sig, decorators = describe(node, in_class=in_class)
            body = code_hash(node) if isinstance(node, _FUNCS) else None
            rows.append({"name": name, **Symbol(True, path, getattr(node, "lineno", None), kind, sig, decorators,
                                                [path], shape=shape(node), body_hash=body).as_fact()})
    return rows


def in_module_order(names: list[str]) -> list[int]:
    """Indexes of `names`, those of one module together: looking names up file by file, each
    file's syntax tree is parsed once while it is in the parse memo (which keeps only the most
    recently used trees) instead of again for every name between two other files' names."""
    return sorted(range(len(names)), key=lambda i: names[i])


def compare_symbol(row: dict[str, Any], there: Resolver | None, bodies: set[str] | None = None, *,
                   lookup: str | None = None) -> None:
    """Add the row's name looked up at the other revision (or `lookup`, the path written in a
    plugin, which follows re-exports there) and what changed."""
    if there is None:
        row.update(signature_changed=None, removed=None, body_changed=None)
        return
    later = find_symbol(there, lookup or row["name"], body=bodies is None or row["name"] in bodies)
    row["compare"] = later.as_fact()
    row["removed"] = row["found"] and not later.found
    row["signature_changed"] = row["found"] and later.found and row["signature"] != later.signature
    row["body_changed"] = row["found"] and later.found and row["body_hash"] != later.body_hash


def _by_name(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for row in rows:
        out.setdefault(row["name"], row)
    return out
