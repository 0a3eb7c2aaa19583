"""`python.imports`: every import of a Python tree, one row per imported name, optionally resolved
to the upstream files that define what it imports (`by_upstream_file`, joined with a diff)."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator, Mapping
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

from policyrun.gcpause import gc_paused
from policyrun.probes.python import parsepool
from policyrun.probes.base import ProbeContext, ProbeError, ProbeResult
from policyrun.probes._kit.gitclient import rev_param
from policyrun.probes.python.fallback import DEFAULT_VERSION_PATTERN, Branch, fallback_branches
from policyrun.probes.python.resolve import DEFINITION_KINDS, ModuleInfo, Resolver, Target
from policyrun.probes.python.source import (PARSE_ERROR_SCHEMA, SKIPPED_SCHEMA, ParseError, SourceTree, absolute_module,
                                       as_list, namer_for, object_schema, open_tree, relative_text, schema_list,
                                       skipped_facts)
from policyrun.probes._kit.paths import PathFilter


@dataclass(frozen=True)
class ImportRow:
    file: str
    line: int
    module: str
    name: str | None
    alias: str | None
    form: str  # import | from | dynamic
    relative: bool
    type_checking: bool
    fallback: Branch | None = None

    @property
    def site(self) -> str:
        return f"{self.file}:{self.line}"

    def as_fact(self) -> dict[str, Any]:
        return {"site": self.site, "file": self.file, "line": self.line, "module": self.module, "name": self.name,
                "alias": self.alias, "form": self.form, "relative": self.relative,
                "type_checking": self.type_checking,
                "fallback": self.fallback.as_fact() if self.fallback is not None else None}


def is_type_checking(test: ast.expr) -> bool:
    """`TYPE_CHECKING`, `typing.TYPE_CHECKING`, `t.TYPE_CHECKING`, or `TYPE_CHECKING and ...`."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        return any(is_type_checking(v) for v in test.values)
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def statements(body: list[ast.stmt], type_checking: bool = False) -> Iterator[tuple[ast.stmt, bool]]:
    """Every statement, nested ones included, with whether it sits under `if TYPE_CHECKING:`.

    Walking statements only (not every expression node) keeps a scan of a large tree cheap.
    """
    for stmt in body:
        yield stmt, type_checking
        if isinstance(stmt, ast.If):
            negated = isinstance(stmt.test, ast.UnaryOp) and isinstance(stmt.test.op, ast.Not)
            checking = is_type_checking(stmt.test.operand if isinstance(stmt.test, ast.UnaryOp) else stmt.test)
            # `if TYPE_CHECKING:` runs only under a type checker; so does the else of `if not TYPE_CHECKING:`.
            yield from statements(stmt.body, type_checking or (checking and not negated))
            yield from statements(stmt.orelse, type_checking or (checking and negated))
            continue
        for name in ("body", "orelse", "finalbody"):
            nested = getattr(stmt, name, None)
            if nested:
                yield from statements(nested, type_checking)
        for handler in getattr(stmt, "handlers", ()):
            yield from statements(handler.body, type_checking)
        for case in getattr(stmt, "cases", ()):
            yield from statements(case.body, type_checking)


def extract_imports(tree: ast.Module, file: str, package: str, *, dynamic: bool = True,
                    version_pattern: re.Pattern[str] | None = None) -> list[ImportRow]:
    """Import rows of one module; `dynamic=False` skips looking for import_module/__import__ calls."""
    rows: list[ImportRow] = []
    fallbacks = fallback_branches(tree, file, version_pattern)
    checking_spans: list[tuple[int, int]] = []
    for stmt, checking in statements(tree.body):
        if isinstance(stmt, ast.Import):
            for alias in stmt.names:
                rows.append(ImportRow(file, alias.lineno, alias.name, None, alias.asname, "import", False, checking,
                                      fallbacks.get(id(stmt))))
        elif isinstance(stmt, ast.ImportFrom):
            source = absolute_module(stmt.module, stmt.level, package)
            module = source if source is not None else relative_text(stmt.module, stmt.level)
            for alias in stmt.names:
                rows.append(ImportRow(file, alias.lineno, module, alias.name, alias.asname, "from", stmt.level > 0,
                                      checking, fallbacks.get(id(stmt))))
        elif checking and dynamic:
            checking_spans.append((stmt.lineno, stmt.end_lineno or stmt.lineno))
    if dynamic:
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                found = _dynamic(node, package)
                if found is not None:
                    module, relative = found
                    checking = any(a <= node.lineno <= b for a, b in checking_spans)
                    rows.append(ImportRow(file, node.lineno, module, None, None, "dynamic", relative, checking))
    return sorted(rows, key=lambda r: r.line)


