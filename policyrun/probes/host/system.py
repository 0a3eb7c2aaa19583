"""System clean-up probes, read from /proc and /dev/shm: leftover processes, listening ports,
shared-memory segments. Used after GPU runs to check that a server, its workers and their NCCL
or vLLM shared memory are gone.

The roots are module constants (`PROC_ROOT`, `SHM_ROOT`) and parameters (`proc_root`,
`shm_root`) so tests can point them at fake trees, and so a host's /proc mounted into a
container (e.g. at /host/proc) can be inspected.

Everything here is a snapshot: a process can start or exit while /proc is read; one that
disappears mid-read is skipped, never an error.

Patterns are RE2 (linear time): command lines are written by whoever started the process, so a
pattern that backtracks could otherwise be made to run for minutes.
"""

from __future__ import annotations

import fnmatch
import ipaddress
import os
import pwd
import stat
import struct
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any


from policyrun.probes.base import ProbeContext, ProbeError, ProbeResult
from policyrun.probes._kit.bounded import display_path
from policyrun.probes._kit.userregex import user_regex

PROC_ROOT = "/proc"
SHM_ROOT = "/dev/shm"
TCP_LISTEN = "0A"  # include/net/tcp_states.h: TCP_LISTEN = 10

_ROOT_PARAM = {"type": "string", "description": "Alternative root (tests, or a host /proc mounted elsewhere)."}

_PROCESSES_PARAMS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "pattern": {"type": "string", "description": "Regular expression searched in each command line "
                                                     "(arguments joined by spaces), e.g. 'vllm serve'."},
        "exclude_self": {"type": "boolean", "default": True,
                         "description": "Leave out policyrun's own process and its descendants."},
        "proc_root": _ROOT_PARAM,
    },
    "required": ["pattern"],
    "additionalProperties": False,
}

_PORTS_PARAMS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "range": {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 65535},
                  "minItems": 2, "maxItems": 2, "default": [1, 65535],
                  "description": "Inclusive [first, last] port range."},
        "proc_root": _ROOT_PARAM,
    },
    "additionalProperties": False,
}

_SHM_PARAMS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "pattern": {"type": "string", "default": "*", "description": "Glob on entry names, e.g. 'nccl-*'."},
        "regex": {"type": "string", "description": "Regular expression searched in entry names (instead of pattern)."},
        "shm_root": _ROOT_PARAM,
    },
    "additionalProperties": False,
}


def _user(uid: int | None) -> str | None:
    if uid is None:
        return None
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _compile(pattern: str, what: str) -> Any:
    return user_regex(pattern, f"parameter `{what}`", code="system.bad_pattern")


def _proc_root(params: Mapping[str, Any], ctx: ProbeContext) -> Path:
    root = ctx.resolve(str(params.get("proc_root") or PROC_ROOT))
    if not root.is_dir():
        raise ProbeError("system.unsupported", f"{root} does not exist: these probes read Linux /proc")
    return root


# --- system.processes ---------------------------------------------------------------------------
def _read_process(d: Path) -> tuple[str, int | None, int | None] | None:
    """(cmdline, ppid, uid), or None for a kernel thread, a zombie or a process that just left."""
    try:
        raw = (d / "cmdline").read_bytes()
    except OSError:
        return None
    if not raw:
        return None
    cmdline = raw.rstrip(b"\0").replace(b"\0", b" ").decode("utf-8", "replace")
    ppid = uid = None
    try:
        stat_text = (d / "stat").read_text(errors="replace")
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split at the last ')'
        ppid = int(stat_text[stat_text.rindex(")") + 2:].split()[1])
    except (OSError, ValueError, IndexError):
        pass
    try:
        for line in (d / "status").read_text(errors="replace").splitlines():
            if line.startswith("Uid:"):
                uid = int(line.split()[1])
                break
    except (OSError, ValueError, IndexError):
        pass
    return cmdline, ppid, uid


