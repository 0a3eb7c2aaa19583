"""The generic `upgrade-vllm-plugin` rulebook on a second real plugin: the bart-plugin tip (vLLM
pinned by a range, no version constant, no patch markers, a `try/except ImportError` fallback),
planning its upgrade from vLLM v0.26.0 to v0.27.0 with no overlay at all.

The truth is computed here with git plumbing and Python's `ast` only (the resolvers are the test
tier's own, in test_flagship_real and test_bindings_real, never policyrun's code): the upstream
files the plugin's imports depend on and which of them changed, the names its imports lose at the
target, the upstream constructors, functions and methods it subclasses, calls or overrides whose
signature changed, the overridden methods whose body changed, and the fallback branch that serves
neither release. policyrun's impact rows are compared with it, row kind by row kind.
"""

from __future__ import annotations

import ast
import json
import re
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest

from policyrun.cli import main
from policyrun.trace.records import phase_checks
from tests.real.conftest import git
from tests.real.test_bindings_real import define, signature
from tests.real.test_flagship_real import (Upstream, _definition, _strip_strings, changed_files, plugin_dependencies,
                                           plugin_replacements, tracked_sources)

CURRENT, TARGET = "v0.26.0", "v0.27.0"
SERVING = "vllm_bart_plugin/openai_serving.py"



def evaluate(repo: Path, vllm: Path, out: Path, *sets: str) -> dict[str, Any]:
    mp = pytest.MonkeyPatch()
    try:
        mp.chdir(repo)
        code = main(["evaluate", "upgrade-vllm-plugin", "--mode", "planning-audit", "--set", f"vllm_src={vllm}",
                     "--set", f"target_ref={TARGET}", "--set", f"python={sys.executable}", *sets,
                     "--out", str(out), "-q"])
    finally:
        mp.undo()
    trace: dict[str, Any] = json.loads((out / "trace.json").read_text())
    assert code == trace["exit_code"]
    return trace


@pytest.fixture(scope="module")
def planning(bart_repo: Path, vllm_repo: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    out = tmp_path_factory.mktemp("bart-planning")
    trace = evaluate(bart_repo, vllm_repo, out, "--set", f"current_ref={CURRENT}", "--format", "md")
    trace["report_md"] = (out / "report.md").read_text()
    return trace


def phases(trace: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {p["phase"]: p for p in trace["phases"]}


def check(trace: dict[str, Any], phase: str, cid: str) -> dict[str, Any]:
    return next(c for c in phase_checks(phases(trace)[phase]) if c["id"] == cid)


def derived(trace: dict[str, Any], name: str) -> Any:
    record = next(d for d in trace["derived"] if d["id"] == name)
    assert record["error"] is None, record["error"]
    return record["value"]


def rows(trace: dict[str, Any], kind: str) -> set[str]:
    return {r["upstream"] for r in derived(trace, "impact_matrix") if r["kind"] == kind}


# --- the truth ------------------------------------------------------------------------------------

def fallback_sites(tree: ast.Module) -> set[int]:
    """Lines of imports inside a `try:` whose handlers catch ImportError: alternatives, not requirements."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Try) and any(
                isinstance(h.type, ast.Name) and h.type.id in ("ImportError", "ModuleNotFoundError") for h in node.handlers):
            for sub in [*node.body, *(s for h in node.handlers for s in h.body)]:
                lines.update(n.lineno for n in ast.walk(sub) if isinstance(n, (ast.Import, ast.ImportFrom)))
    return lines


def imported_names(tree: ast.Module) -> dict[str, tuple[str, str]]:
    """Local name → (vLLM module, name) of the file's `from vllm... import` statements (any depth)."""
    return {a.asname or a.name: (n.module, a.name) for n in ast.walk(tree)
            if isinstance(n, ast.ImportFrom) and not n.level and (n.module or "").split(".")[0] == "vllm" for a in n.names}


def member(vllm: Path, rev: str, dotted: str) -> ast.AST | None:
    """A class member `module.Class.member` at rev (the class followed through re-exports)."""
    owner, _, attr = dotted.rpartition(".")
    module, _, cls = owner.rpartition(".")
    found = define(vllm, rev, module, cls)
    if found is None or not isinstance(found[1], ast.ClassDef):
        return None
    # the last definition is what the class binds (`@overload` stubs come before the implementation)
    return next((s for s in reversed(found[1].body) if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))
                 and s.name == attr), None)


