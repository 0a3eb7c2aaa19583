"""python.imports / python.symbols / python.constants on the real afd-plugin and vLLM 0.26.0/0.27.0.

Ground truth is computed here with git plumbing (`ls-files`, `ls-tree`, `show`, `diff`) and Python's
`ast` walked independently of policyrun's code; the assertions compare the probes against it.
"""

from __future__ import annotations

import ast
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.gitfixtures import run_probe
from tests.real.conftest import git

TEST_GLOBS = ["tests/**", "**/test_*.py", "**/*_test.py", "**/conftest.py"]
_TEST_PATH = re.compile(r"(^|/)tests/|(^|/)test_[^/]*\.py$|_test\.py$|(^|/)conftest\.py$")
CONSTANT = "TARGET_VLLM_VERSION"


def tracked_py(repo: Path, *, tests: bool) -> list[str]:
    files = [p for p in git(repo, "ls-files", "-z", "--", "*.py").split("\0") if p]
    return [p for p in files if tests or not _TEST_PATH.search(p)]


def parsed(repo: Path, files: list[str], rev: str = "HEAD") -> Iterator[tuple[str, ast.Module]]:
    for f in files:
        yield f, ast.parse(git(repo, "show", f"{rev}:{f}"))


def expected_vllm_rows(repo: Path, *, tests: bool) -> set[tuple[str, int, str, str | None, str | None]]:
    out: set[tuple[str, int, str, str | None, str | None]] = set()
    for f, tree in parsed(repo, tracked_py(repo, tests=tests)):
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                out |= {(f, a.lineno, a.name, None, a.asname) for a in node.names if a.name.split(".")[0] == "vllm"}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "vllm":
                out |= {(f, a.lineno, node.module or "", a.name, a.asname) for a in node.names}
    return out


def module_files(vllm: Path, rev: str) -> set[str]:
    return {p for p in git(vllm, "ls-tree", "-r", "-z", "--name-only", rev).split("\0") if p.endswith(".py")}


def file_of(module: str, files: set[str]) -> str | None:
    base = module.replace(".", "/")
    return next((c for c in (f"{base}/__init__.py", f"{base}.py") if c in files), None)


def changed_paths(vllm: Path) -> dict[str, str]:
    out: dict[str, str] = {}
    for line in git(vllm, "diff", "--name-status", "-M", "v0.26.0", "v0.27.0").splitlines():
        status, *paths = line.split("\t")
        for p in paths:
            out[p] = status[0]
    return out


@pytest.fixture(scope="module")
def imports(afd_repo: Path, vllm_repo: Path) -> dict[str, Any]:
    started = time.perf_counter()
    result = run_probe("python.imports", {"root": str(afd_repo), "exclude": TEST_GLOBS, "packages": ["vllm"],
                                          "resolve": {"path": str(vllm_repo), "rev": "v0.26.0",
                                                      "compare_rev": "v0.27.0"}}, afd_repo)
    elapsed = time.perf_counter() - started
    print(f"\npython.imports + resolution at v0.26.0 + compare v0.27.0: {elapsed:.2f}s, "
          f"{len(result.value['imports'])} rows, {len(result.value['by_upstream_file'])} upstream files")
    return {"value": result.value, "commands": result.commands, "elapsed": elapsed}


def test_every_vllm_import_is_found_multi_line_ones_included(imports: dict[str, Any], afd_repo: Path) -> None:
    v = imports["value"]
    got = {(r["file"], r["line"], r["module"], r["name"], r["alias"]) for r in v["imports"]}
    expected = expected_vllm_rows(afd_repo, tests=False)
    assert got == expected
    multi_line = {(f, a.lineno) for f, tree in parsed(afd_repo, tracked_py(afd_repo, tests=False))
                  for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module
                  and node.module.split(".")[0] == "vllm" and (node.end_lineno or 0) > node.lineno for a in node.names}
    assert len(multi_line) >= 20 and multi_line <= {(f, line) for f, line, *_ in got}
    assert v["parse_errors"] == [] and v["unresolved"] == []
    assert v["files_scanned"] == len(tracked_py(afd_repo, tests=False))


def test_with_tests_and_at_a_revision_the_same_rows(afd_repo: Path) -> None:
    v = run_probe("python.imports", {"root": str(afd_repo), "rev": "HEAD", "packages": ["vllm"]}, afd_repo).value
    got = {(r["file"], r["line"], r["module"], r["name"], r["alias"]) for r in v["imports"]}
    assert got == expected_vllm_rows(afd_repo, tests=True)


