"""python.stack (real interpreters, a fake torch/vllm site, a recorded H200 output, failures) and
toolchain (fake and real compilers)."""

from __future__ import annotations

import ast
import hashlib
import json
import os
import shutil
import stat
import sys
from pathlib import Path
from typing import Any

import pytest

from policyrun.language import expr
from policyrun.probes import registry
from policyrun.probes.host import toolchain
from policyrun.probes.base import ProbeContext, ProbeError
from policyrun.masking import mask_value
from policyrun.probes.python.stack import PythonStackProbe, masked_env, stack_script
from policyrun.probes.host.toolchain import ToolchainProbe, parse_cc, parse_nvcc
from tests.fakes import stack_site

FAKES = Path(__file__).parent / "fakes"
RECORDED = FAKES / "recorded_stack_h200.json"  # torch 2.7.1+cu128 with an editable vLLM, 2 GPUs
# The script's real output on a one-H200 machine (torch 2.11.0+cu130, no vLLM), init_cuda true.
RECORDED_DEVICE = FAKES / "recorded_stack_h200_device.json"


@pytest.fixture(autouse=True)
def _no_stack_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The recorded environment is the test's own: drop CUDA_*/NCCL_*/... of the machine (a GPU
    image sets CUDA_HOME, NCCL_VERSION, TORCH_CUDA_ARCH_LIST, ...)."""
    for name in list(os.environ):
        if name.startswith(("CUDA_", "NCCL_", "TORCH_", "PYTORCH_", "VLLM_")):
            monkeypatch.delenv(name)


def _printer(text: str) -> str:
    """A shell body printing `text` with builtins only (tests run some fakes with an empty PATH)."""
    return "printf '%s\\n' " + " ".join("'" + line.replace("'", "'\\''") + "'" for line in text.splitlines()) + "\n"


def _exe(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def _stack(tmp_path: Path, env: dict[str, str] | None = None, timeout: float = 120, **params: Any) -> Any:
    return PythonStackProbe().run(params, ProbeContext(base_dir=tmp_path, timeout_s=timeout, env=env or {}))


def _stack_error(tmp_path: Path, env: dict[str, str] | None = None, timeout: float = 60, **params: Any) -> ProbeError:
    with pytest.raises(ProbeError) as info:
        _stack(tmp_path, env, timeout, **params)
    return info.value


# --- python.stack ---------------------------------------------------------------------------------
def test_registered_and_side_effects() -> None:
    probe = registry.get("python.stack")
    assert isinstance(probe, PythonStackProbe)
    assert probe.side_effects({}) == frozenset()
    assert probe.side_effects({"init_cuda": False}) == frozenset()
    assert probe.side_effects({"init_cuda": True}) == frozenset({"gpu_context"})


def test_script_is_python39_syntax_and_not_run_on_import() -> None:
    ast.parse(stack_script(), feature_version=(3, 9))
    import policyrun.probes.python._stack_script  # noqa: F401 - importing must not run it (it rewires fd 1)


def test_current_interpreter(tmp_path: Path) -> None:
    """A real run of the interpreter running these tests: torch absent here (the usual case on a
    CPU machine), or present (on a GPU machine), but never imported into this process."""
    import importlib.metadata
    import importlib.util

    pytest.importorskip("pip")
    torch_here = "torch" in sys.modules
    result = _stack(tmp_path)
    v = result.value
    if importlib.util.find_spec("torch") is None:
        assert v["torch"] is None and "torch" in v["missing"]
    else:
        # torch.__version__ carries the local tag (2.11.0+cu130); the dist metadata may not
        assert v["torch"]["version"].split("+")[0] == importlib.metadata.version("torch").split("+")[0]
        assert v["torch"]["cuda_initialized"] is False
    if importlib.util.find_spec("vllm") is None:
        assert v["vllm"] is None and "vllm" in v["missing"]
    assert v["cuda"] is None and v["import_errors"] == {}
    assert v["python"]["version"] == ".".join(map(str, sys.version_info[:3]))
    assert v["python"]["executable"] == sys.executable and v["interpreter"] == sys.executable
    assert isinstance(v["pip_check"]["ok"], bool) and v["pip_check"]["available"] is True
    assert ("torch" in sys.modules) == torch_here  # nothing leaked into policyrun's process
    assert result.commands[0].endswith("""-c <policyrun/probes/_stack_script.py> '{"init_cuda": false}'""")
    assert result.commands[1].endswith("-m pip check")


def test_fake_torch_and_vllm_without_cuda_init(tmp_path: Path) -> None:
    marker = tmp_path / "cuda-init.log"
    site = stack_site.write_site(tmp_path / "site", marker)
    python = stack_site.make_venv(tmp_path / "venv", site)
    v = _stack(tmp_path, {"CUDA_VISIBLE_DEVICES": "0,1"}, python=str(python)).value
    t = v["torch"]
    assert t["version"] == "2.7.1+cu128" and t["cuda"] == "12.8" and t["cxx11_abi"] is True
    assert (t["cudnn"], t["cudnn_version_int"], t["nccl"]) == ("9.7.1", 90701, "2.26.2")
    assert t["arch_list"] == ["sm_80", "sm_90", "sm_100"] and t["path"] == str(site / "torch")
    assert t["cuda_initialized"] is False and not marker.exists()  # no CUDA init without init_cuda
    assert v["cuda"] is None and v["missing"] == [] and v["warnings"] == []
    vl = v["vllm"]
    assert vl["version"] == stack_site.VLLM_VERSION and vl["commit"] == "0123abcd"
    assert vl["path"] == str(site / "vllm")
    assert vl["direct_url"] == {"url": "file:///workspace/vllm", "editable": True, "commit": None}
    ext = vl["extension"]
    assert ext["name"] == "_C.abi3.so" and ext["path"] == str(site / "vllm" / "_C.abi3.so")
    assert ext["sha256"] == hashlib.sha256(stack_site.EXTENSION_BYTES).hexdigest()
    assert [e["name"] for e in vl["extensions"]] == ["_C.abi3.so"]
    assert v["pip_check"]["ok"] is False
    assert any(stack_site.MISSING_DEP in line for line in v["pip_check"]["lines"])
    assert v["env"] == {"CUDA_VISIBLE_DEVICES": "0,1"}  # as the workload sees it, not the probe's child


def test_fake_torch_with_init_cuda(tmp_path: Path) -> None:
    marker = tmp_path / "cuda-init.log"
    site = stack_site.write_site(tmp_path / "site", marker)
    python = stack_site.make_venv(tmp_path / "venv", site, with_pip=False)
    v = _stack(tmp_path, python=str(python), init_cuda=True, pip_check=False).value
    assert v["init_cuda"] is True and v["pip_check"] is None
    assert v["cuda"] == {"available": True, "device_count": 2, "arch_list": ["sm_80", "sm_90", "sm_100"],
                         "devices": [{"index": 0, "name": "NVIDIA H200", "capability": "9.0"},
                                     {"index": 1, "name": "NVIDIA H200", "capability": "9.0"}]}
    assert v["torch"]["cuda_initialized"] is True and marker.exists()


def test_broken_torch_import_is_a_finding(tmp_path: Path) -> None:
    site = tmp_path / "site"
    (site / "torch").mkdir(parents=True)
    (site / "torch" / "__init__.py").write_text(
        "raise OSError('libcudnn.so.9: cannot open shared object file: No such file or directory')\n")
    python = stack_site.make_venv(tmp_path / "venv", site, with_pip=False)
    v = _stack(tmp_path, python=str(python), pip_check=False).value
    assert v["torch"] is None and "torch" not in v["missing"]
    assert v["import_errors"]["torch"].startswith("OSError: libcudnn.so.9")


def test_source_checkout_in_working_dir_does_not_shadow(tmp_path: Path) -> None:
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "__init__.py").write_text("raise SystemExit('imported the checkout')\n")
    v = _stack(tmp_path, pip_check=False).value
    assert v["torch"] is None or v["torch"]["path"] != str(tmp_path / "torch")  # the installed one, if any
    assert v["import_errors"] == {}


def _python39() -> str | None:
    for candidate in (shutil.which("python3.9"), "/root/.pyenv/versions/3.9.18/bin/python3.9"):
        if candidate and os.path.exists(candidate):
            import subprocess
            ok = subprocess.run([candidate, "-c", "import sys; assert sys.version_info[:2] == (3, 9)"],
                                capture_output=True).returncode == 0
            if ok:
                return candidate
    return None


@pytest.mark.skipif(_python39() is None, reason="no Python 3.9 interpreter here")
def test_runs_on_python39(tmp_path: Path) -> None:
    import subprocess

    site = stack_site.write_site(tmp_path / "site")
    subprocess.run([_python39() or "", "-m", "venv", "--without-pip", str(tmp_path / "venv39")], check=True)
    (tmp_path / "venv39" / "lib" / "python3.9" / "site-packages" / "site.pth").write_text(f"{site}\n")
    v = _stack(tmp_path, python=str(tmp_path / "venv39" / "bin" / "python"), pip_check=False).value
    assert v["python"]["version"].startswith("3.9.")
    assert v["torch"]["nccl"] == "2.26.2" and v["vllm"]["commit"] == "0123abcd"


def _recorded_interpreter(tmp_path: Path, recorded: Path = RECORDED) -> Path:
    return _exe(tmp_path / "python-h200", f"""
