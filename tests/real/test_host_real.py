"""Host probes on the real corpus: `path` describes and lists the real afd-plugin checkout as git
and os.lstat see it, `command` runs git there with its output kept as head + tail of exactly what
git prints, and `python.modules` answers for the real plugin's top-level imports what an
independent isolated interpreter answers."""

from __future__ import annotations

import ast
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from policyrun.probes.base import ProbeContext, ProbeError
from policyrun.probes.host.command import CommandProbe
from policyrun.probes.host.path import PathProbe
from policyrun.probes.python.modules import PythonModulesProbe
from tests.real.conftest import git


def _run(probe: Any, base: Path, params: dict[str, Any], timeout: float = 60) -> Any:
    return probe.run(params, ProbeContext(base_dir=base, timeout_s=timeout)).value


def _tracked(repo: Path) -> list[str]:
    return [p for p in git(repo, "ls-files", "-z").split("\0") if p]


def test_path_describes_the_real_checkout(afd_repo: Path) -> None:
    stages = {rec.split("\t", 1)[1]: rec.split()[0] for rec in git(afd_repo, "ls-files", "-s", "-z").split("\0") if rec}
    files = ["pyproject.toml", "uv.lock", *sorted(p for p in stages if p.endswith(".py"))[:20]]
    v = _run(PathProbe(), afd_repo, {"paths": files, "root": "."})
    for rel in files:
        entry = v["paths"][rel]
        size = int(git(afd_repo, "cat-file", "-s", f"HEAD:{rel}"))  # no filters in this repository
        assert (entry["exists"], entry["type"], entry["size"]) == (True, "file", size), rel
        assert bool(int(entry["mode"], 8) & stat.S_IXUSR) == (stages[rel] == "100755"), rel
        assert entry["mode"] == f"{stat.S_IMODE(os.lstat(afd_repo / rel).st_mode):04o}"
    assert v["missing"] == [] and v["root"] == str(afd_repo.resolve())


def test_path_lists_the_real_package(afd_repo: Path) -> None:
    expected = sorted(p[len("afd_plugin/"):] for p in _tracked(afd_repo)
                      if p.startswith("afd_plugin/") and p.endswith(".py"))
    assert len(expected) > 20
    v = _run(PathProbe(), afd_repo, {"paths": ["afd_plugin"], "list": ["**/*.py"], "max_entries": 100_000})
    assert v["paths"]["afd_plugin"]["entries"] == expected and v["paths"]["afd_plugin"]["truncated"] is False
    top = sorted({p.split("/")[1] for p in _tracked(afd_repo) if p.startswith("afd_plugin/")})
    v = _run(PathProbe(), afd_repo, {"paths": ["afd_plugin"], "list": ["*"]})
    assert v["paths"]["afd_plugin"]["entries"] == top  # one level only


def test_command_runs_git_in_the_real_checkout(afd_repo: Path) -> None:
    head = git(afd_repo, "rev-parse", "HEAD")
    v = _run(CommandProbe(), afd_repo, {"argv": ["git", "rev-parse", "HEAD"], "cwd": "."})
    assert (v["ok"], v["stdout"]["head"], v["stdout"]["truncated"]) == (True, head, False)

    log = git(afd_repo, "log", "--format=%H %s").encode()
    v = _run(CommandProbe(), afd_repo, {"argv": ["git", "log", "--format=%H %s"], "cwd": "."})
    assert len(log) > 8192 and v["stdout"]["bytes"] == len(log) and v["stdout"]["truncated"]
    assert v["stdout"]["head"].encode() == log[:4096].decode("utf-8", "ignore").encode()
    assert log.endswith(v["stdout"]["tail"].encode()) and len(v["stdout"]["tail"].encode()) > 4090
    # The default working directory is empty and not a repository: git says so, as a fact when
    # ok_exit_codes is listed, and as the error of a failed fact (fail closed) when it is not.
    v = _run(CommandProbe(), afd_repo, {"argv": ["git", "rev-parse", "HEAD"], "ok_exit_codes": [0]})
    assert v["ok"] is False and v["exit_code"] == 128 and "not a git repository" in v["stderr"]["head"]
    with pytest.raises(ProbeError) as info:
        _run(CommandProbe(), afd_repo, {"argv": ["git", "rev-parse", "HEAD"]})
    assert info.value.code == "command.exit_status" and "exited 128" in info.value.message
    assert "not a git repository" in info.value.message


def _top_level_imports(repo: Path) -> list[str]:
    names: set[str] = set()
    for rel in _tracked(repo):
        if rel.startswith("afd_plugin/") and rel.endswith(".py"):
            tree = ast.parse((repo / rel).read_bytes())
            for node in tree.body:  # module level only: what importing the file imports
                if isinstance(node, ast.Import):
                    names |= {a.name.split(".")[0] for a in node.names}
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names.add(node.module.split(".")[0])
    return sorted(names)


def test_modules_the_real_plugin_imports(afd_repo: Path, tmp_path: Path) -> None:
    names = _top_level_imports(afd_repo)
    assert {"afd_plugin", "torch", "vllm"} <= set(names)
    v = _run(PythonModulesProbe(), tmp_path, {"modules": names}, timeout=120)
    for name in names:
        # Ground truth: an isolated interpreter of our own, one import each, from an empty directory.
        alone = subprocess.run([sys.executable, "-I", "-c", f"import {name}"], cwd=tmp_path, capture_output=True,
                               env={"PATH": os.environ.get("PATH", ""), "CUDA_VISIBLE_DEVICES": ""}, timeout=60)
        assert v["modules"][name]["importable"] == (alone.returncode == 0), name
    assert set(v["missing"]) >= {"afd_plugin"}  # the checkout is not installed in this interpreter