def _dynamic(node: ast.Call, package: str) -> tuple[str, bool] | None:
    """(module, relative) of `importlib.import_module("m")`, `import_module(".m", "pkg")`, `__import__("m")`."""
    func = node.func
    if isinstance(func, ast.Name) and func.id in ("import_module", "__import__"):
        callee = func.id
    elif isinstance(func, ast.Attribute) and func.attr == "import_module" and isinstance(func.value, ast.Name) \
            and func.value.id == "importlib":
        callee = "import_module"
    else:
        return None
    if not node.args:
        return None
    first = node.args[0]
    if not (isinstance(first, ast.Constant) and isinstance(first.value, str) and first.value):
        return None  # a computed name: nothing to know statically
    name = first.value
    if callee == "__import__" or not name.startswith("."):
        return name, False
    anchors = [*node.args[1:2], *(k.value for k in node.keywords if k.arg == "package")]
    anchor = next((a.value for a in anchors if isinstance(a, ast.Constant) and isinstance(a.value, str)), None)
    stripped = name.lstrip(".")
    source = absolute_module(stripped or None, len(name) - len(stripped), anchor) if anchor else None
    return source or name, True


def scan(tree: SourceTree, keep: PathFilter) -> Iterator[tuple[str, bytes, ast.Module | ParseError]]:
    """(path, bytes, AST or error) of every kept .py file, in path order."""
    for path in tree.select(keep):
        loaded = tree.load(path)
        if loaded is not None:
            yield path, *loaded


# --- the probe ----------------------------------------------------------------------------------

_TARGET_PROPS: dict[str, Any] = {
    "found": {"type": "boolean", "description": "The module exists and defines (or re-exports) the name."},
    "module_file": {"type": ["string", "null"], "description": "File of the imported module "
                                                               "(`a/b.py` or `a/b/__init__.py`)."},
    "defining_file": {"type": ["string", "null"], "description": "File that defines the name (the submodule's "
                                                                 "file for a submodule)."},
    "line": {"type": ["integer", "null"], "description": "Line of the definition in defining_file."},
    "kind": {"type": ["string", "null"], "enum": [*DEFINITION_KINDS, None], "description": "What the name is: `module`, `class`, `function`, "
             "`assignment`; `import` / `lazy` when it is bound by an import or a lazy map leading out of the "
             "upstream tree."},
    "chain": {"type": "array", "items": {"type": "string"},
              "description": "Files visited from the module to the definition (re-exports in between)."},
    "reason": {"type": ["string", "null"], "enum": ["no_module", "not_defined", "cycle", "depth_limit", "parse_error",
                                                     None], "description": "Why not found; null when found."},
}
_TARGET = object_schema("Where the import leads in the upstream tree at resolve.rev; absent when the "
                        "module's top-level package is not in the upstream tree.", {
                            **_TARGET_PROPS,
                            "compare": object_schema("The same resolution at resolve.compare_rev.", _TARGET_PROPS),
                        })
