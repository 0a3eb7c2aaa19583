"""python.imports / python.symbols / python.constants on fixture repositories: every import form,
resolution through re-exports (chains, stars, lazy maps, cycles, the depth bound), removed names
and changed signatures between revisions, annotated constants and how they are read."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from policyrun.probes.base import ProbeError
from policyrun.probes.python.resolve import MAX_HOPS
from policyrun.probes.registry import get
from tests.gitfixtures import GitRepo, init_repo, run_probe, snapshot

PLUGIN_MAIN = '''\
from __future__ import annotations

import importlib
import typing
from typing import TYPE_CHECKING

import up.core
import up.util as u, os
from up.config import (
    CUDAGraphMode,
    Other as Renamed,
)
from up import util
from up.layers import fused_moe
from . import sibling
from .sub import thing as t
from ..outside import nope

if TYPE_CHECKING:
    from up.core import Engine
else:
    from up.core import helper

if typing.TYPE_CHECKING:
    import up.lazy_impl

if not TYPE_CHECKING:
    from up import Lazy
else:
    from up import Exported


def later():
    from up.core import VALUE
    mod = importlib.import_module("up.util")
    rel = importlib.import_module(".core", "up")
    name = "up." + "x"
    importlib.import_module(name)
    obj.import_module("not.an.import")
    return __import__("up.config")
'''

UP_FILES = {
    "up/__init__.py": '''\
from .core import Engine
from . import util as util_alias

MODULE_ATTRS = {
    "Lazy": ".lazy_impl:LazyThing",
    "Absolute": "up.lazy_impl:LazyThing",
    "Outside": "numpy:ndarray",
    "LazyThing": "up.lazy_impl",
    "lazy_mod": "up.lazy_impl",
}


def __getattr__(name):
    if name in MODULE_ATTRS:
        module_name, attr = MODULE_ATTRS[name].split(":")
        return getattr(importlib.import_module(module_name, __package__), attr)
    raise AttributeError(name)
''',
    "up/core.py": '''\
import os
from os.path import join as pjoin

VALUE = 1
VALUE = 2


class Engine:
    def run(self, x: int, y: "str" = 'a') -> int:
        return x

    async def stop(self):
        pass

    class Inner:
        def deep(self):
            pass


def helper():
    pass


async def ahelper():
    pass
''',
    "up/util.py": "def tool():\n    pass\n",
    "up/lazy_impl.py": "class LazyThing:\n    pass\n",
    "up/config/__init__.py": '''\
from up.config.compilation import (
    CUDAGraphMode,
    Other,
)
from .star_src import *
from .open_star import *
''',
    "up/config/compilation.py": "class CUDAGraphMode:\n    pass\n\n\nclass Other:\n    pass\n",
    "up/config/star_src.py": '__all__ = ["Exported"]\n__all__ += ["Added"]\n\n\nclass Exported:\n    pass\n\n\n'
                             'class NotExported:\n    pass\n\n\nAdded = 1\n',
    "up/config/open_star.py": "class Public:\n    pass\n\n\nclass _Private:\n    pass\n",
    "up/layers/__init__.py": "",
    "up/layers/fused_moe/__init__.py": "def fused():\n    pass\n",
    "up/cyc/__init__.py": "from up.cyc.a import Loop\n",
    "up/cyc/a.py": "from up.cyc import Loop\n",
    "up/broken.py": "def oops(:\n    pass\n",
    "up/guarded.py": "try:\n    from up.core import Engine as Fast\nexcept ImportError:\n    Fast = None\n",
    "up/ns/mod.py": "X = 1\n",
    "up/nolazy.py": 'NAMES = {"X": "up.core:Engine"}\n',  # a string map no __getattr__ reads
    "up/selfimp/__init__.py": "from . import child\nfrom .child import thing\nfrom . import absent\n",
    "up/selfimp/child.py": "thing = 1\n",
}
DEPTH = MAX_HOPS + 2  # a chain one module longer than the bound, plus the defining module
for _i in range(DEPTH):
    UP_FILES[f"up/deep/m{_i}.py"] = f"from up.deep.m{_i + 1} import Deep\n"
UP_FILES[f"up/deep/m{DEPTH}.py"] = "class Deep:\n    pass\n"


def probe(kind: str, base: Path, **params: Any) -> Any:
    value = run_probe(kind, params, base).value
    p = get(kind)
    assert p is not None
    jsonschema.Draft202012Validator(p.fact_schema).validate(value)  # the fact matches its own schema
    return value


def build_upstream(path: Path) -> GitRepo:
    repo = init_repo(path)
    for rel, text in UP_FILES.items():
        repo.write(rel, text)
    repo.commit("v1")
    repo.git("tag", "v1")
    # v2: helper removed, util renamed, Engine.run's signature changes, Other reformatted only
    repo.write("up/core.py", UP_FILES["up/core.py"].replace("def helper():\n    pass\n", "").replace(
        'def run(self, x: int, y: "str" = \'a\') -> int:', "def run(self, x: int, y: str = 'a', z=0) -> int:"))
    repo.git("mv", "up/util.py", "up/utils.py")
    repo.write("up/__init__.py", UP_FILES["up/__init__.py"].replace("from . import util as", "from . import utils as"))
    repo.commit("v2")
    repo.git("tag", "v2")
    return repo


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: pytest.TempPathFactory) -> GitRepo:
    """Shared by the tests that only read it; tests that change it use `own_upstream`."""
    return build_upstream(tmp_path_factory.mktemp("shared") / "up")


@pytest.fixture
def own_upstream(tmp_path: Path) -> GitRepo:
    return build_upstream(tmp_path / "up")


@pytest.fixture
def plugin(tmp_path: Path) -> GitRepo:
    repo = init_repo(tmp_path / "plugin")
    repo.write("plug/__init__.py", "")
    repo.write("plug/main.py", PLUGIN_MAIN)
    repo.write("plug/sub/__init__.py", "thing = 1\n")
    repo.write("plug/sibling.py", "")
    repo.write("tests/test_x.py", "import up.core\n")
    repo.commit("init")
    return repo


def rows(value: Any, file: str = "plug/main.py") -> list[tuple[Any, ...]]:
    return [(r["line"], r["module"], r["name"], r["alias"], r["form"], r["relative"], r["type_checking"])
            for r in value["imports"] if r["file"] == file]


# --- python.imports: forms --------------------------------------------------------------------

def test_every_import_form_one_row_per_name_with_its_own_line(plugin: GitRepo) -> None:
    v = probe("python.imports", plugin.path, root=str(plugin.path))
    assert rows(v) == [
        (1, "__future__", "annotations", None, "from", False, False),
        (3, "importlib", None, None, "import", False, False),
        (4, "typing", None, None, "import", False, False),
        (5, "typing", "TYPE_CHECKING", None, "from", False, False),
        (7, "up.core", None, None, "import", False, False),
        (8, "up.util", None, "u", "import", False, False),
        (8, "os", None, None, "import", False, False),
        (10, "up.config", "CUDAGraphMode", None, "from", False, False),
        (11, "up.config", "Other", "Renamed", "from", False, False),
        (13, "up", "util", None, "from", False, False),
        (14, "up.layers", "fused_moe", None, "from", False, False),
        (15, "plug", "sibling", None, "from", True, False),
        (16, "plug.sub", "thing", "t", "from", True, False),
        (17, "..outside", "nope", None, "from", True, False),  # climbs above the top-level package
        (20, "up.core", "Engine", None, "from", False, True),
        (22, "up.core", "helper", None, "from", False, False),  # the else of TYPE_CHECKING runs
        (25, "up.lazy_impl", None, None, "import", False, True),
        (28, "up", "Lazy", None, "from", False, False),
        (30, "up", "Exported", None, "from", False, True),
        (34, "up.core", "VALUE", None, "from", False, False),
        (35, "up.util", None, None, "dynamic", False, False),
        (36, "up.core", None, None, "dynamic", True, False),
        (40, "up.config", None, None, "dynamic", False, False),
    ]
    assert v["files_scanned"] == 5 and v["parse_errors"] == []
    assert v["imports"][0]["site"] == "plug/main.py:1"
    assert "target" not in v["imports"][0] and v["upstream"] is None and v["by_upstream_file"] == {}


def test_packages_exclude_and_modules(plugin: GitRepo) -> None:
    v = probe("python.imports", plugin.path, root=str(plugin.path), packages=["up"], exclude=["tests/**"])
    assert {r["module"].split(".")[0] for r in v["imports"]} == {"up"}
    assert v["modules"] == ["up", "up.config", "up.core", "up.layers", "up.lazy_impl", "up.util"]
    assert v["files_scanned"] == 4
    with_tests = probe("python.imports", plugin.path, root=str(plugin.path), packages=["up"])
    assert "tests/test_x.py:1" in {r["site"] for r in with_tests["imports"]}


def test_relative_imports_in_a_src_layout(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "r")
    repo.write("src/pkg/__init__.py", "from .a import b\n")
    repo.write("src/pkg/deep/mod.py", "from .. import x\nfrom ..a.b import c\nfrom ... import d\n")
    repo.commit("init")
    v = probe("python.imports", repo.path, root=str(repo.path), source_roots=["src"])
    assert [(r["file"], r["module"], r["name"]) for r in v["imports"]] == [
        ("src/pkg/__init__.py", "pkg.a", "b"),
        ("src/pkg/deep/mod.py", "pkg", "x"),
        ("src/pkg/deep/mod.py", "pkg.a.b", "c"),
        ("src/pkg/deep/mod.py", "...", "d"),
    ]
    # Without the source root, the package would be named src.pkg.
    assert probe("python.imports", repo.path, root=str(repo.path))["imports"][1]["module"] == "src.pkg"


def test_syntax_errors_are_listed_with_their_location_not_skipped(plugin: GitRepo) -> None:
    plugin.write("plug/bad.py", "import ok\n\ndef f(:\n    pass\n")
    plugin.write("plug/nul.py", b"x = 1\ny = 2\0\n")
    plugin.write("plug/indent.py", "if x:\npass\n")
    plugin.commit("bad")
    v = probe("python.imports", plugin.path, root=str(plugin.path))
    assert v["parse_errors"] == [
        {"file": "plug/bad.py", "line": 3, "column": 7, "message": "invalid syntax"},
        {"file": "plug/indent.py", "line": 2, "column": 1, "message": "expected an indented block after 'if' "
                                                                       "statement on line 1"},
        {"file": "plug/nul.py", "line": 2, "column": None, "message": "source contains a NUL byte (not Python text)"},
    ]
    assert v["files_scanned"] == 8
    assert rows(v)  # the good files are still scanned


def test_revision_is_read_from_git_objects_and_nothing_is_written(plugin: GitRepo) -> None:
    first = plugin.sha("HEAD")
    plugin.write("plug/main.py", "import brand_new\n")
    plugin.commit("second")
    plugin.write("plug/main.py", "import uncommitted\n")  # a dirty working tree
    plugin.write("plug/untracked.py", "import untracked_mod\n")
    before = snapshot(plugin)
    at_first = probe("python.imports", plugin.path, root=str(plugin.path), rev=first)
    assert len(rows(at_first)) == 23 and at_first["rev_sha"] == first
    assert [r[1] for r in rows(probe("python.imports", plugin.path, root=str(plugin.path), rev="HEAD"))] == \
        ["brand_new"]
    now = probe("python.imports", plugin.path, root=str(plugin.path))
    assert [r[1] for r in rows(now)] == ["uncommitted"]  # working tree: tracked files as they are now
    assert not rows(now, "plug/untracked.py")  # only tracked files, like search.regex
    probe("python.constants", plugin.path, root=str(plugin.path), rev=first, names=["thing"], references=True)
    probe("python.symbols", plugin.path, path=str(plugin.path), rev="HEAD~1", compare_rev="HEAD",
          symbols=["plug.main.later"])
    assert snapshot(plugin) == before


def test_a_tree_outside_git(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "m.py").write_text("from . import x\n")
    (tmp_path / "pkg" / ".git").mkdir()  # a stray .git directory is skipped like search does
    v = probe("python.imports", tmp_path, root=str(tmp_path))
    assert [(r["file"], r["module"], r["name"]) for r in v["imports"]] == [("pkg/m.py", "pkg", "x")]


def test_type_checking_combined_with_and(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text("import sys\nif TYPE_CHECKING and sys.version_info >= (3, 11):\n    import a\n"
                                   "elif sys.platform:\n    import b\n")
    v = probe("python.imports", tmp_path, root=str(tmp_path))
    assert [(r["module"], r["type_checking"]) for r in v["imports"]] == [("sys", False), ("a", True), ("b", False)]


def test_symlinks_fifos_and_oversize_files_are_not_parsed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    from policyrun.probes.python import source as pysource

    repo = init_repo(tmp_path / "r")
    repo.write("small.py", "import fine\n")
    repo.write("big.py", "import up.core  # " + "x" * 200 + "\n")
    (repo.path / "link.py").symlink_to("/dev/zero")  # a tracked link must never be read
    repo.commit("small, big and a link")
    monkeypatch.setattr(pysource, "MAX_SOURCE_BYTES", 100)
    for rev in (None, "HEAD"):
        v = probe("python.imports", repo.path, root=str(repo.path), **({"rev": rev} if rev else {}))
        assert v["parse_errors"] == [{"file": "big.py", "line": 1, "column": None, "message": "not parsed: 219 "
                                      "bytes, larger than the 100 bytes policyrun parses in one Python file"}]
        assert v["skipped"] == [{"path": "big.py", "reason": "too_large", "size": 219}]
        assert [r["site"] for r in v["imports"]] == ["small.py:1"]
    outside = tmp_path / "outside"
    outside.mkdir()
    os.mkfifo(outside / "pipe.py")  # opening it for reading would wait for a writer forever
    (outside / "ok.py").write_text("import fine\n")
    assert [r["module"] for r in probe("python.imports", outside, root=str(outside))["imports"]] == ["fine"]


def test_subdirectory_root_at_a_revision(plugin: GitRepo) -> None:
    v = probe("python.imports", plugin.path, root=str(plugin.path / "plug"), rev="HEAD")
    assert {r["file"] for r in v["imports"]} == {"main.py"}  # paths relative to root


@pytest.mark.parametrize(("params", "code"), [
    ({"root": "missing"}, "file.not_found"),
    ({"root": ".", "rev": "no-such-tag"}, "git.unknown_ref"),
])
def test_bad_parameters_fail_with_a_code(plugin: GitRepo, params: dict[str, Any], code: str) -> None:
    with pytest.raises(ProbeError) as err:
        run_probe("python.imports", params, plugin.path)
    assert err.value.code == code


def test_compare_rev_needs_git(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text("import os\n")
    with pytest.raises(ProbeError) as err:
        run_probe("python.imports", {"root": ".", "resolve": {"path": ".", "compare_rev": "v2"}}, tmp_path)
    assert err.value.code == "params.invalid" and "compare_rev" in err.value.message
    with pytest.raises(ProbeError) as err:
        run_probe("python.imports", {"root": ".", "rev": "HEAD"}, tmp_path)
    assert err.value.code == "git.not_a_repository"


# --- python.imports: resolution ---------------------------------------------------------------

def resolved(plugin: GitRepo, upstream: GitRepo, **resolve: Any) -> Any:
    return probe("python.imports", plugin.path, root=str(plugin.path), packages=["up"], exclude=["tests/**"],
                 resolve={"path": str(upstream.path), **resolve})


def target(v: Any, line: int, name: str | None = None) -> Mapping[str, Any]:
    (row,) = [r for r in v["imports"] if r["line"] == line and (name is None or r["name"] == name)]
    t: Mapping[str, Any] = row["target"]
    return t


def test_resolution_follows_re_exports_submodules_and_lazy_maps(plugin: GitRepo, upstream: GitRepo) -> None:
    v = resolved(plugin, upstream, rev="v1")
    graph = target(v, 10)
    assert graph == {"found": True, "module_file": "up/config/__init__.py", "defining_file": "up/config/compilation.py",
                     "line": 1, "kind": "class", "chain": ["up/config/__init__.py", "up/config/compilation.py"],
                     "reason": None}
    moe = target(v, 14)  # a submodule imported from its package
    assert (moe["kind"], moe["module_file"], moe["defining_file"]) == (
        "module", "up/layers/__init__.py", "up/layers/fused_moe/__init__.py")
    assert target(v, 7) == {"found": True, "module_file": "up/core.py", "defining_file": "up/core.py", "line": 1,
                            "kind": "module", "chain": ["up/core.py"], "reason": None}
    assert (target(v, 22)["kind"], target(v, 22)["line"]) == ("function", 20)
    assert (target(v, 34)["kind"], target(v, 34)["line"]) == ("assignment", 5)  # the last binding wins
    lazy = target(v, 28)
    assert (lazy["kind"], lazy["defining_file"], lazy["chain"]) == (
        "class", "up/lazy_impl.py", ["up/__init__.py", "up/lazy_impl.py"])
    exported = target(v, 30)  # star-exported by up.config, but the plugin asks up
    assert (exported["found"], exported["reason"], exported["chain"]) == (False, "not_defined", ["up/__init__.py"])
    assert target(v, 13)["defining_file"] == "up/util.py"
    assert target(v, 40)["defining_file"] == "up/config/__init__.py"  # __import__("up.config")
    assert v["by_upstream_file"] == {
        "up/__init__.py": ["plug/main.py:13", "plug/main.py:28", "plug/main.py:30"],
        "up/config/__init__.py": ["plug/main.py:10", "plug/main.py:11", "plug/main.py:40"],
        "up/config/compilation.py": ["plug/main.py:10", "plug/main.py:11"],
        "up/core.py": ["plug/main.py:7", "plug/main.py:20", "plug/main.py:22", "plug/main.py:34",
                       "plug/main.py:36"],
        "up/layers/__init__.py": ["plug/main.py:14"],
        "up/layers/fused_moe/__init__.py": ["plug/main.py:14"],
        "up/lazy_impl.py": ["plug/main.py:25", "plug/main.py:28"],
        "up/util.py": ["plug/main.py:8", "plug/main.py:13", "plug/main.py:35"],
    }
    assert v["unresolved"] == ["plug/main.py:30"]  # Exported is in up.config, not in up
    assert v["upstream"]["rev"] == "v1" and v["upstream"]["rev_sha"] == upstream.sha("v1")


def resolve_one(tmp_path: Path, upstream: GitRepo, line: str, rev: str = "v1") -> Mapping[str, Any]:
    plugin = init_repo(tmp_path / "one")
    plugin.write("p.py", line + "\n")
    plugin.commit("one")
    v = probe("python.imports", plugin.path, root=str(plugin.path),
              resolve={"path": str(upstream.path), "rev": rev})
    (row,) = v["imports"]
    t: Mapping[str, Any] = row["target"]
    return t


@pytest.mark.parametrize(("line", "expected"), [
    # __all__ (with += ) decides what a star import exports
    ("from up.config import Exported", ("class", "up/config/star_src.py", None)),
    ("from up.config import Added", ("assignment", "up/config/star_src.py", None)),
    ("from up.config import NotExported", (None, None, "not_defined")),
    # without __all__, public names only
    ("from up.config import Public", ("class", "up/config/open_star.py", None)),
    ("from up.config import _Private", (None, None, "not_defined")),
    # an import that leads out of the tree stops there
    ("from up.core import pjoin", ("import", "up/core.py", None)),
    ("from up.core import os", ("import", "up/core.py", None)),
    ("from up import Outside", ("lazy", "up/__init__.py", None)),
    ("from up import Absolute", ("class", "up/lazy_impl.py", None)),
    ("from up import LazyThing", ("class", "up/lazy_impl.py", None)),  # "module": the same name there
    ("from up import lazy_mod", ("module", "up/lazy_impl.py", None)),  # ... else the module itself
    ("from up.nolazy import X", (None, None, "not_defined")),
    # `from . import child` in a package's __init__ binds the submodule, not a cycle
    ("from up.selfimp import child", ("module", "up/selfimp/child.py", None)),
    ("from up.selfimp import thing", ("assignment", "up/selfimp/child.py", None)),
    ("from up.selfimp import absent", ("import", "up/selfimp/__init__.py", None)),
    ("from up import util_alias", ("module", "up/util.py", None)),
    # try/except ImportError: the first conditional binding (the import) stands
    ("from up.guarded import Fast", ("class", "up/core.py", None)),
    ("from up.cyc import Loop", (None, None, "cycle")),
    ("from up.broken import oops", (None, None, "parse_error")),
    ("from up.nothere import x", (None, None, "no_module")),
    ("from up.core import missing", (None, None, "not_defined")),
    ("from up.ns import mod", ("module", "up/ns/mod.py", None)),  # a namespace package
    ("import up.ns", ("module", None, None)),
    ("from up.deep.m2 import Deep", ("class", f"up/deep/m{DEPTH}.py", None)),
    ("from up.deep.m0 import Deep", (None, None, "depth_limit")),
])
def test_resolution_cases(tmp_path: Path, upstream: GitRepo, line: str,
                          expected: tuple[str | None, str | None, str | None]) -> None:
    t = resolve_one(tmp_path, upstream, line)
    assert (t["kind"], t["defining_file"], t["reason"]) == expected
    assert t["found"] is (expected[2] is None)


def test_cycle_and_depth_chains_record_the_files_visited(tmp_path: Path, upstream: GitRepo) -> None:
    assert resolve_one(tmp_path, upstream, "from up.cyc import Loop")["chain"] == ["up/cyc/__init__.py",
                                                                                 "up/cyc/a.py"]
    deep = resolve_one(tmp_path, upstream, "from up.deep.m2 import Deep")
    assert deep["chain"] == [f"up/deep/m{i}.py" for i in range(2, DEPTH + 1)]


def test_upstream_parse_errors_are_reported(tmp_path: Path, upstream: GitRepo) -> None:
    plugin = init_repo(tmp_path / "pb")
    plugin.write("p.py", "from up.broken import oops\n")
    plugin.commit("one")
    v = probe("python.imports", plugin.path, root=str(plugin.path), resolve={"path": str(upstream.path), "rev": "v1"})
    assert v["upstream_parse_errors"] == [{"file": "up/broken.py", "line": 1, "column": 10,
                                           "message": "invalid syntax", "rev": "v1"}]
    assert v["unresolved"] == ["p.py:1"]


def test_compare_rev_reports_removed_and_moved_names(plugin: GitRepo, upstream: GitRepo) -> None:
    before = snapshot(upstream)
    v = resolved(plugin, upstream, rev="v1", compare_rev="v2")
    assert snapshot(upstream) == before  # the upstream repository is only read
    assert v["missing_at_compare"] == [
        {"site": "plug/main.py:8", "module": "up.util", "name": None, "reason": "no_module"},
        {"site": "plug/main.py:13", "module": "up", "name": "util", "reason": "not_defined"},
        {"site": "plug/main.py:22", "module": "up.core", "name": "helper", "reason": "not_defined"},
        {"site": "plug/main.py:35", "module": "up.util", "name": None, "reason": "no_module"},
    ]
    graph = target(v, 10)
    assert graph["compare"]["defining_file"] == "up/config/compilation.py" and graph["compare"]["found"]
    assert v["moved_at_compare"] == []
    assert target(v, 22)["compare"]["found"] is False
    assert v["upstream"]["compare_sha"] == upstream.sha("v2")


def test_moved_definitions_at_compare_rev(tmp_path: Path, upstream: GitRepo) -> None:
    plugin = init_repo(tmp_path / "mv")
    plugin.write("p.py", "from up import util_alias\nfrom up.core import Engine\n")
    plugin.commit("one")
    v = probe("python.imports", plugin.path, root=str(plugin.path),
              resolve={"path": str(upstream.path), "rev": "v1", "compare_rev": "v2"})
    assert v["moved_at_compare"] == [{"site": "p.py:1", "module": "up", "name": "util_alias",
                                      "defining_file": "up/util.py", "compare_defining_file": "up/utils.py"}]
    assert v["missing_at_compare"] == []


def test_upstream_working_tree_without_rev(plugin: GitRepo, own_upstream: GitRepo) -> None:
    upstream = own_upstream
    upstream.write("up/config/compilation.py", "class Other:\n    pass\n")  # uncommitted: CUDAGraphMode gone
    v = resolved(plugin, upstream)
    assert target(v, 10)["found"] is False and v["upstream"]["rev"] is None
    assert target(resolved(plugin, upstream, rev="HEAD"), 10)["found"] is True


# --- python.symbols ---------------------------------------------------------------------------

def test_symbols_signatures_and_changes(own_upstream: GitRepo) -> None:
    upstream = own_upstream
    upstream.write("up/config/compilation.py", "class CUDAGraphMode(\n    object,\n):\n    pass\n\n\nclass Other:\n"
                                               "    pass\n")
    upstream.commit("v3: reformat a class header only")
    names = ["up.Engine.run", "up.core.Engine.stop", "up.core.Engine.Inner.deep", "up.core.helper",
             "up.core.ahelper", "up.config.CUDAGraphMode", "up.core.VALUE", "up.core.Engine.gone", "up.nothing.X",
             "up.util_alias.tool", "up.core"]
    v = probe("python.symbols", upstream.path, path=str(upstream.path), rev="v1", compare_rev="v2", symbols=names)
    by = v["by_name"]
    run = by["up.Engine.run"]
    assert (run["file"], run["line"], run["kind"], run["chain"]) == ("up/core.py", 9, "method",
                                                                     ["up/__init__.py", "up/core.py"])
    assert run["signature"] == "(self, x: int, y: 'str'='a') -> int"
    assert run["compare"]["signature"] == "(self, x: int, y: str='a', z=0) -> int"
    assert run["signature_changed"] is True and run["removed"] is False
    assert (by["up.core.Engine.stop"]["kind"], by["up.core.Engine.stop"]["signature"]) == ("async method", "(self)")
    assert by["up.core.Engine.Inner.deep"]["line"] == 16
    assert (by["up.core.helper"]["kind"], by["up.core.helper"]["removed"]) == ("function", True)
    assert by["up.core.ahelper"]["kind"] == "async function"
    assert (by["up.config.CUDAGraphMode"]["kind"], by["up.config.CUDAGraphMode"]["signature"]) == ("class", "()")
    assert (by["up.core.VALUE"]["kind"], by["up.core.VALUE"]["signature"]) == ("assignment", None)
    assert by["up.core.Engine.gone"]["reason"] == "not_defined"
    tool = by["up.util_alias.tool"]  # through `from . import util as util_alias`, renamed to utils in v2
    assert (tool["file"], tool["compare"]["file"], tool["removed"]) == ("up/util.py", "up/utils.py", False)
    assert by["up.core"]["kind"] == "module"
    assert v["changed"] == ["up.Engine.run"]
    assert v["removed"] == ["up.core.helper"]
    assert v["not_found"] == ["up.core.Engine.gone", "up.nothing.X"]
    # `(\n    object,\n)` against `()` is a real change, whatever its layout
    v3 = probe("python.symbols", upstream.path, path=str(upstream.path), rev="v2", compare_rev="HEAD",
               symbols=["up.config.CUDAGraphMode"])
    assert v3["changed"] == ["up.config.CUDAGraphMode"]
    assert v3["symbols"][0]["compare"]["signature"] == "(object)"


def test_formatting_only_changes_are_not_signature_changes(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "fmt")
    repo.write("m.py", "def f(a, b: 'int' = 1, *args, c: dict = {}, **kw) -> None:\n    '''doc'''\n    return\n")
    repo.commit("one")
    repo.write("m.py", '# moved down\n\n\ndef f(\n    a,\n    b: "int"=1,\n    *args,\n    c: dict={},  # comment\n'
                       '    **kw,\n) -> None:\n    """other doc"""\n    x = 1\n')
    repo.commit("two")
    v = probe("python.symbols", repo.path, path=str(repo.path), rev="HEAD~1", compare_rev="HEAD", symbols=["m.f"])
    row = v["symbols"][0]
    assert row["signature_changed"] is False and v["changed"] == []
    assert (row["line"], row["compare"]["line"]) == (1, 4)


def test_symbols_of_files(upstream: GitRepo) -> None:
    v = probe("python.symbols", upstream.path, path=str(upstream.path), rev="v1", compare_rev="v2",
              files=["up/core.py"])
    assert [(r["name"], r["kind"], r["line"]) for r in v["symbols"]] == [
        ("up.core.Engine", "class", 8), ("up.core.Engine.run", "method", 9), ("up.core.Engine.stop", "async method", 12),
        ("up.core.Engine.Inner", "class", 15), ("up.core.Engine.Inner.deep", "method", 16),
        ("up.core.helper", "function", 20), ("up.core.ahelper", "async function", 24)]
    assert v["changed"] == ["up.core.Engine.run"] and v["removed"] == ["up.core.helper"]


def test_symbols_without_compare_and_errors(upstream: GitRepo) -> None:
    v = probe("python.symbols", upstream.path, path=str(upstream.path), symbols=["up.core.helper"])
    assert v["symbols"][0]["signature_changed"] is None and "compare" not in v["symbols"][0]
    with pytest.raises(ProbeError) as err:
        run_probe("python.symbols", {"path": str(upstream.path)}, upstream.path)
    assert err.value.code == "params.invalid"


# --- python.constants -------------------------------------------------------------------------

CONSTANTS_FILES = {
    "pkg/__init__.py": "from .version import TARGET as TARGET\n",
    "pkg/version.py": '''\
from typing import Final

TARGET: Final[str] = "0.26.0"
PLAIN = '1.2'
A = B = 3
X, Y = 1, 2
COMPUTED = "0." + str(26)
NUMS = (1, 2.5, None, True)
if True:
    IN_IF = {"k": [1]}
try:
    IN_TRY = b"bytes"
except ImportError:
    IN_TRY = None


def f():
    LOCAL = "no"
    return TARGET


def checks(installed, text):
    ok = parse(installed) == parse(TARGET)
    if text.startswith(TARGET):
        pass
    if TARGET.endswith(text):
        pass
    print(f"want {TARGET}")
    return installed in (TARGET, "x")
''',
    "pkg/use.py": '''\
from pkg import TARGET as T
import pkg.version as ver
import pkg.version
from pkg import version


def g(s):
    if s.startswith(T):
        return ver.TARGET
    log("x", T)
    return pkg.version.TARGET == s or version.TARGET


TARGET = "shadow-free local"
''',
}


@pytest.fixture
def consts(tmp_path: Path) -> GitRepo:
    repo = init_repo(tmp_path / "c")
    for rel, text in CONSTANTS_FILES.items():
        repo.write(rel, text)
    repo.commit("init")
    return repo


def test_constants_annotated_plain_chained_and_in_blocks(consts: GitRepo) -> None:
    v = probe("python.constants", consts.path, root=str(consts.path), name_pattern="[A-Z_]+", rev="HEAD")
    got = [(r["file"], r["line"], r["name"], r["value"], r["literal"], r["source"], r["annotation"])
           for r in v["constants"]]
    assert got == [
        ("pkg/use.py", 14, "TARGET", "shadow-free local", True, '"shadow-free local"', None),
        ("pkg/version.py", 3, "TARGET", "0.26.0", True, '"0.26.0"', "Final[str]"),
        ("pkg/version.py", 4, "PLAIN", "1.2", True, "'1.2'", None),
        ("pkg/version.py", 5, "A", 3, True, "3", None),
        ("pkg/version.py", 5, "B", 3, True, "3", None),
        ("pkg/version.py", 7, "COMPUTED", None, False, '"0." + str(26)', None),
        ("pkg/version.py", 8, "NUMS", [1, 2.5, None, True], True, "(1, 2.5, None, True)", None),
        ("pkg/version.py", 10, "IN_IF", {"k": [1]}, True, '{"k": [1]}', None),
        ("pkg/version.py", 12, "IN_TRY", None, False, 'b"bytes"', None),
        ("pkg/version.py", 14, "IN_TRY", None, True, "None", None),
    ]  # X, Y (a tuple target) and LOCAL (inside a function) are not module constants
    assert [r["site"] for r in v["by_name"]["TARGET"]] == ["pkg/use.py:14", "pkg/version.py:3"]
    assert v["references"] == [] and v["checks"] == []


def test_constant_references_with_context(consts: GitRepo) -> None:
    v = probe("python.constants", consts.path, root=str(consts.path), names=["TARGET"], references=True,
              exclude=["pkg/use.py"])
    refs = [(r["line"], r["local"], r["context"], r["callee"], r["method"], r["ops"]) for r in v["references"]]
    assert refs == [
        (19, "TARGET", "other", None, None, []),
        (23, "TARGET", "compare", "parse", "parse", ["=="]),
        (24, "TARGET", "call_arg", "text.startswith", "startswith", []),
        (26, "TARGET", "call_receiver", "TARGET.endswith", "endswith", []),
        (28, "TARGET", "format", "print", "print", []),
        (29, "TARGET", "compare", None, None, ["in"]),
    ]
    assert [r["line"] for r in v["checks"]] == [23, 24, 26, 29]
    first = v["references"][1]
    assert (first["site"], first["text"], first["constant"], first["column"]) == (
        "pkg/version.py:23", "ok = parse(installed) == parse(TARGET)", "pkg/version.py:3", 36)


def test_references_follow_imports_aliases_and_module_attributes(consts: GitRepo) -> None:
    v = probe("python.constants", consts.path, root=str(consts.path), names=["TARGET"], references=True,
              include=["pkg/use.py", "pkg/version.py"])
    use = [(r["line"], r["local"], r["constant"], r["context"]) for r in v["references"] if r["file"] == "pkg/use.py"]
    assert use == [
        (8, "T", "pkg/version.py:3", "call_arg"),  # imported as T through the package's re-export
        (9, "ver.TARGET", "pkg/version.py:3", "other"),
        (10, "T", "pkg/version.py:3", "call_arg"),
        (11, "pkg.version.TARGET", "pkg/version.py:3", "compare"),
        (11, "version.TARGET", "pkg/version.py:3", "other"),
    ]
    assert [r["site"] for r in v["checks"] if r["file"] == "pkg/use.py"] == ["pkg/use.py:8", "pkg/use.py:11"]


def test_constants_errors(consts: GitRepo) -> None:
    for params, code in [({"root": "."}, "params.invalid"), ({"root": ".", "name_pattern": "("}, "params.invalid")]:
        with pytest.raises(ProbeError) as err:
            run_probe("python.constants", params, consts.path)
        assert err.value.code == code
    consts.write("pkg/bad.py", "TARGET = (\n")
    consts.commit("bad")
    v = probe("python.constants", consts.path, root=str(consts.path), names=["TARGET"])
    assert [(e["file"], e["line"]) for e in v["parse_errors"]] == [("pkg/bad.py", 1)]
    assert [c["site"] for c in v["constants"]] == ["pkg/use.py:14", "pkg/version.py:3"]


# --- schemas ----------------------------------------------------------------------------------

def _untyped(schema: Mapping[str, Any], path: str) -> list[str]:
    out: list[str] = []
    if "type" not in schema:
        out.append(path)
    for name, sub in (schema.get("properties") or {}).items():
        out += _untyped(sub, f"{path}.{name}")
    if isinstance(schema.get("items"), Mapping):
        out += _untyped(schema["items"], f"{path}[]")
    if isinstance(schema.get("additionalProperties"), Mapping):
        out += _untyped(schema["additionalProperties"], f"{path}{{}}")
    return out


@pytest.mark.parametrize("kind", ["python.imports", "python.symbols", "python.constants"])
def test_fact_schemas_type_every_field(kind: str) -> None:
    p = get(kind)
    assert p is not None and p.side_effects({}) == frozenset()
    assert _untyped(p.fact_schema, "facts") == []
    jsonschema.Draft202012Validator.check_schema(p.params_schema)
    jsonschema.Draft202012Validator.check_schema(p.fact_schema)


# --- through a rulebook -----------------------------------------------------------------------

RULEBOOK = """\
policyrun: 1
name: python-source
inputs:
  plugin: {type: path}
  upstream: {type: path}