if [ "$1 $2 $3 $4" = "-I -B -m pip" ]; then
  echo "vllm 0.10.1.dev412+g5bc1ad6ce.cu128 has requirement torch==2.7.0, but you have torch 2.7.1+cu128."
  exit 1
fi
echo "NCCL INFO noise on stderr" >&2
cat {recorded}
""")


def test_recorded_h200_output(tmp_path: Path) -> None:
    exe = _recorded_interpreter(tmp_path)
    env = {"VLLM_API_KEY": "abc", "HF_TOKEN": "hf_abcdefghijklmnopqrstuvwxyz", "NCCL_SOCKET_IFNAME": "eth0",
           "CUDA_VISIBLE_DEVICES": "GPU-5c3a0000-1b2c-4d5e-8f90-0123456789a0", "VLLM_ATTENTION_BACKEND": "FLASHINFER",
           "TORCH_CUDA_ARCH_LIST": "9.0", "VLLM_REMOTE_URL": "hf_AbCdEfGhIjKlMnOpQrStUv",
           "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True", "VLLM_PIN": "e2d141dbde55c2a4370fac5165b0561b6af4798b",
           "NCCL_OPAQUE": "Zx8aP0qLmN3rT5vW7yB9cD1eF2gH4jK6"}
    result = _stack(tmp_path, env, python=str(exe), init_cuda=True)
    v = result.value
    recorded = json.loads(RECORDED.read_text())
    assert {k: v[k] for k in recorded} == recorded
    assert v["interpreter"] == str(exe)
    assert v["pip_check"] == {"ok": False, "available": True, "lines": [
        "vllm 0.10.1.dev412+g5bc1ad6ce.cu128 has requirement torch==2.7.0, but you have torch 2.7.1+cu128."]}
    assert v["env"] == {
        "CUDA_VISIBLE_DEVICES": "GPU-5c3a0000-1b2c-4d5e-8f90-0123456789a0",
        "NCCL_OPAQUE": "***", "NCCL_SOCKET_IFNAME": "eth0",
        "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True", "TORCH_CUDA_ARCH_LIST": "9.0",
        "VLLM_API_KEY": "***", "VLLM_ATTENTION_BACKEND": "FLASHINFER",
        "VLLM_PIN": "e2d141dbde55c2a4370fac5165b0561b6af4798b", "VLLM_REMOTE_URL": "***"}
    check = expr.compile_expr("facts.stack.torch.cuda == '12.8' && facts.stack.torch.cxx11_abi && "
                              "facts.stack.cuda.devices.all(d, d.capability == '9.0') && "
                              "size(facts.stack.vllm.extension.sha256) == 64")
    assert expr.evaluate(check, {"facts": {"stack": v}}).value is True
    narrow = _stack(tmp_path, env, python=str(exe), env_prefixes=["NCCL_"], pip_check=False).value
    assert narrow["env"] == {"NCCL_OPAQUE": "***", "NCCL_SOCKET_IFNAME": "eth0"}


def test_recorded_device_output(tmp_path: Path) -> None:
    v = _stack(tmp_path, python=str(_recorded_interpreter(tmp_path, RECORDED_DEVICE)), init_cuda=True).value
    assert v["torch"]["version"] == "2.11.0+cu130" and v["torch"]["cuda"] == "13.0"
    assert v["torch"]["nccl"] == "2.28.9" and v["torch"]["cudnn"] == "9.19.0"
    assert v["cuda"]["devices"] == [{"capability": "9.0", "index": 0, "name": "NVIDIA H200"}]
    assert v["vllm"] is None and v["missing"] == ["vllm"]
    gpu_cc = ["9.0"]  # what gpu.nvml reported on the same machine
    check = expr.compile_expr("facts.gpu.all(c, ('sm_' + c.replace('.', '')) in facts.stack.torch.arch_list)")
    assert expr.evaluate(check, {"facts": {"stack": v, "gpu": gpu_cc}}).value is True


def looks_secret(name: str, value: str) -> bool:
    return mask_value(value, name=name).shown is None


def test_secret_heuristics() -> None:
    assert looks_secret("VLLM_API_KEY", "x") and looks_secret("NCCL_PASSWORD", "")
    assert looks_secret("VLLM_X", "ghp_0123456789abcdefABCDEF") and looks_secret("VLLM_X", "sk-proj-abcdefghijklmnop")
    assert not looks_secret("CUDA_HOME", "/usr/local/cuda-12.8")
    assert not looks_secret("VLLM_COMMIT", "0123456789abcdef0123456789abcdef01234567")
    assert masked_env({"CUDA_HOME": "/usr/local/cuda", "HOME": "/root"}) == {"CUDA_HOME": "/usr/local/cuda"}
    assert masked_env({"VLLM_DB": "postgres://u:hunter22@db/x", "VLLM_API_KEY": "k"}) == {
        "VLLM_API_KEY": "***", "VLLM_DB": "postgres://u:***@db/x"}


def test_interpreter_not_found(tmp_path: Path) -> None:
    err = _stack_error(tmp_path, python="python3.0-does-not-exist")
    assert err.code == "python.not_found" and "not on PATH" in err.message
    err = _stack_error(tmp_path, python="venv/bin/python")
    assert err.code == "python.not_found" and str(tmp_path / "venv/bin/python") in err.message
    (tmp_path / "notexec").write_text("")
    assert _stack_error(tmp_path, python="./notexec").code == "python.not_found"


def test_script_failure_reports_stderr_tail(tmp_path: Path) -> None:
    exe = _exe(tmp_path / "python-broken", 'echo "Fatal Python error: init_fs_encoding" >&2\nexit 1\n')
    err = _stack_error(tmp_path, python=str(exe))
    assert err.code == "python.script_failed" and "exited with 1" in err.message
    assert "init_fs_encoding" in err.message and err.commands
    exe = _exe(tmp_path / "python-noise", 'echo "not json"\n')
    err = _stack_error(tmp_path, python=str(exe))
    assert err.code == "python.script_failed" and "no JSON" in err.message


def test_timeout(tmp_path: Path) -> None:
    exe = _exe(tmp_path / "python-slow", "exec sleep 30\n")
    err = _stack_error(tmp_path, timeout=0.5, python=str(exe))
    assert err.code == "python.timeout" and "0.5s" in err.message


# --- toolchain ------------------------------------------------------------------------------------
NVCC_OUT = """nvcc: NVIDIA (R) Cuda compiler driver
Copyright (c) 2005-2025 NVIDIA Corporation
Built on Fri_Feb_21_20:23:50_PST_2025
Cuda compilation tools, release 12.8, V12.8.93
Build cuda_12.8.r12.8/compiler.35583870_0
"""
GCC_OUT = """c++ (Ubuntu 11.4.0-1ubuntu1~22.04) 11.4.0
Copyright (C) 2021 Free Software Foundation, Inc.
This is free software; see the source for copying conditions.  There is NO
"""


@pytest.fixture
def fake_bin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(toolchain, "NVCC_FALLBACK_DIRS", ())
    b = tmp_path / "bin"
    b.mkdir()
    _exe(b / "nvcc", _printer(NVCC_OUT))
    _exe(b / "c++", _printer(GCC_OUT))
    return b


def _tc(tmp_path: Path, path: str, **params: Any) -> Any:
    env = {"PATH": path, "CUDA_HOME": "", "CUDA_PATH": "", "CXX": ""}
    return ToolchainProbe().run(params, ProbeContext(base_dir=tmp_path, timeout_s=30, env=env))


def test_toolchain_fake_tools(tmp_path: Path, fake_bin: Path) -> None:
    r = _tc(tmp_path, str(fake_bin))
    assert r.value == {
        "missing": [],
        "nvcc": {"path": str(fake_bin / "nvcc"), "version": "12.8", "full_version": "12.8.93",
                 "raw": "Cuda compilation tools, release 12.8, V12.8.93"},
        "cc": {"path": str(fake_bin / "c++"), "version": "11.4.0", "family": "gcc",
               "raw": "c++ (Ubuntu 11.4.0-1ubuntu1~22.04) 11.4.0"},
    }
    assert r.commands == [f"{fake_bin / 'nvcc'} --version", f"{fake_bin / 'c++'} --version"]
    assert registry.get("toolchain") is not None and ToolchainProbe().side_effects({}) == frozenset()


def test_toolchain_missing_nvcc(tmp_path: Path, fake_bin: Path) -> None:
    (fake_bin / "nvcc").unlink()
    with pytest.raises(ProbeError) as info:
        _tc(tmp_path, str(fake_bin))
    assert info.value.code == "toolchain.not_found" and "nvcc" in info.value.message
    v = _tc(tmp_path, str(fake_bin), required=["cc"]).value
    assert v["nvcc"] is None and v["missing"] == ["nvcc"] and v["cc"]["version"] == "11.4.0"
    v = _tc(tmp_path, str(fake_bin), required=[]).value
    assert v["missing"] == ["nvcc"]


def test_toolchain_cuda_home_and_explicit_paths(tmp_path: Path, fake_bin: Path) -> None:
    cuda = tmp_path / "cuda-12.8" / "bin"
    cuda.mkdir(parents=True)
    (fake_bin / "nvcc").rename(cuda / "nvcc")
    env = {"PATH": str(fake_bin), "CUDA_HOME": str(tmp_path / "cuda-12.8"), "CXX": ""}
    v = ToolchainProbe().run({}, ProbeContext(base_dir=tmp_path, timeout_s=30, env=env)).value
    assert v["nvcc"]["path"] == str(cuda / "nvcc")
    clang = _exe(tmp_path / "clang++", "echo 'Ubuntu clang version 18.1.3 (1ubuntu1)'\n")
    v = _tc(tmp_path, "/nonexistent", nvcc="cuda-12.8/bin/nvcc", cc=str(clang)).value
    assert v["nvcc"]["version"] == "12.8"
    assert v["cc"] == {"path": str(clang), "version": "18.1.3", "family": "clang",
                       "raw": "Ubuntu clang version 18.1.3 (1ubuntu1)"}
    with pytest.raises(ProbeError) as info:
        _tc(tmp_path, str(fake_bin), cc="g++-13", required=["cc"])
    assert info.value.code == "toolchain.not_found" and "g++-13" in info.value.message


def test_toolchain_tool_that_fails(tmp_path: Path, fake_bin: Path) -> None:
    _exe(fake_bin / "nvcc", "echo 'nvcc fatal: cannot find libdevice' >&2\nexit 1\n")
    with pytest.raises(ProbeError) as info:
        _tc(tmp_path, str(fake_bin))
    assert info.value.code == "toolchain.failed" and "libdevice" in info.value.message


def test_version_parsers() -> None:
    assert parse_nvcc(NVCC_OUT)["full_version"] == "12.8.93"
    assert parse_nvcc("something else\n") == {"version": None, "full_version": None, "raw": "something else"}
    assert parse_cc("gcc (GCC) 11.4.1 20231218 (Red Hat 11.4.1-3)\nCopyright (C) 2021 Free Software Foundation")[
        "version"] == "11.4.1"
    assert parse_cc("Apple clang version 15.0.0 (clang-1500.3.9.4)")["family"] == "clang"


def test_toolchain_real(tmp_path: Path) -> None:
    if not (shutil.which("c++") or shutil.which("gcc")):
        pytest.skip("no host compiler here")
    v = ToolchainProbe().run({"required": ["cc"]}, ProbeContext(base_dir=tmp_path, timeout_s=60)).value
    assert v["cc"]["version"] and v["cc"]["family"] in ("gcc", "clang")
    if v["nvcc"] is not None:
        assert v["nvcc"]["version"] and v["nvcc"]["raw"].startswith("Cuda compilation tools")
