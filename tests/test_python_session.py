"""python.stack and python.modules of one interpreter share one child per collection (issue 24,
item 6): one start of the interpreter, one `import torch`, each probe's fact shape, provenance and
failure modes kept.

The interpreters are fakes: a shell script that appends a line to a file each time it is started
and then runs a virtual environment whose site holds a fake torch (tests/fakes/stack_site.py).
"""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from policyrun.collection.run import collect
from policyrun.model import Rulebook
from policyrun.probes.base import ProbeContext, ProbeError
from policyrun.probes.python import session
from policyrun.probes.python.session import Interpreters
from policyrun.probes.python.modules import PythonModulesProbe
from policyrun.probes.python.stack import PythonStackProbe
from tests.fakes import stack_site


def _counting(tmp_path: Path, python: Path) -> tuple[Path, Path]:
    """A fake interpreter that counts its own starts in a file (policyrun passes a child none of
    its environment, so the file's path is written into the script)."""
    count = tmp_path / "starts"
    exe = tmp_path / "counting-python"
    exe.write_text(f"#!/bin/sh\necho start >> '{count}'\nexec '{python}' \"$@\"\n")
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    return exe, count


def _starts(count: Path) -> int:
    return len(count.read_text().splitlines()) if count.exists() else 0


def _site(tmp_path: Path, torch_init: str | None = None) -> Path:
    site = stack_site.write_site(tmp_path / "site")
    if torch_init is not None:
        (site / "torch" / "__init__.py").write_text(torch_init)
    return stack_site.make_venv(tmp_path / "venv", site, with_pip=False)


def _rulebook(exe: Path) -> Rulebook:
    return Rulebook.model_validate({
        "policyrun": 1, "name": "t", "modes": {"m": {"phases": ["P"]}}, "phases": [{"id": "P"}],
        "probes": {"stack": {"uses": "python.stack", "with": {"python": str(exe), "pip_check": False}},
                   "modules": {"uses": "python.modules", "with": {"python": str(exe), "modules": ["torch", "json"]}}}})


def test_one_collection_starts_one_child_for_both_probes(tmp_path: Path) -> None:
    exe, count = _counting(tmp_path, _site(tmp_path))
    facts = collect(_rulebook(exe), "m", {}, base_dir=tmp_path).facts
    assert _starts(count) == 1
    stack, modules = facts["stack"], facts["modules"]
    assert stack.error is None and modules.error is None
    assert stack.value["torch"]["version"] == "2.7.1+cu128" and stack.value["interpreter"] == str(exe)
    assert stack.value["vllm"]["version"] == stack_site.VLLM_VERSION
    assert modules.value["modules"]["torch"]["importable"] is True
    assert modules.value["modules"]["torch"]["version"] == "2.7.1+cu128"
    assert modules.value["missing"] == [] and modules.value["python"] == str(exe)
    # Provenance says which script answered, and that it ran in the shared child.
    assert "_session_script.py" in stack.provenance.commands[0] and "_stack_script.py" in stack.provenance.commands[0]
    assert "_session_script.py" in modules.provenance.commands[0]
    assert "_modules_script.py" in modules.provenance.commands[0]


def test_the_shared_child_ends_with_the_collection(tmp_path: Path) -> None:
    exe, count = _counting(tmp_path, _site(tmp_path))
    collect(_rulebook(exe), "m", {}, base_dir=tmp_path)
    collect(_rulebook(exe), "m", {}, base_dir=tmp_path)
    assert _starts(count) == 2  # one per collection, none left behind to answer the next


def test_same_answers_as_separate_children(tmp_path: Path) -> None:
    exe, count = _counting(tmp_path, _site(tmp_path))
    ctx = ProbeContext(base_dir=tmp_path, timeout_s=120)
    alone_stack = PythonStackProbe().run({"python": str(exe), "pip_check": False}, ctx).value
    alone_modules = PythonModulesProbe().run({"python": str(exe), "modules": ["torch", "json"]}, ctx).value
    assert _starts(count) == 2
    facts = collect(_rulebook(exe), "m", {}, base_dir=tmp_path).facts
    assert facts["stack"].value == alone_stack
    assert facts["modules"].value == alone_modules


def test_a_child_that_crashes_fails_each_probe_with_its_own_error(tmp_path: Path) -> None:
    exe, count = _counting(tmp_path, _site(tmp_path, "import os\nos._exit(7)\n"))
    shared = Interpreters()
    ctx = ProbeContext(base_dir=tmp_path, timeout_s=60, interpreters=shared)
    try:
        with pytest.raises(ProbeError) as stack:
            PythonStackProbe().run({"python": str(exe), "pip_check": False}, ctx)
        with pytest.raises(ProbeError) as modules:
            PythonModulesProbe().run({"python": str(exe), "modules": ["torch"]}, ctx)
    finally:
        shared.close()
    assert stack.value.code == "python.script_failed" and "the stack script exited with 7" in stack.value.message
    assert modules.value.code == "python.script_failed" and "(exit 7)" in modules.value.message
    assert "_stack_script.py" in stack.value.commands[0] and "_modules_script.py" in modules.value.commands[0]
    assert _starts(count) == 2  # the crashed child answered nothing more: the next request got a fresh one


