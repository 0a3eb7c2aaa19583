"""Every way a plugin binds to an upstream symbol, and each bound symbol at both releases.

A plugin that never marks its patches still depends on upstream through what it writes: it imports
names (`import`), subclasses upstream classes (`subclass`), overrides their methods (`override`:
a method whose name an upstream base class or one of its upstream bases defines, the class
deriving from it directly or through another class of the same file), calls upstream functions,
classes and methods (`call`, `super().m(...)` included), and assigns onto upstream
modules and classes (`patch`: `mod.attr = ...`, `setattr(Cls, "attr", ...)`). A class bound by
`subclass` or `call` also binds its `__init__` (where the class or an upstream base defines it):
that is the signature a subclass or a caller depends on.

Names are read statically: a name bound by an import anywhere in the file, then attributes; what
a parameter or a local variable holds is not known. Symbols are named canonically (the module
that defines them, re-exports followed) so one symbol bound many ways is one row; each is then
looked up with python.symbols' code at the current and the target release.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

from policyrun.gcpause import gc_paused
from policyrun.probes.base import ProbeContext, ProbeError, ProbeResult
from policyrun.probes.python.imports import PARAMS_SCHEMA as IMPORTS_PARAMS, scan
from policyrun.probes.python.resolve import ModuleInfo, Resolver
from policyrun.probes.python.source import (PARSE_ERROR_SCHEMA, SKIPPED_SCHEMA, ParseError, SourceTree, absolute_module,
                                       as_list, import_binds, namer_for, object_schema, open_tree, skipped_facts)
from policyrun.probes.python.symbols import FACT_SCHEMA as SYMBOLS_FACT, class_member, compare_symbol, find_symbol, \
    in_module_order
from policyrun.probes._kit.paths import PathFilter

BINDING_KINDS = ("import", "subclass", "override", "call", "patch")
DEFAULT_MAX_SYMBOLS = 2000
# Upstream base classes followed from a class to find who defines a member; vLLM's deepest
# hierarchies the bart-plugin binds are 3 deep.
MAX_BASE_DEPTH = 8


@dataclass(frozen=True)
class Canon:
    name: str  # module.qualname, where it is defined
    module: str
    kind: str  # module | class | function | assignment


@dataclass(frozen=True)
class Row:
    file: str
    line: int
    kind: str
    canon: Canon
    written: str  # the dotted path as the plugin reaches it (followed through re-exports at the target)
    plugin_symbol: str | None = None

    def as_fact(self) -> dict[str, Any]:
        return {"site": f"{self.file}:{self.line}", "file": self.file, "line": self.line, "kind": self.kind,
                "symbol": self.canon.name, "module": self.canon.module,
                "qualname": self.canon.name[len(self.canon.module) + 1:] or None,
                "plugin_symbol": self.plugin_symbol}


class Binder:
    """Canonical names and class members over one upstream Resolver (the current release)."""

    def __init__(self, here: Resolver) -> None:
        self.here = here
        self.memo: dict[str, Canon | None] = {}
        self.members: dict[tuple[str, str], Canon | None] = {}

    def canonical(self, dotted: str, depth: int = 0) -> Canon | None:
        if dotted not in self.memo:
            self.memo[dotted] = self._canonical(dotted, depth)
        return self.memo[dotted]

    def _canonical(self, dotted: str, depth: int) -> Canon | None:
        namer = self.here.namer
        parts = dotted.split(".")
        for cut in range(len(parts), 0, -1):
            if namer.file_of(".".join(parts[:cut]))[0]:
                break
        else:
            return None
        if cut == len(parts):
            return Canon(dotted, dotted, "module")
        target = self.here.resolve(".".join(parts[:cut]), parts[cut])
        rest = parts[cut + 1:]
        if not target.found or target.defining_file is None or depth > MAX_BASE_DEPTH:
            return None
        module = namer.module_of(target.defining_file)[0]
        if target.kind == "module":
            return self.canonical(".".join([module, *rest]), depth + 1) if rest else Canon(module, module, "module")
        if target.kind not in ("class", "function", "assignment"):
            return None  # bound by an import leading out of the upstream tree
        canon = Canon(f"{module}.{target.name or parts[cut]}", module, target.kind)
        for attr in rest:
            if canon.kind != "class":
                return None
            member = self.member(canon, attr)
            if member is None:
                return None
            canon = member
        return canon

    def class_node(self, canon: Canon) -> tuple[ast.ClassDef, ModuleInfo] | None:
        parts = canon.name[len(canon.module) + 1:].split(".")
        target = self.here.resolve(canon.module, parts[0])
        node = target.node
        if target.defining_file is None or not isinstance(node, ast.ClassDef):
            return None
        for attr in parts[1:]:
            inner = class_member(node, attr)
            if not isinstance(inner, ast.ClassDef):
                return None
            node = inner
        return node, self.here.info(target.defining_file)

    def bases(self, canon: Canon) -> list[Canon]:
        """The upstream classes a class names as its bases, in order."""
        found = self.class_node(canon)
        if found is None:
            return []
        node, info = found
        out = []
        for base in node.bases:
            written = _base_path(base, info)
            resolved = self.canonical(written) if written and self.here.has_package(written) else None
            if resolved is not None and resolved.kind == "class":
                out.append(resolved)
        return out

    def member(self, canon: Canon, name: str, depth: int = 0) -> Canon | None:
        """Who defines member `name` of an upstream class: itself, else its upstream bases,
        depth first left to right (Python's MRO agrees for the single-inheritance chains this is for)."""
        if depth:  # what a deeper search found may be cut by the depth bound: only whole answers are kept
            return self._member(canon, name, depth)
        key = (canon.name, name)
        if key not in self.members:
            self.members[key] = self._member(canon, name, depth)
        return self.members[key]

    def _member(self, canon: Canon, name: str, depth: int) -> Canon | None:
        found = self.class_node(canon)
        if found is None or depth > MAX_BASE_DEPTH:
            return None
        node = class_member(found[0], name)
        if node is not None:
            kind = "class" if isinstance(node, ast.ClassDef) else \
                "function" if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else "assignment"
            return Canon(f"{canon.name}.{name}", canon.module, kind)
        for base in self.bases(canon):
            inherited = self.member(base, name, depth + 1)
            if inherited is not None:
                return inherited
        return None


def _base_path(expr: ast.expr, info: ModuleInfo) -> str | None:
    """A base class expression as a dotted path, read with the names its own module binds."""
    attrs, head = _unwind(expr)
    if head is None:
        return None
    binding = info.bindings.get(head)
    if binding is None:
        return None
    if binding.kind != "import":
        start = f"{info.module}.{head}"
    elif binding.source is None:
        return None
    else:
        start = f"{binding.source}.{binding.source_name}" if binding.source_name else binding.source
    return ".".join([start, *attrs])


def _unwind(expr: ast.expr) -> tuple[list[str], str | None]:
    """(attributes in order, head name) of `a.b.c` or `a.b[T]`; iterative, as a chain may be as long
    as the parser allows."""
    attrs: list[str] = []
    while True:
        if isinstance(expr, ast.Subscript):  # Base[T]
            expr = expr.value
        elif isinstance(expr, ast.Attribute):
            attrs.append(expr.attr)
            expr = expr.value
        elif isinstance(expr, ast.Name):
            return attrs[::-1], expr.id
        else:
            return [], None


def local_names(tree: ast.Module, package: str) -> dict[str, str]:
    """Name → dotted path of every name an import in the file binds (any scope; the first wins)."""
    out: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                name, module = import_binds(alias)
                out.setdefault(name, module)
        elif isinstance(node, ast.ImportFrom):
            source = absolute_module(node.module, node.level, package)
            for alias in node.names:
                if source and alias.name != "*":
                    out.setdefault(alias.asname or alias.name, f"{source}.{alias.name}")
    return out


def dotted(expr: ast.expr, names: Mapping[str, str]) -> str | None:
    """`a.b.c` as the dotted path `a` was imported as, then the attributes; None for anything else."""
    attrs, head = _unwind(expr)
    start = names.get(head) if head is not None else None
    return ".".join([start, *attrs]) if start is not None else None


def file_bindings(tree: ast.Module, file: str, package: str, binder: Binder,
                  packages: set[str]) -> Iterator[Row]:
    names = local_names(tree, package)

    def upstream(path: str | None) -> Canon | None:
        if path is None or (packages and path.split(".")[0] not in packages) or not binder.here.has_package(path):
            return None
        return binder.canonical(path)

    def with_init(kind: str, line: int, canon: Canon, written: str, plugin: str | None = None) -> Iterator[Row]:
        yield Row(file, line, kind, canon, written, plugin)
        init = binder.member(canon, "__init__") if canon.kind == "class" else None
        if init is not None:
            yield Row(file, line, kind, init, init.name, plugin)

    inherited: dict[str, list[Canon]] = {}  # plugin class → the upstream classes it derives from
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            source = absolute_module(node.module, node.level, package) if isinstance(node, ast.ImportFrom) else None
            for alias in node.names:
                path = alias.name if isinstance(node, ast.Import) else \
                    (f"{source}.{alias.name}" if source and alias.name != "*" else None)
                if (canon := upstream(path)) is not None and path is not None:
                    yield Row(file, alias.lineno, "import", canon, path)
        elif isinstance(node, ast.ClassDef):
            yield from _class_bindings(node, file, names, binder, upstream, with_init, inherited)
        elif isinstance(node, ast.Call):
            path = dotted(node.func, names)
            canon = upstream(path)
            if canon is not None and path is not None and canon.kind in ("class", "function"):
                yield from with_init("call", node.lineno, canon, path)
            elif isinstance(node.func, ast.Name) and node.func.id == "setattr" and len(node.args) >= 2:
                attr = node.args[1]
                if isinstance(attr, ast.Constant) and isinstance(attr.value, str):
                    yield from _patch(node.args[0], attr.value, node.lineno, file, names, upstream)
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Attribute):
                    yield from _patch(target.value, target.attr, node.lineno, file, names, upstream)