def _descendants(root_pid: int, parents: Mapping[int, int | None]) -> set[int]:
    children: dict[int, list[int]] = {}
    for pid, ppid in parents.items():
        if ppid is not None:
            children.setdefault(ppid, []).append(pid)
    out, stack = {root_pid}, [root_pid]
    while stack:
        for child in children.get(stack.pop(), []):
            if child not in out:
                out.add(child)
                stack.append(child)
    return out


class ProcessesProbe:
    kind = "system.processes"
    scope = "host"  # describes the machine it runs on: labelled by host, collected on every node
    summary = "Processes whose command line matches a regex (from /proc), e.g. a leftover `vllm serve`."
    params_schema: Mapping[str, Any] = _PROCESSES_PARAMS
    fact_schema: Mapping[str, Any] = {
        "type": "object",
        "properties": {
            "matches": {"type": "array", "items": {"type": "object", "properties": {
                "pid": {"type": "integer"}, "ppid": {"type": ["integer", "null"]}, "cmdline": {"type": "string"},
                "user": {"type": ["string", "null"]}, "uid": {"type": ["integer", "null"]}}}},
            "count": {"type": "integer"},
            "pattern": {"type": "string"},
        },
    }

    def side_effects(self, params: Mapping[str, Any]) -> frozenset[str]:
        return frozenset()

    def run(self, params: Mapping[str, Any], ctx: ProbeContext) -> ProbeResult:
        rx = _compile(str(params["pattern"]), "pattern")
        root = _proc_root(params, ctx)
        procs: dict[int, tuple[str, int | None, int | None]] = {}
        for entry in os.scandir(root):
            if entry.name.isdigit():
                info = _read_process(Path(entry.path))
                if info is not None:
                    procs[int(entry.name)] = info
        excluded: set[int] = set()
        if params.get("exclude_self", True):
            # Our own command line may contain the pattern (`--set pattern=...`), and probes
            # running in parallel start children (the python.stack interpreter).
            excluded = _descendants(os.getpid(), {pid: info[1] for pid, info in procs.items()})
        matches = [{"pid": pid, "ppid": ppid, "cmdline": cmd, "user": _user(uid), "uid": uid}
                   for pid, (cmd, ppid, uid) in sorted(procs.items())
                   if pid not in excluded and rx.search(cmd)]
        return ProbeResult(value={"matches": matches, "count": len(matches), "pattern": rx.pattern},
                           sources=[f"{root}/*/cmdline"])


# --- system.ports -------------------------------------------------------------------------------
def _ipv4(hex_addr: str) -> str:
    # The kernel prints the address as one native-endian 32-bit word.
    return str(ipaddress.IPv4Address(struct.pack("=I", int(hex_addr, 16))))


def _ipv6(hex_addr: str) -> str:
    words = [hex_addr[i:i + 8] for i in range(0, 32, 8)]
    return str(ipaddress.IPv6Address(b"".join(struct.pack("=I", int(w, 16)) for w in words)))


def _listening(path: Path, family: str) -> Iterator[dict[str, Any]]:
    try:
        lines = path.read_text().splitlines()[1:]
    except FileNotFoundError:
        return  # no IPv6 in this kernel or namespace
    for line in lines:
        fields = line.split()
        if len(fields) < 10 or fields[3] != TCP_LISTEN:
            continue
        addr_hex, port_hex = fields[1].rsplit(":", 1)
        try:
            address = _ipv4(addr_hex) if family == "ipv4" else _ipv6(addr_hex)
            yield {"port": int(port_hex, 16), "address": address, "family": family,
                   "inode": int(fields[9]), "uid": int(fields[7])}
        except ValueError:
            continue