modes:
  plan: {phases: [IMPACT]}
probes:
  imp:
    uses: python.imports
    with: {root: "${inputs.plugin}", packages: [up], exclude: ["tests/**"],
           resolve: {path: "${inputs.upstream}", rev: v1, compare_rev: v2}}
  diff: {uses: git.diff, with: {path: "${inputs.upstream}", base: v1, head: v2}}
  sym:
    uses: python.symbols
    with: {path: "${inputs.upstream}", rev: v1, compare_rev: v2, symbols: [up.Engine.run]}
  consts:
    uses: python.constants
    with: {root: "${inputs.plugin}", names: [thing], references: true}
phases:
  - id: IMPACT
    evidence:
      - id: parsed
        check: facts.imp.files_scanned == 4 && size(facts.imp.parse_errors) == 0
      - id: impact_rows
        check: >-
          facts.diff.files.filter(d, d.path in facts.imp.by_upstream_file
            || (d.old_path != null && d.old_path in facts.imp.by_upstream_file)).map(d, d.path)
          == ['up/__init__.py', 'up/core.py', 'up/utils.py']
      - id: consumers
        check: facts.imp.by_upstream_file['up/layers/fused_moe/__init__.py'] == ['plug/main.py:14']
      - id: removed
        check: facts.imp.missing_at_compare.map(m, m.site).exists(s, s == 'plug/main.py:22')
      - id: submodule
        check: facts.imp.imports.exists(r, has(r.target) && r.target.kind == 'module' && r.name == 'fused_moe')
      - id: patch_signature
        check: facts.sym.by_name['up.Engine.run'].signature_changed && facts.sym.changed == ['up.Engine.run']
      - id: constant
        check: facts.consts.by_name['thing'][0].value == 1 && size(facts.consts.references) == 0
