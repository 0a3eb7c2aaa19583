"""`python.patches`: the places a plugin replaces or wraps upstream behaviour, found by what the code
does rather than by the markers it carries: an assignment to an attribute of an upstream module or
class (`vllm.x.y.f = g`, `SomeUpstreamClass.method = g`), `setattr` on one, a wrapper around the
original, and the methods a plugin class overrides on an upstream base class. Each patch says
whether the plugin's PATCH markers and comment fields document it, so an undocumented patch is
found however it is written; each replacement carries its parameter shape and a hash of its code,
and every upstream name the code reads through a module attribute or `getattr` is listed, so the
later gates can check them again at the target (python.symbols)."""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import Any

from policyrun.gcpause import gc_paused
from policyrun.probes.base import ProbeContext, ProbeResult
from policyrun.probes._kit.gitclient import rev_param
from policyrun.probes.python.markers import DEFAULT_END, DEFAULT_FIELDS, DEFAULT_START, _File, _Patterns
from policyrun.probes.python.imports import SOURCE_ROOTS
from policyrun.probes.python.resolve import ModuleInfo, Resolver
from policyrun.probes.python.shape import code_hash, forwards, shape
from policyrun.probes.python.source import (PARSE_ERROR_SCHEMA, SKIPPED_SCHEMA, absolute_module, as_list, import_binds,
                                       object_schema, open_tree, schema_list, skipped_facts, source_text)
from policyrun.probes._kit.paths import PathFilter

FORMS = ("assign", "setattr", "method_replace", "wrap")
_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef)
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_BINDERS = ("staticmethod", "classmethod")


@dataclass
class _Def:
    name: str
    qualname: str
    node: ast.AST
    scope: str  # qualname of the enclosing function ("" at module level)


@dataclass
class _Scan:
    """One file: the names its imports and aliases bind to upstream dotted names, its definitions."""
    packages: frozenset[str]
    bound: dict[str, str] = field(default_factory=dict)  # local name → upstream dotted name
    aliases: dict[str, str] = field(default_factory=dict)  # local name → upstream value it was read from
    strings: dict[str, str] = field(default_factory=dict)  # module-level NAME = "literal"
    plain: set[str] = field(default_factory=set)  # names bound by `import a.b` (the chain holds the module path)
    defs: list[_Def] = field(default_factory=list)

    def upstream(self, dotted: str | None) -> bool:
        return dotted is not None and dotted.split(".")[0] in self.packages

    def dotted(self, node: ast.AST) -> str | None:
        """`core_module.EngineCore.shutdown` → `vllm.v1.engine.core.EngineCore.shutdown` when the
        first name is bound to upstream by an import (or an alias read from upstream)."""
        if isinstance(node, ast.Name):
            return self.bound.get(node.id) or self.aliases.get(node.id)
        if isinstance(node, ast.Attribute):
            base = self.dotted(node.value)
            return f"{base}.{node.attr}" if base else None
        return None


def _imports(nodes: list[tuple[ast.AST, str]], info: ModuleInfo, scan: _Scan) -> None:
    for node, _ in nodes:
        if isinstance(node, ast.Import):
            for a in node.names:
                name, bound = import_binds(a)
                scan.bound[name] = bound
                if not a.asname:
                    scan.plain.add(name)
        elif isinstance(node, ast.ImportFrom):
            module = absolute_module(node.module, node.level, info.package) if node.level else node.module
            if module is None:
                continue
            for a in node.names:
                if a.name != "*":
                    scan.bound[a.asname or a.name] = f"{module}.{a.name}"
    for name in [n for n, v in scan.bound.items() if not scan.upstream(v)]:
        del scan.bound[name]


def _walk(tree: ast.Module, scan: _Scan) -> list[tuple[ast.AST, str]]:
    """Every node with the qualified name of the function holding it ("" at module level), in
    source order; definitions recorded on the way. (A list built by plain recursion: a generator
    chain costs a step per nesting level for every node.)"""
    out: list[tuple[ast.AST, str]] = []
    _visit(tree, "", "", scan, out)
    return out