def bound_symbols(bart_repo: Path, vllm: Path) -> dict[str, ast.AST]:
    """Upstream symbols the plugin subclasses (the class's `__init__`), calls (a function, or a
    class's `__init__`) or overrides (a method of an upstream base it redefines), canonical
    (`defining.module.Name[.member]`) → definition at the current release."""
    out: dict[str, ast.AST] = {}
    for text in tracked_sources(bart_repo).values():
        tree = ast.parse(text)
        imported = imported_names(tree)
        for node in ast.walk(tree):
            refs: list[tuple[ast.AST, ast.ClassDef | None]] = []
            if isinstance(node, ast.ClassDef):
                refs = [(b.value if isinstance(b, ast.Subscript) else b, node) for b in node.bases]
            elif isinstance(node, ast.Call):
                refs = [(node.func, None)]
            for ref, subclass in refs:
                if not (isinstance(ref, ast.Name) and ref.id in imported):
                    continue
                found = define(vllm, CURRENT, *imported[ref.id])
                if found is None:
                    continue
                module, defined = found
                name = f"{module}.{getattr(defined, 'name')}"
                if isinstance(defined, ast.ClassDef):
                    members = {s.name: s for s in defined.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))}
                    if "__init__" in members:
                        out[f"{name}.__init__"] = members["__init__"]
                    if subclass is not None:
                        for own in subclass.body:
                            if isinstance(own, (ast.FunctionDef, ast.AsyncFunctionDef)) and own.name in members:
                                out[f"{name}.{own.name}"] = members[own.name]
                elif subclass is None:
                    out[name] = defined
    return out


class Resolver(Upstream):
    """test_flagship_real's Upstream, also following what a vLLM package `__init__` does beyond
    plain top-level `from x import name`: bindings inside module-level `if`/`try` blocks (the
    `if TYPE_CHECKING:` re-exports of `vllm/__init__.py`) and `from x import *`."""

    def chain(self, module: str, name: str, depth: int = 0) -> tuple[list[str], bool]:
        """(files from `module` to where `name` is bound, whether it was found)."""
        path = self.module_file(module)
        if path is None or depth > 16:
            return [], False
        package = module if path.endswith("__init__.py") else module.rsplit(".", 1)[0]
        stars: list[str] = []
        todo: list[ast.stmt] = list(self.tree(path).body)
        while todo:
            node = todo.pop(0)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
                return [path], True
            if isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                    return [path], True
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname == name and (f := self.module_file(alias.name)):
                        return [path, f], True
            if isinstance(node, ast.ImportFrom):
                source = self.absolute(package, node)
                for alias in node.names:
                    if alias.name == "*":
                        stars.append(source)
                    elif (alias.asname or alias.name) == name:
                        if sub := self.module_file(f"{source}.{alias.name}"):
                            return [path, sub], True
                        files, found = self.chain(source, alias.name, depth + 1)
                        return [path, *files], found
            if isinstance(node, (ast.If, ast.Try)):
                todo.extend([*node.body, *node.orelse, *getattr(node, "finalbody", []),
                             *(s for h in getattr(node, "handlers", []) for s in h.body)])
        if sub := self.module_file(f"{module}.{name}"):
            return [path, sub], True
        for source in stars:
            files, found = self.chain(source, name, depth + 1)
            if found:
                return [path, *files], True
        return [path], False

    def defining_chain(self, module: str, name: str, depth: int = 0) -> list[str]:
        return self.chain(module, name, depth)[0]


# --- the tests ------------------------------------------------------------------------------------

