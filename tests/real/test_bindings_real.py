"""python.imports' fallback groups and python.bindings on the real bart-plugin tip, against vLLM
v0.26.0 → v0.27.0, compared with a truth this test computes itself with plain `ast` and `git show`
(none of the probe code): the try/except ImportError chain in openai_serving.py and which branch
resolves at which release, the upstream classes the plugin subclasses, and which of the upstream
classes it subclasses and functions it calls changed signature between the releases."""

from __future__ import annotations

import ast
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from policyrun.cli import main
from policyrun.probes.base import ProbeContext
from policyrun.probes.registry import get
from policyrun.trace.records import phase_checks
from tests.real.conftest import _git

RELEASES = ("v0.26.0", "v0.27.0")
SERVING = "vllm_bart_plugin/openai_serving.py"



def run(kind: str, params: dict[str, Any], base: Path) -> Any:
    probe = get(kind)
    assert probe is not None
    return probe.run(params, ProbeContext(base_dir=base, timeout_s=300)).value


def params(bart_repo: Path, vllm_repo: Path) -> dict[str, Any]:
    return {"root": str(bart_repo), "rev": "HEAD", "packages": ["vllm"], "include": ["vllm_bart_plugin/**/*.py"],
            "resolve": {"path": str(vllm_repo), "rev": RELEASES[0], "compare_rev": RELEASES[1]}}


# --- the independent truth ------------------------------------------------------------------------

def show(vllm_repo: Path, rev: str, module: str) -> tuple[ast.Module, bool] | None:
    """(AST, is a package) of a module's file at rev."""
    for path, package in ((module.replace(".", "/") + ".py", False), (module.replace(".", "/") + "/__init__.py", True)):
        proc = subprocess.run(["git", "show", f"{rev}:{path}"], cwd=vllm_repo, capture_output=True, text=True)
        if proc.returncode == 0:
            return ast.parse(proc.stdout), package
    return None


