"""pins.package finds every constraint on a package, with file, line and section; pins.constant
reads a module-level literal without importing the module."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from policyrun.probes.base import ProbeError
from tests.gitfixtures import init_repo, run_probe

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
    # Each constraint read as PEP 440 (Poetry's bare version and caret translated) and given a kind.
    assert [(s["raw"], s["specifier_set"], s["exact"], s["kind"]) for s in v["sources"]] == [
        ("vllm 0.6.3", "==0.6.3", None, "lock"),
        ("vllm==0.6.3", "==0.6.3", "0.6.3", "exact"),
        ("vLLM[audio] >=0.6, <0.8 ; python_version >= '3.10'", "<0.8,>=0.6", None, "range"),
        ("vllm===0.6.3", "===0.6.3", "0.6.3", "exact"),
        ('vllm = "0.6.3"', "==0.6.3", "0.6.3", "exact"),
        ('vllm = {version = "^0.6", optional = true}', "<0.7,>=0.6", None, "range"),
        ("vllm==0.7.0", "==0.7.0", "0.7.0", "exact"),
        ("VLLM == 0.6.3", "==0.6.3", "0.6.3", "exact"),
        ("vllm 0.6.3.post1", "==0.6.3.post1", None, "lock"),
    ]
    assert (v["pinned"], v["locked"], v["unreadable"]) == (["0.6.3", "0.7.0"], ["0.6.3", "0.6.3.post1"], [])


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


def kinds(root: Path, **params: Any) -> list[tuple[Any, ...]]:
    return [(s["file"], s["line"], s["section"], s["specifier_set"], s["exact"], s["kind"])
            for s in pins(root, package="vllm", **params)["sources"]]


def test_a_range_is_a_range_not_a_missing_pin(tmp_path: Path) -> None:
    # The bart-plugin's form: a minimum in [project] dependencies and in an extra, no lock.
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "p"\ndependencies = [\n  "torch>=2.9",\n  "vllm>=0.24.0",\n]\n'
        '[project.optional-dependencies]\nserve = ["vllm[audio]~=0.26.0"]\nany = ["vllm"]\n'
        'odd = ["vllm @ git+https://github.com/vllm-project/vllm@v0.26.0"]\n')
    v = pins(tmp_path, package="vllm")
    assert kinds(tmp_path) == [
        ("pyproject.toml", 5, "project.dependencies", ">=0.24.0", None, "range"),
        ("pyproject.toml", 8, "project.optional-dependencies.serve", "~=0.26.0", None, "range"),
        ("pyproject.toml", 9, "project.optional-dependencies.any", "", None, "unpinned"),
        ("pyproject.toml", 10, "project.optional-dependencies.odd", None, None, "other"),
    ]
    assert (v["distinct"], v["pinned"], v["locked"]) == ([], [], [])


SETUP_PY = """\
from setuptools import setup

