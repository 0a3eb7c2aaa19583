"""`toolchain`: the CUDA compiler and the host C++ compiler an extension build would use.

Missing tools: by default both tools are required and a missing one is a fact error
(`toolchain.not_found`, naming the binary and where it was looked for). A rulebook that only
needs some of them lists those in `required`; the others are then reported as `null` and named
in `missing`, so a check can still say "nvcc absent" without the whole fact failing.

`--version` runs from an empty temporary directory with the allow-listed environment of
`bounded.child_env`, in its own process group, killed (with anything it started) at the deadline.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
import time
from collections.abc import Mapping
from typing import Any

from policyrun.probes.base import ProbeContext, ProbeError, ProbeResult
from policyrun.probes._kit.bounded import ChildOutputTooLarge, ChildTimeout, child_env, run_child

TOOLS = ("nvcc", "cc")
# Where CUDA installs nvcc when it is not on PATH (the toolkit does not edit PATH itself).
NVCC_FALLBACK_DIRS: tuple[str, ...] = ("/usr/local/cuda/bin",)
CC_DEFAULTS = ("c++", "g++", "gcc", "clang++")

_NVCC_RELEASE = re.compile(r"release (\d+\.\d+), V(\d+\.\d+\.\d+)")
_AFTER_VERSION = re.compile(r"\bversion\s+(\d+\.\d+(?:\.\d+)?)")
_VERSION = re.compile(r"(?<![\w.])(\d+\.\d+(?:\.\d+)?)(?![\w.])")
_PARENS = re.compile(r"\([^)]*\)")

_TOOL_SCHEMA: dict[str, Any] = {"type": ["object", "null"], "properties": {
    "path": {"type": "string"}, "version": {"type": ["string", "null"]}, "raw": {"type": "string"}}}

_PARAMS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "nvcc": {"type": "string", "default": "nvcc",
                 "description": "nvcc to inspect: a path, or a name looked up on PATH, then $CUDA_HOME/bin, "
                                "$CUDA_PATH/bin, /usr/local/cuda/bin."},
        "cc": {"type": "string", "description": "Host C++ compiler: a path or a name on PATH "
                                                "(default: the first of c++, g++, gcc, clang++; $CXX if set)."},
        "required": {"type": "array", "items": {"enum": list(TOOLS)}, "uniqueItems": True,
                     "description": "Tools whose absence is a fact error (default: all). Others become null."},
    },
    "additionalProperties": False,
}

_FACT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "nvcc": {**_TOOL_SCHEMA, "properties": {**_TOOL_SCHEMA["properties"],
                                                "full_version": {"type": ["string", "null"]}}},
        "cc": {**_TOOL_SCHEMA, "properties": {**_TOOL_SCHEMA["properties"],
                                              "family": {"enum": ["gcc", "clang", "unknown"]}}},
        "missing": {"type": "array", "items": {"type": "string"}},
    },
}


def parse_nvcc(text: str) -> dict[str, Any]:
    for line in text.splitlines():
        m = _NVCC_RELEASE.search(line)
        if m:
            return {"version": m.group(1), "full_version": m.group(2), "raw": line.strip()}
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return {"version": None, "full_version": None, "raw": first}


def parse_cc(text: str) -> dict[str, Any]:
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    lower = text.lower()
    family = "clang" if "clang" in first.lower() else \
        "gcc" if ("free software foundation" in lower or re.search(r"\b(gcc|g\+\+)\b", first.lower())) else "unknown"
    m = _AFTER_VERSION.search(first) or _VERSION.search(_PARENS.sub(" ", first))
    return {"version": m.group(1) if m else None, "family": family, "raw": first}


class ToolchainProbe:
    kind = "toolchain"
    scope = "host"  # describes the machine it runs on: labelled by host, collected on every node
    summary = "nvcc release and the host C++ compiler (path, version, the version line)."
    params_schema: Mapping[str, Any] = _PARAMS_SCHEMA
    fact_schema: Mapping[str, Any] = _FACT_SCHEMA

    def side_effects(self, params: Mapping[str, Any]) -> frozenset[str]:
        return frozenset()

    def run(self, params: Mapping[str, Any], ctx: ProbeContext) -> ProbeResult:
        env = {**os.environ, **ctx.env}
        required = set(params["required"]) if "required" in params else set(TOOLS)
        deadline = time.monotonic() + ctx.timeout_s
        commands: list[str] = []
        value: dict[str, Any] = {"missing": []}
        not_found: list[str] = []
        for tool in TOOLS:
            path, looked = _find_nvcc(params, env, ctx) if tool == "nvcc" else _find_cc(params, env, ctx)
            if path is None:
                value[tool] = None
                value["missing"].append(tool)
                if tool in required:
                    not_found.append(f"{tool} ({looked})")
                continue
            commands.append(f"{path} --version")
            text = _version_output(path, env, ctx, deadline, commands)
            value[tool] = {"path": path, **(parse_nvcc(text) if tool == "nvcc" else parse_cc(text))}
        if not_found:
            raise ProbeError("toolchain.not_found", "not found: " + "; ".join(not_found) + ". Install it, "
                             "give its path in the probe's parameters, or leave it out of `required`",
                             commands=commands)
        return ProbeResult(value=value, commands=commands)


def _which(spec: str, env: Mapping[str, str], ctx: ProbeContext) -> str | None:
    if os.sep in spec:
        p = ctx.resolve(spec)
        return str(p) if p.is_file() and os.access(p, os.X_OK) else None
    return shutil.which(spec, path=env.get("PATH"))


def _find_nvcc(params: Mapping[str, Any], env: Mapping[str, str], ctx: ProbeContext) -> tuple[str | None, str]:
    spec = str(params.get("nvcc") or "nvcc")
    if os.sep in spec:
        return _which(spec, env, ctx), spec
    dirs = [os.path.join(env[k], "bin") for k in ("CUDA_HOME", "CUDA_PATH") if env.get(k)]
    dirs += list(NVCC_FALLBACK_DIRS)
    found = _which(spec, env, ctx) or next(
        (p for p in (os.path.join(d, spec) for d in dirs) if os.path.isfile(p) and os.access(p, os.X_OK)), None)
    return found, "looked on PATH and in " + ", ".join(dirs)


def _find_cc(params: Mapping[str, Any], env: Mapping[str, str], ctx: ProbeContext) -> tuple[str | None, str]:
    if params.get("cc"):
        spec = str(params["cc"])
        return _which(spec, env, ctx), spec if os.sep in spec else f"{spec} on PATH"
    candidates = ([env["CXX"]] if env.get("CXX") else []) + list(CC_DEFAULTS)
    found = next((p for p in (_which(c, env, ctx) for c in candidates) if p), None)
    return found, "none of " + ", ".join(candidates) + " on PATH"


def _version_output(path: str, env: Mapping[str, str], ctx: ProbeContext, deadline: float,
                    commands: list[str]) -> str:
    try:
        with tempfile.TemporaryDirectory(prefix="policyrun-toolchain-") as cwd:
            proc = run_child([path, "--version"], cwd=cwd, env=child_env(env),
                             timeout_s=max(deadline - time.monotonic(), 1.0), max_stdout=1 << 20)
    except ChildTimeout:
        raise ProbeError("toolchain.timeout", f"`{path} --version` did not finish within {ctx.timeout_s:g}s",
                         commands=commands) from None
    except ChildOutputTooLarge:
        raise ProbeError("toolchain.failed", f"`{path} --version` printed more than 1 MiB; it is not a compiler's "
                         "version banner", commands=commands) from None
    except OSError as exc:
        raise ProbeError("toolchain.failed", f"cannot run {path}: {exc.strerror or exc}", commands=commands) from None
    text = (proc.stdout + proc.stderr).decode("utf-8", "replace")
    if proc.returncode != 0:
        tail = text.strip()[-500:] or "(no output)"
        raise ProbeError("toolchain.failed", f"`{path} --version` exited with {proc.returncode}: {tail}",
                         commands=commands)
    return text


PROBES = [ToolchainProbe()]
