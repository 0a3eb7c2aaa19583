"""`python.modules`: whether modules import in a target interpreter, with version and location.

Importing a module runs its code: that is what the probe asks ("does `flash_attn` import in the
workload's venv?"). The child runs exactly as `python.stack`'s do — isolated (`-I -B`: no PYTHON*
variables, no user site-packages, neither the script's nor the working directory on sys.path), in
a fresh empty directory, with the allow-listed environment of `bounded.child_env`, in its own
process group, killed at the deadline — so what imports is what the interpreter has installed,
never a module lying in the directory under audit.

Side effects: none by default. Importing torch does not initialise CUDA (that happens on first
use), but any module may do so at import time, so the child runs with CUDA_VISIBLE_DEVICES=""
and no GPU is reachable. `gpu_visible: true` lets imports see the GPUs; the probe then declares
`gpu_context`, which a mode must permit.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from collections.abc import Mapping
from typing import Any

from policyrun.probes.base import ProbeContext, ProbeError, ProbeResult
from policyrun.probes._kit.bounded import ChildOutputTooLarge, ChildTimeout, child_env
from policyrun.probes.python.session import ISOLATED, run_script, script_label, script_text
from policyrun.probes.python.stack import MAX_RESULT_BYTES, _resolve_python, _tail

DEFAULT_TIMEOUT_S = 60.0
MAX_TIMEOUT_S = 3600.0
_MODULE_NAME = r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$"

_PARAMS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "python": {"type": "string", "description": "Interpreter to ask: a path (relative to the working directory) "
                                                    "or a name on PATH. Default: the interpreter running policyrun."},
        "modules": {"type": "array", "minItems": 1, "uniqueItems": True,
                    "items": {"type": "string", "pattern": _MODULE_NAME},
                    "description": "Module names to import, e.g. torch, vllm, flash_attn, vllm._C."},
        "timeout_s": {"type": "number", "exclusiveMinimum": 0, "maximum": MAX_TIMEOUT_S, "default": DEFAULT_TIMEOUT_S,
                      "description": "Budget for all imports together (also bounded by the probe's own timeout_s); "
                                     "an import still running then is reported as timed out."},
        "gpu_visible": {"type": "boolean", "default": False,
                        "description": "Let imports see the GPUs (side effect gpu_context). Default: "
                                       "CUDA_VISIBLE_DEVICES is empty in the child."},
    },
    "required": ["modules"],
    "additionalProperties": False,
}

_FACT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "python": {"type": "string", "description": "The interpreter run (resolved path)."},
        "python_version": {"type": "string"},
        "modules": {"type": "object", "additionalProperties": {"type": "object", "properties": {
            "importable": {"type": "boolean"},
            "version": {"type": ["string", "null"], "description": "Version of the distribution providing the module "
                                                                   "(importlib.metadata), else its __version__."},
            "distribution": {"type": ["string", "null"], "description": "The distribution the version came from."},
            "location": {"type": ["string", "null"], "description": "The module's __file__ (a namespace package: "
                                                                    "its first __path__ entry)."},
            "error": {"type": ["string", "null"], "description": "First line of the exception: 'Type: message'."},
            "error_type": {"type": ["string", "null"], "description": "e.g. ModuleNotFoundError, ImportError, OSError, "
                                                                      "TimeoutError."},
        }}, "description": "Keyed by module name, in the order given."},
        "missing": {"type": "array", "items": {"type": "string"}, "description": "Modules that did not import."},
        "gpu_visible": {"type": "boolean"},
    },
}


def modules_script() -> str:
    return script_text("_modules_script.py")


def _reusable(stdout: bytes) -> bool:
    """Whether a shared child may answer another probe after this answer: when every module
    imported or simply is not installed (no module of that name, or of a package above it: nothing
    ran). An import that failed or timed out inside a module's own code leaves the interpreter in a
    state a fresh one is not in."""
    try:
        modules = json.loads(stdout)["modules"]
        for name, got in modules.items():
            if got.get("importable") is True:
                continue
            parts = name.split(".")
            absent = {f"ModuleNotFoundError: No module named '{'.'.join(parts[:i])}'" for i in range(1, len(parts) + 1)}
            if got.get("error") not in absent:
                return False
        return True
    except (ValueError, KeyError, TypeError, AttributeError):
        return False


def _budgets(requested: float, probe_budget: float) -> tuple[float, float]:
    """(child deadline, the script's own import budget). The child finishes before collect abandons
    the probe, and the script's watchdog reports before the child is killed (interpreter start-up
    and metadata lookups take the difference)."""
    child = max(min(requested, probe_budget - min(1.0, probe_budget * 0.1)), 0.001)
    return child, _script_budget(child)


def _script_budget(child: float) -> float:
    """The script's import budget for a child that has `child` seconds left."""
    return max(child - max(1.0, child * 0.1), child * 0.5)