REQS = open("requirements.in").read().splitlines()
setup(
    name="p",
    install_requires=[
        "torch>=2.9.0",
        "vllm>=0.24.0",  # minimum
    ],
    extras_require={"gpu": ("vllm==0.26.0",), "docs": "sphinx\\nvllm<0.28"},
)
"""


def test_setup_py_literal_requirements_are_read_without_running_it(tmp_path: Path) -> None:
    (tmp_path / "setup.py").write_text(SETUP_PY.replace("from setuptools", "open('ran', 'w')\nfrom setuptools"))
    assert kinds(tmp_path) == [
        ("setup.py", 9, "setup.install_requires", ">=0.24.0", None, "range"),
        ("setup.py", 11, "setup.extras_require.gpu", "==0.26.0", "0.26.0", "exact"),
        ("setup.py", 11, "setup.extras_require.docs", "<0.28", None, "range"),
    ]
    v = pins(tmp_path, package="vllm")
    assert v["files"] == ["setup.py"] and v["unreadable"] == [] and v["pinned"] == ["0.26.0"]
    assert not (tmp_path / "ran").exists()


def test_computed_setup_py_requirements_are_unreadable_at_their_line(tmp_path: Path) -> None:
    (tmp_path / "setup.py").write_text(
        "import setuptools\nREQS = ['vllm==0.26.0']\nEXTRAS = {}\nsetuptools.setup(\n    install_requires=REQS,\n"
        "    extras_require=EXTRAS,\n    **{'name': 'p'},\n)\n")
    v = pins(tmp_path, package="vllm")
    assert v["sources"] == []  # the list is never evaluated, so REQS's pin is not guessed at
    assert v["unreadable"] == [
        {"file": "setup.py", "line": 5, "reason": "install_requires is computed, not a literal list of strings; "
                                                  "policyrun reads setup.py and never runs it"},
        {"file": "setup.py", "line": 6, "reason": "extras_require is computed, not a dict literal"},
        {"file": "setup.py", "line": 7, "reason": "setup(**...) passes keywords policyrun cannot read"},
    ]
    (tmp_path / "setup.py").write_text("setup(install_requires=[\n")
    assert pins(tmp_path, package="vllm")["unreadable"] == [
        {"file": "setup.py", "line": 1, "reason": "not valid Python (SyntaxError)"}]


# The pattern of vllm-project/vllm-neuron's setup.py: install_requires computed from a requirements
# file that the probe reads itself, so its pins are found there, with their lines.
READS_REQUIREMENTS = """from pathlib import Path
from setuptools import setup


def read_requirements():
    \"\"\"Read requirements from core.txt file.\"\"\"
    req_file = Path(__file__).parent / "requirements" / "core.txt"
    if req_file.exists():
        with open(req_file) as f:
            return [line.strip() for line in f if line.strip() and not line.strip().startswith('#')]
    return []