def _patch(owner: ast.expr, attr: str, line: int, file: str, names: Mapping[str, str],
           upstream: Any) -> Iterator[Row]:
    path = dotted(owner, names)
    canon = upstream(path)
    if canon is not None and path is not None and canon.kind in ("module", "class"):
        yield Row(file, line, "patch", Canon(f"{canon.name}.{attr}", canon.module, "assignment"), f"{path}.{attr}")


def _class_bindings(node: ast.ClassDef, file: str, names: Mapping[str, str], binder: Binder, upstream: Any,
                    with_init: Any, inherited: dict[str, list[Canon]]) -> Iterator[Row]:
    bases: list[Canon] = []
    for base in node.bases:
        if isinstance(base, ast.Name) and base.id in inherited:
            # a plugin class deriving from another of this file's classes overrides what that one's
            # upstream bases define (ast.walk meets a module's classes in source order)
            bases += [b for b in inherited[base.id] if b not in bases]
            continue
        path = dotted(base, names)
        canon = upstream(path)
        if canon is not None and canon.kind == "class":
            bases.append(canon)
            yield from with_init("subclass", node.lineno, canon, path, node.name)
    if not bases:
        return
    inherited.setdefault(node.name, bases)
    for stmt in node.body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            owner = _first_member(binder, bases, stmt.name)
            if owner is not None:
                yield Row(file, stmt.lineno, "override", owner, owner.name, f"{node.name}.{stmt.name}")
            for call in ast.walk(stmt):
                if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and \
                        isinstance(call.func.value, ast.Call) and isinstance(call.func.value.func, ast.Name) and \
                        call.func.value.func.id == "super":
                    called = _first_member(binder, bases, call.func.attr)
                    if called is not None:
                        yield Row(file, call.lineno, "call", called, called.name, f"{node.name}.{stmt.name}")


