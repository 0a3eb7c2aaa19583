"""`tests.inventory`: the test modules a revision holds, by pytest's rules and the repository's
own configuration, compared here with what pytest itself collects."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gitfixtures import init_repo, run_probe, snapshot
from policyrun.probes import registry
from policyrun.probes.base import ProbeError
from policyrun.probes.repo.testinventory import TestInventoryProbe

NPU_MODULE = '''"""NPU connector tests."""
import sys

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_npu")
try:
    from vllm_ascend.ops import thing
except ImportError:
    thing = None


def test_x():
    import flashinfer  # a test's own import: not a module requirement
    assert pytest.importorskip("numpy")
'''


def _inventory(root: Path, **params: Any) -> dict[str, Any]:
    value: dict[str, Any] = run_probe("tests.inventory", {"root": str(root), **params}, root).value
    return value


def _modules(value: dict[str, Any]) -> list[str]:
    return [m["path"] for m in value["modules"]]


def test_registered() -> None:
    assert isinstance(registry.get("tests.inventory"), TestInventoryProbe)


def test_default_rules_without_configuration(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "r")
    for path in ["tests/unit/test_a.py", "tests/unit/sub/b_test.py", "tests/unit/helpers.py", "tests/unit/conftest.py",
                 "tests/unit/__init__.py", "tests/e2e/test_gpu.py", "tests/unit/build/test_generated.py",
                 "tests/unit/.hidden/test_h.py", "src/test_not_under_root.py"]:
        repo.write(path, "def test_x():\n    pass\n")
    repo.commit("tests")
    value = _inventory(repo.path, rev="HEAD", roots=["tests/unit"])
    assert _modules(value) == ["tests/unit/sub/b_test.py", "tests/unit/test_a.py"]
    assert [m["module"] for m in value["modules"]] == ["tests.unit.sub.b_test", "tests.unit.test_a"]
    assert value["config"]["file"] is None and value["count"] == 2 and value["roots"] == ["tests/unit"]


def test_pyproject_testpaths_and_python_files(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "r")
    repo.write("pyproject.toml", '[tool.pytest.ini_options]\ntestpaths = ["checks"]\npython_files = ["check_*.py"]\n'
                                 'norecursedirs = ["slow"]\n')
    repo.write("checks/check_a.py", "def test_x():\n    pass\n")
    repo.write("checks/test_b.py", "def test_x():\n    pass\n")  # not a python_files name here
    repo.write("checks/slow/check_c.py", "def test_x():\n    pass\n")
    repo.write("tests/check_d.py", "def test_x():\n    pass\n")  # outside testpaths
    repo.commit("tests")
    value = _inventory(repo.path, rev="HEAD")
    assert _modules(value) == ["checks/check_a.py"]
    assert value["config"] == {"file": "pyproject.toml", "testpaths": ["checks"], "python_files": ["check_*.py"],
                               "norecursedirs": ["slow"], "python_functions": ["test"], "python_classes": ["Test"]}


def test_pytest_ini_wins_over_pyproject_even_without_a_section(tmp_path: Path) -> None:
    """pytest's rule: a pytest.ini configures the run even when empty."""
    repo = init_repo(tmp_path / "r")
    repo.write("pytest.ini", "# pytest configuration lives here\n")
    repo.write("pyproject.toml", '[tool.pytest.ini_options]\npython_files = ["check_*.py"]\n')
    repo.write("tests/test_a.py", "")
    repo.write("tests/check_b.py", "")
    repo.commit("tests")
    value = _inventory(repo.path, rev="HEAD")
    assert value["config"]["file"] == "pytest.ini"
    assert _modules(value) == ["tests/test_a.py"]


def test_setup_cfg_section(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "r")
    repo.write("pyproject.toml", "[tool.black]\nline-length = 100\n")  # no pytest section: not the config
    repo.write("setup.cfg", "[tool:pytest]\ntestpaths = tests/unit tests/more\npython_files = t_*.py\n")
    repo.write("tests/unit/t_a.py", "")
    repo.write("tests/more/t_b.py", "")
    repo.write("tests/other/t_c.py", "")
    repo.commit("tests")
    value = _inventory(repo.path, rev="HEAD")
    assert value["config"]["file"] == "setup.cfg" and value["roots"] == ["tests/unit", "tests/more"]
    assert _modules(value) == ["tests/more/t_b.py", "tests/unit/t_a.py"]