_ROW = object_schema("One imported name.", {
    "site": {"type": "string", "description": "`file:line`."},
    "file": {"type": "string", "description": "Path relative to root."},
    "line": {"type": "integer", "description": "Line of this name (each name of a multi-line import has its own)."},
    "module": {"type": "string", "description": "Absolute module (relative imports resolved); a relative import "
                                                "climbing above the top-level package keeps its dots (`..x`)."},
    "name": {"type": ["string", "null"], "description": "Imported name (`*` for a star import); null for "
                                                       "`import a.b` and dynamic imports."},
    "alias": {"type": ["string", "null"], "description": "The `as` name."},
    "form": {"type": "string", "enum": ["import", "from", "dynamic"], "description": "`import a`, `from a import b`, or a literal "
                                                                  "`importlib.import_module(...)`/`__import__(...)`."},
    "relative": {"type": "boolean", "description": "Written relative (`from . import x`)."},
    "type_checking": {"type": "boolean", "description": "Under `if TYPE_CHECKING:` (not run at runtime)."},
    "fallback": object_schema("The version-compatibility fallback this import is a branch of (a `try:` catching "
                              "ImportError, or a version-guarded `if`); null outside one.", {
                                  "group": {"type": "string", "description": "`file:line` of the outermost "
                                                                             "`try`/`if` of the chain."},
                                  "branch": {"type": "integer", "description": "0 the `try` body (or first arm), "
                                                                              "then each handler (or arm)."},
                                  "guard": {"type": "string", "enum": ["try", "version"]}}, nullable=True),
    "target": _TARGET,
})
_UPSTREAM = object_schema("The upstream tree resolved against; null without `resolve`.", {
    "path": {"type": "string"}, "rev": {"type": ["string", "null"]}, "rev_sha": {"type": ["string", "null"]},
    "compare_rev": {"type": ["string", "null"]}, "compare_sha": {"type": ["string", "null"]},
}, nullable=True)
_SITES = {"type": "array", "items": {"type": "string"}}
_RESOLVES = {"type": ["boolean", "null"]}
_BRANCH = object_schema("One branch of a fallback group.", {
    "branch": {"type": "integer"}, "line": {"type": "integer", "description": "First line of the branch."},
    "sites": {**_SITES, "description": "Its upstream imports (rows of packages in the upstream tree)."},
    "resolves_at_rev": _RESOLVES | {"description": "Every upstream import of the branch resolves at resolve.rev "
                                                  "(the current release); null without resolve or without "
                                                  "upstream imports."},
    "resolves_at_compare": _RESOLVES | {"description": "The same at resolve.compare_rev (the target)."},
    "removable": {"type": "boolean", "description": "Resolves at neither release (at rev, without compare_rev): "
                                                    "the branch serves no supported release."},
})
_GROUP = object_schema("A version-compatibility fallback: alternative imports of which one must work.", {
    "group": {"type": "string", "description": "`file:line` of its outermost `try`/`if`."},
    "file": {"type": "string"}, "line": {"type": "integer"},
    "guard": {"type": "string", "enum": ["try", "version"]},
    "branches": {"type": "array", "items": _BRANCH, "description": "Branches holding upstream imports, in order."},
    "satisfied_at_rev": _RESOLVES | {"description": "At least one branch resolves at resolve.rev; null without "
                                                   "resolve."},
    "satisfied_at_compare": _RESOLVES | {"description": "At least one branch resolves at compare_rev."},
})

FACT_SCHEMA: Mapping[str, Any] = object_schema("Imports of the scanned tree.", {
    "root": {"type": "string", "description": "The scanned directory."},
    "rev": {"type": ["string", "null"], "description": "As given; null: the working tree."},
    "rev_sha": {"type": ["string", "null"]},
    "files_scanned": {"type": "integer", "description": ".py files read (after include/exclude)."},
    "parse_errors": {"type": "array", "items": PARSE_ERROR_SCHEMA,
                     "description": "Scanned files that are not valid Python (their imports are unknown)."},
    "imports": {"type": "array", "items": _ROW, "description": "One row per imported name, by file then line."},
    "modules": {"type": "array", "items": {"type": "string"}, "description": "Sorted distinct modules of the rows."},
    "upstream": _UPSTREAM,
    "by_upstream_file": {"type": "object", "additionalProperties": _SITES,
                         "description": "Upstream path (relative to resolve.path) → sorted sites depending on it: "
                                        "module file, every file of the re-export chain, defining file."},
    "unresolved": {**_SITES, "description": "Sites of rows whose target was not found at resolve.rev, except "
                                            "branches of a fallback group another branch satisfies there."},
    "fallbacks": {"type": "array", "items": _GROUP, "description": "Fallback groups holding upstream imports, by "
                                                                 "file then line."},
    "removable": {"type": "array", "description": "Fallback branches that resolve at no supported release.",
                  "items": object_schema("A removable branch.", {
                      "group": {"type": "string"}, "branch": {"type": "integer"}, "sites": _SITES})},
    "missing_at_compare": {"type": "array", "description": "Rows found at resolve.rev but not at compare_rev "
                                                          "(except branches of a fallback group satisfied there).",
                           "items": object_schema("A removed or renamed module or name.", {
                               "site": {"type": "string"}, "module": {"type": "string"},
                               "name": {"type": ["string", "null"]},
                               "reason": {"type": ["string", "null"], "description": "As target.reason."}})},
    "moved_at_compare": {"type": "array", "description": "Rows found at both revisions, defined in another file "
                                                        "at compare_rev.",
                         "items": object_schema("A module or name that moved.", {
                             "site": {"type": "string"}, "module": {"type": "string"},
                             "name": {"type": ["string", "null"]},
                             "defining_file": {"type": ["string", "null"], "description": "At resolve.rev."},
                             "compare_defining_file": {"type": ["string", "null"], "description": "At compare_rev."}})},
    "skipped": SKIPPED_SCHEMA | {"description": "Scanned files not parsed for their size (in parse_errors too: "
                                                "their imports are unknown)."},
    "upstream_skipped": {**SKIPPED_SCHEMA, "items": object_schema("An upstream file not parsed.", {
        **SKIPPED_SCHEMA["items"]["properties"], "rev": {"type": ["string", "null"]}}),
        "description": "Upstream files resolution needed, not parsed for their size (in upstream_parse_errors "
                       "too; what needed them is unresolved)."},
    "upstream_parse_errors": {"type": "array", "description": "Upstream files resolution needed that do not parse.",
                              "items": object_schema("An upstream file that is not valid Python.", {
                                  **PARSE_ERROR_SCHEMA["properties"],
                                  "rev": {"type": ["string", "null"], "description": "resolve.rev or compare_rev."}})},
})