def define(vllm_repo: Path, rev: str, module: str, name: str, hops: int = 0) -> tuple[str, ast.AST] | None:
    """(defining module, node) of module.name at rev: a top-level class/def, else one followed
    `from X import name` (absolute or relative)."""
    shown = show(vllm_repo, rev, module)
    if shown is None or hops > 5:
        return None
    tree, is_package = shown
    package = module if is_package else module.rpartition(".")[0]
    for stmt in tree.body:
        if isinstance(stmt, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and stmt.name == name:
            return module, stmt
    for stmt in ast.walk(tree):
        if isinstance(stmt, ast.ImportFrom):
            for alias in stmt.names:
                if (alias.asname or alias.name) == name:
                    source = stmt.module or ""
                    if stmt.level:
                        base = package.split(".")[:len(package.split(".")) - stmt.level + 1]
                        source = ".".join(base + ([stmt.module] if stmt.module else []))
                    return define(vllm_repo, rev, source, alias.name, hops + 1)
    return None


def signature(node: ast.AST) -> str:
    if isinstance(node, ast.ClassDef):
        return "(" + ", ".join(ast.unparse(b) for b in node.bases + node.keywords) + ")"  # type: ignore[operator]
    assert isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    return f"({ast.unparse(node.args)})" + (f" -> {ast.unparse(node.returns)}" if node.returns else "")


def plugin_imports(tree: ast.Module) -> dict[str, tuple[str, str]]:
    return {alias.asname or alias.name: (node.module, alias.name) for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("vllm")
            for alias in node.names}


def plugin_files(bart_repo: Path) -> dict[str, ast.Module]:
    names = _git("ls-tree", "-r", "--name-only", "HEAD", "vllm_bart_plugin", cwd=bart_repo).split()
    return {n: ast.parse(_git("show", f"HEAD:{n}", cwd=bart_repo)) for n in names if n.endswith(".py")}


# --- the tests ------------------------------------------------------------------------------------

def test_the_fallback_chain_in_openai_serving_resolves_branch_by_branch(bart_repo: Path, vllm_repo: Path) -> None:
    tree = plugin_files(bart_repo)[SERVING]
    outer = next(n for n in ast.walk(tree) if isinstance(n, ast.Try))
    inner = next(n for n in ast.walk(outer.handlers[0]) if isinstance(n, ast.Try))
    branches = [[n for n in ast.walk(ast.Module(body=body, type_ignores=[])) if isinstance(n, ast.ImportFrom)]
                for body in (outer.body, inner.body)]
    truth = [{"branch": i, "line": imports[0].lineno,
              "sites": [f"{SERVING}:{a.lineno}" for imp in imports for a in imp.names],
              "resolves_at_rev": all(define(vllm_repo, RELEASES[0], imp.module or "", a.name) is not None
                                     for imp in imports for a in imp.names),
              "resolves_at_compare": all(define(vllm_repo, RELEASES[1], imp.module or "", a.name) is not None
                                         for imp in imports for a in imp.names)}
             for i, imports in enumerate(branches)]
    for t in truth:
        t["removable"] = not t["resolves_at_rev"] and not t["resolves_at_compare"]
    # the premise: the first branch serves both releases, the second neither
    assert [(t["resolves_at_rev"], t["resolves_at_compare"]) for t in truth] == [(True, True), (False, False)]

    v = run("python.imports", params(bart_repo, vllm_repo), bart_repo)
    group = next(g for g in v["fallbacks"] if g["file"] == SERVING)
    assert group["group"] == f"{SERVING}:{outer.lineno}" and group["guard"] == "try"
    assert group["branches"] == truth
    assert group["satisfied_at_rev"] is True and group["satisfied_at_compare"] is True
    assert v["removable"] == [{"group": group["group"], "branch": 1, "sites": truth[1]["sites"]}]
    # the fallback is not an unresolved import (imports_resolved_at_current blocked on it before)
    assert v["unresolved"] == [] and v["missing_at_compare"] == []


def test_subclassed_classes_and_signature_changes_equal_the_truth(bart_repo: Path, vllm_repo: Path) -> None:
    subclassed: set[str] = set()
    bound: dict[str, ast.AST] = {}  # canonical → node at the current release (subclassed or called)
    for tree in plugin_files(bart_repo).values():
        imported = plugin_imports(tree)
        for node in ast.walk(tree):
            refs = []
            if isinstance(node, ast.ClassDef):
                refs = [(b.value if isinstance(b, ast.Subscript) else b, True) for b in node.bases]
            elif isinstance(node, ast.Call):
                refs = [(node.func, False)]
            for ref, is_base in refs:
                if isinstance(ref, ast.Name) and ref.id in imported:
                    found = define(vllm_repo, RELEASES[0], *imported[ref.id])
                    if found is None:
                        continue
                    module, defined = found
                    name = f"{module}.{getattr(defined, 'name')}"
                    if is_base and isinstance(defined, ast.ClassDef):
                        subclassed.add(name)
                    bound[name] = defined
                    init = next((s for s in getattr(defined, "body", []) if isinstance(s, ast.FunctionDef)
                                 and s.name == "__init__"), None) if isinstance(defined, ast.ClassDef) else None
                    if init is not None:
                        bound[f"{name}.__init__"] = init

    def at_target(name: str) -> ast.AST | None:
        module, _, rest = name.partition(".__init__")[0].rpartition(".")
        found = define(vllm_repo, RELEASES[1], module, rest)
        if found is None or not name.endswith(".__init__"):
            return found[1] if found else None
        return next((s for s in getattr(found[1], "body", []) if isinstance(s, ast.FunctionDef)
                     and s.name == "__init__"), None)

    changed = {n for n, node in bound.items() if (later := at_target(n)) is not None
               and signature(node) != signature(later)}
    assert "vllm.model_executor.layers.vocab_parallel_embedding.VocabParallelEmbedding.__init__" in changed  # premise

    v = run("python.bindings", params(bart_repo, vllm_repo), bart_repo)
    assert {b["symbol"] for b in v["bindings"] if b["kind"] == "subclass" and not b["symbol"].endswith(".__init__")} \
        == subclassed
    assert set(bound) <= set(v["by_symbol"])
    assert set(v["signature_changed"]) & set(bound) == changed
    assert v["truncated"] is None and v["parse_errors"] == []


FLAGSHIP_OVERLAY = """\
policyrun: 1
name: bart-plugin-upgrade
extends: upgrade-gpu-version
vars:
  doc_globs: ["docs/**/*.md"]
phases:
  - id: INVENTORY_AFD_CONTRACTS
    disable:
      - {id: pin_matches_runtime_check, reason: "the bart-plugin has no version constant nor runtime check"}
"""


def test_the_flagship_no_longer_blocks_diff_vllm_on_the_fallback(bart_repo: Path, vllm_repo: Path,
                                                                 tmp_path: Path) -> None:
    """Before, imports_resolved_at_current listed openai_serving.py:87 (the removable branch) and an
    overlay had to disable it; now the check holds with no overlay of it."""
    repo = tmp_path / "bart-plugin"
    _git("clone", "-q", str(bart_repo), str(repo))
    for name in ("pyproject.toml", "setup.py"):  # the flagship takes an exact pin as the identity
        path = repo / name
        path.write_text(path.read_text().replace("vllm>=0.24.0", "vllm==0.26.0"))
    _git("-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit", "-qam", "pin vLLM exactly", cwd=repo)
    overlay = tmp_path / "bart-overlay.yaml"
    overlay.write_text(FLAGSHIP_OVERLAY)
    out = tmp_path / "out"
    mp = pytest.MonkeyPatch()
    try:
        mp.chdir(repo)
        main(["evaluate", str(overlay), "--mode", "planning-audit", "--set", f"vllm_src={vllm_repo}",
              "--set", "target_ref=v0.27.0", "--out", str(out), "-q"])
    finally:
        mp.undo()
    trace = json.loads((out / "trace.json").read_text())
    diff = next(p for p in trace["phases"] if p["phase"] == "DIFF_VLLM")
    check = next(c for c in phase_checks(diff) if c["id"] == "imports_resolved_at_current")
    assert check["result"] == "SATISFIED" and check["violations"] == [], check
