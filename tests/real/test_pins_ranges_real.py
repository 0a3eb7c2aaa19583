"""Version identity on two real plugins: the bart-plugin pins vLLM by a range (`vllm>=0.24.0` in
pyproject.toml and in setup.py, no lock) and its README states the minimum it supports; the
afd-plugin pins `vllm==0.26.0` in an optional extra and resolves it in uv.lock. The expected lines
are found here by a plain scan of the files, not from policyrun's output."""

from __future__ import annotations

from pathlib import Path
from typing import Any


from policyrun.language.functions.versions import version_unique
from policyrun.probes.base import ProbeContext
from policyrun.probes.repo.claims import ClaimsProbe
from policyrun.probes.repo.pins import PackagePinsProbe
from tests.claimconventions import flagship_vars, vllm_claims
from tests.real.conftest import git



def _pins(root: Path) -> dict[str, Any]:
    return PackagePinsProbe().run({"package": "vllm", "root": str(root)},
                                  ProbeContext(base_dir=root, timeout_s=60)).value


def _claims(root: Path) -> dict[str, Any]:
    flagship = flagship_vars()
    params = {"root": str(root), **vllm_claims(), "include": flagship["doc_globs"],
              "exclude": flagship["historical_globs"] + flagship["vendored_globs"]}
    return ClaimsProbe().run(params, ProbeContext(base_dir=root, timeout_s=60)).value


def _lines(repo: Path, rel: str, needle: str) -> list[int]:
    return [n for n, line in enumerate((repo / rel).read_text().split("\n"), 1) if needle in line]


def test_bart_plugin_pins_vllm_by_a_range_in_pyproject_and_setup_py(bart_repo: Path) -> None:
    v = _pins(bart_repo)
    [py_line] = _lines(bart_repo, "pyproject.toml", '"vllm>=0.24.0"')
    [setup_line] = _lines(bart_repo, "setup.py", '"vllm>=0.24.0"')
    got = [(s["file"], s["line"], s["section"], s["raw"], s["specifier_set"], s["exact"], s["kind"])
           for s in v["sources"]]
    assert got == [
        ("pyproject.toml", py_line, "project.dependencies", "vllm>=0.24.0", ">=0.24.0", None, "range"),
        ("setup.py", setup_line, "setup.install_requires", "vllm>=0.24.0", ">=0.24.0", None, "range"),
    ]
    tracked = git(bart_repo, "ls-files").split()
    assert not [f for f in tracked if f.endswith(".lock")]  # no lock: nothing resolves the current version
    assert (v["distinct"], v["pinned"], v["locked"], v["unreadable"]) == ([], [], [], [])
    assert version_unique(v["pinned"] + v["locked"]) is None


def test_bart_plugin_readme_minimum_is_a_range_claim(bart_repo: Path) -> None:
    v = _claims(bart_repo)
    [line] = _lines(bart_repo, "README.md", "requires vLLM 0.24.0 or newer")
    [claim] = [c for c in v["claims"] if c["site"] == f"README.md:{line}"]
    assert (claim["version"], claim["class"], claim["kind"], claim["specifier"]) == ("0.24.0", "support", "range",
                                                                                     ">=0.24.0")
    # No sentence of the README names the version in use: nothing is an exact claim of 0.24.0.
    assert [c["site"] for c in v["claims"] if c["kind"] == "exact"] == []


def test_afd_plugin_exact_pin_and_lock_both_resolve_0_26_0(afd_repo: Path) -> None:
    v = _pins(afd_repo)
    [extra_line] = _lines(afd_repo, "pyproject.toml", '"vllm==0.26.0"')
    [pin] = [s for s in v["sources"] if s["file"] == "pyproject.toml"]
    assert (pin["line"], pin["section"], pin["specifier"], pin["version"], pin["exact"], pin["kind"]) == (
        extra_line, "project.optional-dependencies.vllm", "==0.26.0", "0.26.0", "0.26.0", "exact")
    [lock] = [s for s in v["sources"] if s["kind"] == "lock"]
    [lock_line] = [n for n in _lines(afd_repo, "uv.lock", 'name = "vllm"')
                   if (afd_repo / "uv.lock").read_text().split("\n")[n].strip() == 'version = "0.26.0"']
    assert (lock["file"], lock["line"], lock["version"], lock["specifier_set"]) == ("uv.lock", lock_line, "0.26.0",
                                                                                   "==0.26.0")
    assert (v["distinct"], v["pinned"], v["locked"], v["unreadable"]) == (["0.26.0"], ["0.26.0"], ["0.26.0"], [])
    assert version_unique(v["pinned"] + v["locked"]) == "0.26.0"
    assert "setup.py" in v["files"]  # read (it builds extensions only) and constrains nothing


def test_afd_plugin_claims_are_all_exact(afd_repo: Path) -> None:
    # The afd-plugin's docs name the version in use; none bounds it.
    v = _claims(afd_repo)
    assert v["claims"] and {(c["kind"], c["specifier"]) for c in v["mentions"]} == {("exact", None)}