_GLOBS = schema_list("Globs relative to root (`*` within a directory, `**` across).")
SOURCE_ROOTS = {"type": "array", "items": {"type": "string"}, "default": ["."],
                "description": "Directories (relative to the tree) that hold top-level packages, e.g. `src`."}

PARAMS_SCHEMA: Mapping[str, Any] = {
    "type": "object", "additionalProperties": False, "required": ["root"],
    "properties": {
        "root": {"type": "string", "minLength": 1, "description": "Directory to scan (a repository or a tree in one)."},
        "rev": rev_param("Read this revision's git objects instead of the working tree."),
        "include": _GLOBS | {"default": ["**/*.py"]},
        "exclude": _GLOBS | {"description": "Globs to skip (e.g. tests)."},
        "packages": {"type": "array", "items": {"type": "string", "minLength": 1},
                     "description": "Keep only imports of these top-level packages (e.g. [vllm])."},
        "source_roots": SOURCE_ROOTS,
        "version_pattern": {"type": "string", "minLength": 1, "default": DEFAULT_VERSION_PATTERN,
                            "description": "Regular expression (Python `re`) a name, attribute or function in an "
                                           "`if` test must match for the `if` to be a version guard."},
        "resolve": {"type": "object", "additionalProperties": False, "required": ["path"],
                    "description": "Resolve each import in an upstream tree.",
                    "properties": {
                        "path": {"type": "string", "minLength": 1, "description": "Upstream tree (its repository "
                                 "top level, so paths match `git.diff`)."},
                        "rev": rev_param("Upstream revision the plugin is built against; default its working tree."),
                        "compare_rev": rev_param("Also resolve at this revision (the upgrade target)."),
                        "source_roots": SOURCE_ROOTS,
                    }},
    },
}


class ImportsProbe:
    kind = "python.imports"
    summary = ("Every Python import (multi-line, relative, TYPE_CHECKING, importlib), resolved to the upstream "
               "files that define what it imports.")
    params_schema = PARAMS_SCHEMA
    fact_schema = FACT_SCHEMA

    def side_effects(self, params: Mapping[str, Any]) -> frozenset[str]:
        return frozenset()

    def run(self, params: Mapping[str, Any], ctx: ProbeContext) -> ProbeResult:
        with ExitStack() as stack:
            stack.enter_context(gc_paused())
            tree = stack.enter_context(open_tree(params["root"], params.get("rev"), ctx))
            value = collect_imports(tree, params)
            commands = list(tree.repo.commands) if tree.repo else [f"python walk of {tree.root}"]
            sources = [str(tree.root)]
            resolve = params.get("resolve")
            if resolve:
                upstream = stack.enter_context(open_tree(resolve["path"], resolve.get("rev"), ctx,
                                                         what="resolve.path"))
                compare = None
                if resolve.get("compare_rev"):
                    if upstream.repo is None:
                        raise ProbeError("params.invalid", "resolve.compare_rev needs resolve.path in a git "
                                                           "repository")
                    compare = stack.enter_context(open_tree(resolve["path"], resolve["compare_rev"], ctx,
                                                            what="resolve.path"))
                resolve_rows(value, upstream, compare, as_list(resolve.get("source_roots")) or ["."])
                sources.append(str(upstream.root))
                for t in (upstream, compare):
                    if t is not None and t.repo is not None:
                        commands += t.repo.commands
            return ProbeResult(value=value, commands=commands, sources=sources,
                               repo_path=str(tree.repo.root) if tree.repo else None,
                               repo_head=tree.repo.head() if tree.repo else None)