"""


def test_facts_read_by_a_rulebook(plugin: GitRepo, upstream: GitRepo, tmp_path: Path) -> None:
    import json

    from policyrun.cli import main

    rulebook = tmp_path / "rb.yaml"
    rulebook.write_text(RULEBOOK)
    assert main(["lint", str(rulebook)]) == 0
    out = tmp_path / "out"
    rc = main(["evaluate", str(rulebook), "--mode", "plan", "--set", f"plugin={plugin.path}",
               "--set", f"upstream={upstream.path}", "--out", str(out)])
    trace = json.loads((out / "trace.json").read_text())
    results = {e["id"]: e["result"] for p in trace["phases"] for e in p.get("evidence", [])}
    assert rc == 0, results
    assert trace["phases"][0]["status"] == "PASS"
    assert len(results) == 7 and set(results.values()) == {"SATISFIED"}


# --- the shared memo ----------------------------------------------------------------------------

def test_memo_computes_once_for_probes_asking_at_the_same_time() -> None:
    import threading

    from policyrun.probes.python.source import memo

    calls: list[int] = []
    release = threading.Event()

    def slow() -> str:
        calls.append(1)
        release.wait(5)
        return "tree"

    data = b"x = 1  # test_memo_computes_once\n"
    results: list[str] = []
    threads = [threading.Thread(target=lambda: results.append(memo("test", data, "m.py", slow))) for _ in range(4)]
    for t in threads:
        t.start()
    while not calls:  # the first asker is computing; the others must wait for it
        threading.Event().wait(0.01)
    threading.Event().wait(0.1)
    release.set()
    for t in threads:
        t.join(5)
    assert results == ["tree"] * 4 and len(calls) == 1
    assert memo("test", data, "other.py", lambda: "another path is another module") == "another path is another module"


def test_memo_recomputes_when_the_first_computation_fails() -> None:
    from policyrun.probes.python.source import memo

    data = b"y = 2  # test_memo_recomputes\n"

    def boom() -> str:
        raise RuntimeError("first try fails")

    with pytest.raises(RuntimeError):
        memo("test", data, "m.py", boom)
    assert memo("test", data, "m.py", lambda: "second try") == "second try"


# --- the parse helper (parsepool) ---------------------------------------------------------------

def _helper_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Force the helper on for the small fixture and count the helpers started."""
    from policyrun.probes.python import parsepool, resolve as pyresolve

    started: list[int] = []
    real = parsepool.SummaryHelper.__init__

    def counting(self: Any, jobs: Any, deadline: float) -> None:
        started.append(len(jobs))
        real(self, jobs, deadline)

    monkeypatch.setattr(parsepool, "MIN_JOBS", 1)
    monkeypatch.setattr(parsepool.SummaryHelper, "__init__", counting)
    # Modules parsed by an earlier resolution in this process are not handed to a helper again.
    monkeypatch.setattr(pyresolve, "_SHARED", pyresolve._BlobCache(8 << 20))
    return started


