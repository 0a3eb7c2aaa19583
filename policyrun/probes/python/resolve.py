"""Where a Python name is defined: module → file, then re-exports followed to the defining file.

`from a.b import N` binds whatever module `a.b` holds under N after it ran. Statically that is,
in this order (the import system's): a module-level binding of N in `a/b/__init__.py` or `a/b.py`
(class, def, assignment, or an import, which is followed to where it leads), else the submodule
`a.b.N`, else a `from x import *` that exports N (its `__all__` when it has one, else its public
names), else a lazy attribute map read by the module's `__getattr__`. Bindings inside module-level
`if`/`try`/`with` blocks count (`if TYPE_CHECKING:` re-exports included); when a name is bound
several times the last unconditional binding wins, else the first conditional one.

Lazy maps are vLLM's pattern for heavy names: a module-level dict of string to string that the
module's `__getattr__` reads, valued `"pkg.mod:attr"`, `".mod:attr"` (relative to the package) or
`"pkg.mod"` (the attribute of the same name there, else the module itself).

Every followed import is a hop; more than MAX_HOPS hops, or a hop back to a (module, name) already
on the path, stops the search (reason `depth_limit` / `cycle`).
"""

from __future__ import annotations

import ast
import threading
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from policyrun.probes.python.parsepool import Job, SummaryHelper
from policyrun.probes.python.source import ParseError, SourceTree, absolute_module, import_binds, namer_for, parse_source, \
    content_digest

# Every name the afd-plugin imports from vLLM 0.26/0.27 resolves in at most one hop (vllm.ModelRegistry
# takes two); 16 leaves room for deep facades while keeping a pathological chain cheap.
MAX_HOPS = 16

DEFINITION_KINDS = ("module", "class", "function", "assignment", "import", "lazy")


@dataclass(frozen=True)
class Binding:
    kind: str  # class | function | assignment | import
    line: int
    conditional: bool
    index: int = -1  # the binding statement's position in module_statements(tree.body); -1: unknown
    source: str | None = None  # for imports: the absolute module the name comes from
    source_name: str | None = None  # ...and the name there; None: the module itself


@dataclass
class ModuleInfo:
    """What resolution reads of one module: a summary, without its syntax tree.

    A tree takes about 25 times its source in memory, and the caches below keep hundreds of
    modules; `syntax()` and `node()` parse again (through the parse memo, which keeps the most
    recently used trees) when a probe needs nodes, and the caller drops them when it is done."""

    path: str
    module: str
    package: str
    error: ParseError | None
    source: bytes = b""
    parsed: bool = False  # `source` is the whole file and it parses: syntax() can rebuild the tree
    bindings: dict[str, Binding] = field(default_factory=dict)
    stars: list[str] = field(default_factory=list)  # absolute modules of `from m import *`, in order
    exports: list[str] | None = None  # __all__ when it is a literal
    lazy: dict[str, tuple[str, str | None]] = field(default_factory=dict)
    digest: str | None = field(default=None, repr=False, compare=False)  # content_digest(source), once known

    def syntax(self) -> ast.Module | None:
        """The module's syntax tree (None when it did not parse or only a summary was kept)."""
        if not self.parsed:
            return None
        if self.digest is None:  # asked for once per node a probe reads: hash the source once
            self.digest = content_digest(self.source)
        tree = parse_source(self.source, self.path, digest=self.digest)
        return tree if isinstance(tree, ast.Module) else None

    def node(self, binding: Binding) -> ast.stmt | None:
        """The statement that makes `binding`."""
        tree = self.syntax() if binding.index >= 0 else None
        if tree is None:
            return None
        for i, (stmt, _) in enumerate(module_statements(tree.body)):
            if i == binding.index:
                return stmt
        return None


@dataclass
class Target:
    found: bool
    module_file: str | None
    defining_file: str | None = None
    line: int | None = None
    kind: str | None = None
    name: str | None = None  # the name at the defining file (a re-export may rename)
    chain: list[str] = field(default_factory=list)
    reason: str | None = None  # why not found: no_module | not_defined | cycle | depth_limit | parse_error
    binding: tuple[ModuleInfo, Binding] | None = field(default=None, repr=False, compare=False)

    @property
    def node(self) -> ast.AST | None:
        """The defining statement (class, def, assignment, import), parsed again when asked for."""
        return self.binding[0].node(self.binding[1]) if self.binding is not None else None

    def as_fact(self) -> dict[str, Any]:
        return {"found": self.found, "module_file": self.module_file, "defining_file": self.defining_file,
                "line": self.line, "kind": self.kind, "chain": list(self.chain), "reason": self.reason}

    def files(self) -> Iterator[str]:
        if self.module_file:
            yield self.module_file
        yield from self.chain
        if self.defining_file:
            yield self.defining_file