def _visit(node: ast.AST, scope: str, prefix: str, scan: _Scan, out: list[tuple[ast.AST, str]]) -> None:
    # A module-level function, not a closure: a closure that calls itself is a reference cycle,
    # and with the cyclic collector off (the CLI turns it off) the cycle kept `out`, and with it
    # every syntax tree this probe walked, alive to the end of the run.
    for child in ast.iter_child_nodes(node):
        out.append((child, scope))
        if isinstance(child, _DEFS):
            qual = f"{prefix}{child.name}"
            scan.defs.append(_Def(child.name, qual, child, scope))
            if isinstance(child, _FUNCS):
                _visit(child, qual, qual + ".<locals>.", scan, out)
            else:
                _visit(child, scope, qual + ".", scan, out)
        else:
            _visit(child, scope, prefix, scan, out)


def _unwrap(value: ast.expr) -> ast.expr:
    """`staticmethod(f)` / `classmethod(f)` bind the same function."""
    while isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in _BINDERS \
            and len(value.args) == 1:
        value = value.args[0]
    return value


def _reads(node: ast.AST, scan: _Scan, target: str) -> bool:
    """Whether `node` reads the original `target` (directly or through an alias of it)."""
    for sub in ast.walk(node):
        if isinstance(sub, (ast.Name, ast.Attribute)) and isinstance(getattr(sub, "ctx", None), ast.Load) \
                and scan.dotted(sub) == target:
            return True
    return False