def _first_member(binder: Binder, bases: list[Canon], name: str) -> Canon | None:
    return next((m for b in bases if (m := binder.member(b, name)) is not None), None)


# --- the probe ----------------------------------------------------------------------------------

_BINDING = object_schema("One way the plugin binds to an upstream symbol.", {
    "site": {"type": "string", "description": "`file:line`."},
    "file": {"type": "string"}, "line": {"type": "integer"},
    "kind": {"type": "string", "enum": list(BINDING_KINDS)},
    "symbol": {"type": "string", "description": "Canonical upstream name: the defining module, then the "
                                                "qualified name (`vllm.a.b.Class.method`)."},
    "module": {"type": "string", "description": "The upstream module that defines it."},
    "qualname": {"type": ["string", "null"], "description": "The name in that module; null for a module."},
    "plugin_symbol": {"type": ["string", "null"], "description": "The plugin's class (subclass) or "
                                                                "`Class.method` (override, super() call)."},
})
_SYMBOL_ROW = SYMBOLS_FACT["properties"]["symbols"]["items"]
_SYMBOL = object_schema("One bound upstream symbol at the current release, compared at the target.", {
    **_SYMBOL_ROW["properties"],
    "name": {"type": "string", "description": "Canonical upstream name (as bindings[].symbol)."},
    "written": {"type": "string", "description": "The path it was first reached by (looked up at the target, "
                                                 "so a re-export that moved still finds it)."},
    "kinds": {"type": "array", "items": {"type": "string", "enum": list(BINDING_KINDS)},
              "description": "Every way it is bound, in BINDING_KINDS order."},
    "sites": {"type": "array", "items": {"type": "string"}, "description": "Sites binding it, distinct."},
})
_NAMES = {"type": "array", "items": {"type": "string"}}

