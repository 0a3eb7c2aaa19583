"""pins.package finds every constraint on a package, with file, line and section; pins.constant
reads a module-level literal without importing the module."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from policyrun.probes.base import ProbeError
from tests.gitfixtures import run_probe

PYPROJECT = """\
[build-system]
requires = ["hatchling"]

[project]
name = "afd-plugin"
dependencies = [
    "torch>=2.4",
    "vllm==0.6.3",
    "vllm-plugin-extras>=1",
]

[project.optional-dependencies]
serve = ["vLLM[audio] >=0.6, <0.8 ; python_version >= '3.10'"]

[dependency-groups]
test = ["pytest", {include-group = "lint"}, "vllm===0.6.3"]
lint = ["ruff"]

[tool.poetry.dependencies]
python = "^3.10"
vllm = "0.6.3"

[tool.poetry.group.gpu.dependencies]
vllm = {version = "^0.6", optional = true}
"""

UV_LOCK = """\
version = 1

[[package]]
name = "torch"
version = "2.4.0"

[[package]]
name = "vllm"
version = "0.6.3.post1"
source = { registry = "https://pypi.org/simple" }
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text(PYPROJECT)
    (tmp_path / "requirements.txt").write_text("# runtime\n-r requirements/base.txt\nvllm==0.7.0  # new\n")
    (tmp_path / "requirements").mkdir()
    (tmp_path / "requirements" / "cuda.txt").write_text(
        "torch==2.4.0 \\\n    --hash=sha256:abc\nVLLM == 0.6.3 \\\n    --hash=sha256:def\n")
    (tmp_path / "uv.lock").write_text(UV_LOCK)
    (tmp_path / "poetry.lock").write_text('[[package]]\nname = "vllm"\nversion = "0.6.3"\n')
    return tmp_path


def pins(root: Path, **params: Any) -> Any:
    return run_probe("pins.package", {"root": str(root), **params}, root).value


def test_every_source_with_line_section_and_version(project: Path) -> None:
    v = pins(project, package="vllm")
    got = [(s["file"], s["line"], s["specifier"], s["version"], s["section"]) for s in v["sources"]]
    assert got == [
        ("poetry.lock", 2, "0.6.3", "0.6.3", "package"),
        ("pyproject.toml", 8, "==0.6.3", "0.6.3", "project.dependencies"),
        ("pyproject.toml", 13, ">=0.6, <0.8", None, "project.optional-dependencies.serve"),
        ("pyproject.toml", 16, "===0.6.3", "0.6.3", "dependency-groups.test"),
        ("pyproject.toml", 21, "0.6.3", "0.6.3", "tool.poetry.dependencies"),
        ("pyproject.toml", 24, "^0.6", None, "tool.poetry.group.gpu.dependencies"),
        ("requirements.txt", 3, "==0.7.0", "0.7.0", None),
        ("requirements/cuda.txt", 3, "== 0.6.3", "0.6.3", None),
        ("uv.lock", 8, "0.6.3.post1", "0.6.3.post1", "package"),
    ]
    assert v["distinct"] == ["0.6.3", "0.6.3.post1", "0.7.0"]
    assert v["files"] == ["poetry.lock", "pyproject.toml", "requirements.txt", "requirements/cuda.txt", "uv.lock"]


def test_names_are_normalised_and_not_prefix_matched(project: Path) -> None:
    extras = pins(project, package="VLLM_Plugin.extras")
    assert [(s["file"], s["specifier"]) for s in extras["sources"]] == [("pyproject.toml", ">=1")]
    assert pins(project, package="torch")["distinct"] == ["2.4.0"]


def test_files_globs_and_absent_package(project: Path) -> None:
    v = pins(project, package="vllm", files=["requirements*.txt"])
    assert [s["file"] for s in v["sources"]] == ["requirements.txt"]
    none = pins(project, package="flash-attn")
    assert (none["sources"], none["distinct"]) == ([], [])


def test_malformed_toml_is_a_located_error(project: Path) -> None:
    (project / "pyproject.toml").write_text("[project\nname = 1\n")
    with pytest.raises(ProbeError) as info:
        pins(project, package="vllm")
    assert info.value.code == "file.parse_error" and "pyproject.toml" in info.value.message
    assert "line 1" in info.value.message


def constant(path: Path, name: str) -> Any:
    return run_probe("pins.constant", {"file": str(path), "name": name}, path.parent).value


def test_constant_is_read_without_importing(tmp_path: Path) -> None:
    src = tmp_path / "versions.py"
    src.write_text(
        "import pathlib\n"
        "pathlib.Path(__file__).with_name('imported').write_text('yes')\n"
        "TARGET_VLLM_VERSION = '0.6.0'\n"
        "TARGET_VLLM_VERSION = '0.6.3'\n"
        "SUPPORTED: tuple[str, ...] = ('a100', 'h100')\n"
        "COMPUTED = '.'.join(['0', '6'])\n")
    assert constant(src, "TARGET_VLLM_VERSION") == {"name": "TARGET_VLLM_VERSION", "value": "0.6.3", "line": 4,
                                                    "file": str(src)}
    assert constant(src, "SUPPORTED")["value"] == ["a100", "h100"]
    assert not (tmp_path / "imported").exists()
    for name, code in (("COMPUTED", "pins.not_literal"), ("MISSING", "pins.not_found")):
        with pytest.raises(ProbeError) as info:
            constant(src, name)
        assert info.value.code == code and name in info.value.message


def test_constant_file_errors(tmp_path: Path) -> None:
    (tmp_path / "broken.py").write_text("X = (\n")
    with pytest.raises(ProbeError) as info:
        constant(tmp_path / "broken.py", "X")
    assert info.value.code == "file.parse_error" and "broken.py:" in info.value.message
    with pytest.raises(ProbeError) as info:
        constant(tmp_path / "absent.py", "X")
    assert info.value.code == "file.not_found"


def test_a_lock_files_requirement_specifiers_are_sources_with_their_line(tmp_path: Path) -> None:
    # uv copies the project's own requirements into the lock: a pin bumped in pyproject.toml
    # without `uv lock` leaves the old specifier there, and the old locked version above it.
    (tmp_path / "uv.lock").write_text(
        'version = 1\n\n[[package]]\nname = "vllm"\nversion = "0.26.0"\n\n[[package]]\nname = "my-plugin"\n'
        'version = "1.0"\n\n[package.metadata]\n'
        'requires-dist = [\n    { name = "torch" },\n    { name = "vllm", marker = "extra == \'vllm\'", '
        'specifier = "==0.26.0" },\n]\n\n[package.metadata.requires-dev]\n'
        'test = [{ name = "vLLM", specifier = ">=0.26" }]\n')
    got = [(s["line"], s["specifier"], s["version"], s["section"]) for s in pins(tmp_path, package="vllm")["sources"]]
    assert got == [
        (4, "0.26.0", "0.26.0", "package"),
        (14, "==0.26.0", "0.26.0", "package.metadata.requires-dist (my-plugin)"),
        (18, ">=0.26", None, "package.metadata.requires-dev.test (my-plugin)"),
    ]