class _BlobCache:
    """Module summaries by blob sha, shared by the probes of one process: a blob's content never
    changes, and a planning run reads the same upstream revisions from several probes. Bounded
    by source bytes (a summary keeps its source, for the nodes asked for later), least recently
    used out first."""

    def __init__(self, max_source_bytes: int) -> None:
        self.max_bytes = max_source_bytes
        self.bytes = 0
        self.items: OrderedDict[str, ModuleInfo] = OrderedDict()
        self.lock = threading.Lock()

    def get(self, key: str) -> ModuleInfo | None:
        with self.lock:
            info = self.items.get(key)
            if info is not None:
                self.items.move_to_end(key)
            return info

    def put(self, key: str, info: ModuleInfo) -> None:
        with self.lock:
            if key in self.items:
                return
            self.items[key] = info
            self.bytes += len(info.source)
            while self.bytes > self.max_bytes and self.items:
                _, dropped = self.items.popitem(last=False)
                self.bytes -= len(dropped.source)


_SHARED = _BlobCache(8 * 1024 * 1024)  # vLLM needs about 3 MB for the afd-plugin's imports


class Resolver:
    """Resolution over one SourceTree; `cache` (parsed modules by content key) may be shared
    between the trees of one repository at two revisions."""

    def __init__(self, tree: SourceTree, source_roots: list[str], cache: dict[str, ModuleInfo] | None = None) -> None:
        self.tree = tree
        self.namer = namer_for(tree, source_roots)
        self.cache = cache if cache is not None else {}
        self.errors: dict[str, ParseError] = {}
        self.memo: dict[tuple[str, str | None], Target] = {}
        # Summaries parsed in a helper process (parsepool), for a resolver that needs no nodes.
        self.helper: SummaryHelper | None = None

    def key(self, path: str) -> str:
        """What identifies a module: its content, its path (the same bytes at another path are
        another module: every empty __init__.py is one blob) and the source roots naming it."""
        return f"{self.tree.key(path)}|{path}|{','.join(self.namer.roots)}"

    def job(self, path: str) -> Job | None:
        """The helper's job for a file: (key, bytes, path, module, package); None when the file
        is summarised already or cannot be read as a regular file under the size limit."""
        key = self.key(path)
        if key in self.cache or (self.tree.rev_sha and _SHARED.get(key) is not None):
            return None
        data = self.tree.read(path)
        if not isinstance(data, bytes):
            return None
        module, is_package = self.namer.module_of(path)
        return key, data, path, module, module if is_package else module.rpartition(".")[0]

    def has_package(self, module: str) -> bool:
        return self.namer.file_of(module.split(".")[0])[0]

    def info(self, path: str) -> ModuleInfo:
        content = self.tree.key(path)
        key = self.key(path)
        info = self.cache.get(key) or (_SHARED.get(key) if content.startswith("blob:") else None)
        if info is not None and self.tree.reader is not None:
            self.tree.reader.note()  # read from git objects, whichever probe read them first
        if info is None and self.helper is not None:
            info = self.helper.get(key)  # without nodes: kept in this resolution's cache, never shared
        if info is None:
            module, is_package = self.namer.module_of(path)
            package = module if is_package else module.rpartition(".")[0]
            loaded = self.tree.load(path)
            data, parsed = loaded if loaded is not None else (b"", ParseError(path, 1, None, "not a readable "
                                                                                                "regular file"))
            if isinstance(parsed, ParseError):
                info = ModuleInfo(path, module, package, parsed)
            else:
                info = module_info(parsed, path, module, package, data)
            if content.startswith("blob:"):
                _SHARED.put(key, info)
        self.cache[key] = info
        if info.error:
            self.errors[path] = info.error
        return info

    def resolve(self, module: str, name: str | None) -> Target:
        """The module itself (name None or `*`), or the name imported from it."""
        key = (module, name)
        if key not in self.memo:
            if name is None or name == "*":
                self.memo[key] = self._module(module, [])
            else:
                self.memo[key] = self._name(module, name, [], set())
        return self.memo[key]

    def _module(self, module: str, chain: list[str]) -> Target:
        exists, path = self.namer.file_of(module)
        if not exists:
            return Target(False, None, chain=chain, reason="no_module")
        chain = _extend(chain, path)
        return Target(True, path, path, 1 if path else None, "module", module.rpartition(".")[2], chain)

    def _name(self, module: str, name: str, chain: list[str], seen: set[tuple[str, str]],
              *, submodules: bool = True) -> Target:
        if (module, name) in seen:
            return Target(False, None, chain=chain, reason="cycle")
        if len(seen) > MAX_HOPS:
            return Target(False, None, chain=chain, reason="depth_limit")
        seen = seen | {(module, name)}
        exists, path = self.namer.file_of(module)
        if not exists:
            return Target(False, None, chain=chain, reason="no_module")
        if path is None:  # a namespace package holds only its submodules
            return self._submodule(module, name, None, chain)
        chain = _extend(chain, path)
        info = self.info(path)
        if info.error:
            return Target(False, path, chain=chain, reason="parse_error")
        binding = info.bindings.get(name)
        if binding is not None:
            return self._binding(info, name, binding, chain, seen)
        if submodules and self.namer.file_of(f"{module}.{name}")[0]:
            return self._submodule(module, name, path, chain)
        for star in reversed(info.stars):
            found = self._star(star, name, chain, seen)
            if found is not None:
                return _with_module(found, path)
        if name in info.lazy:
            return _with_module(self._lazy(info, name, chain, seen), path)
        return Target(False, path, chain=chain, reason="not_defined")

    def _binding(self, info: ModuleInfo, name: str, b: Binding, chain: list[str],
                 seen: set[tuple[str, str]]) -> Target:
        here = Target(True, info.path, info.path, b.line, b.kind, name, chain, binding=(info, b))
        if b.kind != "import" or b.source is None:
            return here
        if not self.has_package(b.source):  # leads out of this tree (stdlib, a dependency)
            return here
        if b.source == info.module and b.source_name is not None:
            # `from . import x` in a package's __init__ binds its submodule x (asking the package
            # itself for x again would be a cycle)
            if not self.namer.file_of(f"{b.source}.{b.source_name}")[0]:
                return here
            return self._submodule(b.source, b.source_name, info.path, chain)
        if b.source_name is None:
            followed = self._module(b.source, chain)
        else:
            followed = self._name(b.source, b.source_name, chain, seen)
        return _with_module(followed, info.path)

    def _submodule(self, module: str, name: str, path: str | None, chain: list[str]) -> Target:
        return _with_module(self._module(f"{module}.{name}", chain), path)

    def _star(self, star: str, name: str, chain: list[str], seen: set[tuple[str, str]]) -> Target | None:
        exists, path = self.namer.file_of(star)
        if not exists or path is None:
            return None
        sinfo = self.info(path)
        if sinfo.exports is not None:
            if name not in sinfo.exports:
                return None
        elif name.startswith("_"):
            return None
        found = self._name(star, name, chain, seen, submodules=sinfo.exports is not None)
        return found if found.found or found.reason in ("cycle", "depth_limit") else None

    def _lazy(self, info: ModuleInfo, name: str, chain: list[str], seen: set[tuple[str, str]]) -> Target:
        target_module, attr = info.lazy[name]
        source = absolute_module(target_module.lstrip("."), len(target_module) - len(target_module.lstrip(".")),
                                 info.package) if target_module.startswith(".") else target_module
        lazy = Target(True, info.path, info.path, None, "lazy", name, chain)
        if source is None or not self.has_package(source):
            return lazy
        if attr is not None:
            return self._name(source, attr, chain, seen)
        by_name = self._name(source, name, chain, seen, submodules=False)
        return by_name if by_name.found else self._module(source, chain)