class _FileScan:
    def __init__(self, info: ModuleInfo, packages: frozenset[str], pats: _Patterns, required: list[str]) -> None:
        self.info = info
        self.scan = _Scan(packages)
        self.patches: list[dict[str, Any]] = []
        self.overrides: list[dict[str, Any]] = []
        self.uses: list[dict[str, Any]] = []
        tree = info.syntax()
        assert tree is not None
        self.nodes = nodes = _walk(tree, self.scan)
        _imports(nodes, info, self.scan)
        for stmt in tree.body:
            if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Constant) \
                    and isinstance(stmt.value.value, str):
                for t in stmt.targets:
                    if isinstance(t, ast.Name):
                        self.scan.strings[t.id] = stmt.value.value
        for node, _ in nodes:  # every imported upstream name is a use too (its own form)
            if isinstance(node, ast.ImportFrom) and node.level == 0 and self.scan.upstream(node.module):
                self.uses.extend(self._use(node, f"{node.module}.{a.name}", "import") for a in node.names
                                 if a.name != "*")
            elif isinstance(node, ast.Import):
                self.uses.extend(self._use(node, a.name, "import") for a in node.names if self.scan.upstream(a.name))
        for node, _ in nodes:  # aliases first: `original = mod.f` read before a later `mod.f = g`
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                src = self.scan.dotted(node.value)
                if src is not None and "." in src:
                    self.scan.aliases[node.targets[0].id] = src
        self.regions = _File(info.path, source_text(info.source), pats, always=True).fact()["regions"] \
            if self.scan.bound else []
        self.required = required
        for node, scope in nodes:
            self._visit(node, scope)

    def _visit(self, node: ast.AST, scope: str) -> None:
        scan = self.scan
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(t, ast.Attribute) and node.value is not None:
                    base = scan.dotted(t.value)
                    if base is not None:
                        self._patch(node, scope, f"{base}.{t.attr}", node.value, "assign", t.value)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            if node.func.id == "setattr" and len(node.args) == 3:
                base = scan.dotted(node.args[0])
                attr = self._literal(node.args[1])
                if base is not None and attr is not None:
                    self._patch(node, scope, f"{base}.{attr}", node.args[2], "setattr", node.args[0])
            elif node.func.id == "getattr" and len(node.args) >= 2:
                base = scan.dotted(node.args[0])
                attr = self._literal(node.args[1])
                if base is not None and attr is not None:
                    self.uses.append(self._use(node, f"{base}.{attr}", "getattr"))
        elif isinstance(node, ast.ClassDef):
            for b in node.bases:
                base = scan.dotted(b)
                if base is None:
                    continue
                for stmt in node.body:
                    if isinstance(stmt, _FUNCS):
                        self.overrides.append({
                            "site": f"{self.info.path}:{stmt.lineno}", "path": self.info.path, "line": stmt.lineno,
                            "cls": node.name, "target": f"{base}.{stmt.name}",
                            "replacement": self._replacement_of(stmt, self._qual(stmt))})

    def _qual(self, node: ast.AST) -> str:
        return next((d.qualname for d in self.scan.defs if d.node is node), "")

    def _literal(self, node: ast.expr) -> str | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
        if isinstance(node, ast.Name):
            return self.scan.strings.get(node.id)
        return None

    def _use(self, node: ast.AST, name: str, form: str) -> dict[str, Any]:
        line = getattr(node, "lineno", 0)
        return {"site": f"{self.info.path}:{line}", "path": self.info.path, "line": line, "name": name, "form": form}

    def _find_def(self, name: str, scope: str) -> _Def | None:
        """The definition a name means at a site: one in the same function first, then the module's."""
        for wanted in ([f"{scope}.<locals>.{name}"] if scope else []) + [name]:
            hits = [d for d in self.scan.defs if d.qualname == wanted]
            if hits:
                return hits[-1]
        return None

    def _patch(self, node: ast.AST, scope: str, target: str, value: ast.expr, form: str, base: ast.expr) -> None:
        scan = self.scan
        raw = _unwrap(value)
        src = scan.dotted(raw)
        if src is not None:
            return  # stores or restores an upstream value (the original kept aside): no new behaviour
        found = self._find_def(raw.id, scope) if isinstance(raw, ast.Name) else None
        rep_node: ast.AST | None = found.node if found else (raw if isinstance(raw, ast.Lambda) else None)
        if form != "setattr":
            if _reads(value, scan, target) or (rep_node is not None and _reads(rep_node, scan, target)):
                form = "wrap"
            elif isinstance(rep_node, (*_FUNCS, ast.Lambda)) and _is_class(base, scan):
                form = "method_replace"
        elif rep_node is not None and _reads(rep_node, scan, target):
            form = "wrap"
        line = getattr(node, "lineno", 0)
        replacement = self._replacement_of(rep_node, found.qualname if found else None) if rep_node else None
        if replacement is None and not isinstance(raw, ast.Name):
            replacement = {"name": None, "qualname": None, "line": getattr(raw, "lineno", line), "shape": None,
                           "forwards": False, "code_hash": code_hash(raw)}
        missing = self._missing(line, found.qualname if found else None, scope)
        self.patches.append({"site": f"{self.info.path}:{line}", "path": self.info.path, "line": line,
                             "target": target, "form": form, "marked": not missing, "missing": missing,
                             "replacement": replacement})

    def _replacement_of(self, node: ast.AST | None, qualname: str | None) -> dict[str, Any] | None:
        if node is None:
            return None
        return {"name": getattr(node, "name", None), "qualname": qualname, "line": getattr(node, "lineno", None),
                "shape": shape(node), "forwards": forwards(node), "code_hash": code_hash(node)}

    def _missing(self, line: int, qualname: str | None, scope: str) -> list[str]:
        """What the plugin's convention asks and this patch lacks: `markers` (no PATCH region in the
        replacement, in the function making the assignment, or around it), else the required
        comment fields its region lacks."""
        def covers(r: dict[str, Any]) -> bool:
            enclosing = r.get("enclosing")
            inside = enclosing is not None and any(
                q and (enclosing == q or enclosing.startswith(q + ".")) for q in (qualname, scope))
            end = r.get("end_line") or r["start_line"]
            return inside or r["start_line"] <= line <= end
        regions = [r for r in self.regions if covers(r)]
        if not regions:
            return ["markers"]
        best = min(([f for f in self.required if f not in r["fields"]] for r in regions), key=len)
        return best


def _is_class(base: ast.expr, scan: _Scan) -> bool:
    """`X.f = g` replaces a method when X names a class: its last name is CapWords (upstream module
    names are lower case)."""
    dotted = scan.dotted(base)
    last = (dotted or "").rsplit(".", 1)[-1]
    return bool(last) and last[0].isupper()