FACT_SCHEMA: Mapping[str, Any] = object_schema("How the plugin binds to upstream.", {
    "root": {"type": "string"}, "rev": {"type": ["string", "null"]}, "rev_sha": {"type": ["string", "null"]},
    "upstream": object_schema("The upstream tree.", {
        "path": {"type": "string"}, "rev": {"type": ["string", "null"]}, "rev_sha": {"type": ["string", "null"]},
        "compare_rev": {"type": ["string", "null"]}, "compare_sha": {"type": ["string", "null"]}}),
    "files_scanned": {"type": "integer"},
    "parse_errors": {"type": "array", "items": PARSE_ERROR_SCHEMA,
                     "description": "Plugin files that are not valid Python (their bindings are unknown)."},
    "skipped": SKIPPED_SCHEMA,
    "bindings": {"type": "array", "items": _BINDING, "description": "Every binding, by file then line then kind."},
    "symbols": {"type": "array", "items": _SYMBOL, "description": "Each bound symbol once, in the order first "
                                                                  "bound, at most max_symbols."},
    "by_symbol": {"type": "object", "additionalProperties": _SYMBOL, "description": "Name → its symbols row."},
    "signature_changed": _NAMES | {"description": "Symbols whose signature differs at compare_rev."},
    "body_changed": _NAMES | {"description": "Functions and methods whose body_hash differs at compare_rev."},
    "removed": _NAMES | {"description": "Symbols found at rev, not at compare_rev."},
    "truncated": object_schema("Set when more symbols were bound than max_symbols: the rest were not looked up.", {
        "limit": {"type": "integer"}, "symbols": {"type": "integer", "description": "Symbols bound in all."},
        "dropped": _NAMES | {"description": "The first 20 symbols not looked up."}}, nullable=True),
    "upstream_parse_errors": {"type": "array", "items": PARSE_ERROR_SCHEMA | {"properties": {
        **PARSE_ERROR_SCHEMA["properties"], "rev": {"type": ["string", "null"]}}},
        "description": "Upstream files the lookups needed that are not valid Python."},
})

PARAMS_SCHEMA: Mapping[str, Any] = {
    "type": "object", "additionalProperties": False, "required": ["root", "resolve"],
    "properties": {
        **{k: IMPORTS_PARAMS["properties"][k] for k in ("root", "rev", "include", "exclude", "source_roots")},
        "packages": {**IMPORTS_PARAMS["properties"]["packages"],
                     "description": "Keep only bindings of these top-level packages (e.g. [vllm]); default every "
                                    "package of the upstream tree."},
        "resolve": {**IMPORTS_PARAMS["properties"]["resolve"], "required": ["path", "compare_rev"]},
        "max_symbols": {"type": "integer", "minimum": 1, "default": DEFAULT_MAX_SYMBOLS,
                        "description": "Bound symbols looked up at both releases; more are recorded in "
                                       "`truncated`."},
    },
}


