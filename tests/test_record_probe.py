"""`python.record`: an installed distribution is tied to its source tree at a revision, file by
file, so a stub package that only claims the right version does not pass. Interpreters here are
real virtual environments built in tmp dirs, with a distribution written into site-packages as an
installer would (RECORD with urlsafe-base64 sha256 hashes); the source is a git repository."""

from __future__ import annotations

import base64
import hashlib
import subprocess
import sys
from pathlib import Path

import pytest
from gitfixtures import GitRepo, init_repo, run_probe, snapshot

from policyrun.evidencekinds import evidence_of

SOURCES = {"vllm/__init__.py": "__version__ = '0.27.0'\nfrom vllm.engine import Engine\n",
           "vllm/engine.py": "class Engine:\n    pass\n"}


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    return root


def _site(venv: Path) -> Path:
    return next(venv.glob("lib/python*/site-packages"))


def install(venv: Path, files: dict[str, str], *, version: str = "0.27.0", edit_after: dict[str, str] | None = None,
            direct_url: str | None = None) -> None:
    """Write the distribution as an installer would, RECORD hashing what it wrote."""
    site = _site(venv)
    for old in site.glob("vllm*"):
        subprocess.run(["rm", "-rf", str(old)], check=True)
    info = site / f"vllm-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: vllm\nVersion: {version}\n")
    (info / "INSTALLER").write_text("pip\n")
    if direct_url:
        (info / "direct_url.json").write_text(direct_url)
    lines = []
    for rel, text in files.items():
        (site / rel).parent.mkdir(parents=True, exist_ok=True)
        (site / rel).write_text(text)
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        lines.append(f"{rel},sha256={digest},{len(text.encode())}")
    lines += [f"vllm-{version}.dist-info/METADATA,,", f"vllm-{version}.dist-info/RECORD,,"]
    (info / "RECORD").write_text("\n".join(lines) + "\n")
    for rel, text in (edit_after or {}).items():
        (site / rel).write_text(text)


@pytest.fixture()
def source(tmp_path: Path) -> Path:
    repo = init_repo(tmp_path / "vllm-src")
    for rel, text in SOURCES.items():
        repo.write(rel, text)
    repo.write("setup.py", "print('not a package file')\n")
    repo.commit("v0.27.0")
    repo.git("tag", "v0.27.0")
    repo.write("vllm/engine.py", "class Engine:\n    changed = True\n")
    repo.commit("after the release")
    return repo.path


def record(venv: Path, source: Path, **extra: object) -> dict[str, object]:
    params = {"python": str(next(venv.glob("bin/python"))), "distribution": "vllm", "source": str(source),
              "rev": "v0.27.0", **extra}
    return run_probe("python.record", params, source.parent).value  # type: ignore[no-any-return]


def test_the_build_of_the_target_matches(venv: Path, source: Path) -> None:
    install(venv, SOURCES, direct_url='{"url": "https://example.invalid/vllm.whl", "archive_info": {}}')
    before = snapshot(GitRepo(source))
    value = record(venv, source, min_files=2)
    assert value["installed"] and value["version"] == "0.27.0" and value["distribution"] == "vllm"
    assert (value["compared"], value["matched"], value["matches"]) == (2, 2, True)
    assert value["differ"] == value["not_in_source"] == value["record_mismatch"] == []
    assert value["installer"] == "pip" and value["direct_url"] == {"url": "https://example.invalid/vllm.whl",
                                                                   "archive_info": {}}
    assert snapshot(GitRepo(source)) == before  # the source is only read


def test_a_stub_with_the_right_version_does_not_match(venv: Path, source: Path) -> None:
    install(venv, {"vllm/__init__.py": "__version__ = '0.27.0'\n"})
    value = record(venv, source, min_files=2)
    assert value["version"] == "0.27.0"  # what the stack probe would compare, and accept
    assert value["matches"] is False and value["differ"] == ["vllm/__init__.py"] and value["compared"] == 1


def test_another_revision_and_an_edit_after_install_are_named(venv: Path, source: Path) -> None:
    install(venv, {**SOURCES, "vllm/engine.py": "class Engine:\n    changed = True\n", "vllm/extra.py": "x = 1\n"},
            edit_after={"vllm/__init__.py": "__version__ = '0.27.0'\nimport os\n"})
    value = record(venv, source)
    assert value["matches"] is False
    assert value["differ"] == ["vllm/__init__.py", "vllm/engine.py"]  # the edited file, and a later commit's
    assert value["not_in_source"] == ["vllm/extra.py"]
    assert value["record_mismatch"] == ["vllm/__init__.py"]
    assert record(venv, source, rev="HEAD")["differ"] == ["vllm/__init__.py"]


def test_not_installed(venv: Path, source: Path) -> None:
    for old in _site(venv).glob("vllm*"):
        subprocess.run(["rm", "-rf", str(old)], check=True)
    value = record(venv, source)
    assert value["installed"] is False and value["matches"] is False and value["compared"] == 0


def test_it_is_measured_evidence() -> None:
    assert evidence_of("python.record") == "measured"


def test_files_the_build_generates_are_listed_apart_only_when_the_source_lacks_them(venv: Path, source: Path) -> None:
    install(venv, {**SOURCES, "vllm/_version.py": "__version__ = '0.27.0'\n"})
    assert record(venv, source)["not_in_source"] == ["vllm/_version.py"]  # not allowed unless named
    value = record(venv, source, generated=["vllm/_version.py", "vllm/engine.py"])
    assert value["matches"] is True and value["generated"] == ["vllm/_version.py"] and value["generated_count"] == 1
    assert value["compared"] == 2  # engine.py is in the source: compared, the glob does not hide it
    install(venv, {**SOURCES, "vllm/engine.py": "class Engine:\n    changed = True\n"})
    value = record(venv, source, generated=["vllm/engine.py"])
    assert value["matches"] is False and value["differ"] == ["vllm/engine.py"]