def _attribute_uses(fs: _FileScan) -> list[dict[str, Any]]:
    """`module.Name` reads on an upstream-bound name: the longest attribute chain, once per site."""
    out: list[dict[str, Any]] = []
    inner = {id(node.value) for node, _ in fs.nodes if isinstance(node, ast.Attribute)}
    seen: set[tuple[int, str]] = set()
    for node, _ in fs.nodes:
        if isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load) and id(node) not in inner:
            name = _chain(node, fs.scan)
            if name is not None and (node.lineno, name) not in seen:
                seen.add((node.lineno, name))
                out.append(fs._use(node, name, "attribute"))
    return out


def _chain(node: ast.Attribute, scan: _Scan) -> str | None:
    """The longest prefix of an attribute chain rooted at an upstream-bound import name."""
    parts: list[str] = []
    cur: ast.expr = node
    while isinstance(cur, ast.Attribute):
        parts.append(cur.attr)
        cur = cur.value
    if not isinstance(cur, ast.Name) or cur.id not in scan.bound:
        return None
    # `mod.Name` and `mod.Class.member` are upstream names; what follows is an object's attribute
    # (`core.logger.debug`), which python.symbols cannot look up anyway.
    names = list(reversed(parts))
    return ".".join([scan.bound[cur.id], *(names if cur.id in scan.plain else names[:2])])


_REPLACEMENT = object_schema("The plugin's replacement (a def, class or lambda in the same file).", {
    "name": {"type": ["string", "null"]},
    "qualname": {"type": ["string", "null"], "description": "`f`, `outer.<locals>.inner`, `Cls.method`."},
    "line": {"type": ["integer", "null"]},
    "shape": {"type": ["string", "null"], "description": "Parameters without annotations (python.symbols' shape)."},
    "forwards": {"type": "boolean", "description": "`(self, *args, **kwargs)`: binds whatever upstream passes."},
    "code_hash": {"type": ["string", "null"], "description": "Hash of its AST without docstrings."},
}, nullable=True)
_PATCH = object_schema("One patch.", {
    "site": {"type": "string"}, "path": {"type": "string"}, "line": {"type": "integer"},
    "target": {"type": "string",
               "description": "Dotted upstream name replaced (`vllm.v1.engine.core.EngineCore.shutdown`)."},
    "form": {"type": "string", "enum": list(FORMS)},
    "marked": {"type": "boolean", "description": "A PATCH region in the replacement (or around the site) carries "
                                                 "every required comment field."},
    "missing": {"type": "array", "items": {"type": "string"},
                "description": "`markers`, or the required fields the region lacks; empty when marked."},
    "replacement": _REPLACEMENT,
})
_OVERRIDE = object_schema("A method of a plugin class defined on an upstream base class.", {
    "site": {"type": "string"}, "path": {"type": "string"}, "line": {"type": "integer"}, "cls": {"type": "string"},
    "target": {"type": "string", "description": "The base class's member of that name."},
    "replacement": _REPLACEMENT,
})
_USE = object_schema("An upstream name the code uses: imported (`from m import N`: `m.N`; `import m`: `m`), read "
                     "through a module or class attribute, or through getattr with a literal.", {
    "site": {"type": "string"}, "path": {"type": "string"}, "line": {"type": "integer"},
    "name": {"type": "string"}, "form": {"type": "string", "enum": ["import", "attribute", "getattr"]},
})

FACT_SCHEMA: Mapping[str, Any] = object_schema("Patches of upstream behaviour found in code.", {
    "root": {"type": "string"}, "rev": {"type": ["string", "null"]}, "rev_sha": {"type": ["string", "null"]},
    "files_scanned": {"type": "integer"},
    "parse_errors": {"type": "array", "items": PARSE_ERROR_SCHEMA},
    "skipped": SKIPPED_SCHEMA,
    "patches": {"type": "array", "items": _PATCH, "description": "By file, then line."},
    "unmarked": {"type": "array", "items": _PATCH, "description": "The patches with marked false."},
    "overrides": {"type": "array", "items": _OVERRIDE},
    "uses": {"type": "array", "items": _USE},
    "targets": {"type": "array", "items": {"type": "string"},
                "description": "Distinct patch and override targets, sorted (for python.symbols)."},
    "used_names": {"type": "array", "items": {"type": "string"}, "description": "Distinct `uses` names, sorted."},
    "by_target": {"type": "object", "additionalProperties": {"type": "array", "items": {"type": "object"}},
                  "description": "Target → `{site, path, kind (patch|override), form, code_hash, shape}` of "
                                 "each replacement."},
})