def test_planning_phases_pass_with_no_overlay(planning: dict[str, Any]) -> None:
    statuses = {p["phase"]: p["status"] for p in planning["phases"]}
    assert statuses["FREEZE_IDENTITY"] == "PASS"
    assert statuses["INVENTORY_PLUGIN_CONTRACTS"] == "PASS"
    assert statuses["DIFF_VLLM"] == "PASS"
    assert statuses["ARCHITECTURE_GATE"] == "BLOCKED"  # no attestation yet: a reviewer's call, not a fault
    assert [layer["name"] for layer in planning["rulebook"]["chain"] or [planning["rulebook"]]] == ["upgrade-vllm-plugin"]
    assert all(p["disabled"] == [] for p in planning["phases"])  # nothing loosened
    # no version constant configured: the checks that need one do not apply, and nothing refuses that
    assert check(planning, "INVENTORY_PLUGIN_CONTRACTS", "pin_matches_runtime_check")["result"] == "NOT_APPLICABLE"


def test_identity_rests_on_the_ranges_and_current_ref(bart_repo: Path, planning: dict[str, Any]) -> None:
    project = tomllib.loads(git(bart_repo, "show", "HEAD:pyproject.toml"))["project"]["dependencies"]
    setup = ast.parse(git(bart_repo, "show", "HEAD:setup.py"))
    setup_reqs = [e.value for n in ast.walk(setup) if isinstance(n, ast.keyword) and n.arg == "install_requires"
                  for e in getattr(n.value, "elts", []) if isinstance(e, ast.Constant)]
    specs = [r[len("vllm"):] for r in [*project, *setup_reqs] if re.match(r"vllm\b", r)]
    readme = git(bart_repo, "show", "HEAD:README.md").splitlines()
    claim = next(i for i, line in enumerate(readme, 1) if re.search(r"vLLM 0\.24\.0 or newer", line))
    got = derived(planning, "range_constraints")
    assert [(r["kind"], r["specifier"]) for r in got] == [("pin", s) for s in specs] + [("doc", ">=0.24.0")]
    assert got[-1]["source"] == f"README.md:{claim}"
    assert derived(planning, "identity_sources") == []  # a range names no current version
    assert derived(planning, "current_version") == "0.26.0"
    assert check(planning, "FREEZE_IDENTITY", "ranges_admit_current_and_target")["result"] == "SATISFIED"
    assert check(planning, "FREEZE_IDENTITY", "pins_exact")["result"] == "NOT_APPLICABLE"
    assert check(planning, "FREEZE_IDENTITY", "current_ref_matches_evidence")["result"] == "NOT_APPLICABLE"
    # the completion report lists the ranges under the identity sources
    assert "| pin | `pyproject.toml:28` | `>=0.24.0` |" in planning["report_md"]
    assert f"| doc | `README.md:{claim}` | `>=0.24.0` |" in planning["report_md"]


def test_file_rows_equal_the_import_and_diff_truth(bart_repo: Path, vllm_repo: Path, planning: dict[str, Any]) -> None:
    deps = plugin_dependencies(bart_repo, Resolver(vllm_repo, CURRENT))
    changed = changed_files(vllm_repo)
    expected = {p for p in deps if p in changed}
    assert rows(planning, "file") == expected
    # through vllm/__init__.py's `if TYPE_CHECKING:` re-export and vllm/distributed's star import
    assert {"vllm/entrypoints/llm.py", "vllm/distributed/parallel_state.py"} <= expected