def test_module_files_and_re_exported_definitions_are_upstream_files(imports: dict[str, Any],
                                                                    vllm_repo: Path) -> None:
    v = imports["value"]
    files = module_files(vllm_repo, "v0.26.0")
    by_file = v["by_upstream_file"]
    for row in v["imports"]:
        module_file = file_of(row["module"], files)
        assert module_file is not None, row
        assert row["site"] in by_file[module_file]
        if row["name"] and file_of(f"{row['module']}.{row['name']}", files) and row["target"]["kind"] == "module":
            assert row["site"] in by_file[file_of(f"{row['module']}.{row['name']}", files) or ""]
    # CUDAGraphMode: vllm/config/__init__.py re-exports it from vllm.config.compilation, which defines it.
    init = ast.parse(git(vllm_repo, "show", "v0.26.0:vllm/config/__init__.py"))
    assert any(isinstance(n, ast.ImportFrom) and n.module == "vllm.config.compilation"
               and "CUDAGraphMode" in {a.name for a in n.names} for n in init.body)
    compilation = ast.parse(git(vllm_repo, "show", "v0.26.0:vllm/config/compilation.py"))
    assert any(isinstance(n, ast.ClassDef) and n.name == "CUDAGraphMode" for n in compilation.body)
    graph_sites = {r["site"] for r in v["imports"] if (r["module"], r["name"]) == ("vllm.config", "CUDAGraphMode")}
    assert len(graph_sites) >= 5 and graph_sites <= set(by_file["vllm/config/compilation.py"])
    # fused_moe: a subpackage imported from its parent, which does not bind the name itself.
    layers = git(vllm_repo, "show", "v0.26.0:vllm/model_executor/layers/__init__.py")
    assert "fused_moe" not in layers and "vllm/model_executor/layers/fused_moe/__init__.py" in files
    (moe,) = [r for r in v["imports"] if r["name"] == "fused_moe"]
    assert moe["site"] == "afd_plugin/model_executor/models/deepseek_v2.py:20"
    assert by_file["vllm/model_executor/layers/fused_moe/__init__.py"] == [moe["site"]]
    assert moe["target"]["chain"] == ["vllm/model_executor/layers/__init__.py",
                                      "vllm/model_executor/layers/fused_moe/__init__.py"]


def test_changed_upstream_files_the_plugin_depends_on(imports: dict[str, Any], vllm_repo: Path) -> None:
    v = imports["value"]
    changed = changed_paths(vllm_repo)
    impact = sorted(p for p in v["by_upstream_file"] if p in changed)
    print(f"\n{len(impact)} of {len(changed)} changed upstream files are plugin dependencies: {impact}")
    assert {"vllm/config/__init__.py", "vllm/config/compilation.py",
            "vllm/model_executor/layers/fused_moe/__init__.py"} <= set(impact)
    # Every changed module file a plugin import names directly is an impact row.
    files = module_files(vllm_repo, "v0.26.0")
    direct = {file_of(r["module"], files) for r in v["imports"]}
    assert {p for p in direct if p in changed} <= set(impact)
    # Every module still exists at v0.27.0, so nothing is missing there.
    later = module_files(vllm_repo, "v0.27.0")
    assert all(file_of(r["module"], later) for r in v["imports"]) and v["missing_at_compare"] == []
    assert v["moved_at_compare"] == []
    assert all(r["target"]["compare"]["found"] for r in v["imports"])


def test_at_most_one_cat_file_process_per_revision(imports: dict[str, Any]) -> None:
    # At most one per revision read (none when another probe of the session already parsed the files).
    cat_files = [c for c in imports["commands"] if "cat-file" in c]
    assert cat_files == [c for c in cat_files if c.endswith("cat-file --batch")] and len(cat_files) <= 2
    assert not [c for c in imports["commands"] if " show " in c]