def _extend(chain: list[str], path: str | None) -> list[str]:
    return chain if path is None or (chain and chain[-1] == path) else [*chain, path]


def _with_module(target: Target, module_file: str | None) -> Target:
    target.module_file = module_file
    return target


# --- what a module binds ------------------------------------------------------------------------

def module_info(tree: ast.Module, path: str, module: str, package: str, source: bytes | None = None) -> ModuleInfo:
    """The summary of a parsed module; with `source` (the bytes `tree` was parsed from) it can give
    its tree and nodes again."""
    info = ModuleInfo(path, module, package, None, source or b"", source is not None)
    bindings: dict[str, list[Binding]] = {}
    dicts: dict[str, dict[str, str]] = {}
    getattr_fn: ast.FunctionDef | None = None
    for index, (stmt, conditional) in enumerate(module_statements(tree.body)):
        for name, binding in _bindings(stmt, conditional, package, index):
            bindings.setdefault(name, []).append(binding)
        if isinstance(stmt, ast.ImportFrom) and any(a.name == "*" for a in stmt.names):
            star = absolute_module(stmt.module, stmt.level, package)
            if star:
                info.stars.append(star)
        if isinstance(stmt, ast.FunctionDef) and stmt.name == "__getattr__":
            getattr_fn = stmt
        _collect_exports(info, stmt)
        target, value = _assigned(stmt)
        if target and isinstance(value, ast.Dict) and (mapping := _string_map(value)):
            dicts[target] = mapping
    info.bindings = {name: _choose(found) for name, found in bindings.items()}
    if getattr_fn is not None:
        read = {n.id for n in ast.walk(getattr_fn) if isinstance(n, ast.Name)}
        for dict_name, mapping in dicts.items():
            if dict_name in read:
                for key, spec in mapping.items():
                    mod, _, attr = spec.partition(":")
                    info.lazy[key] = (mod, attr or None)
    return info


