"""`markers`: region markers, their balance and enclosing functions, documenting comment fields,
module docstring symbols; working tree and revisions; other conventions through parameters."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import pytest

from policyrun.language import expr
from policyrun.probes.base import ProbeContext, ProbeError
from policyrun.probes.python.markers import MarkersProbe
from tests.gitfixtures import init_repo, snapshot

PATCHED = '''"""Patches for the engine.

This module patches:
1. ``vllm.v1.engine.core.EngineCoreProc.run_engine_core``
2. ``vllm.v1.engine.utils.launch_core_engines``

Why:
    The native path uses ``DPEngineCoreProc`` and ``additional_config["afd"]``.

Future plan:
    Remove when upstream has a hook.
"""

import functools

TEMPLATE = """
    # ### PATCH START: inside a string, not a marker
"""


class Runner:
    # Patch reason: native capture does not publish
    # AFD metadata.
    # Patch functionality: preserve the flow.
    # Expansion exception: keep the delegation narrow,
    # because upstream is large.
    # Signature: matches upstream; no added parameters.
    # Upstream: vLLM v0.26.0, vllm/v1/worker/gpu_model_runner.py
    # Commit: 568afb3a13806beb53bb2e6bd518269357b237c0
    @functools.cache
    @staticmethod
    def capture(x):
        """Docstring."""
        # ### PATCH START: publish state
        y = x
        # ### PATCH END: publish state
        return y

    # Upstream source: vllm-ascend commit 80d8c194f,
    # NPUModelRunner._model_forward.
    #
    # Patch reason: the upstream path lacks metadata.
    def forward(self):
        def helper():
            # ### PATCH START: nested
            # ### PATCH START: inner
            pass
            # ### PATCH END
            # ### PATCH END: nested
        return helper


def plain():
    # Patch reason: overridden right above the marker
    # ### PATCH START
    pass
    # ### PATCH END
'''

BROKEN = '''x = 1
# ### PATCH END: orphan
def f(:
    # ### PATCH START: a
    # ### PATCH START: b
    pass
    # ### PATCH END: a
    # ### PATCH START: c
    # ### PATCH END: zzz
    # ### PATCH START: never closed
'''


def _at(text: str, needle: str, nth: int = 1) -> int:
    """1-based line of the nth line containing `needle`."""
    hits = [n for n, line in enumerate(text.split("\n"), 1) if needle in line]
    return hits[nth - 1]


def _run(root: Path, **params: Any) -> dict[str, Any]:
    value = MarkersProbe().run({"root": str(root), **params}, ProbeContext(base_dir=root, timeout_s=30)).value
    jsonschema.validate(value, MarkersProbe.fact_schema)
    return value


def _error(root: Path, **params: Any) -> ProbeError:
    with pytest.raises(ProbeError) as info:
        MarkersProbe().run({"root": str(root), **params}, ProbeContext(base_dir=root, timeout_s=30))
    return info.value


@pytest.fixture
def plugin(tmp_path: Path) -> Path:
    repo = init_repo(tmp_path / "plugin")
    repo.write("pkg/patches/engine.py", PATCHED)
    repo.write("pkg/patches/empty.py", "X = 1\n")
    repo.write("pkg/broken.py", BROKEN)
    repo.write("tests/test_engine.py", "# ### PATCH START: test copy\n# ### PATCH END: test copy\n")
    repo.write("docs/notes.md", "# ### PATCH START: a doc, not Python\n")
    repo.commit("plugin")
    return repo.path


def test_regions_fields_and_docstring(plugin: Path) -> None:
    v = _run(plugin, exclude=["tests"])
    assert [f["file"] for f in v["files"]] == ["pkg/broken.py", "pkg/patches/engine.py"]  # *.py, marked only
    f = v["files"][1]
    assert (f["starts"], f["ends"], f["balanced"], f["max_depth"], f["problems"]) == (4, 4, True, 2, [])
    assert f["parsed"] is True
    got = [(r["start_line"], r["end_line"], r["label"], r["end_label"], r["depth"], r["enclosing"])
           for r in f["regions"]]
    P = PATCHED
    assert got == [
        (_at(P, "START: publish"), _at(P, "END: publish"), "publish state", "publish state", 1, "Runner.capture"),
        (_at(P, "START: nested"), _at(P, "END: nested"), "nested", "nested", 1, "Runner.forward.<locals>.helper"),
        (_at(P, "START: inner"), _at(P, "PATCH END", 2), "inner", None, 2, "Runner.forward.<locals>.helper"),
        (_at(P, "PATCH START", 5), _at(P, "PATCH END", 4), None, None, 1, "plain"),
    ]
    capture = f["regions"][0]
    assert capture["doc_line"] == _at(P, "Patch reason: native")  # the block above the decorators
    assert capture["fields"] == {
        "reason": "native capture does not publish AFD metadata.",
        "functionality": "preserve the flow.",  # "Expansion exception:" ends it
        "signature": "matches upstream; no added parameters.",
        "upstream": "vLLM v0.26.0, vllm/v1/worker/gpu_model_runner.py",
        "commit": "568afb3a13806beb53bb2e6bd518269357b237c0",
    }
    # helper() has no comment block: the documentation of forward(), where the patch lives, applies;
    # the multi-line `Upstream source:` value is read up to the blank comment line
    assert f["regions"][1]["fields"] == {"upstream": "vllm-ascend commit 80d8c194f, NPUModelRunner._model_forward.",
                                         "reason": "the upstream path lacks metadata."}
    assert f["regions"][3]["fields"] == {"reason": "overridden right above the marker"}
    assert f["fields"]["upstream"] == ["vLLM v0.26.0, vllm/v1/worker/gpu_model_runner.py",
                                       "vllm-ascend commit 80d8c194f, NPUModelRunner._model_forward."]
    assert f["fields"]["reason"] == ["native capture does not publish AFD metadata.",
                                     "the upstream path lacks metadata.", "overridden right above the marker"]
    assert f["symbols"] == ["vllm.v1.engine.core.EngineCoreProc.run_engine_core",
                            "vllm.v1.engine.utils.launch_core_engines"]  # not ``DPEngineCoreProc`` (no dot)
    assert f["docstring"].startswith("Patches for the engine.")
    assert f["sections"]["Future plan"] == "Remove when upstream has a hook."
    assert list(f["sections"]) == ["This module patches", "Why", "Future plan"]
    assert v["by_file"]["pkg/patches/engine.py"] == {"starts": 4, "ends": 4, "balanced": True, "has": {
        "reason": True, "functionality": True, "signature": True, "upstream": True, "commit": True}}


def test_unbalanced_and_unparsed(plugin: Path) -> None:
    v = _run(plugin, include=["pkg/broken.py"])
    (f,) = v["files"]
    assert f["parsed"] is False and (f["starts"], f["ends"], f["balanced"]) == (4, 3, False)
    assert f["problems"] == [
        {"line": 2, "message": "end marker 'orphan' has no open start marker"},
        {"line": 5, "message": "start marker 'b' is not closed before the end marker at line 7"},
        {"line": 9, "message": "end marker 'zzz' closes start marker 'c' of line 8"},
        {"line": 10, "message": "start marker 'never closed' is never closed"},
    ]
    assert [(r["start_line"], r["end_line"], r["enclosing"]) for r in f["regions"]] == [
        (4, 7, None), (5, None, None), (8, 9, None), (10, None, None)]
    assert v["totals"] == {"files": 1, "starts": 4, "ends": 3, "regions": 4, "unbalanced_files": 1,
                           "files_scanned": 1}


def test_include_unmarked_and_globs(plugin: Path) -> None:
    v = _run(plugin, include=["pkg/patches"], include_unmarked=True)
    assert [(f["file"], f["starts"], f["balanced"]) for f in v["files"]] == [
        ("pkg/patches/empty.py", 0, True), ("pkg/patches/engine.py", 4, True)]
    assert v["by_file"]["pkg/patches/empty.py"]["has"]["reason"] is False
    assert _run(plugin)["totals"]["files"] == 3  # tests/ included when not excluded
    md = _run(plugin, include=["*.md"])
    assert md["files"][0]["file"] == "docs/notes.md" and md["files"][0]["parsed"] is False


def test_revision_is_read_from_git_objects_and_nothing_is_written(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "r")
    repo.write("a.py", "# ### PATCH START: one\n# ### PATCH END: one\n")
    first = repo.commit("one region")
    repo.write("a.py", "# ### PATCH START: one\n")  # edited in the working tree only
    repo.write("new.py", "# ### PATCH START: x\n# ### PATCH END: x\n")
    before = snapshot(repo)
    at_rev = _run(repo.path, rev="HEAD")
    assert at_rev["rev_sha"] == first and [f["file"] for f in at_rev["files"]] == ["a.py"]
    assert at_rev["files"][0]["balanced"] is True
    tree = _run(repo.path)
    assert [f["file"] for f in tree["files"]] == ["a.py"] and tree["files"][0]["balanced"] is False
    assert [f["file"] for f in _run(repo.path, untracked=True)["files"]] == ["a.py", "new.py"]
    assert snapshot(repo) == before
    assert _error(repo.path, rev="nope").code == "git.unknown_ref"
    assert _error(repo.path, rev="HEAD", untracked=True).code == "params.invalid"


def test_subdirectory_root_and_plain_directory(plugin: Path, tmp_path: Path) -> None:
    v = _run(plugin / "pkg" / "patches", rev="HEAD")
    assert [f["file"] for f in v["files"]] == ["engine.py"]
    plain = tmp_path / "plain"
    (plain / "m").mkdir(parents=True)
    (plain / "m" / "x.py").write_text("# ### PATCH START: p\n# ### PATCH END: p\n")
    assert _run(plain)["by_file"] == {"m/x.py": {"starts": 1, "ends": 1, "balanced": True, "has": {
        "reason": False, "functionality": False, "signature": False, "upstream": False, "commit": False}}}


def test_another_plugins_conventions(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "hook.ts").write_text(
        "// Why: the upstream hook is missing\n// and needed.\n// BEGIN-PATCH(hook)\nx();\n// END-PATCH(hook)\n")
    v = _run(tmp_path, include=["*.ts"], comment=r"^//\s?", start=r"^//\s*BEGIN-PATCH\((?P<label>[^)]*)\)",
             end=r"^//\s*END-PATCH\((?P<label>[^)]*)\)", fields={"why": r"^//\s*Why:\s*(.*)"})
    (f,) = v["files"]
    assert f["regions"] == [{"start_line": 3, "end_line": 5, "label": "hook", "end_label": "hook", "depth": 1,
                             "enclosing": None, "doc_line": 1,
                             "fields": {"why": "the upstream hook is missing and needed."}}]
    assert v["by_file"]["src/hook.ts"]["has"] == {"why": True}


def test_bad_patterns_are_errors_naming_the_parameter(tmp_path: Path) -> None:
    err = _error(tmp_path, start="(unclosed")
    assert err.code == "markers.invalid_pattern" and "`start`" in err.message and "missing )" in err.message
    err = _error(tmp_path, fields={"reason": r"^#\s*Patch reason:"})
    assert err.code == "markers.invalid_pattern" and "fields.reason" in err.message and "1 capturing" in err.message
    assert _error(tmp_path, end=r"(a)\1").code == "markers.invalid_pattern"  # no backreferences in RE2
    assert _error(tmp_path / "missing").code == "file.not_found"


def test_a_catastrophic_pattern_cannot_hang_the_probe(tmp_path: Path) -> None:
    (tmp_path / "x.py").write_text("# " + "a" * 50_000 + "!\n")
    v = _run(tmp_path, start=r"^#\s*(a+)+$")  # exponential in a backtracking engine: the test would not end
    assert v["files"] == []


def test_facts_read_from_cel(plugin: Path) -> None:
    v = _run(plugin, include=["pkg/patches"], include_unmarked=True)
    check = expr.compile_expr(
        "facts.m.files.all(f, f.balanced) && facts.m.by_file['pkg/patches/engine.py'].has.upstream && "
        "facts.m.files.exists(f, f.regions.exists(r, r.enclosing == 'Runner.capture' && "
        "r.fields.reason.startsWith('native')))")
    assert expr.evaluate(check, {"facts": {"m": v}}).value is True


def test_unreadable_files_fail_closed_and_links_are_listed(tmp_path: Path) -> None:
    """A file the probe cannot read makes the fact an error; a symlink or a FIFO is listed, never read."""
    import os

    from policyrun.probes.base import ProbeContext, ProbeError
    from policyrun.probes.python.markers import MarkersProbe

    root = tmp_path / "tree"
    root.mkdir()
    (root / "a.py").write_text("# ### PATCH START: x\npass\n# ### PATCH END: x\n")
    (root / "link.py").symlink_to("/etc/passwd")
    os.mkfifo(root / "pipe.py")
    ctx = ProbeContext(base_dir=tmp_path, timeout_s=10)
    value = MarkersProbe().run({"root": str(root)}, ctx).value
    assert [f["file"] for f in value["files"]] == ["a.py"]
    assert {(s["path"], s["reason"]) for s in value["skipped"]} == {("link.py", "symlink"), ("pipe.py", "special")}
    if os.geteuid() != 0:  # root reads anything; the permission check needs another user
        (root / "a.py").chmod(0)
        with pytest.raises(ProbeError) as exc:
            MarkersProbe().run({"root": str(root)}, ctx)
        assert exc.value.code == "file.unreadable"


DOCUMENTED = '''\
"""Copies of upstream runner methods.