def test_the_parse_helper_resolves_the_real_imports_exactly_as_in_process(
        afd_repo: Path, vllm_repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from policyrun.probes.python import parsepool, resolve as pyresolve

    params = {"root": str(afd_repo), "exclude": TEST_GLOBS, "packages": ["vllm"],
              "resolve": {"path": str(vllm_repo), "rev": "v0.26.0", "compare_rev": "v0.27.0"}}
    values = {}
    started: list[int] = []
    real = parsepool.SummaryHelper.__init__

    def counting(self: Any, jobs: Any, deadline: float) -> None:
        started.append(len(jobs))
        real(self, jobs, deadline)

    monkeypatch.setattr(parsepool.SummaryHelper, "__init__", counting)
    for setting in ("0", "1"):
        monkeypatch.setenv("POLICYRUN_PARSE_HELPER", setting)
        monkeypatch.setattr(pyresolve, "_SHARED", pyresolve._BlobCache(8 << 20))  # nothing parsed before
        values[setting] = run_probe("python.imports", params, afd_repo).value
    assert started and started[0] >= parsepool.MIN_JOBS  # the vLLM files the imports lead to first
    assert values["1"] == values["0"]


def test_version_constant_and_its_runtime_checks(afd_repo: Path) -> None:
    v = run_probe("python.constants", {"root": str(afd_repo), "names": [CONSTANT], "references": True,
                                       "exclude": TEST_GLOBS}, afd_repo).value
    files = tracked_py(afd_repo, tests=False)
    trees = dict(parsed(afd_repo, files))
    defined = [(f, n.lineno, ast.literal_eval(n.value), ast.unparse(n.annotation)) for f, tree in trees.items()
               for n in tree.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)
               and n.target.id == CONSTANT and n.value is not None]
    assert defined == [("afd_plugin/compat/vllm.py", 12, "0.26.0", "Final[str]")]
    assert [(c["file"], c["line"], c["value"], c["annotation"], c["source"]) for c in v["constants"]] == \
        [(f, line, value, ann, '"0.26.0"') for f, line, value, ann in defined]
    # Independently: every load of the name, and which of them sit in a comparison or feed startswith.
    loads, compares, startswith = set(), set(), set()
    for f, tree in trees.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Compare):
                compares |= {f"{f}:{n.lineno}" for n in ast.walk(node) if isinstance(n, ast.Name) and n.id == CONSTANT}
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "startswith":
                startswith |= {f"{f}:{a.lineno}" for a in node.args if isinstance(a, ast.Name) and a.id == CONSTANT}
            elif isinstance(node, ast.Name) and node.id == CONSTANT and isinstance(node.ctx, ast.Load):
                loads.add(f"{f}:{node.lineno}")
    assert {r["site"] for r in v["references"]} == loads
    assert {r["site"] for r in v["checks"]} == compares | startswith
    assert compares == {"afd_plugin/compat/vllm.py:35"} and len(startswith) == 3
    (cmp,) = [r for r in v["references"] if r["context"] == "compare"]
    assert (cmp["ops"], cmp["callee"], cmp["text"]) == (
        ["=="], "_parse_release", "return _parse_release(installed_version) == _parse_release(TARGET_VLLM_VERSION)")
    assert {(r["method"], r["text"]) for r in v["references"] if r["context"] == "call_arg"} == {
        ("startswith", "return version_text.startswith(TARGET_VLLM_VERSION)")}


def _signatures(tree: ast.Module, module: str) -> dict[str, str]:
    out: dict[str, str] = {}

    def walk(body: list[ast.stmt], prefix: str) -> None:
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                out.setdefault(f"{prefix}.{node.name}", ast.dump(node.args) + ast.dump(node.returns or ast.Pass()))
            elif isinstance(node, ast.ClassDef):
                out.setdefault(f"{prefix}.{node.name}", "class " + ast.dump(ast.Tuple(node.bases + [
                    k.value for k in node.keywords], ast.Load())))
                walk(node.body, f"{prefix}.{node.name}")

    walk(tree.body, module)
    return out


def test_symbols_of_a_patched_module_between_releases(vllm_repo: Path) -> None:
    path = "vllm/v1/engine/core.py"
    v = run_probe("python.symbols", {"path": str(vllm_repo), "rev": "v0.26.0", "compare_rev": "v0.27.0",
                                     "files": [path], "symbols": ["vllm.v1.engine.core.EngineCoreProc.run_engine_core"]},
                  vllm_repo).value
    before = _signatures(ast.parse(git(vllm_repo, "show", f"v0.26.0:{path}")), "vllm.v1.engine.core")
    after = _signatures(ast.parse(git(vllm_repo, "show", f"v0.27.0:{path}")), "vllm.v1.engine.core")
    expected_changed = sorted(n for n in before if n in after and before[n] != after[n])
    expected_removed = sorted(n for n in before if n not in after)
    file_rows = [r for r in v["symbols"][1:]]
    assert sorted(r["name"] for r in file_rows) == sorted(before)
    assert sorted(v["changed"]) == expected_changed and sorted(v["removed"]) == expected_removed
    print(f"\n{path}: {len(before)} definitions, signature changed: {expected_changed}, removed: {expected_removed}")
    run = v["symbols"][0]
    assert (run["kind"], run["decorators"], run["signature_changed"]) == (
        "method", ["staticmethod"], before[run["name"]] != after[run["name"]])