def collect_imports(tree: SourceTree, params: Mapping[str, Any]) -> dict[str, Any]:
    keep = PathFilter(as_list(params.get("include")) or ["**/*.py"], as_list(params.get("exclude")))
    namer = namer_for(tree, as_list(params.get("source_roots")) or ["."])
    packages = set(params.get("packages") or [])
    try:
        pattern = re.compile(params.get("version_pattern") or DEFAULT_VERSION_PATTERN)
    except re.error as exc:
        raise ProbeError("params.invalid", f"version_pattern is not a regular expression: {exc}") from None
    rows: list[ImportRow] = []
    errors: list[ParseError] = []
    scanned = 0
    for path, data, parsed in scan(tree, keep):
        scanned += 1
        if isinstance(parsed, ParseError):
            errors.append(parsed)
            continue
        dynamic = b"import_module" in data or b"__import__" in data  # skip the expression walk when it cannot hit
        for row in extract_imports(parsed, path, namer.package_of(path), dynamic=dynamic, version_pattern=pattern):
            if not packages or row.module.split(".")[0] in packages:
                rows.append(row)
    return {"root": str(tree.root), "rev": tree.rev, "rev_sha": tree.rev_sha, "files_scanned": scanned,
            "parse_errors": [e.as_fact() for e in errors], "skipped": skipped_facts(errors),
            "imports": [r.as_fact() for r in rows], "modules": sorted({r.module for r in rows}), "upstream": None,
            "by_upstream_file": {}, "unresolved": [], "missing_at_compare": [], "moved_at_compare": [],
            "fallbacks": fallback_groups(rows), "removable": [],
            "upstream_parse_errors": [], "upstream_skipped": []}


def resolve_rows(value: dict[str, Any], upstream: SourceTree, compare: SourceTree | None,
                 source_roots: list[str]) -> None:
    cache: dict[str, ModuleInfo] = {}  # files unchanged between the two revisions parse once
    here = Resolver(upstream, source_roots, cache)
    there = Resolver(compare, source_roots, cache) if compare is not None else None
    helper = _start_helper(value["imports"], [r for r in (here, there) if r is not None])
    try:
        _resolve_rows(value, here, there)
    finally:
        if helper is not None:
            helper.close()


def _start_helper(imports: list[dict[str, Any]], resolvers: list[Resolver]) -> parsepool.SummaryHelper | None:
    """A helper process summarising the files the imports lead to first (the module, and the
    submodule a name may be), in the order resolution will ask for them; see parsepool."""
    if not parsepool.enabled():
        return None
    jobs: dict[str, parsepool.Job] = {}
    for row in imports:
        for resolver in resolvers:
            if not resolver.has_package(row["module"]):
                continue
            for module in (row["module"], f"{row['module']}.{row['name']}" if row["name"] else None):
                path = resolver.namer.file_of(module)[1] if module else None
                if path is not None and resolver.key(path) not in jobs and (job := resolver.job(path)) is not None:
                    jobs[job[0]] = job
    if len(jobs) < parsepool.MIN_JOBS:
        return None
    try:
        helper = parsepool.SummaryHelper(list(jobs.values()), resolvers[0].tree.deadline)
    except OSError:  # cannot start a process here: resolve in process
        return None
    for resolver in resolvers:
        resolver.helper = helper
    return helper


