"""`tests.inventory`: the test modules a repository holds, found by pytest's default rules.

A results file says what ran; only the repository says what should have. This probe lists the
test modules under the configured roots at a revision (or in the working tree), the way pytest's
collection finds them: files whose name matches `python_files` (default `test_*.py` and
`*_test.py`) in directories `norecursedirs` does not exclude (default `*.egg .* _darcs build CVS
dist node_modules venv {arch}`), under `testpaths` (or the root). Those settings are read from the
repository's own pytest configuration, in pytest's order: `pytest.ini`, `pyproject.toml`
(`[tool.pytest.ini_options]`), `tox.ini` (`[pytest]`), `setup.cfg` (`[tool:pytest]`); the first
file that has a section wins. `roots` in the probe's parameters overrides `testpaths` (a rulebook
auditing the unit suite names `tests/unit`).

Each module is named as pytest's JUnit report names it (`tests/unit/test_x.py` →
`tests.unit.test_x`), so a rule can join the two, and says whether it defines anything pytest
would collect as a test (`defines_tests`: a module-level function, or name bound by an import or an
assignment, matching `python_functions`, default `test` as a prefix; a class matching
`python_classes`, default `Test`): a file named like a test module that holds only helpers reports
no test, and a report that lacks it is not partial. Each also lists what it requires at import:
the top-level packages its module body imports (`import torch_npu`, `from vllm_ascend import x`,
also inside a module-level `if`/`try`) and those it asks `pytest.importorskip` for at module
level; imports inside functions and classes are a test's own business and are not listed.
Sources are parsed with `ast`, never imported; a module that does not parse is listed with its
`parse_error` and no requirements.

Limits: `collect_ignore` in a conftest.py, `-p`/`--ignore` options in `addopts`, plugins that
collect other files (doctest, notebooks) and `rootdir` set elsewhere than `root` are not read.
"""

from __future__ import annotations

import ast
import configparser
import tomllib
from collections.abc import Mapping
from fnmatch import fnmatchcase
from typing import Any

from policyrun.probes.base import ProbeContext, ProbeError, ProbeResult
from policyrun.probes._kit.revfiles import SKIPPED_SCHEMA, TREE_PARAMS, read_tree

DEFAULT_PYTHON_FILES = ["test_*.py", "*_test.py"]
DEFAULT_NORECURSE = ["*.egg", ".*", "_darcs", "build", "CVS", "dist", "node_modules", "venv", "{arch}"]
DEFAULT_PYTHON_FUNCTIONS = ["test"]
DEFAULT_PYTHON_CLASSES = ["Test"]
# pytest's order: the first of these files that holds a pytest section configures the run.
CONFIG_FILES = (("pytest.ini", "ini", "pytest"), ("pyproject.toml", "toml", "tool.pytest.ini_options"),
                ("tox.ini", "ini", "pytest"), ("setup.cfg", "ini", "tool:pytest"))

PARAMS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "root": TREE_PARAMS["root"],
        "rev": TREE_PARAMS["rev"],
        "roots": {"type": "array", "items": {"type": "string", "minLength": 1},
                  "description": "Folders to collect from, relative to root (default: the configuration's "
                                 "`testpaths`, else the root)."},
    },
    "additionalProperties": False,
}

_STRS = {"type": "array", "items": {"type": "string"}}
FACT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "modules": {"type": "array", "description": "Test modules, sorted by path.", "items": {
            "type": "object", "properties": {
                "path": {"type": "string"},
                "module": {"type": "string", "description": "As pytest's JUnit report names it: tests.unit.test_x."},
                "requires": {**_STRS, "description": "Top-level packages the module body imports or importorskips."},
                "defines_tests": {"type": "boolean", "description": "A module-level test function or class "
                                  "(python_functions / python_classes) is defined or imported."},
                "parse_error": {"type": ["string", "null"]}}}},
        "count": {"type": "integer"},
        "roots": {**_STRS, "description": "The folders collected from."},
        "config": {"type": "object", "description": "Where the settings came from.", "properties": {
            "file": {"type": ["string", "null"], "description": "The configuration file used, or null."},
            "testpaths": _STRS, "python_files": _STRS, "norecursedirs": _STRS, "python_functions": _STRS,
            "python_classes": _STRS}},
        "root": {"type": "string"}, "rev": {"type": ["string", "null"]}, "rev_sha": {"type": ["string", "null"]},
        "skipped": SKIPPED_SCHEMA,
    },
}


