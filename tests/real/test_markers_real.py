"""`markers` on the real afd-plugin at HEAD (tests excluded): the files and counts `git grep -c`
gives, every region's enclosing function, and the documentation fields, each computed here with
git plumbing, `ast` and plain regexes, never from policyrun's output."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from policyrun.probes.base import ProbeContext
from policyrun.probes.python.markers import MarkersProbe
from tests.real.conftest import git

FIELD_LINES = {
    "reason": re.compile(r"^\s*#\s*Patch reason:"),
    "functionality": re.compile(r"^\s*#\s*Patch functionality:"),
    "upstream": re.compile(r"^\s*#\s*Upstream( source)?:"),
    "signature": re.compile(r"^\s*#\s*Signature:"),
    "commit": re.compile(r"^\s*#\s*Commit:"),
}


def _docstring_lines(source: str) -> list[str]:
    """Every line of the module's, each class's and each function's docstring."""
    out: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            doc = ast.get_docstring(node, clean=True)
            out.extend(doc.split("\n") if doc else [])
    return out


def _grep_counts(repo: Path, needle: str) -> dict[str, int]:
    out = git(repo, "grep", "-c", needle, "HEAD", "--", "*.py", ":!tests")
    return {line.split(":")[1]: int(line.split(":")[2]) for line in out.splitlines()}


def _innermost_def(source: str, line: int) -> str | None:
    best = None
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and \
                node.lineno <= line <= (node.end_lineno or 0) and (best is None or node.lineno > best.lineno):
            best = node
    return best.name if best else None


def test_markers_match_git_grep_and_ast(afd_repo: Path) -> None:
    starts, ends = _grep_counts(afd_repo, "PATCH START"), _grep_counts(afd_repo, "PATCH END")
    assert len(starts) == 13 and sum(starts.values()) == 50 and sum(ends.values()) == 50
    ctx = ProbeContext(base_dir=afd_repo, timeout_s=60)
    v = MarkersProbe().run({"root": str(afd_repo), "exclude": ["tests"]}, ctx).value
    assert {f: (b["starts"], b["ends"]) for f, b in v["by_file"].items()} == {f: (starts[f], ends[f]) for f in starts}
    assert v["totals"] == {"files": 13, "starts": 50, "ends": 50, "regions": 50, "unbalanced_files": 0,
                           "files_scanned": v["totals"]["files_scanned"]}
    for f in v["files"]:
        source = git(afd_repo, "show", f"HEAD:{f['file']}")
        lines = source.split("\n")
        assert f["parsed"] and f["balanced"] and f["problems"] == []
        truth_starts = [n for n, ln in enumerate(lines, 1) if "PATCH START" in ln]
        assert [r["start_line"] for r in f["regions"]] == truth_starts
        for r in f["regions"]:
            assert r["enclosing"] is not None, (f["file"], r["start_line"])
            assert r["enclosing"].split(".")[-1] == _innermost_def(source, r["start_line"])
            assert "PATCH END" in lines[r["end_line"] - 1]
        # fields written in comments, or in docstrings (`Upstream source: ...` without the `#`)
        docs = ["# " + ln for ln in _docstring_lines(source)]
        present = {name for name, rx in FIELD_LINES.items() if any(rx.match(ln) for ln in lines + docs)}
        assert {name for name, has in v["by_file"][f["file"]]["has"].items() if has} == present, f["file"]

    # the patched functions' comment blocks, read through their multi-line values
    files = {f["file"]: f for f in v["files"]}
    npu = files["afd_plugin/v1/worker/npu/attention_model_runner.py"]
    forward = next(r for r in npu["regions"] if r["label"] == "AFD forward-context metadata")
    assert forward["enclosing"] == "AFDNPUAttentionModelRunner._model_forward"
    assert forward["fields"]["upstream"] == "vllm-ascend commit 80d8c194f, NPUModelRunner._model_forward."
    assert forward["fields"]["reason"].endswith("or expose Ascend ubatch slices to the model wrapper.")
    gpu = files["afd_plugin/v1/worker/attention_model_runner.py"]
    assert gpu["regions"][0]["enclosing"] == "AFDAttentionModelRunner._warmup_and_capture"
    assert gpu["regions"][0]["fields"]["commit"] == "568afb3a13806beb53bb2e6bd518269357b237c0"
    validation = files["afd_plugin/compat/patches/config_validation.py"]
    assert validation["regions"][0]["fields"]["functionality"] == (
        "temporarily uses a supported backend only during upstream EngineArgs-to-VllmConfig validation for "
        "AFD configs.")  # "Expansion exception:" is not swallowed
    # a field in a docstring is a row at its own line, like a comment's
    wrapper = "afd_plugin/v1/worker/npu/npu_ubatch_wrapper.py"
    wrapper_lines = git(afd_repo, "show", f"HEAD:{wrapper}").split("\n")
    own = next(n for n, ln in enumerate(wrapper_lines, 1) if ln.strip().startswith("Upstream source: vLLM v0.26.0"))
    rows = [r for r in v["field_rows"] if r["file"] == wrapper and r["field"] == "upstream"]
    assert [(r["line"], r["form"]) for r in rows] == [(own, "docstring")]
    assert rows[0]["text"].startswith("vLLM v0.26.0 commit 568afb3a1, ``gpu_ubatch_wrapper._cat_ubatch_outputs``.")
    comment_rows = [r for r in v["field_rows"] if r["file"] == "afd_plugin/v1/worker/attention_model_runner.py"
                    and r["field"] == "commit"]
    runner_lines = git(afd_repo, "show", "HEAD:afd_plugin/v1/worker/attention_model_runner.py").split("\n")
    assert [r["line"] for r in comment_rows] == [n for n, ln in enumerate(runner_lines, 1) if "# Commit:" in ln]
    # every region in a file whose comments carry a reason gets one
    documented = [r for f in v["files"] if v["by_file"][f["file"]]["has"]["reason"] for r in f["regions"]]
    assert documented and all("reason" in r["fields"] for r in documented)

    engine = files["afd_plugin/compat/patches/async_dp_engine.py"]
    doc = ast.get_docstring(ast.parse(git(afd_repo, "show", "HEAD:afd_plugin/compat/patches/async_dp_engine.py")))
    assert doc is not None
    assert engine["symbols"] == list(dict.fromkeys(re.findall(r"``([\w]+(?:\.[\w]+)+)``", doc)))
    assert engine["symbols"][0] == "vllm.v1.engine.core.EngineCoreProc.run_engine_core"
    assert {"Why", "How", "Future plan"} <= set(engine["sections"])

    at_head = MarkersProbe().run({"root": str(afd_repo), "exclude": ["tests"], "rev": "HEAD"}, ctx).value
    assert at_head["files"] == v["files"] and at_head["rev_sha"] == git(afd_repo, "rev-parse", "HEAD").strip()


def test_patches_package_with_unmarked_files(afd_repo: Path) -> None:
    ctx = ProbeContext(base_dir=afd_repo, timeout_s=60)
    v = MarkersProbe().run({"root": str(afd_repo), "include": ["afd_plugin/compat/patches"],
                            "include_unmarked": True}, ctx).value
    tracked = [p for p in git(afd_repo, "ls-files", "afd_plugin/compat/patches").split() if p.endswith(".py")]
    assert [f["file"] for f in v["files"]] == sorted(tracked)
    marked = {f for f in tracked if "PATCH START" in (afd_repo / f).read_text()}
    assert {f["file"] for f in v["files"] if f["starts"]} == marked
