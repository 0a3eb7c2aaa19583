"""The flagship's runtime-build check on the real vLLM v0.27.0 sources: an install of the release's
Python files (laid into a real virtual environment as an installer would, RECORD included, with a
generated `vllm/_version.py`) is the target's build by the flagship's own parameters; a stub with
the right version string, a file edited after install and an install of v0.26.0 are not, and the
flagship's static/unit gate says which files, evaluated over the real upgrade.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from policyrun.language.rulebook import load_rulebook
from tests.gitfixtures import run_probe
from tests.real.upgrade import Upgrade, checks, evaluate_upgrade, machine_facts, phase

ROOT = Path(__file__).resolve().parents[2]
VARS = load_rulebook(ROOT / "rulebooks" / "upgrade-gpu-version.yaml").model.vars  # with the generic base merged


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("runtime-venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    return root


def _python(venv: Path) -> str:
    return str(next(venv.glob("bin/python")))


def install(venv: Path, vllm: Path, rev: str, *, stub: bool = False, edit: str | None = None) -> None:
    """vllm/ of `rev` (or a one-file stub) into site-packages, with dist-info and RECORD."""
    site = next(venv.glob("lib/python*/site-packages"))
    for old in site.glob("vllm*"):
        shutil.rmtree(old)
    if stub:
        (site / "vllm").mkdir()
        (site / "vllm" / "__init__.py").write_text("__version__ = '0.27.0'\n")
    else:
        archive = subprocess.run(["git", "-C", str(vllm), "archive", rev, "vllm"], check=True, capture_output=True)
        subprocess.run(["tar", "-x", "-C", str(site)], input=archive.stdout, check=True)
        (site / "vllm" / "_version.py").write_text("__version__ = version = '0.27.0'\n")  # setuptools_scm's
    info = site / "vllm-0.27.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm\nVersion: 0.27.0\n")
    rows = []
    for path in sorted((site / "vllm").rglob("*")):
        if path.is_file():  # the release has file names with commas: RECORD is CSV, quoted as installers do
            data = path.read_bytes()
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            rows.append([path.relative_to(site).as_posix(), f"sha256={digest}", str(len(data))])
    with (info / "RECORD").open("w", newline="") as fh:
        csv.writer(fh, lineterminator="\n").writerows([*rows, ["vllm-0.27.0.dist-info/RECORD", "", ""]])
    if edit:
        with (site / edit).open("a") as fh:
            fh.write("\nPATCHED_AFTER_INSTALL = True\n")


def record(venv: Path, vllm: Path) -> dict[str, Any]:
    target = subprocess.run(["git", "-C", str(vllm), "rev-parse", "v0.27.0^{commit}"], check=True,
                            capture_output=True, text=True).stdout.strip()
    params = {"python": _python(venv), "distribution": "vllm", "source": str(vllm), "rev": target,
              "generated": VARS["runtime_build_generated"], "min_files": VARS["runtime_build_min_files"]}
    return run_probe("python.record", params, vllm, timeout_s=120).value  # type: ignore[no-any-return]


def test_the_release_sources_installed_are_the_targets_build(venv: Path, vllm_repo: Path) -> None:
    install(venv, vllm_repo, "v0.27.0")
    value = record(venv, vllm_repo)
    assert value["matches"] is True, {k: value[k] for k in ("differ", "not_in_source", "record_mismatch")}
    assert value["compared"] == value["matched"] >= VARS["runtime_build_min_files"]
    assert value["generated"] == ["vllm/_version.py"]


def test_an_edit_after_install_and_another_release_are_named(venv: Path, vllm_repo: Path) -> None:
    install(venv, vllm_repo, "v0.27.0", edit="vllm/v1/engine/core.py")
    value = record(venv, vllm_repo)
    assert value["matches"] is False
    assert value["differ"] == value["record_mismatch"] == ["vllm/v1/engine/core.py"]
    install(venv, vllm_repo, "v0.26.0")
    value = record(venv, vllm_repo)
    assert value["matches"] is False and value["differ_count"] > 100 and value["record_mismatch_count"] == 0


def test_a_stub_with_the_right_version_blocks_the_static_gate(venv: Path, vllm_repo: Path, upgraded_afd: Upgrade,
                                                              tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    install(venv, vllm_repo, "v0.27.0", stub=True)
    machine = machine_facts(_python(venv))
    del machine["runtime_build"]  # measured for real, on the stub
    trace = evaluate_upgrade(upgraded_afd, "implementation", tmp_path / "out", monkeypatch, machine=machine,
                             python=_python(venv))
    gate = phase(trace, "STATIC_AND_UNIT_GATE")
    assert gate["status"] == "BLOCKED"
    assert checks(trace, "STATIC_AND_UNIT_GATE")["target_runtime_installed"]["result"] == "SATISFIED"  # the version alone passes
    assert checks(trace, "STATIC_AND_UNIT_GATE")["target_runtime_is_build"]["result"] == "UNSATISFIED"
    assert ("only 1 Python file(s) compared, fewer than 1000; 1 differ from the target source: vllm/__init__.py"
            in gate["blocker"])
