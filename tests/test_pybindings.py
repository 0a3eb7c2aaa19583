"""Version-compatibility fallbacks in python.imports, and python.bindings, on a fixture upstream with
two tagged releases and a plugin that binds to it every way: a try/except ImportError chain, a
version-guarded import, a subclass with overrides, calls, a patch."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import pytest

from policyrun.probes.base import ProbeError
from policyrun.probes.registry import get
from tests.gitfixtures import GitRepo, init_repo, run_probe, snapshot

UP_V1 = {
    "up/__init__.py": "from up.core import Engine\n",
    "up/core.py": '''\
class Base:
    def __init__(self, x: int) -> None:
        self.x = x

    def step(self, a):
        return a


class Engine(Base):
    def run(self, n: int) -> int:
        return n


def make(n):
    return Engine(n)
''',
    "up/old_place.py": "def helper():\n    return 1\n",
    "up/settings.py": "LIMIT = 1\n",
}


def _v2(files: dict[str, str]) -> dict[str, str]:
    out = dict(files)
    # Base.__init__ gains a parameter; step's body changes; helper moves to new_place
    out["up/core.py"] = files["up/core.py"].replace("def __init__(self, x: int) -> None:",
                                                    "def __init__(self, x: int, y: int = 0) -> None:") \
        .replace("        return a\n", "        return a + 1\n")
    del out["up/old_place.py"]
    out["up/new_place.py"] = files["up/old_place.py"]
    return out


PLUGIN = '''\
import sys

from up import Engine
from up.core import make
import up.settings as settings

try:
    from up.new_place import helper
except ImportError:
    try:
        from up.old_place import helper
    except (ModuleNotFoundError, AttributeError):
        from up.gone_place import helper

if sys.version_info >= (3, 12):
    from up.old_place import helper as guarded
else:
    from up.core import make as guarded


class Mine(Engine):
    def __init__(self, x):
        super().__init__(x)

    def step(self, a):
        return make(a)

    def own(self):
        return 1


settings.LIMIT = 2
setattr(Engine, "extra", 1)


class Sub(Mine):
    def run(self, n):
        return n
'''


@pytest.fixture(scope="module")
def upstream(tmp_path_factory: pytest.TempPathFactory) -> GitRepo:
    repo = init_repo(tmp_path_factory.mktemp("bind") / "up")
    for rel, text in UP_V1.items():
        repo.write(rel, text)
    repo.commit("v1")
    repo.git("tag", "v1")
    repo.git("rm", "-q", "up/old_place.py")
    for rel, text in _v2(UP_V1).items():
        repo.write(rel, text)
    repo.commit("v2")
    repo.git("tag", "v2")
    return repo


@pytest.fixture
def plugin(tmp_path: Path) -> GitRepo:
    repo = init_repo(tmp_path / "plugin")
    repo.write("plug/__init__.py", "")
    repo.write("plug/main.py", PLUGIN)
    repo.commit("init")
    return repo


def probe(kind: str, base: Path, **params: Any) -> Any:
    value = run_probe(kind, params, base).value
    p = get(kind)
    assert p is not None
    jsonschema.Draft202012Validator(p.fact_schema).validate(value)
    return value


def imports(plugin: GitRepo, upstream: GitRepo, **extra: Any) -> Any:
    return probe("python.imports", plugin.path, root=str(plugin.path), packages=["up"],
                 resolve={"path": str(upstream.path), "rev": "v1", "compare_rev": "v2"}, **extra)


# --- fallbacks in python.imports -------------------------------------------------------------------

def test_each_import_records_its_fallback_group_and_branch(plugin: GitRepo, upstream: GitRepo) -> None:
    v = imports(plugin, upstream)
    by_line = {r["line"]: r["fallback"] for r in v["imports"]}
    assert by_line[3] is None and by_line[5] is None
    # the nested try chain is one group; the handler holding only the next try is no branch
    assert by_line[8] == {"group": "plug/main.py:7", "branch": 0, "guard": "try"}
    assert by_line[11] == {"group": "plug/main.py:7", "branch": 1, "guard": "try"}
    assert by_line[13] == {"group": "plug/main.py:7", "branch": 2, "guard": "try"}
    assert by_line[16] == {"group": "plug/main.py:15", "branch": 0, "guard": "version"}
    assert by_line[18] == {"group": "plug/main.py:15", "branch": 1, "guard": "version"}


def test_branches_resolve_per_release_and_a_branch_serving_none_is_removable(plugin: GitRepo,
                                                                             upstream: GitRepo) -> None:
    v = imports(plugin, upstream)
    groups = {g["group"]: g for g in v["fallbacks"]}
    chain = groups["plug/main.py:7"]
    assert [(b["branch"], b["resolves_at_rev"], b["resolves_at_compare"], b["removable"]) for b in chain["branches"]] \
        == [(0, False, True, False), (1, True, False, False), (2, False, False, True)]
    assert chain["satisfied_at_rev"] is True and chain["satisfied_at_compare"] is True
    assert v["removable"] == [{"group": "plug/main.py:7", "branch": 2, "sites": ["plug/main.py:13"]}]
    guarded = groups["plug/main.py:15"]
    assert [(b["resolves_at_rev"], b["resolves_at_compare"]) for b in guarded["branches"]] == [(True, False),
                                                                                           (True, True)]
    # a fallback working as written is neither unresolved nor missing at the target
    assert v["unresolved"] == []
    assert v["missing_at_compare"] == []


def test_a_fallback_group_no_branch_satisfies_stays_unresolved(plugin: GitRepo, upstream: GitRepo) -> None:
    plugin.write("plug/other.py", "try:\n    from up.nowhere import a\nexcept ImportError:\n"
                                  "    from up.gone_place import a\n")
    plugin.commit("other")
    v = imports(plugin, upstream)
    assert v["unresolved"] == ["plug/other.py:2", "plug/other.py:4"]
    group = next(g for g in v["fallbacks"] if g["group"] == "plug/other.py:1")
    assert group["satisfied_at_rev"] is False
    assert [r["sites"] for r in v["removable"] if r["group"] == "plug/other.py:1"] == [["plug/other.py:2"],
                                                                                       ["plug/other.py:4"]]


def test_a_try_not_catching_import_errors_is_no_fallback(plugin: GitRepo, upstream: GitRepo) -> None:
    plugin.write("plug/other.py", "try:\n    from up.gone_place import a\nexcept ValueError:\n    pass\n"
                                  "if DEBUG > 1:\n    from up.core import make\n")
    plugin.commit("other")
    v = imports(plugin, upstream)
    assert [r["fallback"] for r in v["imports"] if r["file"] == "plug/other.py"] == [None, None]
    assert "plug/other.py:2" in v["unresolved"]


def test_version_pattern_names_the_plugins_own_guard(plugin: GitRepo, upstream: GitRepo) -> None:
    plugin.write("plug/other.py", "if UP_RELEASE >= (2, 0):\n    from up.new_place import helper\n"
                                  "else:\n    from up.old_place import helper\n")
    plugin.commit("other")
    default = imports(plugin, upstream)
    assert "plug/other.py:1" not in [g["group"] for g in default["fallbacks"]]
    custom = imports(plugin, upstream, version_pattern="RELEASE")
    assert "plug/other.py:1" in [g["group"] for g in custom["fallbacks"]]
    with pytest.raises(ProbeError, match="version_pattern is not a regular expression"):
        run_probe("python.imports", {"root": str(plugin.path), "version_pattern": "("}, plugin.path)


def test_fallbacks_are_listed_without_resolve(plugin: GitRepo) -> None:
    v = probe("python.imports", plugin.path, root=str(plugin.path))
    chain = next(g for g in v["fallbacks"] if g["group"] == "plug/main.py:7")
    assert [b["sites"] for b in chain["branches"]] == [["plug/main.py:8"], ["plug/main.py:11"], ["plug/main.py:13"]]
    assert chain["satisfied_at_rev"] is None and v["removable"] == []


# --- python.bindings ---------------------------------------------------------------------------------

def bindings(plugin: GitRepo, upstream: GitRepo, **extra: Any) -> Any:
    return probe("python.bindings", plugin.path, root=str(plugin.path), packages=["up"],
                 resolve={"path": str(upstream.path), "rev": "v1", "compare_rev": "v2"}, **extra)


def test_every_way_of_binding_is_a_row_with_the_canonical_upstream_name(plugin: GitRepo, upstream: GitRepo) -> None:
    before = snapshot(plugin)
    v = bindings(plugin, upstream)
    rows = {(b["line"], b["kind"], b["symbol"], b["plugin_symbol"]) for b in v["bindings"]}
    assert {
        (3, "import", "up.core.Engine", None),  # re-exported by up/__init__.py, named where defined
        (21, "subclass", "up.core.Engine", "Mine"),
        (21, "subclass", "up.core.Base.__init__", "Mine"),  # the __init__ a subclass depends on, inherited
        (22, "override", "up.core.Base.__init__", "Mine.__init__"),
        (23, "call", "up.core.Base.__init__", "Mine.__init__"),  # super().__init__(x)
        (25, "override", "up.core.Base.step", "Mine.step"),
        (26, "call", "up.core.make", None),
        (32, "patch", "up.settings.LIMIT", None),
        (33, "patch", "up.core.Engine.extra", None),
    } <= rows
    assert (37, "override", "up.core.Engine.run", "Sub.run") in rows  # through the plugin's own Mine
    assert not [r for r in rows if r[3] == "Sub" or r[3] == "Mine.own"]  # a method upstream does not define overrides nothing
    row = next(b for b in v["bindings"] if b["kind"] == "override" and b["line"] == 22)
    assert row == {"site": "plug/main.py:22", "file": "plug/main.py", "line": 22, "kind": "override",
                   "symbol": "up.core.Base.__init__", "module": "up.core", "qualname": "Base.__init__",
                   "plugin_symbol": "Mine.__init__"}
    assert snapshot(plugin) == before


def test_bound_symbols_carry_signature_and_body_at_both_releases(plugin: GitRepo, upstream: GitRepo) -> None:
    v = bindings(plugin, upstream)
    init = v["by_symbol"]["up.core.Base.__init__"]
    assert init["signature"] == "(self, x: int) -> None"
    assert init["compare"]["signature"] == "(self, x: int, y: int=0) -> None"
    assert init["kinds"] == ["subclass", "override", "call"]
    assert v["signature_changed"] == ["up.core.Base.__init__"]
    assert "up.core.Base.step" in v["body_changed"] and "up.core.Base.__init__" in v["body_changed"]
    # the old home of a moved function is gone at the target; its new home, absent at the current
    # release, binds nothing there (python.imports' fallback groups say which branch serves which)
    assert "up.old_place.helper" in v["removed"] and "up.new_place.helper" not in v["by_symbol"]
    assert len({s["name"] for s in v["symbols"]}) == len(v["symbols"])  # one row per symbol


def test_symbols_beyond_the_bound_are_recorded_as_truncated(plugin: GitRepo, upstream: GitRepo) -> None:
    v = bindings(plugin, upstream, max_symbols=2)
    assert len(v["symbols"]) == 2
    assert v["truncated"]["limit"] == 2 and v["truncated"]["symbols"] > 2
    assert v["truncated"]["dropped"][0] not in v["by_symbol"]
    assert bindings(plugin, upstream)["truncated"] is None


def test_bindings_need_a_target_release(plugin: GitRepo, upstream: GitRepo) -> None:
    with pytest.raises(Exception, match="compare_rev"):
        run_probe("python.bindings", {"root": str(plugin.path), "resolve": {"path": str(upstream.path)}},
                  plugin.path)


def test_a_cycle_in_upstream_bases_ends_and_binds_what_exists(tmp_path: Path) -> None:
    up = init_repo(tmp_path / "up")
    up.write("up/__init__.py", "")
    up.write("up/loop.py", "class A(B):\n    def a(self):\n        pass\n\n\nclass B(A):\n    pass\n")
    up.commit("v1")
    up.git("tag", "v1")
    up.write("up/loop.py", "class A(B):\n    def a(self, x):\n        pass\n\n\nclass B(A):\n    pass\n")
    up.commit("v2")
    plugin = init_repo(tmp_path / "plugin")
    plugin.write("plug.py", "from up.loop import B\n\n\nclass Mine(B):\n    def a(self):\n        pass\n\n"
                            "    def nowhere(self):\n        pass\n")
    plugin.commit("init")
    v = probe("python.bindings", plugin.path, root=str(plugin.path),
              resolve={"path": str(up.path), "rev": "v1", "compare_rev": "HEAD"})
    assert [(b["kind"], b["symbol"]) for b in v["bindings"] if b["kind"] == "override"] == [("override", "up.loop.A.a")]
    assert v["signature_changed"] == ["up.loop.A.a"]