def test_a_child_that_hangs_is_killed_and_the_next_probe_gets_its_own_answer(tmp_path: Path) -> None:
    exe, count = _counting(tmp_path, _site(tmp_path, "import time\ntime.sleep(600)\n"))
    shared = Interpreters()
    try:
        with pytest.raises(ProbeError) as stack:
            PythonStackProbe().run({"python": str(exe), "pip_check": False},
                                   ProbeContext(base_dir=tmp_path, timeout_s=3, interpreters=shared))
        modules = PythonModulesProbe().run({"python": str(exe), "modules": ["json", "torch"], "timeout_s": 4},
                                           ProbeContext(base_dir=tmp_path, timeout_s=30, interpreters=shared)).value
    finally:
        shared.close()
    assert stack.value.code == "python.timeout"
    # The modules script's own watchdog reports the hanging import; the module before it is answered.
    assert modules["modules"]["json"]["importable"] is True
    assert modules["modules"]["torch"]["error_type"] == "TimeoutError"
    assert _starts(count) == 2


def test_a_failed_import_retires_the_child(tmp_path: Path) -> None:
    exe, count = _counting(tmp_path, _site(tmp_path, "raise ImportError('libcudnn.so.9: cannot open')\n"))
    shared = Interpreters()
    ctx = ProbeContext(base_dir=tmp_path, timeout_s=60, interpreters=shared)
    try:
        first = PythonModulesProbe().run({"python": str(exe), "modules": ["torch"]}, ctx).value
        stack = PythonStackProbe().run({"python": str(exe), "pip_check": False}, ctx).value
    finally:
        shared.close()
    assert first["modules"]["torch"]["error"] == "ImportError: libcudnn.so.9: cannot open"
    assert stack["import_errors"]["torch"].startswith("ImportError: libcudnn.so.9")
    assert _starts(count) == 2  # a half-imported interpreter never answers the next probe


def test_different_environments_do_not_share(tmp_path: Path) -> None:
    exe, count = _counting(tmp_path, _site(tmp_path))
    shared = Interpreters()
    ctx = ProbeContext(base_dir=tmp_path, timeout_s=60, interpreters=shared)
    try:
        PythonModulesProbe().run({"python": str(exe), "modules": ["json"]}, ctx)
        PythonModulesProbe().run({"python": str(exe), "modules": ["json"], "gpu_visible": True}, ctx)
        PythonModulesProbe().run({"python": str(exe), "modules": ["json"]}, ctx)
    finally:
        shared.close()
    assert _starts(count) == 2  # CUDA_VISIBLE_DEVICES differs: a child of its own


@pytest.fixture(autouse=True)
def _no_cuda_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith(("CUDA_", "NVIDIA_")):
            monkeypatch.delenv(name)


def test_concurrent_requests_wait_for_the_one_child(tmp_path: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    exe, count = _counting(tmp_path, _site(tmp_path))
    shared = Interpreters()
    ctx = ProbeContext(base_dir=tmp_path, timeout_s=120, interpreters=shared)
    names = [["json"], ["torch"], ["torch", "json"], ["os"], ["no_such_module_here"]]
    try:
        with ThreadPoolExecutor(max_workers=len(names)) as pool:
            results = list(pool.map(lambda m: PythonModulesProbe().run({"python": str(exe), "modules": m}, ctx).value,
                                    names))
    finally:
        shared.close()
    for wanted, got in zip(names, results):
        assert list(got["modules"]) == wanted
        assert got["missing"] == [n for n in wanted if n == "no_such_module_here"]
    assert _starts(count) == 1  # a module that is not installed ran nothing: the child stays in use


def test_a_module_not_installed_keeps_the_child(tmp_path: Path) -> None:
    exe, count = _counting(tmp_path, _site(tmp_path))
    shared = Interpreters()
    ctx = ProbeContext(base_dir=tmp_path, timeout_s=60, interpreters=shared)
    try:
        modules = PythonModulesProbe().run({"python": str(exe), "modules": ["flash_attn", "torch.nope"]}, ctx).value
        stack = PythonStackProbe().run({"python": str(exe), "pip_check": False}, ctx).value
    finally:
        shared.close()
    assert modules["missing"] == ["flash_attn", "torch.nope"] and stack["torch"]["version"] == "2.7.1+cu128"
    assert _starts(count) == 1


def test_every_child_script_runs_from_the_folder_its_probes_read_it_from(tmp_path: Path) -> None:
    # The scripts are read as package resources beside policyrun/probes/python/session.py and run
    # with `-c`; one moved without its loader (or a new one never loaded) fails here, not in a
    # target interpreter. The label facts show stays the name it had before the families.
    folder = Path(session.__file__).parent
    on_disk = sorted(p.name for p in folder.glob("_*_script.py"))
    assert on_disk == ["_modules_script.py", "_record_script.py", "_session_script.py", "_stack_script.py"]
    for name in on_disk:
        assert session.script_text(name) == (folder / name).read_text(encoding="utf-8")
        assert session.script_label(name) == f"policyrun/probes/{name}"
    proc = subprocess.run([sys.executable, "-I", "-B", "-c", session.script_text("_modules_script.py"),
                           '{"modules": ["json"], "budget_s": 30}'], cwd=tmp_path, capture_output=True, text=True,
                          timeout=60, check=True)
    assert '"importable": true' in proc.stdout