def _words(value: Any) -> list[str]:
    """An ini value (whitespace-separated) or a TOML list/string, as a list of strings."""
    if isinstance(value, str):
        return value.split()
    if isinstance(value, list):
        return [str(v) for v in value]
    return []


def pytest_config(files: Mapping[str, str]) -> dict[str, Any]:
    """testpaths, python_files and norecursedirs from the first configuration file with a section."""
    for name, fmt, section in CONFIG_FILES:
        text = files.get(name)
        if text is None:
            continue
        options: Mapping[str, Any] | None
        try:
            if fmt == "toml":
                data: Any = tomllib.loads(text)
                for key in section.split("."):
                    data = data.get(key) if isinstance(data, dict) else None
                options = data if isinstance(data, dict) else None
            else:
                parser = configparser.ConfigParser(interpolation=None)
                parser.read_string(text, source=name)
                options = dict(parser[section]) if parser.has_section(section) else None
        except (tomllib.TOMLDecodeError, configparser.Error) as exc:
            raise ProbeError("config.invalid", f"{name}: cannot read the pytest configuration: "
                             f"{str(exc).splitlines()[0]}; fix the file (pytest cannot read it either)") from None
        if options is None and name != "pytest.ini":
            continue
        options = options or {}  # pytest.ini always wins, even without a [pytest] section
        return {"file": name, "testpaths": _words(options.get("testpaths")),
                "python_files": _words(options.get("python_files")) or list(DEFAULT_PYTHON_FILES),
                "norecursedirs": _words(options.get("norecursedirs")) or list(DEFAULT_NORECURSE),
                "python_functions": _words(options.get("python_functions")) or list(DEFAULT_PYTHON_FUNCTIONS),
                "python_classes": _words(options.get("python_classes")) or list(DEFAULT_PYTHON_CLASSES)}
    return {"file": None, "testpaths": [], "python_files": list(DEFAULT_PYTHON_FILES),
            "norecursedirs": list(DEFAULT_NORECURSE), "python_functions": list(DEFAULT_PYTHON_FUNCTIONS),
            "python_classes": list(DEFAULT_PYTHON_CLASSES)}


_IMPORT_CALLS = frozenset({"importorskip", "import_module", "__import__"})


def _importorskip(node: ast.AST) -> str | None:
    """`pytest.importorskip("x")`, `importlib.import_module("x")`, `__import__("x")` → "x"."""
    if not isinstance(node, ast.Call) or not node.args:
        return None
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
    first = node.args[0]
    if name in _IMPORT_CALLS and isinstance(first, ast.Constant) and isinstance(first.value, str):
        return first.value
    return None


def _module_statements(tree: ast.Module) -> list[ast.stmt]:
    """The module body, with the bodies of module-level `if`/`try`/`with` blocks (not functions or classes)."""
    out: list[ast.stmt] = []
    pending: list[ast.stmt] = list(reversed(tree.body))
    while pending:
        node = pending.pop()
        out.append(node)
        if isinstance(node, (ast.If, ast.Try, ast.With)):
            nested: list[ast.stmt] = []
            for block in ("body", "orelse", "finalbody"):
                nested.extend(getattr(node, block, []))
            for handler in getattr(node, "handlers", []):
                nested.extend(handler.body)
            pending.extend(reversed(nested))
    return out


def _pytest_name_match(name: str, patterns: list[str]) -> bool:
    """pytest's rule for python_functions / python_classes: a prefix, or a glob when it has one."""
    return any(fnmatchcase(name, p) if any(c in p for c in "*?[") else name.startswith(p) for p in patterns)


