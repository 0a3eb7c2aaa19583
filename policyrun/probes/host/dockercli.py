"""`docker`: the container engine as the docker CLI reports it: versions, runtimes (is `nvidia`
registered, which is the default), images, and running containers with their published ports,
mounts, runtime and GPU requests.

Read-only by construction: only `docker version`, `docker info`, `docker images`, `docker ps` and
`docker inspect` run, each with `--format '{{json .}}'` (stable JSON since Docker 1.13), in an
empty directory, with the allow-listed environment plus the variables that say which engine to
talk to (DOCKER_HOST, DOCKER_CONTEXT, DOCKER_CONFIG, DOCKER_CERT_PATH, DOCKER_TLS_VERIFY).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Mapping
from typing import Any

from policyrun.probes.base import ProbeContext, ProbeError, ProbeResult
from policyrun.probes._kit.bounded import ChildOutputTooLarge, ChildTimeout, child_env, run_child

DOCKER_ENV = ("DOCKER_HOST", "DOCKER_CONTEXT", "DOCKER_CONFIG", "DOCKER_CERT_PATH", "DOCKER_TLS_VERIFY")
MAX_OUTPUT = 64 << 20
SECTIONS = ("images", "containers")

_PARAMS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "docker": {"type": "string", "default": "docker", "description": "The CLI: a path, or a name on PATH."},
        "include": {"type": "array", "items": {"enum": list(SECTIONS)}, "uniqueItems": True,
                    "default": list(SECTIONS), "description": "Lists to collect besides version and info."},
        "all_containers": {"type": "boolean", "default": False,
                           "description": "List stopped containers too (`docker ps -a`)."},
    },
    "additionalProperties": False,
}

_PORT = {"type": "object", "properties": {
    "container_port": {"type": "integer"}, "protocol": {"type": "string"},
    "host_ip": {"type": ["string", "null"]}, "host_port": {"type": ["integer", "null"]}},
    "additionalProperties": False}
_MOUNT = {"type": "object", "properties": {
    "type": {"type": "string"}, "source": {"type": "string"}, "destination": {"type": "string"},
    "rw": {"type": "boolean"}, "name": {"type": ["string", "null"]}}, "additionalProperties": False}

_FACT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "client_version": {"type": ["string", "null"]},
        "server_version": {"type": ["string", "null"]},
        "api_version": {"type": ["string", "null"], "description": "The engine's API version."},
        "runtimes": {"type": "array", "items": {"type": "string"}, "description": "Registered runtimes, sorted."},
        "default_runtime": {"type": ["string", "null"]},
        "nvidia_runtime": {"type": "boolean", "description": "A runtime named `nvidia` is registered."},
        "gpus": {"type": "boolean", "description": "`nvidia` registered or CDI devices named nvidia.com/gpu=..."},
        "images": {"type": "array", "items": {"type": "object", "properties": {
            "repository": {"type": "string"}, "tag": {"type": "string"}, "ref": {"type": "string"},
            "id": {"type": "string"}, "digest": {"type": ["string", "null"]}, "size": {"type": "string"}},
            "additionalProperties": False}},
        "containers": {"type": "array", "items": {"type": "object", "properties": {
            "id": {"type": "string"}, "name": {"type": "string"}, "image": {"type": "string"},
            "state": {"type": "string"}, "status": {"type": "string"}, "command": {"type": "string"},
            "ports": {"type": "array", "items": _PORT}, "mounts": {"type": "array", "items": _MOUNT},
            "runtime": {"type": ["string", "null"]},
            "gpus": {"type": "boolean", "description": "Started with GPUs (--gpus, a device request)."}},
            "additionalProperties": False}},
    },
    "additionalProperties": False,
}


def _env(ctx: ProbeContext) -> dict[str, str]:
    env = {**os.environ, **ctx.env}
    return child_env(env, **{k: env[k] for k in DOCKER_ENV if env.get(k)})


class _Runner:
    def __init__(self, exe: str, ctx: ProbeContext) -> None:
        self.exe, self.env, self.ctx = exe, _env(ctx), ctx
        self.deadline = time.monotonic() + ctx.timeout_s
        self.commands: list[str] = []

    def __call__(self, *args: str) -> str:
        argv = [self.exe, *args]
        self.commands.append(" ".join(a if re.fullmatch(r"[\w./=:@-]+", a) else repr(a) for a in argv))
        left = self.deadline - time.monotonic()
        try:
            with tempfile.TemporaryDirectory(prefix="policyrun-docker-") as cwd:
                proc = run_child(argv, cwd=cwd, env=self.env, timeout_s=max(left, 0.001), max_stdout=MAX_OUTPUT)
        except ChildTimeout:
            raise ProbeError("docker.timeout", f"`{self.commands[-1]}` did not finish within "
                                               f"{self.ctx.timeout_s:g}s", commands=self.commands) from None
        except ChildOutputTooLarge:
            raise ProbeError("docker.failed", f"`{self.commands[-1]}` printed more than {MAX_OUTPUT >> 20} MiB",
                             commands=self.commands) from None
        except OSError as exc:
            raise ProbeError("docker.failed", f"cannot run {self.exe}: {exc.strerror or exc}",
                             commands=self.commands) from None
        if proc.returncode != 0:
            tail = proc.stderr.decode("utf-8", "replace").strip()[-500:] or "(no output)"
            code = "docker.no_engine" if "daemon" in tail.lower() or "connect" in tail.lower() else "docker.failed"
            raise ProbeError(code, f"`{self.commands[-1]}` exited with {proc.returncode}: {tail}",
                             commands=self.commands)
        return proc.stdout.decode("utf-8", "replace")

    def json(self, *args: str) -> Any:
        text = self(*args)
        try:
            return json.loads(text)
        except ValueError:
            raise ProbeError("docker.bad_output", f"`{self.commands[-1]}` did not print JSON: "
                                                  f"{text.strip()[:200]!r}", commands=self.commands) from None

    def lines(self, *args: str) -> list[dict[str, Any]]:
        out = []
        for line in self(*args).splitlines():
            if line.strip():
                try:
                    row = json.loads(line)
                except ValueError:
                    raise ProbeError("docker.bad_output", f"`{self.commands[-1]}` printed a line that is not "
                                                          f"JSON: {line[:200]!r}", commands=self.commands) from None
                if isinstance(row, dict):
                    out.append(row)
        return out


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def ports(inspected: Mapping[str, Any]) -> list[dict[str, Any]]:
    """`NetworkSettings.Ports` ({"8000/tcp": [{"HostIp": "0.0.0.0", "HostPort": "8000"}]}) as rows."""
    rows = []
    for key, bindings in sorted(((inspected.get("NetworkSettings") or {}).get("Ports") or {}).items()):
        number, _, protocol = str(key).partition("/")
        if not number.isdigit():
            continue
        for b in bindings or [None]:
            host_port = (b or {}).get("HostPort")
            rows.append({"container_port": int(number), "protocol": protocol or "tcp",
                         "host_ip": _str((b or {}).get("HostIp")),
                         "host_port": int(host_port) if isinstance(host_port, str) and host_port.isdigit() else None})
    return rows


def mounts(inspected: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [{"type": str(m.get("Type") or ""), "source": str(m.get("Source") or ""),
             "destination": str(m.get("Destination") or ""), "rw": bool(m.get("RW")), "name": _str(m.get("Name"))}
            for m in inspected.get("Mounts") or [] if isinstance(m, dict)]


def _wants_gpus(host_config: Mapping[str, Any]) -> bool:
    for request in host_config.get("DeviceRequests") or []:
        caps = [c for group in (request or {}).get("Capabilities") or [] for c in group or []]
        if "gpu" in caps or (request or {}).get("Driver") == "nvidia":
            return True
    return False


def container(row: Mapping[str, Any], inspected: Mapping[str, Any]) -> dict[str, Any]:
    host = inspected.get("HostConfig") or {}
    state = inspected.get("State") or {}
    return {"id": str(row.get("ID") or inspected.get("Id") or ""),
            "name": str(row.get("Names") or inspected.get("Name") or "").lstrip("/"),
            "image": str(row.get("Image") or (inspected.get("Config") or {}).get("Image") or ""),
            "state": str(row.get("State") or state.get("Status") or ""), "status": str(row.get("Status") or ""),
            "command": str(row.get("Command") or "").strip('"'),
            "ports": ports(inspected), "mounts": mounts(inspected),
            "runtime": _str(host.get("Runtime")), "gpus": _wants_gpus(host)}


def image(row: Mapping[str, Any]) -> dict[str, Any]:
    repo, tag = str(row.get("Repository") or ""), str(row.get("Tag") or "")
    digest = _str(row.get("Digest"))
    return {"repository": repo, "tag": tag, "ref": f"{repo}:{tag}" if tag and tag != "<none>" else repo,
            "id": str(row.get("ID") or ""), "digest": None if digest == "<none>" else digest,
            "size": str(row.get("Size") or "")}


class DockerProbe:
    kind = "docker"
    summary = "The Docker engine through its CLI (read-only): versions, runtimes (nvidia?), images, containers."
    params_schema: Mapping[str, Any] = _PARAMS
    fact_schema: Mapping[str, Any] = _FACT

    def side_effects(self, params: Mapping[str, Any]) -> frozenset[str]:
        return frozenset()

    def run(self, params: Mapping[str, Any], ctx: ProbeContext) -> ProbeResult:
        spec = str(params.get("docker") or "docker")
        exe = str(ctx.resolve(spec)) if os.sep in spec else shutil.which(spec, path=_env(ctx).get("PATH"))
        if exe is None or not os.access(exe, os.X_OK):
            raise ProbeError("docker.not_found", f"{spec} not found{' on PATH' if os.sep not in spec else ''}; "
                                                 "install the Docker CLI or give its path in `docker`")
        docker = _Runner(exe, ctx)
        version = docker.json("version", "--format", "{{json .}}")
        info = docker.json("info", "--format", "{{json .}}")
        client, server = (version.get("Client") or {}), (version.get("Server") or {})
        runtimes = sorted((info.get("Runtimes") or {}).keys())
        cdi = [d.get("ID", "") for d in info.get("DiscoveredDevices") or [] if isinstance(d, dict)]
        value: dict[str, Any] = {
            "client_version": _str(client.get("Version")),
            "server_version": _str(server.get("Version")) or _str(info.get("ServerVersion")),
            "api_version": _str(server.get("ApiVersion")), "runtimes": runtimes,
            "default_runtime": _str(info.get("DefaultRuntime")), "nvidia_runtime": "nvidia" in runtimes,
            "gpus": "nvidia" in runtimes or any(str(d).startswith("nvidia.com/gpu") for d in cdi),
            "images": [], "containers": []}
        include = set(params.get("include") or SECTIONS)
        if "images" in include:
            value["images"] = [image(r) for r in docker.lines("images", "--no-trunc", "--format", "{{json .}}")]
        if "containers" in include:
            rows = docker.lines("ps", *(["-a"] if params.get("all_containers") else []), "--no-trunc",
                                "--format", "{{json .}}")
            details: dict[str, Any] = {}
            if rows:
                for d in docker.json("inspect", "--type", "container", *[str(r.get("ID")) for r in rows]):
                    if isinstance(d, dict):
                        details[str(d.get("Id", ""))] = d
            value["containers"] = [container(r, _find(details, str(r.get("ID") or ""))) for r in rows]
        return ProbeResult(value=value, commands=docker.commands)


def _find(details: Mapping[str, Any], short: str) -> Mapping[str, Any]:
    # `docker ps --no-trunc` prints the full id; older CLIs may print 12 characters of it.
    return details.get(short) or next((d for k, d in details.items() if short and k.startswith(short)), {})


PROBES = [DockerProbe()]
