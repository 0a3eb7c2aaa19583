"""The package's import graph: no cycles, and no import from a lower layer into a higher one.

Layers are declared once, in policyrun/layers.py. Imports inside functions count (they run when
the function does); imports under `if TYPE_CHECKING:` do not (they never run).
"""

from __future__ import annotations

import ast
import fnmatch
from collections.abc import Iterator
from pathlib import Path

import pytest

from policyrun.layers import LAYERS

PACKAGE = Path(__file__).resolve().parent.parent / "policyrun"


def module_files() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def _runtime_nodes(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node except the bodies of `if TYPE_CHECKING:` blocks."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                stack.extend(child.orelse)
            else:
                stack.append(child)


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in _runtime_nodes(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name in modules)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([node.module] if node.module else []))
            submodules = {f"{base}.{a.name}" for a in node.names} & modules.keys()
            found.update(submodules)
            if base in modules and len(submodules) < len(node.names):
                found.add(base)  # a name defined in the module itself, not a submodule of it
    found.discard(name)
    return found


def layer_of(module: str) -> int | None:
    for index, (_name, patterns) in enumerate(LAYERS):
        if any(fnmatch.fnmatchcase(module, p) for p in patterns):
            return index
    return None


@pytest.fixture(scope="module")
def graph() -> dict[str, set[str]]:
    modules = module_files()
    return {name: imports_of(name, path, modules) for name, path in modules.items()}


def test_every_module_has_a_layer(graph: dict[str, set[str]]) -> None:
    assert [m for m in graph if layer_of(m) is None] == []


def test_no_import_reaches_up_a_layer(graph: dict[str, set[str]]) -> None:
    wrong = []
    for module, targets in sorted(graph.items()):
        for target in sorted(targets):
            low, high = layer_of(module), layer_of(target)
            if low is not None and high is not None and high > low:
                wrong.append(f"{module} ({LAYERS[low][0]}) imports {target} ({LAYERS[high][0]})")
    assert wrong == []


def test_no_cycles(graph: dict[str, set[str]]) -> None:
    # Tarjan's strongly connected components, iteratively; any component of two or more is a cycle.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    cycles: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    cycles.append(sorted(component))
    assert cycles == []


# Probe families (policyrun/probes/<family>/) import the kit below them (policyrun.probes._kit,
# policyrun.probes.base) and their own family. A public import from another family is allowed
# only when listed here, with its reason; a private one (a `_name`, or a `_module`) never.
FAMILIES = ("repo", "python", "host", "gpu", "results")
ACROSS_FAMILIES = {
    # pins.constant reads a module's constant from a Python tree at a revision, as python.* do.
    ("policyrun.probes.repo.pins", "policyrun.probes.python.source"),
}


def family_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if len(parts) > 3 and parts[:2] == ["policyrun", "probes"] and parts[2] in FAMILIES else None


def imported_names(path: Path) -> Iterator[tuple[str, str]]:
    """(module, name) for every `from policyrun... import name` and `import policyrun...` that runs."""
    for node in _runtime_nodes(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:
                yield node.module, alias.name
        elif isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, ""


def across_families(modules: dict[str, Path]) -> list[str]:
    wrong = []
    for module, path in sorted(modules.items()):
        home = family_of(module)
        if home is None:
            continue
        for target, name in imported_names(path):
            if f"{target}.{name}" in modules:  # `from policyrun.probes.python import source`
                target, name = f"{target}.{name}", ""
            other = family_of(target)
            if other is None or other == home:
                continue
            private = any(part.startswith("_") for part in [*target.split(".")[3:], name])
            if private or (module, target) not in ACROSS_FAMILIES:
                wrong.append(f"{module} imports {target}{' ' + name if name else ''}")
    return sorted(wrong)


def test_probe_families_import_the_kit_not_each_other() -> None:
    assert across_families(module_files()) == []


def test_the_family_check_sees_a_private_import_across_families(tmp_path: Path) -> None:
    path = tmp_path / "x.py"
    path.write_text("from policyrun.probes.repo.git import _prop\nfrom policyrun.probes.python import source\n"
                    "from policyrun.probes.host.system import listening\nfrom policyrun.probes._kit.bounded import kill\n"
                    "def f():\n    from policyrun.probes.repo.pins import _reader\n")
    empty = tmp_path / "empty.py"
    empty.write_text("")
    modules = {m: empty for m in ("policyrun.probes.repo.git", "policyrun.probes.python.source",
                                   "policyrun.probes.host.system", "policyrun.probes._kit.bounded",
                                   "policyrun.probes.repo.pins")}
    modules["policyrun.probes.python.x"] = path
    assert across_families(modules) == ["policyrun.probes.python.x imports policyrun.probes.host.system listening",
                                        "policyrun.probes.python.x imports policyrun.probes.repo.git _prop",
                                        "policyrun.probes.python.x imports policyrun.probes.repo.pins _reader"]


def test_the_checker_sees_a_wrong_way_import_and_a_cycle(tmp_path: Path) -> None:
    # The three tests above are only as good as imports_of: it must see lazy imports, relative
    # imports and `from package import submodule`, and skip TYPE_CHECKING blocks.
    source = ("from __future__ import annotations\nfrom typing import TYPE_CHECKING\n"
              "from . import render\nfrom .probes import git\nif TYPE_CHECKING:\n    from policyrun import cli\n"
              "def f():\n    from policyrun.evaluate.engine import evaluate_all\n")
    path = tmp_path / "x.py"
    path.write_text(source)
    modules = {m: Path() for m in ("policyrun.render", "policyrun.probes", "policyrun.probes.git",
                                   "policyrun.cli", "policyrun.evaluate.engine", "policyrun.x")}
    assert imports_of("policyrun.x", path, modules) == {"policyrun.render", "policyrun.probes.git",
                                                        "policyrun.evaluate.engine"}


def test_the_architecture_page_maps_every_module_as_the_code_describes_it() -> None:
    from tests import architecture_doc

    text = architecture_doc.PAGE.read_text(encoding="utf-8")
    assert architecture_doc.current(text) == text, "run: python -m tests.architecture_doc --update"