def module_statements(body: list[ast.stmt], conditional: bool = False) -> Iterator[tuple[ast.stmt, bool]]:
    """Statements that run at module level: the body, and the bodies of its if/try/with blocks."""
    for stmt in body:
        yield stmt, conditional
        if isinstance(stmt, ast.If):
            yield from module_statements(stmt.body, True)
            yield from module_statements(stmt.orelse, True)
        elif isinstance(stmt, (ast.Try, ast.TryStar)):
            yield from module_statements(stmt.body, True)
            for handler in stmt.handlers:
                yield from module_statements(handler.body, True)
            yield from module_statements(stmt.orelse, True)
            yield from module_statements(stmt.finalbody, conditional)
        elif isinstance(stmt, (ast.With, ast.AsyncWith)):
            yield from module_statements(stmt.body, conditional)


def _choose(bindings: list[Binding]) -> Binding:
    unconditional = [b for b in bindings if not b.conditional]
    return unconditional[-1] if unconditional else bindings[0]


def _bindings(stmt: ast.stmt, conditional: bool, package: str, index: int) -> Iterator[tuple[str, Binding]]:
    if isinstance(stmt, ast.ClassDef):
        yield stmt.name, Binding("class", stmt.lineno, conditional, index)
    elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
        yield stmt.name, Binding("function", stmt.lineno, conditional, index)
    elif isinstance(stmt, ast.Assign):
        for target in stmt.targets:
            for name in _target_names(target):
                yield name, Binding("assignment", stmt.lineno, conditional, index)
    elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
        yield stmt.target.id, Binding("assignment", stmt.lineno, conditional, index)
    elif isinstance(stmt, ast.Import):
        for alias in stmt.names:
            name, module = import_binds(alias)
            yield name, Binding("import", alias.lineno, conditional, index, module)
    elif isinstance(stmt, ast.ImportFrom):
        source = absolute_module(stmt.module, stmt.level, package)
        for alias in stmt.names:
            if alias.name != "*":
                yield alias.asname or alias.name, Binding("import", alias.lineno, conditional, index, source,
                                                          alias.name)


def _target_names(target: ast.expr) -> Iterator[str]:
    if isinstance(target, ast.Name):
        yield target.id
    elif isinstance(target, (ast.Tuple, ast.List)):
        for elt in target.elts:
            yield from _target_names(elt)
    elif isinstance(target, ast.Starred):
        yield from _target_names(target.value)


def _assigned(stmt: ast.stmt) -> tuple[str | None, ast.expr | None]:
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
        return stmt.targets[0].id, stmt.value
    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
        return stmt.target.id, stmt.value
    return None, None


def _strings(node: ast.expr | None) -> list[str] | None:
    if not isinstance(node, (ast.List, ast.Tuple)):
        return None
    out = [e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    return out if len(out) == len(node.elts) else None


def _collect_exports(info: ModuleInfo, stmt: ast.stmt) -> None:
    """`__all__ = [...]`, `__all__ += [...]`, `__all__.extend([...])` with literal strings."""
    target, value = _assigned(stmt)
    if target == "__all__":
        names = _strings(value)
        info.exports = names  # a computed __all__ is unknown: None
        return
    extra: list[str] | None = None
    if isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name) and stmt.target.id == "__all__":
        extra = _strings(stmt.value)
    elif (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call)
          and isinstance(stmt.value.func, ast.Attribute) and stmt.value.func.attr in ("extend", "append")
          and isinstance(stmt.value.func.value, ast.Name) and stmt.value.func.value.id == "__all__"
          and len(stmt.value.args) == 1):
        arg = stmt.value.args[0]
        extra = [arg.value] if (stmt.value.func.attr == "append" and isinstance(arg, ast.Constant)
                                and isinstance(arg.value, str)) else _strings(arg)
    if extra is not None and info.exports is not None:
        info.exports = info.exports + extra


def _string_map(node: ast.Dict) -> dict[str, str] | None:
    out: dict[str, str] = {}
    for k, v in zip(node.keys, node.values):
        if not (isinstance(k, ast.Constant) and isinstance(k.value, str)
                and isinstance(v, ast.Constant) and isinstance(v.value, str)):
            return None
        mod, _, attr = v.value.partition(":")
        if not mod.lstrip(".") or not all(p.isidentifier() for p in mod.lstrip(".").split(".")) or \
                (attr and not attr.isidentifier()):
            return None
        out[k.value] = v.value
    return out or None
