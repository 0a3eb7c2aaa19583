"""`python.stack`: the Python / PyTorch / vLLM stack a target interpreter would run.

The facts come from the interpreter the workload uses (often a different venv), so the probe
runs a small stdlib-only script (`_stack_script.py`) in that interpreter and reads one JSON
object back; policyrun never imports torch itself (seconds of import time, CUDA libraries in
our process). `pip check` runs as a second command in the same interpreter.

Side effects: none by default. The child runs with CUDA_VISIBLE_DEVICES="" so that even a
library that initialises CUDA on import cannot touch a GPU. With `init_cuda: true` the script
also asks torch for devices and capabilities, which creates a CUDA context: the probe then
declares `gpu_context`, and a mode must permit it.

Nothing from the directory under audit runs: both children run isolated (`-I`: no PYTHON*
variables, no user site-packages, no script or working directory on sys.path), without writing
bytecode (`-B`), in a fresh empty working directory, with an allow-listed environment
(`bounded.CHILD_ENV_NAMES`), in their own process group, killed at the deadline.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import sys
import tempfile
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from policyrun import masking
from policyrun.probes.base import ProbeContext, ProbeError, ProbeResult
from policyrun.probes._kit.bounded import ChildOutputTooLarge, ChildResult, ChildTimeout, child_env, run_child
from policyrun.probes.python.session import ISOLATED as ISOLATED  # python.record runs its child the same way
from policyrun.probes.python.session import run_script, script_label, script_text

DEFAULT_ENV_PREFIXES = ("CUDA_", "NCCL_", "TORCH_", "PYTORCH_", "VLLM_")
_STDERR_TAIL = 2000
MAX_RESULT_BYTES = 16 * 1024 * 1024  # the script's JSON is a few kB; an interpreter printing more is killed

_PARAMS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "python": {"type": "string", "description": "Interpreter to inspect: a path (relative to the working "
                   "directory) or a name on PATH. Default: the interpreter running policyrun."},
        "init_cuda": {"type": "boolean", "default": False,
                      "description": "Also ask torch for CUDA devices (creates a CUDA context: side effect gpu_context)."},
        "pip_check": {"type": "boolean", "default": True, "description": "Run `python -m pip check`."},
        "env_prefixes": {"type": "array", "items": {"type": "string"},
                         "description": "Environment variable prefixes to record (default CUDA_, NCCL_, TORCH_, "
                                        "PYTORCH_, VLLM_)."},
    },
    "additionalProperties": False,
}

_NULLABLE_STR: dict[str, Any] = {"type": ["string", "null"]}
_EXTENSION: dict[str, Any] = {"type": "object", "properties": {
    "name": {"type": "string"}, "path": {"type": "string"}, "size": {"type": "integer"},
    "sha256": {"type": ["string", "null"]}}}
# Every field `_stack_script.py` emits is listed here (tests/test_fact_schemas.py runs it): lint
# treats an object with `properties` as closed, so a field missing here is an L028 for a reader.
_FACT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "interpreter": {"type": "string"},
        "python": {"type": "object", "properties": {
            "version": {"type": "string"}, "implementation": {"type": "string"},
            "executable": {"type": "string"}, "prefix": {"type": "string"}, "base_prefix": {"type": "string"},
            "platform": {"type": "string"}, "machine": {"type": "string"}, "libc": _NULLABLE_STR}},
        "torch": {"type": ["object", "null"], "properties": {
            "version": _NULLABLE_STR, "cuda": _NULLABLE_STR, "hip": _NULLABLE_STR, "git_version": _NULLABLE_STR,
            "debug": {"type": ["boolean", "null"]},
            "cxx11_abi": {"type": ["boolean", "null"]}, "cudnn": _NULLABLE_STR,
            "cudnn_version_int": {"type": ["integer", "null"]}, "nccl": _NULLABLE_STR,
            "arch_list": {"type": ["array", "null"], "items": {"type": "string"}}, "path": {"type": "string"},
            "cuda_initialized": {"type": ["boolean", "null"]}}},
        "vllm": {"type": ["object", "null"], "properties": {
            "version": _NULLABLE_STR, "path": _NULLABLE_STR,
            "commit": _NULLABLE_STR, "extension": {"anyOf": [_EXTENSION, {"type": "null"}]},
            "extensions": {"type": "array", "items": _EXTENSION}, "direct_url": {"type": ["object", "null"]}}},
        "cuda": {"type": ["object", "null"], "description": "Only with init_cuda.", "properties": {
            "available": {"type": ["boolean", "null"]}, "device_count": {"type": ["integer", "null"]},
            "devices": {"type": "array", "items": {"type": "object", "properties": {
                "index": {"type": "integer"}, "name": {"type": "string"}, "capability": {"type": "string"}}}},
            "arch_list": {"type": ["array", "null"], "items": {"type": "string"}},
            "error": {"type": "string"}}},
        "missing": {"type": "array", "items": {"type": "string"}},
        "import_errors": {"type": "object", "additionalProperties": {"type": "string"}},
        "warnings": {"type": "array", "items": {"type": "string"}},
        "pip_check": {"type": ["object", "null"], "properties": {
            "ok": {"type": ["boolean", "null"]}, "available": {"type": "boolean"},
            "lines": {"type": "array", "items": {"type": "string"}}, "error": {"type": "string"}}},
        "env": {"type": "object", "additionalProperties": {"type": "string"}},
        "init_cuda": {"type": "boolean"},
    },
}


def stack_script() -> str:
    return script_text("_stack_script.py")


def masked_env(env: Mapping[str, str], prefixes: tuple[str, ...] = DEFAULT_ENV_PREFIXES) -> dict[str, str]:
    return masking.masked_mapping({k: v for k, v in sorted(env.items()) if k.startswith(prefixes)})


def _tail(text: str) -> str:
    text = text.strip()
    return text if len(text) <= _STDERR_TAIL else "…" + text[-_STDERR_TAIL:]


def _resolve_python(spec: str, ctx: ProbeContext, env: Mapping[str, str]) -> str:
    if os.sep in spec or spec.startswith(("~", ".")):
        path = ctx.resolve(spec)
        if not path.is_file():
            raise ProbeError("python.not_found", f"interpreter {str(path)!r} does not exist; "
                             "fix the probe's `python` parameter")
        if not os.access(path, os.X_OK):
            raise ProbeError("python.not_found", f"interpreter {str(path)!r} is not executable")
        return str(path)
    found = shutil.which(spec, path=env.get("PATH"))
    if not found:
        raise ProbeError("python.not_found", f"interpreter {spec!r} is not on PATH; give its full path "
                         "in the probe's `python` parameter")
    return found


class PythonStackProbe:
    kind = "python.stack"
    scope = "host"  # describes the machine it runs on: labelled by host, collected on every node
    summary = ("A target interpreter's stack, inspected in a subprocess: Python, PyTorch (build CUDA, C++11 ABI, "
               "cuDNN, NCCL, arch list), vLLM (version, native extension sha256), pip check, CUDA/NCCL/TORCH/"
               "VLLM environment.")
    params_schema: Mapping[str, Any] = _PARAMS_SCHEMA
    fact_schema: Mapping[str, Any] = _FACT_SCHEMA

    def side_effects(self, params: Mapping[str, Any]) -> frozenset[str]:
        return frozenset({"gpu_context"}) if params.get("init_cuda") else frozenset()

    def run(self, params: Mapping[str, Any], ctx: ProbeContext) -> ProbeResult:
        env = {**os.environ, **ctx.env}
        exe = _resolve_python(str(params.get("python") or sys.executable), ctx, env)
        init_cuda = bool(params.get("init_cuda", False))
        deadline = time.monotonic() + ctx.timeout_s
        # CUDA_VISIBLE_DEVICES="" without init_cuda: belt and braces, no GPU is reachable.
        script_env = child_env(env, **({} if init_cuda else {"CUDA_VISIBLE_DEVICES": ""}))
        commands: list[str] = []
        with tempfile.TemporaryDirectory(prefix="policyrun-stack-") as cwd:
            # `pip check` needs nothing from the script: run it alongside, so the probe costs the
            # slower of the two (usually importing torch), not their sum.
            pip_pool = ThreadPoolExecutor(max_workers=1) if params.get("pip_check", True) else None
            pip_future = pip_pool.submit(_pip_check, exe, env, cwd, deadline) if pip_pool else None
            if pip_pool:
                pip_pool.shutdown(wait=False)
            shown = (f"{shlex.quote(exe)} {' '.join(ISOLATED)} -c <{script_label('_stack_script.py')}> "
                     f"{shlex.quote(json.dumps({'init_cuda': init_cuda}))}")
            try:
                # In a collection, the child is shared with python.modules of the same interpreter.
                answer = run_script(ctx.interpreters, exe, script_env, script_label("_stack_script.py"),
                                    stack_script(), lambda _left: {"init_cuda": init_cuda},
                                    timeout_s=ctx.timeout_s, max_stdout=MAX_RESULT_BYTES, keep=_reusable)
            except ChildTimeout:
                raise ProbeError("python.timeout", f"{exe} did not finish inspecting its stack within "
                                 f"{ctx.timeout_s:g}s; raise the probe's timeout_s", commands=[shown]) from None
            except ChildOutputTooLarge:
                raise ProbeError("python.script_failed", f"{exe} printed more than {MAX_RESULT_BYTES} bytes for "
                                 "the stack script; it is not the script's output", commands=[shown]) from None
            except OSError as exc:
                raise ProbeError("python.not_found", f"cannot run {exe!r}: {exc.strerror or exc}",
                                 commands=[shown]) from None
            proc = answer.result
            commands.append(answer.command)
            value = _script_value(proc, exe, commands)
            value["interpreter"] = exe
            value["init_cuda"] = init_cuda
            if pip_future is not None:
                commands.append(f"{shlex.quote(exe)} {' '.join(ISOLATED)} -m pip check")
                value["pip_check"] = pip_future.result()
            else:
                value["pip_check"] = None
        prefixes = tuple(params.get("env_prefixes") or DEFAULT_ENV_PREFIXES)
        value["env"] = masked_env(env, prefixes)
        return ProbeResult(value=value, commands=commands)


def _reusable(stdout: bytes) -> bool:
    """Whether a shared child may answer another probe after this answer: not after an import that
    failed (a half-imported torch would change what the next probe sees)."""
    try:
        return not json.loads(stdout)["import_errors"]
    except (ValueError, KeyError, TypeError):
        return False


def _script_value(proc: ChildResult, exe: str, commands: list[str]) -> dict[str, Any]:
    stderr = proc.stderr.decode("utf-8", "replace")
    if proc.returncode != 0:
        raise ProbeError("python.script_failed", f"the stack script exited with {proc.returncode} in {exe}: "
                         f"{_tail(stderr) or '(no stderr)'}", commands=commands)
    from policyrun import limits
    from policyrun.errors import PolicyrunError
    from policyrun.jsonfile import parse_json

    try:  # the interpreter is the user's: its output is parsed as strictly as any input
        value = parse_json(proc.stdout.decode("utf-8", "replace"), exe, what="stack script output",
                           code="python.script_failed", max_depth=limits.RESULTS_DEPTH)
        if not isinstance(value, dict):
            raise ValueError("not an object")
    except (ValueError, PolicyrunError):
        raise ProbeError("python.script_failed", f"the stack script printed no JSON object in {exe}: "
                         f"{_tail(stderr) or _tail(proc.stdout.decode('utf-8', 'replace'))}",
                         commands=commands) from None
    return value


def _pip_check(exe: str, env: Mapping[str, str], cwd: str, deadline: float) -> dict[str, Any]:
    remaining = max(deadline - time.monotonic(), 1.0)
    # pip's own settings: no prompt, no version check (it would reach the network).
    pip_env = child_env(env, PIP_NO_INPUT="1", PIP_DISABLE_PIP_VERSION_CHECK="1")
    try:
        proc = run_child([exe, *ISOLATED, "-m", "pip", "check"], cwd=cwd, env=pip_env, timeout_s=remaining,
                         max_stdout=MAX_RESULT_BYTES)
    except ChildTimeout:
        return {"ok": None, "available": True, "lines": [], "error": f"timed out after {remaining:.0f}s"}
    except (OSError, ChildOutputTooLarge) as exc:
        return {"ok": None, "available": True, "lines": [], "error": f"could not run: {exc}"}
    out = (proc.stdout + proc.stderr).decode("utf-8", "replace")
    lines = [ln.rstrip() for ln in out.splitlines() if ln.strip()]
    if proc.returncode != 0 and any("No module named pip" in ln for ln in lines):
        return {"ok": None, "available": False, "lines": lines}
    return {"ok": proc.returncode == 0, "available": True, "lines": lines}


PROBES = [PythonStackProbe()]