PARAMS_SCHEMA: Mapping[str, Any] = {
    "type": "object", "additionalProperties": False, "required": ["root"],
    "properties": {
        "root": {"type": "string", "minLength": 1, "description": "The plugin's directory."},
        "rev": rev_param("Read this revision's git objects instead of the working tree."),
        "include": schema_list("Globs relative to root.", default=["**/*.py"]),
        "exclude": schema_list("Globs to skip."),
        "packages": schema_list("Top-level upstream packages whose modules and classes count.", default=["vllm"]),
        "start": {"type": "string", "default": DEFAULT_START, "description": "A PATCH start marker (as for markers)."},
        "end": {"type": "string", "default": DEFAULT_END, "description": "A PATCH end marker."},
        "fields": {"type": "object", "additionalProperties": {"type": "string"}, "default": DEFAULT_FIELDS,
                   "description": "Comment fields (as for markers)."},
        "required_fields": schema_list("Fields a patch's region must carry to count as marked.",
                                       default=["reason", "functionality"]),
        "source_roots": SOURCE_ROOTS,
    },
}


class PatchesProbe:
    kind = "python.patches"
    summary = ("Monkey patches of upstream found by what code does (attribute assignment, setattr, wrappers, "
               "overrides), each with whether markers document it, its replacement's shape and code hash.")
    params_schema = PARAMS_SCHEMA
    fact_schema = FACT_SCHEMA

    def side_effects(self, params: Mapping[str, Any]) -> frozenset[str]:
        return frozenset()

    def run(self, params: Mapping[str, Any], ctx: ProbeContext) -> ProbeResult:
        pats = _Patterns.from_params(params)
        packages = frozenset(as_list(params.get("packages")) or ["vllm"])
        required = as_list(params.get("required_fields")) if "required_fields" in params \
            else ["reason", "functionality"]
        with ExitStack() as stack:
            stack.enter_context(gc_paused())
            tree = stack.enter_context(open_tree(params["root"], params.get("rev"), ctx))
            resolver = Resolver(tree, as_list(params.get("source_roots")) or ["."])
            keep = PathFilter(as_list(params.get("include")) or ["**/*.py"], as_list(params.get("exclude")))
            infos = [resolver.info(p) for p in tree.select(keep) if p.endswith(".py")]
            patches: list[dict[str, Any]] = []
            overrides: list[dict[str, Any]] = []
            uses: list[dict[str, Any]] = []
            needles = [p.encode() for p in packages]
            for info in infos:
                if not info.parsed or not any(n in info.source for n in needles):
                    continue  # no upstream name anywhere in the text: nothing to find
                fs = _FileScan(info, packages, pats, required)
                patches += fs.patches
                overrides += fs.overrides
                uses += sorted(fs.uses + _attribute_uses(fs), key=lambda u: (u["line"], u["name"]))
            by_target: dict[str, list[dict[str, Any]]] = {}
            for kind, rows in (("patch", patches), ("override", overrides)):
                for r in rows:
                    rep = r["replacement"] or {}
                    by_target.setdefault(r["target"], []).append({
                        "site": r["site"], "path": r["path"], "kind": kind, "form": r.get("form", "override"),
                        "code_hash": rep.get("code_hash"), "shape": rep.get("shape")})
            value = {"root": str(tree.root), "rev": tree.rev, "rev_sha": tree.rev_sha, "files_scanned": len(infos),
                     "parse_errors": [info.error.as_fact() for info in infos if info.error],
                     "skipped": skipped_facts(info.error for info in infos if info.error),
                     "patches": patches, "unmarked": [p for p in patches if not p["marked"]],
                     "overrides": overrides, "uses": uses,
                     "targets": sorted(by_target), "used_names": sorted({u["name"] for u in uses}),
                     "by_target": by_target}
            return ProbeResult(value=value, sources=[str(tree.root)],
                               commands=list(tree.repo.commands) if tree.repo else [f"python walk of {tree.root}"],
                               repo_path=str(tree.repo.root) if tree.repo else None,
                               repo_head=tree.repo.head() if tree.repo else None)