class BindingsProbe:
    kind = "python.bindings"
    summary = ("How a plugin binds to upstream (imports, subclasses, overrides, calls, patches), and each bound "
               "symbol's signature and body at the current and the target release.")
    params_schema = PARAMS_SCHEMA
    fact_schema = FACT_SCHEMA

    def side_effects(self, params: Mapping[str, Any]) -> frozenset[str]:
        return frozenset()

    def run(self, params: Mapping[str, Any], ctx: ProbeContext) -> ProbeResult:
        resolve = params["resolve"]
        with ExitStack() as stack:
            stack.enter_context(gc_paused())
            tree = stack.enter_context(open_tree(params["root"], params.get("rev"), ctx))
            upstream = stack.enter_context(open_tree(resolve["path"], resolve.get("rev"), ctx, what="resolve.path"))
            if upstream.repo is None:
                raise ProbeError("params.invalid", "resolve.compare_rev needs resolve.path in a git repository")
            compare = stack.enter_context(open_tree(resolve["path"], resolve["compare_rev"], ctx,
                                                    what="resolve.path"))
            roots = as_list(resolve.get("source_roots")) or ["."]
            cache: dict[str, ModuleInfo] = {}
            here, there = Resolver(upstream, roots, cache), Resolver(compare, roots, cache)
            value = collect_bindings(tree, params, here, there)
            commands = list(tree.repo.commands) if tree.repo else [f"python walk of {tree.root}"]
            for t in (upstream, compare):
                if t.repo is not None:
                    commands += t.repo.commands
            return ProbeResult(value=value, commands=commands, sources=[str(tree.root), str(upstream.root)],
                               repo_path=str(tree.repo.root) if tree.repo else None,
                               repo_head=tree.repo.head() if tree.repo else None)


def collect_bindings(tree: SourceTree, params: Mapping[str, Any], here: Resolver,
                     there: Resolver) -> dict[str, Any]:
    keep = PathFilter(as_list(params.get("include")) or ["**/*.py"], as_list(params.get("exclude")))
    namer = namer_for(tree, as_list(params.get("source_roots")) or ["."])
    packages = set(params.get("packages") or [])
    binder = Binder(here)
    rows: list[Row] = []
    errors: list[ParseError] = []
    scanned = 0
    for path, _, parsed in scan(tree, keep):
        scanned += 1
        if isinstance(parsed, ParseError):
            errors.append(parsed)
            continue
        found = set(file_bindings(parsed, path, namer.package_of(path), binder, packages))
        rows += sorted(found, key=lambda r: (r.line, BINDING_KINDS.index(r.kind), r.canon.name))
    symbols, truncated = _symbols(rows, here, there, params.get("max_symbols") or DEFAULT_MAX_SYMBOLS)
    return {
        "root": str(tree.root), "rev": tree.rev, "rev_sha": tree.rev_sha,
        "upstream": {"path": str(here.tree.root), "rev": here.tree.rev, "rev_sha": here.tree.rev_sha,
                     "compare_rev": there.tree.rev, "compare_sha": there.tree.rev_sha},
        "files_scanned": scanned, "parse_errors": [e.as_fact() for e in errors], "skipped": skipped_facts(errors),
        "bindings": [r.as_fact() for r in rows], "symbols": symbols,
        "by_symbol": {s["name"]: s for s in symbols},
        "signature_changed": [s["name"] for s in symbols if s["signature_changed"]],
        "body_changed": [s["name"] for s in symbols if s["body_changed"]],
        "removed": [s["name"] for s in symbols if s["removed"]],
        "truncated": truncated,
        "upstream_parse_errors": [{**e.as_fact(), "rev": r.tree.rev} for r in (here, there)
                                  for e in r.errors.values()],
    }


def _symbols(rows: list[Row], here: Resolver, there: Resolver,
             limit: int) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """Each symbol once (first binding's order), looked up at both releases; at most `limit`."""
    bound: dict[str, dict[str, Any]] = {}
    for row in rows:
        entry = bound.setdefault(row.canon.name, {"written": row.written, "kinds": set(), "sites": []})
        entry["kinds"].add(row.kind)
        site = f"{row.file}:{row.line}"
        if site not in entry["sites"]:
            entry["sites"].append(site)
    names = list(bound)
    kept = names[:limit]
    out: list[dict[str, Any]] = [{} for _ in kept]
    for i in in_module_order(kept):
        entry = bound[kept[i]]
        fact: dict[str, Any] = {"name": kept[i], **find_symbol(here, kept[i]).as_fact()}
        compare_symbol(fact, there, lookup=entry["written"])
        fact.update(written=entry["written"], kinds=[k for k in BINDING_KINDS if k in entry["kinds"]],
                   sites=entry["sites"])
        out[i] = fact
    truncated: dict[str, Any] | None = {"limit": limit, "symbols": len(names), "dropped": names[limit:limit + 20]} \
        if len(names) > limit else None
    return out, truncated