class PortsProbe:
    kind = "system.ports"
    scope = "host"  # describes the machine it runs on: labelled by host, collected on every node
    summary = "Listening TCP ports in a range (from /proc/net/tcp and tcp6), e.g. a server that did not stop."
    params_schema: Mapping[str, Any] = _PORTS_PARAMS
    fact_schema: Mapping[str, Any] = {
        "type": "object",
        "properties": {
            "listening": {"type": "array", "items": {"type": "object", "properties": {
                "port": {"type": "integer"}, "address": {"type": "string"}, "family": {"enum": ["ipv4", "ipv6"]},
                "inode": {"type": "integer"}, "uid": {"type": "integer"}}}},
            "count": {"type": "integer"},
            "ports": {"type": "array", "items": {"type": "integer"}, "description": "Distinct ports, sorted."},
        },
    }

    def side_effects(self, params: Mapping[str, Any]) -> frozenset[str]:
        return frozenset()

    def run(self, params: Mapping[str, Any], ctx: ProbeContext) -> ProbeResult:
        lo, hi = params.get("range") or (1, 65535)
        if lo > hi:
            raise ProbeError("system.bad_range", f"port range [{lo}, {hi}] is empty; give [first, last]")
        root = _proc_root(params, ctx)
        sources = [str(root / "net" / "tcp"), str(root / "net" / "tcp6")]
        if not (root / "net" / "tcp").exists():
            raise ProbeError("system.unsupported", f"{sources[0]} does not exist: cannot list TCP sockets")
        found = [s for path, fam in ((root / "net" / "tcp", "ipv4"), (root / "net" / "tcp6", "ipv6"))
                 for s in _listening(path, fam) if lo <= s["port"] <= hi]
        found.sort(key=lambda s: (s["port"], s["family"], s["address"], s["inode"]))
        return ProbeResult(value={"listening": found, "count": len(found),
                                  "ports": sorted({s["port"] for s in found})}, sources=sources)


# --- system.shm ---------------------------------------------------------------------------------
class ShmProbe:
    kind = "system.shm"
    scope = "host"  # describes the machine it runs on: labelled by host, collected on every node
    summary = "Entries under /dev/shm matching a glob or regex (e.g. NCCL or vLLM segments left behind)."
    params_schema: Mapping[str, Any] = _SHM_PARAMS
    fact_schema: Mapping[str, Any] = {
        "type": "object",
        "properties": {
            "entries": {"type": "array", "items": {"type": "object", "properties": {
                "name": {"type": "string"}, "size": {"type": "integer"},
                "type": {"enum": ["file", "dir", "other"]}, "user": {"type": ["string", "null"]}}}},
            "count": {"type": "integer"},
            "total_size": {"type": "integer"},
        },
    }

    def side_effects(self, params: Mapping[str, Any]) -> frozenset[str]:
        return frozenset()

    def run(self, params: Mapping[str, Any], ctx: ProbeContext) -> ProbeResult:
        root = ctx.resolve(str(params.get("shm_root") or SHM_ROOT))
        if not root.is_dir():
            raise ProbeError("system.unsupported", f"{root} does not exist: no POSIX shared memory to inspect here")
        wanted: Callable[[str], object]
        if params.get("regex"):
            rx = _compile(str(params["regex"]), "regex")
            wanted = rx.search
        else:
            glob = str(params.get("pattern") or "*")
            wanted = lambda name: fnmatch.fnmatchcase(name, glob)  # noqa: E731
        entries: list[dict[str, Any]] = []
        for entry in os.scandir(root):
            name = display_path(entry.name)  # a name that is not UTF-8 is matched and shown as `\xNN`
            if not wanted(name):
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue  # removed while listing
            kind = "file" if stat.S_ISREG(st.st_mode) else "dir" if stat.S_ISDIR(st.st_mode) else "other"
            entries.append({"name": name, "size": st.st_size, "type": kind, "user": _user(st.st_uid)})
        entries.sort(key=lambda e: e["name"])
        return ProbeResult(value={"entries": entries, "count": len(entries),
                                  "total_size": sum(e["size"] for e in entries)}, sources=[str(root)])


PROBES = [ProcessesProbe(), PortsProbe(), ShmProbe()]