Upstream source: ``vllm_ascend/platform.py`` at commit ``80d8c194f``.
"""


def _cat(results):
    """Concatenate the ubatch outputs.

    Upstream source: vLLM v0.26.0 commit 568afb3a1,
    ``gpu_ubatch_wrapper._cat_ubatch_outputs``.

    Patch reason: nested auxiliary outputs.
    """
    # ### PATCH START: nested outputs
    return results
    # ### PATCH END: nested outputs


class Runner:
    # Patch reason: capture publishes AFD metadata.
    # Signature: matches upstream; no added parameters.
    # Upstream: vLLM v0.26.0, vllm/v1/worker/gpu_model_runner.py
    # Commit: 568afb3a13806beb53bb2e6bd518269357b237c0
    def capture(self):
        # ### PATCH START: publish
        pass
        # ### PATCH END: publish
'''


def test_docstring_fields_are_read_like_comment_fields_and_every_row_is_at_its_own_line(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "plugin")
    repo.write("pkg/runner.py", DOCUMENTED)
    repo.commit("plugin")
    v = _run(repo.path)
    D = DOCUMENTED
    got = [(r["line"], r["block"], r["form"], r["field"], r["text"]) for r in v["field_rows"]]
    assert got == [
        (_at(D, "``vllm_ascend/platform.py``"), 1, "docstring", "upstream",
         "``vllm_ascend/platform.py`` at commit ``80d8c194f``."),
        (_at(D, "vLLM v0.26.0 commit"), _at(D, '"""Concatenate'), "docstring", "upstream",
         "vLLM v0.26.0 commit 568afb3a1, ``gpu_ubatch_wrapper._cat_ubatch_outputs``."),
        (_at(D, "Patch reason: nested"), _at(D, '"""Concatenate'), "docstring", "reason", "nested auxiliary outputs."),
        (_at(D, "# Patch reason: capture"), _at(D, "# Patch reason: capture"), "comment", "reason",
         "capture publishes AFD metadata."),
        (_at(D, "# Signature:"), _at(D, "# Patch reason: capture"), "comment", "signature",
         "matches upstream; no added parameters."),
        (_at(D, "# Upstream: vLLM"), _at(D, "# Patch reason: capture"), "comment", "upstream",
         "vLLM v0.26.0, vllm/v1/worker/gpu_model_runner.py"),
        (_at(D, "# Commit:"), _at(D, "# Patch reason: capture"), "comment", "commit",
         "568afb3a13806beb53bb2e6bd518269357b237c0"),
    ]
    # a region in a function documented only by its docstring takes the docstring's fields
    regions = v["files"][0]["regions"]
    assert regions[0]["enclosing"] == "_cat" and regions[0]["doc_line"] == _at(D, '"""Concatenate')
    assert regions[0]["fields"]["reason"] == "nested auxiliary outputs."
    assert v["by_file"]["pkg/runner.py"]["has"]["reason"] is True