def _answers_first(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Make resolution wait until the helper has answered everything (or died); the keys it used."""
    from policyrun.probes.python import parsepool

    used: list[str] = []
    real_get = parsepool.SummaryHelper.get

    def get_when_done(self: Any, key: str) -> Any:
        with self.cond:
            while self.alive and len(self.results) < len(self.index):
                self.cond.wait(10)
        got = real_get(self, key)
        if got is not None:
            used.append(key)
        return got

    monkeypatch.setattr(parsepool.SummaryHelper, "get", get_when_done)
    return used


def test_resolution_with_the_parse_helper_equals_resolution_in_process(
        plugin: GitRepo, upstream: GitRepo, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POLICYRUN_PARSE_HELPER", "0")
    alone = resolved(plugin, upstream, rev="v1", compare_rev="v2")
    started = _helper_calls(monkeypatch)
    used = _answers_first(monkeypatch)
    monkeypatch.setenv("POLICYRUN_PARSE_HELPER", "1")
    helped = resolved(plugin, upstream, rev="v1", compare_rev="v2")
    assert started and started[0] > 3  # the helper ran, with the files the imports lead to first
    # ...and resolution read its summaries (a few prefetched submodule candidates go unread)
    assert 5 <= len(used) <= started[0]
    assert helped == alone


def test_a_helper_that_cannot_work_leaves_resolution_in_process(
        plugin: GitRepo, upstream: GitRepo, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POLICYRUN_PARSE_HELPER", "0")
    alone = resolved(plugin, upstream, rev="v1", compare_rev="v2")
    started = _helper_calls(monkeypatch)
    monkeypatch.setenv("POLICYRUN_PARSE_HELPER", "1")
    monkeypatch.setattr("sys.executable", "/bin/false")  # starts, then exits at once without an answer
    assert resolved(plugin, upstream, rev="v1", compare_rev="v2") == alone
    assert started


def test_helper_summaries_carry_parse_errors_and_no_syntax_trees() -> None:
    import io
    import pickle

    from policyrun.probes.python.parseworker import serve

    jobs = [(b"from .b import X\ndef f(a, b=1): pass\n", "up/a.py", "up.a", "up"),
            (b"def broken(:\n", "up/c.py", "up.c", "up")]
    out = io.BytesIO()
    serve(io.BytesIO(pickle.dumps(jobs)), out)
    out.seek(0)
    answers = dict(pickle.load(out) for _ in jobs)
    assert sorted(answers) == [0, 1]
    good, bad = answers[0], answers[1]
    assert good.syntax() is None and good.error is None and good.source == b""  # no tree, no bytes back
    from policyrun.probes.python import source as pysource
    # the helper parses each file once and keeps no tree in its memo
    assert (pysource.content_digest(jobs[0][0]), "up/a.py") not in pysource._MEMO.get("ast", {})
    assert good.bindings["X"].source == "up.b" and good.node(good.bindings["X"]) is None
    assert good.bindings["f"].kind == "function" and good.bindings["f"].line == 2
    assert bad.error is not None and bad.error.file == "up/c.py" and bad.error.line == 1


def test_the_helper_imports_nothing_from_the_inspected_repository(
        plugin: GitRepo, upstream: GitRepo, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The helper runs where policyrun runs: usually inside the plugin checkout. Modules there
    named like the ones it imports (ast, pickle, policyrun) must not be imported."""
    hostile = tmp_path / "hostile"
    marker = tmp_path / "imported"
    for module in ("ast.py", "pickle.py", "policyrun/__init__.py"):
        (hostile / module).parent.mkdir(parents=True, exist_ok=True)
        (hostile / module).write_text(f"open({str(marker)!r}, 'a').write({module!r})\n")
    monkeypatch.setenv("POLICYRUN_PARSE_HELPER", "0")
    alone = resolved(plugin, upstream, rev="v1", compare_rev="v2")
    started = _helper_calls(monkeypatch)
    used = _answers_first(monkeypatch)
    monkeypatch.setenv("POLICYRUN_PARSE_HELPER", "1")
    monkeypatch.chdir(hostile)
    monkeypatch.setenv("PYTHONPATH", str(hostile))
    assert resolved(plugin, upstream, rev="v1", compare_rev="v2") == alone
    assert started and used  # the helper ran to the end, imports and all
    assert not marker.exists()


def test_memo_is_bounded_by_source_bytes_least_recently_used_out(monkeypatch: pytest.MonkeyPatch) -> None:
    from policyrun.probes.python import source as pysource

    monkeypatch.setattr(pysource, "_MEMO", {})
    monkeypatch.setattr(pysource, "_memo_bytes", {})
    monkeypatch.setattr(pysource, "_MEMO_MAX_BYTES", 250)
    calls: list[str] = []

    def source(name: str) -> bytes:
        return f"# {name}\n".encode().ljust(100, b"x")

    def get(name: str) -> str:
        return pysource.memo("test", source(name), f"{name}.py", lambda: calls.append(name) or name)

    assert [get("a"), get("b"), get("a")] == ["a", "b", "a"]  # a is the most recently used now
    get("c")  # 300 bytes: the least recently used (b) goes
    assert pysource._memo_bytes["test"] == 200
    get("a"), get("c")
    get("b")
    assert calls == ["a", "b", "c", "b"]


def test_a_helper_that_never_answers_is_not_waited_for(tmp_path: Path) -> None:
    import threading
    import time

    from policyrun.probes.python import parsepool

    helper = parsepool.SummaryHelper.__new__(parsepool.SummaryHelper)  # no process: answers nothing
    helper.index, helper.results = {"a": 0, "b": 1}, {}
    helper.next, helper.alive, helper.cond = 1, True, threading.Condition()
    helper.deadline = time.monotonic() + 60
    t = time.monotonic()
    assert helper.get("b") is None  # it would be "on" b, but has never answered: b is parsed here
    assert time.monotonic() - t < 30  # not the 60 s deadline: it was not waited for
    assert helper.get("a") is None and helper.get("unknown") is None


# --- the size bound on parsing (issue 19, item 12) -------------------------------------------------
# A 6 MB upstream module took 28 s through these probes. Files over 1 MiB are not parsed: they are
# listed in `skipped`, and what needed them stays unknown (an import through one is unresolved).

def _with_big_module(tmp_path: Path) -> tuple[GitRepo, GitRepo, int]:
    up = init_repo(tmp_path / "bigup")
    up.write("up/__init__.py", "")
    big = "class Thing:\n    pass\n\n\nLIMIT = 3\n" + "".join(f"value_{i} = {i}\n" for i in range(80_000))
    assert len(big) > 1024 * 1024
    up.write("up/big.py", big)
    up.write("up/small.py", "class Small:\n    pass\n")
    up.commit("v1")
    up.git("tag", "v1")
    plugin = init_repo(tmp_path / "bigplug")
    plugin.write("p.py", "from up.big import Thing\nfrom up.small import Small\n")
    plugin.commit("one")
    return up, plugin, len(big.encode())


@pytest.mark.parametrize("rev", ["v1", None])
def test_an_import_through_a_file_too_large_to_parse_is_unresolved_and_the_file_listed(
        tmp_path: Path, rev: str | None) -> None:
    up, plugin, size = _with_big_module(tmp_path)
    v = probe("python.imports", plugin.path, root=str(plugin.path),
              resolve={"path": str(up.path), **({"rev": rev} if rev else {})})
    thing, small = v["imports"]
    assert (thing["target"]["found"], thing["target"]["reason"]) == (False, "parse_error")
    assert small["target"]["found"] and small["target"]["defining_file"] == "up/small.py"
    assert v["unresolved"] == ["p.py:1"]
    assert v["upstream_skipped"] == [{"path": "up/big.py", "reason": "too_large", "size": size, "rev": rev}]
    [error] = v["upstream_parse_errors"]
    assert error["file"] == "up/big.py" and "larger than the 1048576 bytes" in error["message"]
    assert v["skipped"] == []


def test_symbols_and_constants_list_a_file_too_large_to_parse(tmp_path: Path) -> None:
    up, _, size = _with_big_module(tmp_path)
    symbols = probe("python.symbols", up.path, path=str(up.path), rev="v1", symbols=["up.big.Thing", "up.small.Small"])
    assert symbols["not_found"] == ["up.big.Thing"]
    assert symbols["skipped"] == [{"path": "up/big.py", "reason": "too_large", "size": size, "rev": "v1"}]
    constants = probe("python.constants", up.path, root=str(up.path), names=["LIMIT"])
    assert constants["constants"] == [] and constants["skipped"] == [{"path": "up/big.py", "reason": "too_large",
                                                                       "size": size}]


def test_module_summaries_hold_no_syntax_tree_and_give_nodes_again(monkeypatch: pytest.MonkeyPatch) -> None:
    # Resolution caches keep hundreds of modules: a summary holding its tree (about 25 times the
    # source) kept 133 MB of trees alive through the real planning audit. Nodes come back on demand.
    import ast

    from policyrun.probes.python import source as pysource
    from policyrun.probes.python.resolve import ModuleInfo, module_info

    source = b"import os\n\nclass Engine:\n    def step(self, batch):\n        return batch\n\nif os:\n    X = 1\n"
    parsed = pysource.parse_source(source, "up/core.py")
    assert isinstance(parsed, ast.Module)
    info = module_info(parsed, "up/core.py", "up.core", "up", source)

    def holds_ast(value: object, depth: int = 0) -> bool:
        if isinstance(value, ast.AST):
            return True
        if depth > 3:
            return False
        if isinstance(value, dict):
            return any(holds_ast(v, depth + 1) for v in value.values())
        if isinstance(value, (list, tuple)):
            return any(holds_ast(v, depth + 1) for v in value)
        if hasattr(value, "__dataclass_fields__"):
            return any(holds_ast(v, depth + 1) for v in vars(value).values())
        return False

    assert isinstance(info, ModuleInfo) and not holds_ast(info)
    monkeypatch.setattr(pysource, "_MEMO", {})  # the tree is gone from the memo too: parsed again
    engine, x = info.node(info.bindings["Engine"]), info.node(info.bindings["X"])
    assert isinstance(engine, ast.ClassDef) and engine.name == "Engine" and engine.lineno == 3
    assert isinstance(x, ast.Assign) and x.lineno == 8  # inside the module-level `if`