def test_no_imported_name_is_gone_and_the_fallback_is_no_stale_import(bart_repo: Path, vllm_repo: Path,
                                                                       planning: dict[str, Any]) -> None:
    gone = set()
    for path, text in tracked_sources(bart_repo).items():
        tree = ast.parse(text)
        alternatives = fallback_sites(tree)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] == "vllm" \
                    and node.lineno not in alternatives:
                for a in node.names:
                    if define(vllm_repo, CURRENT, node.module or "", a.name) is not None \
                            and define(vllm_repo, TARGET, node.module or "", a.name) is None \
                            and Upstream(vllm_repo, TARGET).module_file(f"{node.module}.{a.name}") is None:
                        gone.add(f"{node.module}.{a.name}")
    assert rows(planning, "name") == gone
    # The try/except ImportError chain: its first branch resolves at both releases, so DIFF_VLLM does
    # not block on the second (which resolves at neither): that one is a removable-fallback row.
    resolved = check(planning, "DIFF_VLLM", "imports_resolved_at_current")
    assert resolved["result"] == "SATISFIED" and resolved["violations"] == []
    tree = ast.parse(git(bart_repo, "show", f"HEAD:{SERVING}"))
    outer = next(n for n in ast.walk(tree) if isinstance(n, ast.Try))
    inner = next(n for n in ast.walk(outer.handlers[0]) if isinstance(n, ast.Try))
    second = [n for n in ast.walk(inner) if isinstance(n, ast.ImportFrom)][0]
    assert all(define(vllm_repo, rev, second.module or "", a.name) is None for rev in (CURRENT, TARGET)
               for a in second.names)
    fallback = [r for r in derived(planning, "impact_matrix") if r["kind"] == "fallback"]
    assert [(r["upstream"], r["consumers"]) for r in fallback] == [
        (f"{SERVING}:{outer.lineno} branch 1", [f"{SERVING}:{a.lineno}" for a in second.names])]


def test_signature_rows_equal_what_it_subclasses_calls_and_overrides(bart_repo: Path, vllm_repo: Path,
                                                                     planning: dict[str, Any]) -> None:
    bound = bound_symbols(bart_repo, vllm_repo)
    changed = set()
    for name, node in bound.items():
        later = member(vllm_repo, TARGET, name)
        if later is None:
            module, _, rest = name.rpartition(".")
            found = define(vllm_repo, TARGET, module, rest)
            later = found[1] if found else None
        if later is None or signature(node) != signature(later):
            changed.add(name)
    # each change is one row: a signature row, or the body row of a method the plugin overrides that
    # says its signature changed too
    body_and_signature = {r["upstream"] for r in derived(planning, "impact_matrix")
                          if r["kind"] == "body" and "signature" in r["change"]}
    assert rows(planning, "signature") | body_and_signature == changed
    assert not rows(planning, "signature") & body_and_signature
    assert "vllm.model_executor.layers.vocab_parallel_embedding.VocabParallelEmbedding.__init__" in changed  # subclassed
    assert "vllm.model_executor.layers.linear.ColumnParallelLinear.__init__" in rows(planning, "signature")  # called


def test_body_rows_equal_the_overridden_bodies_that_changed(bart_repo: Path, vllm_repo: Path,
                                                            planning: dict[str, Any]) -> None:
    current, target = Upstream(vllm_repo, CURRENT), Upstream(vllm_repo, TARGET)
    replaced, _ = plugin_replacements(bart_repo)
    changed = set()
    for name in replaced:
        before, after = _definition(current, name), _definition(target, name)
        if isinstance(before, (ast.FunctionDef, ast.AsyncFunctionDef)) and after is not None \
                and _strip_strings(before) != _strip_strings(after):
            changed.add(name)
    assert rows(planning, "body") == changed


def test_without_current_ref_the_ranges_are_named_and_identity_blocks(bart_repo: Path, vllm_repo: Path,
                                                                       tmp_path: Path) -> None:
    """No exact pin, no constant, no exact claim, and no vLLM in the target interpreter: nothing names
    the current release, and the blocker says which ranges there are."""
    trace = evaluate(bart_repo, vllm_repo, tmp_path / "out")
    assert phases(trace)["FREEZE_IDENTITY"]["status"] == "BLOCKED"
    message = check(trace, "FREEZE_IDENTITY", "sources_found")["message"]
    assert "only ranges: pyproject.toml:" in message and "README.md:" in message
    assert message.endswith("pass --set current_ref=<tag or sha>")