def test_module_level_requirements_only(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "r")
    repo.write("tests/test_npu.py", NPU_MODULE)
    repo.write("tests/test_broken.py", "def test_x(:\n")
    repo.commit("tests")
    by_path = {m["path"]: m for m in _inventory(repo.path, rev="HEAD")["modules"]}
    assert by_path["tests/test_npu.py"]["requires"] == ["pytest", "sys", "torch", "torch_npu", "vllm_ascend"]
    assert by_path["tests/test_npu.py"]["parse_error"] is None
    broken = by_path["tests/test_broken.py"]
    assert broken["requires"] == [] and broken["parse_error"].startswith("SyntaxError")


def test_a_revision_not_the_working_tree(tmp_path: Path) -> None:
    """The audited commit's modules: one added but not committed is not part of it; the repository
    is not written."""
    repo = init_repo(tmp_path / "r")
    repo.write("tests/test_a.py", "")
    repo.commit("a")
    repo.write("tests/test_b.py", "")
    before = snapshot(repo)
    assert _modules(_inventory(repo.path, rev="HEAD")) == ["tests/test_a.py"]
    assert snapshot(repo) == before


def test_an_unreadable_configuration_is_an_error(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "r")
    repo.write("pyproject.toml", "[tool.pytest.ini_options\n")
    repo.commit("broken")
    with pytest.raises(ProbeError) as info:
        _inventory(repo.path, rev="HEAD")
    assert info.value.code == "config.invalid" and info.value.message.startswith("pyproject.toml: ")


def test_agrees_with_pytests_own_collection(tmp_path: Path) -> None:
    """The modules pytest --collect-only finds in the same tree (configuration included)."""
    repo = init_repo(tmp_path / "r")
    repo.write("pyproject.toml", '[tool.pytest.ini_options]\ntestpaths = ["tests"]\n'
                                 'python_files = ["test_*.py", "*_check.py"]\n')
    for path in ["tests/test_a.py", "tests/sub/b_check.py", "tests/sub/test_c.py", "tests/helpers.py",
                 "tests/node_modules/test_vendored.py", "tests/venv/test_env.py", "other/test_outside.py"]:
        repo.write(path, "def test_x():\n    pass\n")
    repo.commit("tests")
    proc = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"],
                          cwd=repo.path, capture_output=True, text=True, timeout=120)
    collected = sorted({line.split("::")[0] for line in proc.stdout.splitlines() if "::" in line})
    assert collected, proc.stdout + proc.stderr
    assert _modules(_inventory(repo.path, rev="HEAD")) == collected


@pytest.mark.parametrize(("source", "expected"), [
    ("def test_x():\n    pass\n", True),
    ("async def test_x():\n    pass\n", True),
    ("class TestThing:\n    def test_y(self):\n        pass\n", True),
    ("from tests.unit.common import TestBase\n", True),              # pytest collects an imported Test class
    ("import pytest\ntest_case = pytest.mark.skip(lambda: None)\n", True),
    ("if True:\n    def test_in_if():\n        pass\n", True),
    ("import pytest\n\ndef helper():\n    return 1\n\nclass Helper:\n    pass\n", False),
    ("def make():\n    def test_inner():\n        pass\n    return test_inner\n", False),
], ids=["function", "async", "class", "imported-class", "assigned", "in-if", "helpers-only", "nested"])
def test_whether_a_module_defines_tests(tmp_path: Path, source: str, expected: bool) -> None:
    repo = init_repo(tmp_path / "r")
    repo.write("tests/test_m.py", source)
    repo.commit("m")
    (module,) = _inventory(repo.path, rev="HEAD")["modules"]
    assert module["defines_tests"] is expected


def test_configured_test_name_rules(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "r")
    repo.write("pytest.ini", "[pytest]\npython_functions = check_*\npython_classes = *Suite\n")
    repo.write("tests/test_fn.py", "def check_a():\n    pass\n")
    repo.write("tests/test_cls.py", "class SmokeSuite:\n    pass\n")
    repo.write("tests/test_default_names.py", "def test_a():\n    pass\n")
    repo.commit("m")
    got = {m["path"]: m["defines_tests"] for m in _inventory(repo.path, rev="HEAD")["modules"]}
    assert got == {"tests/test_cls.py": True, "tests/test_default_names.py": False, "tests/test_fn.py": True}


def test_dynamic_imports_at_module_level_are_requirements(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "r")
    repo.write("tests/test_m.py", "import importlib\nnpu = importlib.import_module('torch_npu.contrib')\n"
                                  "acl = __import__('acl')\n\ndef test_x():\n    pass\n")
    repo.commit("m")
    (module,) = _inventory(repo.path, rev="HEAD")["modules"]
    assert module["requires"] == ["acl", "importlib", "torch_npu"]
