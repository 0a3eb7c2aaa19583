"""`system.disk`: free space on the file systems holding given paths (os.statvfs), e.g. room to
download a model or pull an image. A path that does not exist yet is measured at its nearest
existing ancestor (where it would be created), named in `measured_at`."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from policyrun.probes.base import ProbeContext, ProbeError, ProbeResult

GIB = 1 << 30

_PARAMS: dict[str, Any] = {
    "type": "object",
    "properties": {"paths": {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 1,
                             "description": "Paths whose file system is measured (relative to the working "
                                            "directory)."}},
    "required": ["paths"],
    "additionalProperties": False,
}

_FACT: dict[str, Any] = {
    "type": "object",
    "properties": {"paths": {"type": "object", "description": "Path as given → its file system.",
                             "additionalProperties": {"type": "object", "properties": {
                                 "exists": {"type": "boolean"},
                                 "measured_at": {"type": "string", "description": "The path, or its nearest "
                                                                                  "existing ancestor."},
                                 "total_bytes": {"type": "integer"},
                                 "available_bytes": {"type": "integer", "description": "Free to an unprivileged "
                                                                                      "user (f_bavail)."},
                                 "free_bytes": {"type": "integer", "description": "Free including the root "
                                                                                 "reserve (f_bfree)."},
                                 "used_bytes": {"type": "integer"},
                                 "available_gib": {"type": "number", "description": "available_bytes / 2^30, "
                                                                                   "to two decimals."},
                                 "used_fraction": {"type": "number", "description": "used / total, 0 to 1."}},
                                 "additionalProperties": False}}},
    "additionalProperties": False,
}


def _existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def measure(path: Path) -> dict[str, Any]:
    at = _existing(path)
    st = os.statvfs(at)
    total, free, avail = st.f_blocks * st.f_frsize, st.f_bfree * st.f_frsize, st.f_bavail * st.f_frsize
    used = total - free
    return {"exists": at == path, "measured_at": str(at), "total_bytes": total, "available_bytes": avail,
            "free_bytes": free, "used_bytes": used, "available_gib": round(avail / GIB, 2),
            "used_fraction": round(used / total, 4) if total else 0.0}


class DiskProbe:
    kind = "system.disk"
    scope = "host"  # describes the machine it runs on: labelled by host, collected on every node
    summary = "Free space on the file system of each path (os.statvfs); a missing path at its nearest ancestor."
    params_schema: Mapping[str, Any] = _PARAMS
    fact_schema: Mapping[str, Any] = _FACT

    def side_effects(self, params: Mapping[str, Any]) -> frozenset[str]:
        return frozenset()

    def run(self, params: Mapping[str, Any], ctx: ProbeContext) -> ProbeResult:
        out: dict[str, Any] = {}
        for given in params["paths"]:
            path = Path(os.path.abspath(ctx.resolve(str(given))))
            try:
                out[str(given)] = measure(path)
            except OSError as exc:
                raise ProbeError("system.disk.unreadable", f"cannot measure {path}: {exc.strerror or exc}") from None
        return ProbeResult(value={"paths": out}, sources=[v["measured_at"] for v in out.values()])


PROBES = [DiskProbe()]
