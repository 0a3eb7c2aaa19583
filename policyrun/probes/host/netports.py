"""`net.ports`: which TCP ports are listening (from /proc/net/tcp and tcp6, as `system.ports`
reads them) and whether given ports can be bound now, for a server about to start on them.

The bind test opens a socket, binds it with SO_REUSEADDR (as servers such as uvicorn do, so a
port whose last connection lingers in TIME_WAIT still counts as free) and closes it at once; it
never listens or connects, so it has no side effect to declare.
"""

from __future__ import annotations

import errno
import os
import socket
from collections.abc import Mapping
from typing import Any

from policyrun.probes.base import ProbeContext, ProbeResult
from policyrun.probes.host.system import _listening, _proc_root

_PARAMS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "ports": {"type": "array", "items": {"type": "integer", "minimum": 1, "maximum": 65535}, "default": [],
                  "description": "Ports to test: listening or not, and whether they can be bound."},
        "host": {"type": "string", "default": "0.0.0.0",
                 "description": "Address the bind test uses (a server's --host): 0.0.0.0, 127.0.0.1, ::, ..."},
        "proc_root": {"type": "string", "description": "Alternative /proc (tests, or a host /proc mounted elsewhere)."},
    },
    "additionalProperties": False,
}

_SOCKET = {"type": "object", "properties": {
    "port": {"type": "integer"}, "address": {"type": "string"}, "family": {"enum": ["ipv4", "ipv6"]},
    "inode": {"type": "integer"}, "uid": {"type": "integer"}}, "additionalProperties": False}

_FACT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "listening": {"type": "array", "items": _SOCKET, "description": "Every listening TCP socket."},
        "listening_ports": {"type": "array", "items": {"type": "integer"}, "description": "Distinct ports, sorted."},
        "ports": {"type": "array", "items": {"type": "object", "properties": {
            "port": {"type": "integer"},
            "listening": {"type": "boolean"},
            "addresses": {"type": "array", "items": {"type": "string"}, "description": "Where it listens."},
            "bindable": {"type": "boolean", "description": "A bind to host:port succeeded just now."},
            "bind_error": {"type": ["string", "null"], "description": "Why not (`address in use`, ...)."}},
            "additionalProperties": False}, "description": "One row per port in `ports`, in that order."},
    },
    "additionalProperties": False,
}


def bind_error(host: str, port: int) -> str | None:
    """None when host:port can be bound now, else why not in words."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        return f"cannot resolve {host!r} ({exc.strerror})"
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(address)
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                return "address in use"
            if exc.errno == errno.EACCES:
                return "permission denied (ports below 1024 need privileges)"
            return os.strerror(exc.errno) if exc.errno else str(exc)
    return None


class NetPortsProbe:
    kind = "net.ports"
    summary = "Listening TCP sockets (/proc/net/tcp, tcp6) and whether given ports can be bound now."
    params_schema: Mapping[str, Any] = _PARAMS
    fact_schema: Mapping[str, Any] = _FACT

    def side_effects(self, params: Mapping[str, Any]) -> frozenset[str]:
        return frozenset()

    def run(self, params: Mapping[str, Any], ctx: ProbeContext) -> ProbeResult:
        root = _proc_root(params, ctx)
        found = [s for path, fam in ((root / "net" / "tcp", "ipv4"), (root / "net" / "tcp6", "ipv6"))
                 for s in _listening(path, fam)]
        found.sort(key=lambda s: (s["port"], s["family"], s["address"], s["inode"]))
        host = str(params.get("host") or "0.0.0.0")
        rows = []
        for port in params.get("ports") or []:
            addresses = sorted({s["address"] for s in found if s["port"] == port})
            why = bind_error(host, int(port))
            rows.append({"port": port, "listening": bool(addresses), "addresses": addresses,
                         "bindable": why is None, "bind_error": why})
        return ProbeResult(value={"listening": found, "listening_ports": sorted({s["port"] for s in found}),
                                  "ports": rows},
                           sources=[str(root / "net" / "tcp"), str(root / "net" / "tcp6")])


PROBES = [NetPortsProbe()]
