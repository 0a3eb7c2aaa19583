"""python.patches on small plugin repositories: every form a plugin replaces upstream behaviour in
(assignment to a module or class attribute, setattr, method replacement, wrapper, override), whether
the plugin's markers document it, the replacement's parameter shape and code hash, the upstream
names it uses; and python.symbols' shape and body hash of the upstream side."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import pytest

from policyrun.probes.registry import get
from tests.gitfixtures import GitRepo, init_repo, run_probe, snapshot

UPSTREAM = {
    "up/__init__.py": "",
    "up/core.py": (
        "class Engine:\n"
        "    def step(self, batch, *, eager=False):\n"
        "        '''Run one step.'''\n"
        "        return batch  # the body\n\n"
        "    def shutdown(self):\n"
        "        pass\n\n\n"
        "def launch(config, executor, log_stats, num_servers=1):\n"
        "    return config\n\n\n"
        "Gone = 1\n"),
}

FIELDS = ("# Patch reason: upstream does not know AFD.\n"
          "# Patch functionality: skip the scheduler for FFN ranks.\n")

PLUGIN = {
    "plug/__init__.py": "",
    # assign (module attribute) and method_replace (class attribute through a module), marked
    "plug/marked.py": (
        "import up.core as core_module\n\n\n"
        + FIELDS +
        "def launch(config, executor, log_stats, num_servers=1):\n"
        "    # ### PATCH START: launch\n"
        "    return config\n"
        "    # ### PATCH END: launch\n\n\n"
        + FIELDS +
        "def step(self, batch, *, eager=False):\n"
        "    # ### PATCH START: step\n"
        "    return batch\n"
        "    # ### PATCH END: step\n\n\n"
        "core_module.launch = launch\n"
        "core_module.Engine.step = step\n"),
    # setattr with a literal and with a module constant; a stash of the original is not a patch
    "plug/unmarked.py": (
        "from up.core import Engine\n"
        "from up import core\n\n"
        "_ORIGINAL = '_plug_original_shutdown'\n\n\n"
        "def shutdown(self):\n"
        "    return None\n\n\n"
        "setattr(core, _ORIGINAL, Engine.shutdown)\n"
        "setattr(Engine, 'shutdown', shutdown)\n"
        "setattr(core, 'launch', lambda *args, **kwargs: None)\n"),
    # a wrapper that calls the original, installed and later restored
    "plug/wrapper.py": (
        "import functools\n"
        "from up import core\n\n\n"
        "def install():\n"
        "    original = core.launch\n\n"
        "    @functools.wraps(original)\n"
        "    def launch_with_afd(*args, **kwargs):\n"
        "        return original(*args, **kwargs)\n\n"
        "    core.launch = launch_with_afd\n\n\n"
        "def uninstall(saved):\n"
        "    core.launch = core.launch\n"),
    # an override of an upstream method on a plugin subclass, and the upstream names it reads
    "plug/runner.py": (
        "from up.core import Engine\n"
        "import up.core\n\n\n"
        "class AFDEngine(Engine):\n"
        "    def step(self, batch):\n"
        "        return up.core.Gone\n\n"
        "    def extra(self):\n"
        "        return getattr(up.core, 'launch')\n"),
    # no upstream name at all: never parsed for patches
    "plug/local.py": "class Thing:\n    pass\n\n\nThing.x = 1\n",
}


def probe(kind: str, base: Path, **params: Any) -> Any:
    value = run_probe(kind, params, base).value
    p = get(kind)
    assert p is not None
    jsonschema.Draft202012Validator(p.fact_schema).validate(value)
    return value


@pytest.fixture()
def plugin(tmp_path: Path) -> GitRepo:
    repo = init_repo(tmp_path / "plugin")
    for rel, text in PLUGIN.items():
        repo.write(rel, text)
    repo.commit("plugin")
    return repo


def by_site(value: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {p["site"]: p for p in value["patches"]}


def test_every_form_is_found_with_its_target(plugin: GitRepo) -> None:
    got = by_site(probe("python.patches", plugin.path, root=".", packages=["up"]))
    assert {site: (p["target"], p["form"]) for site, p in got.items()} == {
        "plug/marked.py:20": ("up.core.launch", "assign"),
        "plug/marked.py:21": ("up.core.Engine.step", "method_replace"),
        "plug/unmarked.py:12": ("up.core.Engine.shutdown", "setattr"),
        "plug/unmarked.py:13": ("up.core.launch", "setattr"),
        "plug/wrapper.py:12": ("up.core.launch", "wrap"),
    }  # the stash (setattr of the original) and the restore (core.launch = core.launch) are not patches


def test_marked_only_with_a_region_and_the_required_fields(plugin: GitRepo) -> None:
    value = probe("python.patches", plugin.path, root=".", packages=["up"])
    got = by_site(value)
    assert got["plug/marked.py:20"]["marked"] and got["plug/marked.py:20"]["missing"] == []
    assert got["plug/marked.py:21"]["marked"]
    assert got["plug/unmarked.py:12"]["missing"] == ["markers"]
    assert [p["site"] for p in value["unmarked"]] == [
        "plug/unmarked.py:12", "plug/unmarked.py:13", "plug/wrapper.py:12"]
    # a region whose comment block lacks a required field is not marked, naming the field
    plugin.write("plug/marked.py", PLUGIN["plug/marked.py"].replace(
        "# Patch functionality: skip the scheduler for FFN ranks.\n", "", 1))
    again = by_site(probe("python.patches", plugin.path, root=".", packages=["up"]))
    assert again["plug/marked.py:19"]["missing"] == ["functionality"]
    assert not again["plug/marked.py:19"]["marked"]


def test_replacements_carry_shape_and_code_hash(plugin: GitRepo) -> None:
    got = by_site(probe("python.patches", plugin.path, root=".", packages=["up"]))
    launch = got["plug/marked.py:20"]["replacement"]
    assert launch["shape"] == "(config, executor, log_stats, num_servers=1)"
    assert launch["qualname"] == "launch" and not launch["forwards"]
    step = got["plug/marked.py:21"]["replacement"]
    assert step["shape"] == "(self, batch, *, eager=False)"
    wrapper = got["plug/wrapper.py:12"]["replacement"]
    assert wrapper["qualname"] == "install.<locals>.launch_with_afd" and wrapper["forwards"]
    lam = got["plug/unmarked.py:13"]["replacement"]
    assert lam["shape"] == "(*args, **kwargs)" and lam["forwards"] and lam["name"] is None


def test_overrides_and_uses(plugin: GitRepo) -> None:
    value = probe("python.patches", plugin.path, root=".", packages=["up"])
    assert [(o["site"], o["target"]) for o in value["overrides"]] == [
        ("plug/runner.py:6", "up.core.Engine.step"), ("plug/runner.py:9", "up.core.Engine.extra")]
    uses = {(u["site"], u["name"], u["form"]) for u in value["uses"]}
    assert ("plug/runner.py:7", "up.core.Gone", "attribute") in uses
    assert ("plug/runner.py:10", "up.core.launch", "getattr") in uses
    assert ("plug/runner.py:1", "up.core.Engine", "import") in uses
    assert ("plug/runner.py:2", "up.core", "import") in uses
    assert "up.core.Gone" in value["used_names"]
    assert value["targets"] == sorted({"up.core.launch", "up.core.Engine.step", "up.core.Engine.shutdown",
                                       "up.core.Engine.extra"})
    assert [e["kind"] for e in value["by_target"]["up.core.Engine.step"]] == ["patch", "override"]
    assert not any(p["path"] == "plug/local.py" for p in value["patches"])


def test_code_hash_ignores_docstrings_and_comments_not_code(plugin: GitRepo) -> None:
    base = plugin.sha("HEAD")
    before = by_site(probe("python.patches", plugin.path, root=".", packages=["up"]))
    plugin.write("plug/marked.py", PLUGIN["plug/marked.py"].replace(
        "    return config\n", '    """Documented now."""\n    return config  # a comment\n', 1))
    plugin.commit("docs only")
    docs = by_site(probe("python.patches", plugin.path, root=".", packages=["up"]))
    old_hash = before["plug/marked.py:20"]["replacement"]["code_hash"]
    assert docs["plug/marked.py:21"]["replacement"]["code_hash"] == old_hash
    plugin.write("plug/marked.py", PLUGIN["plug/marked.py"].replace("    return config\n", "    return executor\n", 1))
    code = by_site(probe("python.patches", plugin.path, root=".", packages=["up"]))
    assert code["plug/marked.py:20"]["replacement"]["code_hash"] != old_hash
    # the revision is read from git objects, not the working tree
    at_base = by_site(probe("python.patches", plugin.path, root=".", packages=["up"], rev=base))
    assert at_base == before


def test_read_only(plugin: GitRepo) -> None:
    before = snapshot(plugin)
    probe("python.patches", plugin.path, root=".", packages=["up"], rev="HEAD")
    probe("python.patches", plugin.path, root=".", packages=["up"])
    assert snapshot(plugin) == before


def test_upstream_shape_and_body_hash(tmp_path: Path) -> None:
    up = init_repo(tmp_path / "up")
    for rel, text in UPSTREAM.items():
        up.write(rel, text)
    up.commit("v1")
    up.git("tag", "v1")
    # docstring and comment changes only in step; a default and a body change in launch; Gone removed
    up.write("up/core.py", UPSTREAM["up/core.py"]
             .replace("'''Run one step.'''", "'''Run exactly one step.'''").replace("  # the body", "")
             .replace("num_servers=1):\n    return config", "num_servers=2):\n    return config")
             .replace("\n\nGone = 1\n", "\n"))
    up.commit("v2")
    up.git("tag", "v2")
    value = probe("python.symbols", up.path, path=".", rev="v1", compare_rev="v2",
                  symbols=["up.core.Engine.step", "up.core.launch", "up.core.Gone"])
    rows = value["by_name"]
    step, launch = rows["up.core.Engine.step"], rows["up.core.launch"]
    assert step["shape"] == "(self, batch, *, eager=False)" and step["body_changed"] is False
    assert launch["shape"] == "(config, executor, log_stats, num_servers=1)"
    assert launch["compare"]["shape"] == "(config, executor, log_stats, num_servers=2)"
    assert launch["body_changed"] is True and launch["body_hash"] != launch["compare"]["body_hash"]
    assert value["removed"] == ["up.core.Gone"]
    assert rows["up.core.Gone"]["body_hash"] is None  # an assignment has no body


def test_fact_schema_types_every_field() -> None:
    p = get("python.patches")
    assert p is not None and p.side_effects({}) == frozenset()
    from tests.test_pysource_probes import _untyped
    assert _untyped(p.fact_schema, "facts") == []
    jsonschema.Draft202012Validator.check_schema(p.params_schema)


def test_no_syntax_tree_outlives_the_probe_with_the_cyclic_collector_off(plugin: GitRepo,
                                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    # The CLI turns the cyclic collector off, so a reference cycle is never freed: a recursive
    # closure in the file walk once kept every tree the probe walked alive to the end of the run.
    import ast
    import gc

    from policyrun.probes.python import source as pysource

    monkeypatch.setattr(pysource, "AST_MEMO_BYTES", 1)  # the parse memo keeps one tree at most
    for rel in PLUGIN:
        if rel.endswith(".py") and PLUGIN[rel]:
            pysource.memo("ast", b"# evict\n" + rel.encode(), rel, lambda: None)  # push fixture trees out

    def plugin_defs() -> int:
        return sum(1 for o in gc.get_objects() if isinstance(o, ast.FunctionDef) and o.name == "launch_with_afd")

    was = gc.isenabled()
    gc.disable()
    try:
        before = plugin_defs()
        value = probe("python.patches", plugin.path, root=".", packages=["up"])
        pysource.memo("ast", b"# evict again\n", "x.py", lambda: None)
        after = plugin_defs()
    finally:
        if was:
            gc.enable()
    assert value["files_scanned"] == 6
    assert after == before  # wrapper.py's tree (the only one defining launch_with_afd) is gone