setup(name="p", install_requires=read_requirements())
"""


@pytest.mark.parametrize("setup_py", [
    READS_REQUIREMENTS,
    READS_REQUIREMENTS.replace('Path(__file__).parent / "requirements" / "core.txt"',
                               'os.path.join(os.path.dirname(__file__), "requirements/core.txt")'),
    'from setuptools import setup\nsetup(install_requires=open("requirements/core.txt").read().splitlines())\n',
])
def test_setup_py_reading_a_requirements_file_is_that_file(tmp_path: Path, setup_py: str) -> None:
    repo = init_repo(tmp_path / "r")
    repo.write("setup.py", setup_py)
    repo.write("requirements/core.txt", "# core\nnumpy<2\n\nvllm==0.11.0\n")
    repo.commit("computed install_requires")
    for v in (pins(repo.path, package="vllm"), pins(repo.path, package="vllm", rev="HEAD")):
        assert v["unreadable"] == []
        assert [(s["file"], s["line"], s["exact"]) for s in v["sources"]] == [("requirements/core.txt", 4, "0.11.0")]


@pytest.mark.parametrize(("setup_py", "files"), [
    # the file it names is not one the probe reads (here: not there at all)
    (READS_REQUIREMENTS.replace('"core.txt"', '"other.txt"'), {}),
    # a path computed at run time
    (READS_REQUIREMENTS.replace('"requirements" / "core.txt"', 'os.environ["REQS"]'), {}),
    # the code adds or filters the package itself: the file alone does not say what setup() gets
    (READS_REQUIREMENTS.replace("return []", 'return ["vllm==0.12.0"]'), {}),
    (READS_REQUIREMENTS.replace("startswith('#')", "startswith(('#', 'vllm'))"), {}),
    # a list joined or grown: what is added need not be a literal (a name imported from elsewhere)
    (READS_REQUIREMENTS.replace("install_requires=read_requirements()", "install_requires=read_requirements() + [REQ]"),
     {}),
    (READS_REQUIREMENTS.replace("    return []", "    reqs = []\n    reqs.append(REQ)\n    return reqs"), {}),
    # two requirements files: which one install_requires gets is not a literal fact
    (READS_REQUIREMENTS.replace('return []', 'return open("requirements/extra.txt").read().split()'),
     {"requirements/extra.txt": "vllm>=0.11\n"}),
])
def test_setup_py_computing_requirements_otherwise_stays_unreadable(tmp_path: Path, setup_py: str,
                                                                    files: dict[str, str]) -> None:
    (tmp_path / "setup.py").write_text(setup_py)
    (tmp_path / "requirements").mkdir()
    (tmp_path / "requirements" / "core.txt").write_text("vllm==0.11.0\n")
    for rel, text in files.items():
        (tmp_path / rel).write_text(text)
    v = pins(tmp_path, package="vllm")
    assert [u["reason"].split(";")[0] for u in v["unreadable"]] == [
        "install_requires is computed, not a literal list of strings"]


def test_a_setup_py_without_requirements_adds_no_source(tmp_path: Path) -> None:
    # The afd-plugin's setup.py builds extensions only: read, and nothing found.
    (tmp_path / "setup.py").write_text("from setuptools import setup\nsetup(ext_modules=[], cmdclass={})\n")
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "p"\n[project.optional-dependencies]\n'
                                             'vllm = ["vllm==0.26.0"]\n')
    v = pins(tmp_path, package="vllm")
    assert (v["files"], v["unreadable"]) == (["pyproject.toml", "setup.py"], [])
    assert kinds(tmp_path) == [("pyproject.toml", 4, "project.optional-dependencies.vllm", "==0.26.0", "0.26.0",
                                "exact")]


def test_requirements_and_locks_kinds(tmp_path: Path) -> None:
    (tmp_path / "requirements.txt").write_text("vllm>=0.24,<0.28  # a range\n")
    (tmp_path / "constraints.txt").write_text("vllm==0.26.*\n")
    (tmp_path / "uv.lock").write_text('version = 1\n\n[[package]]\nname = "vllm"\nversion = "0.26.0"\n')
    (tmp_path / "pdm.lock").write_text('[[package]]\nname = "vllm"\nversion = "0.26.1"\n')
    assert kinds(tmp_path) == [
        ("constraints.txt", 1, None, "==0.26.*", None, "range"),  # a wildcard names no one version
        ("pdm.lock", 2, "package", "==0.26.1", None, "lock"),
        ("requirements.txt", 1, None, "<0.28,>=0.24", None, "range"),
        ("uv.lock", 4, "package", "==0.26.0", None, "lock"),
    ]
    assert pins(tmp_path, package="vllm")["locked"] == ["0.26.0", "0.26.1"]


def test_setup_py_at_a_revision(tmp_path: Path) -> None:
    repo = init_repo(tmp_path / "r")
    repo.write("setup.py", SETUP_PY)
    repo.commit("range")
    repo.write("setup.py", SETUP_PY.replace("vllm>=0.24.0", "vllm>=0.27.0"))
    then = run_probe("pins.package", {"package": "vllm", "rev": "HEAD"}, repo.path).value
    now = run_probe("pins.package", {"package": "vllm"}, repo.path).value
    assert [s["specifier_set"] for s in then["sources"]] == [">=0.24.0", "==0.26.0", "<0.28"]
    assert [s["specifier_set"] for s in now["sources"]] == [">=0.27.0", "==0.26.0", "<0.28"]


@pytest.mark.parametrize(("constraint", "spec_set", "kind"), [
    ("^0.6", "<0.7,>=0.6", "range"), ("^1.2.3", "<2,>=1.2.3", "range"), ("^0.0.3", "<0.0.4,>=0.0.3", "range"),
    ("~1.2", "<1.3,>=1.2", "range"), ("~1", "<2,>=1", "range"), ("0.26.*", "==0.26.*", "range"),
    ("*", "", "unpinned"), ("0.26.0", "==0.26.0", "exact"), (">=0.24,<0.28", "<0.28,>=0.24", "range"),
])
def test_poetry_constraints_as_pep440(tmp_path: Path, constraint: str, spec_set: str, kind: str) -> None:
    (tmp_path / "pyproject.toml").write_text(f'[tool.poetry.dependencies]\nvllm = "{constraint}"\n')
    assert kinds(tmp_path) == [("pyproject.toml", 2, "tool.poetry.dependencies", spec_set, None if kind != "exact"
                                else "0.26.0", kind)]