def defines_tests(statements: list[ast.stmt], config: Mapping[str, Any]) -> bool:
    """Whether pytest would find a test here: a module-level function or bound name matching
    python_functions, or a class matching python_classes (imported ones included: pytest collects them)."""
    functions, classes = config["python_functions"], config["python_classes"]
    for node in statements:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and _pytest_name_match(node.name, functions):
            return True
        if isinstance(node, ast.ClassDef) and _pytest_name_match(node.name, classes):
            return True
        names: list[str] = []
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [alias.asname or alias.name.split(".")[0] for alias in node.names]
        elif isinstance(node, ast.Assign):
            names = [t.id for t in node.targets if isinstance(t, ast.Name)]
        if any(_pytest_name_match(n, functions) or _pytest_name_match(n, classes) for n in names):
            return True
    return False


def module_requirements(statements: list[ast.stmt]) -> list[str]:
    """Top-level packages the module body needs at import (functions and classes left out)."""
    found: set[str] = set()
    for node in statements:
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            found.add(node.module.split(".")[0])
        elif isinstance(node, (ast.Expr, ast.Assign, ast.AnnAssign)) and node.value is not None:
            if (name := _importorskip(node.value)) is not None:
                found.add(name.split(".")[0])
    return sorted(found)


def _under(path: str, folder: str) -> bool:
    folder = folder.strip("/")
    return folder in ("", ".") or path == folder or path.startswith(folder + "/")


def _collected(path: str, roots: list[str], config: Mapping[str, Any]) -> bool:
    folders, _, name = path.rpartition("/")
    if not any(fnmatchcase(name, pattern) for pattern in config["python_files"]):
        return False
    if not any(_under(path, root) for root in roots):
        return False
    return not any(fnmatchcase(part, pattern) for part in folders.split("/") if part
                   for pattern in config["norecursedirs"])


class TestInventoryProbe:
    kind = "tests.inventory"
    summary = ("The test modules a repository holds under its configured roots, found by pytest's default "
               "rules (python_files, testpaths, norecursedirs from its pytest configuration), at a revision, "
               "with the packages each needs at import.")
    params_schema: Mapping[str, Any] = PARAMS_SCHEMA
    fact_schema: Mapping[str, Any] = FACT_SCHEMA

    def side_effects(self, params: Mapping[str, Any]) -> frozenset[str]:
        return frozenset()

    def run(self, params: Mapping[str, Any], ctx: ProbeContext) -> ProbeResult:
        base = {k: params[k] for k in ("root", "rev") if k in params}
        settings = read_tree({**base, "include": [f"/{name}" for name, _, _ in CONFIG_FILES]}, ctx, [])
        config = pytest_config(dict(settings.files))
        roots = [r.strip("/") or "." for r in params.get("roots") or config["testpaths"] or ["."]]
        # Only files named like tests under the roots are read (the `_collected` filter then applies
        # norecursedirs and the basename rule exactly).
        include = [f"{root}/**/{pattern}" if root != "." else pattern
                   for root in roots for pattern in config["python_files"]]
        tree = read_tree({**base, "include": include}, ctx, [])
        modules = []
        for path, text in tree.files:
            if not _collected(path, roots, config):
                continue
            try:
                statements = _module_statements(ast.parse(text, filename=path))
                requires, tests, error = module_requirements(statements), defines_tests(statements, config), None
            except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
                # pytest reports a module it cannot parse as a collection error: expected in the report
                requires, tests, error = [], True, f"{type(exc).__name__}: {exc}"
            modules.append({"path": path, "module": path[:-len(".py")].replace("/", "."), "requires": requires,
                            "defines_tests": tests, "parse_error": error})
        value = {"modules": modules, "count": len(modules), "roots": roots, "config": config,
                 "root": str(tree.root), "rev": tree.rev, "rev_sha": tree.rev_sha,
                 "skipped": [s for s in tree.skipped if _collected(s["path"], roots, config)]}
        return ProbeResult(value=value, commands=settings.commands + tree.commands, repo_path=tree.repo_path,
                           repo_head=tree.repo_head, sources=[str(tree.root)])


PROBES: list[Any] = [TestInventoryProbe()]