class PythonModulesProbe:
    kind = "python.modules"
    scope = "host"  # describes the machine it runs on: labelled by host, collected on every node
    summary = ("Whether modules import in a target interpreter (isolated subprocess): version, location, the error "
               "when they do not.")
    params_schema: Mapping[str, Any] = _PARAMS_SCHEMA
    fact_schema: Mapping[str, Any] = _FACT_SCHEMA

    def side_effects(self, params: Mapping[str, Any]) -> frozenset[str]:
        return frozenset({"gpu_context"}) if params.get("gpu_visible") else frozenset()

    def run(self, params: Mapping[str, Any], ctx: ProbeContext) -> ProbeResult:
        env = {**os.environ, **ctx.env}
        exe = _resolve_python(str(params.get("python") or sys.executable), ctx, env)
        names = [str(m) for m in params["modules"]]
        gpu_visible = bool(params.get("gpu_visible", False))
        timeout, budget = _budgets(float(params.get("timeout_s", DEFAULT_TIMEOUT_S)), ctx.timeout_s)
        shown = (f"{shlex.quote(exe)} {' '.join(ISOLATED)} -c <{script_label('_modules_script.py')}> "
                 f"{shlex.quote(json.dumps({'modules': names, 'budget_s': round(budget, 3)}))}")
        script_env = child_env(env, **({} if gpu_visible else {"CUDA_VISIBLE_DEVICES": ""}))

        def make_args(left: float) -> dict[str, Any]:
            # In a shared child this request may have waited for another probe's: budget what is left.
            return {"modules": names, "budget_s": round(_script_budget(left), 3)}

        try:
            # In a collection, the child is shared with python.stack of the same interpreter.
            answer = run_script(ctx.interpreters, exe, script_env, script_label("_modules_script.py"),
                                modules_script(), make_args, timeout_s=timeout, max_stdout=MAX_RESULT_BYTES,
                                keep=_reusable)
        except ChildTimeout:
            raise ProbeError("python.timeout", f"{exe} did not finish importing {', '.join(names)} within "
                             f"{timeout:g}s; raise the probe's timeout_s", commands=[shown]) from None
        except ChildOutputTooLarge:
            raise ProbeError("python.script_failed", f"{exe} printed more than {MAX_RESULT_BYTES} bytes on "
                             "stdout; it is not the script's output", commands=[shown]) from None
        except OSError as exc:
            raise ProbeError("python.not_found", f"cannot run {exe!r}: {exc.strerror or exc}",
                             commands=[shown]) from None
        proc, commands = answer.result, [answer.command]
        from policyrun import limits
        from policyrun.errors import PolicyrunError
        from policyrun.jsonfile import parse_json

        try:  # the interpreter is the user's: its output is parsed as strictly as any input
            got = parse_json(proc.stdout.decode("utf-8", "replace"), exe, what="modules script output",
                             code="python.script_failed", max_depth=limits.RESULTS_DEPTH)
            modules = {name: _entry(got["modules"][name]) for name in names}
            version = got["python_version"]
            if not isinstance(version, str):
                raise TypeError("python_version")
        except (ValueError, KeyError, TypeError, PolicyrunError):
            stderr = proc.stderr.decode("utf-8", "replace")
            raise ProbeError("python.script_failed", f"the modules script printed no result in {exe} (exit "
                             f"{proc.returncode}): {_tail(stderr) or '(no stderr)'}", commands=commands) from None
        value = {"python": exe, "python_version": version, "modules": modules,
                 "missing": [n for n in names if not modules[n]["importable"]], "gpu_visible": gpu_visible}
        return ProbeResult(value=value, commands=commands)


_TEXT_FIELDS = ("version", "distribution", "location", "error", "error_type")


def _entry(raw: Any) -> dict[str, Any]:
    """One module's result as the fact schema says, or TypeError: the interpreter reports on itself,
    but what it prints is data that must have the documented shape."""
    if not isinstance(raw, dict) or not isinstance(raw.get("importable"), bool):
        raise TypeError("not a module result")
    return {"importable": raw["importable"],
            **{k: raw[k] if isinstance(raw.get(k), str) else None for k in _TEXT_FIELDS}}


PROBES = [PythonModulesProbe()]