def _resolve_rows(value: dict[str, Any], here: Resolver, there: Resolver | None) -> None:
    upstream, compare = here.tree, there.tree if there is not None else None
    by_file: dict[str, set[str]] = {}
    unresolved: list[str] = []
    missing: list[dict[str, Any]] = []
    moved: list[dict[str, Any]] = []
    resolved_rows: list[dict[str, Any]] = []
    for row in value["imports"]:
        if not here.has_package(row["module"]):
            continue
        target = here.resolve(row["module"], row["name"])
        resolved_rows.append(row)
        fact = target.as_fact()
        for path in target.files():
            by_file.setdefault(path, set()).add(row["site"])
        if not target.found:
            unresolved.append(row["site"])
        if there is not None:
            later: Target = there.resolve(row["module"], row["name"])
            fact["compare"] = later.as_fact()
            if target.found and not later.found:
                missing.append({"site": row["site"], "module": row["module"], "name": row["name"],
                                "reason": later.reason})
            elif target.found and later.defining_file != target.defining_file:
                moved.append({"site": row["site"], "module": row["module"], "name": row["name"],
                              "defining_file": target.defining_file, "compare_defining_file": later.defining_file})
        row["target"] = fact
    value["upstream"] = {"path": str(upstream.root), "rev": upstream.rev, "rev_sha": upstream.rev_sha,
                         "compare_rev": compare.rev if compare else None,
                         "compare_sha": compare.rev_sha if compare else None}
    value["by_upstream_file"] = {path: sorted(sites, key=_site_order) for path, sites in sorted(by_file.items())}
    # A fallback branch that does not resolve where another branch of its group does is the
    # fallback working as written, not an unknown or missing surface.
    covered_here, covered_there = _judge_fallbacks(value, resolved_rows, there is not None)
    value["unresolved"] = [s for s in unresolved if s not in covered_here]
    value["missing_at_compare"] = [m for m in missing if m["site"] not in covered_there]
    value["moved_at_compare"] = moved
    value["upstream_parse_errors"] = [
        {**err.as_fact(), "rev": resolver.tree.rev}
        for resolver in (here, there) if resolver is not None for err in resolver.errors.values()]
    value["upstream_skipped"] = [entry for resolver in (here, there) if resolver is not None
                                 for entry in skipped_facts(resolver.errors.values(), rev=resolver.tree.rev)]


def _site_order(site: str) -> tuple[str, int]:
    path, _, line = site.rpartition(":")
    return path, int(line)


def fallback_groups(rows: list[ImportRow]) -> list[dict[str, Any]]:
    """The fallback groups of the rows, unresolved: branches in order, each with its sites."""
    groups: dict[str, dict[str, Any]] = {}
    for row in rows:
        b = row.fallback
        if b is None:
            continue
        file, _, line = b.group.rpartition(":")
        group = groups.setdefault(b.group, {"group": b.group, "file": file, "line": int(line), "guard": b.guard,
                                            "branches": {}, "satisfied_at_rev": None, "satisfied_at_compare": None})
        branch = group["branches"].setdefault(b.index, {"branch": b.index, "line": b.line, "sites": [],
                                                        "resolves_at_rev": None, "resolves_at_compare": None,
                                                        "removable": False})
        if row.site not in branch["sites"]:
            branch["sites"].append(row.site)
    out = sorted(groups.values(), key=lambda g: (g["file"], g["line"]))
    for group in out:
        group["branches"] = [group["branches"][i] for i in sorted(group["branches"])]
    return out


def _judge_fallbacks(value: dict[str, Any], resolved: list[dict[str, Any]],
                     compared: bool) -> tuple[set[str], set[str]]:
    """Mark each branch resolved or not at both releases; the sites covered by another branch at
    rev and at compare_rev. Branches without upstream imports drop out (they prove nothing)."""
    by_branch: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for row in resolved:
        if row.get("fallback") is not None:
            by_branch.setdefault((row["fallback"]["group"], row["fallback"]["branch"]), []).append(row)
    covered_here: set[str] = set()
    covered_there: set[str] = set()
    groups = []
    removable = []
    for group in value["fallbacks"]:
        branches = []
        for branch in group["branches"]:
            rows = by_branch.get((group["group"], branch["branch"]), [])
            if not rows:
                continue
            branch["sites"] = [r["site"] for r in rows]
            branch["resolves_at_rev"] = all(r["target"]["found"] for r in rows)
            branch["resolves_at_compare"] = all(r["target"]["compare"]["found"] for r in rows) if compared else None
            branch["removable"] = not branch["resolves_at_rev"] and not branch["resolves_at_compare"]
            branches.append(branch)
        if not branches:
            continue
        group["branches"] = branches
        group["satisfied_at_rev"] = any(b["resolves_at_rev"] for b in branches)
        group["satisfied_at_compare"] = any(b["resolves_at_compare"] for b in branches) if compared else None
        for b in branches:
            if group["satisfied_at_rev"]:
                covered_here.update(b["sites"])
            if group["satisfied_at_compare"]:
                covered_there.update(b["sites"])
            if b["removable"]:
                removable.append({"group": group["group"], "branch": b["branch"], "sites": b["sites"]})
        groups.append(group)
    value["fallbacks"] = groups
    value["removable"] = removable
    return covered_here, covered_there
