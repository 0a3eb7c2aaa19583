"""`gpu.nvml`: what NVML says about the GPUs, without touching them.

NVML is the driver's management library (nvidia-smi is built on it). Unlike the CUDA runtime
it never creates a CUDA context, so this probe is read-only and declares no side effect: it can
run in a planning mode and next to a live vLLM server.

Every NVML call goes through `_Session.call`, which turns NVML_ERROR_NOT_SUPPORTED (a field
this GPU or driver does not have: ECC on a consumer card, MIG on a PCIe part, NVLink on a
single-slot board) into `null` plus an entry in `unsupported`, so a rulebook can tell "not
supported here" from "not collected". Errors that mean NVML as a whole is unusable (no
library, no driver, no permission) become a fact error with a stable `nvml.<reason>` code.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, cast

from policyrun.probes.base import ProbeContext, ProbeError, ProbeResult

# nvmlGpuTopologyLevel_t → (name, nvidia-smi `topo -m` label). nvidia-smi has no label for
# INTERNAL (two GPUs on one board); NVLink pairs show NV<n> instead of the PCIe label.
TOPOLOGY_LEVELS: dict[int, tuple[str, str | None]] = {
    0: ("INTERNAL", None),
    10: ("SINGLE", "PIX"),
    20: ("MULTIPLE", "PXB"),
    30: ("HOSTBRIDGE", "PHB"),
    40: ("NODE", "NODE"),
    50: ("SYSTEM", "SYS"),
}

# nvmlNvLinkDeviceType_t
NVLINK_REMOTE_TYPES: dict[int, str] = {0: "gpu", 1: "ibmnpu", 2: "switch", 0xFF: "unknown"}

# What a rulebook author should do about each NVML-wide failure; keyed by the suffix of the
# NVML_ERROR_* constant, which is also the fact error code (`nvml.<suffix lowercased>`).
_ADVICE: dict[str, str] = {
    "LIBRARY_NOT_FOUND": "the NVML library (libnvidia-ml.so.1) was not found: the NVIDIA driver is not "
                         "installed or not mounted into this container; run on a GPU machine or expose "
                         "the driver (e.g. --gpus all / nvidia-container-toolkit)",
    "DRIVER_NOT_LOADED": "the NVIDIA kernel driver is not loaded (nvidia-smi fails the same way); load "
                         "the driver or run on a machine with GPUs",
    "NO_PERMISSION": "no permission to talk to the NVIDIA driver (/dev/nvidiactl, /dev/nvidia*); run "
                     "as a user with access to the GPU device files",
    "LIB_RM_VERSION_MISMATCH": "the NVML library and the loaded kernel driver differ in version (driver "
                               "upgraded without reboot); reload the driver or reboot",
    "GPU_IS_LOST": "a GPU fell off the bus or stopped responding; check dmesg/Xid errors and reset it",
    "UNINITIALIZED": "NVML was not initialised",
}

_BUS_ID = re.compile(r"^([0-9a-fA-F]+):([0-9a-fA-F]+):([0-9a-fA-F]+)\.([0-9a-fA-F])$")

_PARAMS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "processes": {"type": "boolean", "default": True,
                      "description": "List compute processes running on each GPU."},
        "topology": {"type": "boolean", "default": True,
                     "description": "Pairwise topology (common PCIe ancestor) for every device pair."},
        "nvlink": {"type": "boolean", "default": True,
                   "description": "Per-link NVLink state and peers; feeds the NV<n> counts in `topology`."},
    },
    "additionalProperties": False,
}

_ON_OFF = {"type": ["object", "null"],
           "properties": {"current": {"type": "boolean"}, "pending": {"type": "boolean"}}}

_FACT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "driver_version": {"type": ["string", "null"]},
        "nvml_version": {"type": ["string", "null"]},
        "cuda_driver_version": {"type": ["string", "null"], "description": 'Highest CUDA the driver supports, "12.8".'},
        "cuda_driver_version_int": {"type": ["integer", "null"], "description": "As NVML reports it, e.g. 12080."},
        "device_count": {"type": "integer"},
        "devices": {"type": "array", "items": {"type": "object", "properties": {
            "index": {"type": "integer"},
            "name": {"type": ["string", "null"]},
            "uuid": {"type": ["string", "null"]},
            "compute_capability": {"type": ["string", "null"]},
            "cc_major": {"type": ["integer", "null"]},
            "cc_minor": {"type": ["integer", "null"]},
            "memory_total": {"type": ["integer", "null"], "description": "bytes"},
            "memory_used": {"type": ["integer", "null"], "description": "bytes"},
            "memory_free": {"type": ["integer", "null"], "description": "bytes"},
            "pci_bus_id": {"type": ["string", "null"]},
            "mig": _ON_OFF,
            "ecc": _ON_OFF,
            "persistence_mode": {"type": ["boolean", "null"]},
            "power_limit_w": {"type": ["number", "null"]},
            "nvlink": {"type": ["object", "null"]},
            "unsupported": {"type": "array", "items": {"type": "string"}},
        }}},
        "topology": {"type": ["object", "null"], "properties": {
            "pairs": {"type": "array"}, "matrix": {"type": "array"}}},
        "processes": {"type": ["array", "null"]},
        "unsupported": {"type": "array", "items": {"type": "string"},
                        "description": "Paths of fields NVML reported NOT_SUPPORTED (they are null)."},
        "field_errors": {"type": "object", "description": "Path → NVML error for fields it refused to read."},
    },
}


class _Unavailable(Exception):
    """A field NVML cannot give on this device; the caller stores null."""


class _Session:
    """NVML calls with provenance and the NOT_SUPPORTED → null rule in one place."""

    def __init__(self, nv: Any) -> None:
        self.nv = nv
        self.calls: list[str] = []
        self.unsupported: list[str] = []
        self.field_errors: dict[str, str] = {}
        self.last_call = ""
        self._unsupported_types = cast("tuple[type[BaseException], ...]", tuple(t for t in (
            getattr(nv, "NVMLError_NotSupported", None),
            getattr(nv, "NVMLError_FunctionNotFound", None),  # an older driver lacks the entry point
            getattr(nv, "NVMLLibraryMismatchError", None),  # pynvml's wrapper for the same
        ) if isinstance(t, type)))
        self._permission_types = cast("tuple[type[BaseException], ...]",
                                      tuple(t for t in (getattr(nv, "NVMLError_NoPermission", None),)
                                            if isinstance(t, type)))

    def raw(self, fn_name: str, *args: Any) -> Any:
        """Call an NVML function; errors propagate (the caller decides)."""
        if fn_name not in self.calls:
            self.calls.append(fn_name)
        self.last_call = fn_name
        fn: Callable[..., Any] | None = getattr(self.nv, fn_name, None)
        if fn is None:  # this nvidia-ml-py predates the function
            raise _Unavailable(fn_name)
        return fn(*args)

    def call(self, path: str, fn_name: str, *args: Any) -> Any:
        """Call an NVML function for the field at `path`; None when the field is unavailable."""
        try:
            return self.raw(fn_name, *args)
        except _Unavailable:
            self.unsupported.append(path)
        except self._unsupported_types:
            self.unsupported.append(path)
        except self._permission_types as exc:
            # One field we may not read (e.g. processes of other users) is not a reason to lose
            # the rest; record why it is null.
            self.field_errors[path] = str(exc)
        return None


def _text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace").rstrip("\x00")
    return str(value)


def _bus_key(bus_id: str | None) -> tuple[int, int, int] | None:
    """(domain, bus, device) of a PCI bus id; NVML pads the domain to 8 digits or 4 by API."""
    m = _BUS_ID.match(bus_id or "")
    return (int(m.group(1), 16), int(m.group(2), 16), int(m.group(3), 16)) if m else None


def _cuda_version(v: int | None) -> str | None:
    if v is None:
        return None
    return f"{v // 1000}.{(v % 1000) // 10}"


def _on_off(pair: Any) -> dict[str, bool] | None:
    if pair is None:
        return None
    current, pending = pair
    return {"current": int(current) == 1, "pending": int(pending) == 1}


def _nvml_error_name(nv: Any, exc: BaseException) -> str:
    value = getattr(exc, "value", None)
    for name in dir(nv):
        if name.startswith("NVML_ERROR_") and getattr(nv, name) == value:
            return name[len("NVML_ERROR_"):]
    return "UNKNOWN"


class GpuNvmlProbe:
    kind = "gpu.nvml"
    scope = "host"  # describes the machine it runs on: labelled by host, collected on every node
    summary = ("NVML (nvidia-ml-py): driver and CUDA driver version, devices (name, UUID, compute "
               "capability, memory, PCI, MIG/ECC/persistence), topology and NVLink, GPU processes. Read-only.")
    params_schema: Mapping[str, Any] = _PARAMS_SCHEMA
    fact_schema: Mapping[str, Any] = _FACT_SCHEMA

    def side_effects(self, params: Mapping[str, Any]) -> frozenset[str]:
        return frozenset()  # NVML reads driver state; it never creates a CUDA context

    def run(self, params: Mapping[str, Any], ctx: ProbeContext) -> ProbeResult:
        try:
            import pynvml as nv
        except ImportError:
            raise ProbeError("nvml.module_missing", "the nvidia-ml-py package (module pynvml) is not installed "
                             "in policyrun's environment; install it with `pip install nvidia-ml-py`") from None
        s = _Session(nv)
        nvml_error = getattr(nv, "NVMLError", None)
        initialised = False
        try:
            s.raw("nvmlInit")
            initialised = True
            value = _collect(s, params)
        except Exception as exc:
            if not (isinstance(nvml_error, type) and isinstance(exc, nvml_error)):
                raise
            name = _nvml_error_name(nv, exc)
            advice = _ADVICE.get(name)
            where = f"{s.last_call} failed: {exc}"
            message = f"{where}; {advice}" if advice else f"{where} (NVML_ERROR_{name})"
            raise ProbeError(f"nvml.{name.lower()}", message, commands=_commands(s)) from None
        finally:
            if initialised:
                try:
                    s.raw("nvmlShutdown")
                except Exception:  # noqa: BLE001 - shutting down must not mask the result
                    pass
        return ProbeResult(value=value, commands=_commands(s))


def _commands(s: _Session) -> list[str]:
    return [f"pynvml.{name}" for name in s.calls]


def _collect(s: _Session, params: Mapping[str, Any]) -> dict[str, Any]:
    cuda_int = s.call("cuda_driver_version", "nvmlSystemGetCudaDriverVersion_v2")
    value: dict[str, Any] = {
        "driver_version": _text(s.call("driver_version", "nvmlSystemGetDriverVersion")),
        "nvml_version": _text(s.call("nvml_version", "nvmlSystemGetNVMLVersion")),
        "cuda_driver_version": _cuda_version(cuda_int),
        "cuda_driver_version_int": cuda_int,
    }
    count = int(s.raw("nvmlDeviceGetCount"))
    value["device_count"] = count
    handles = [s.raw("nvmlDeviceGetHandleByIndex", i) for i in range(count)]
    devices = [_device(s, i, h) for i, h in enumerate(handles)]

    if params.get("nvlink", True):
        by_bus = {_bus_key(d["pci_bus_id"]): d["index"] for d in devices if d["pci_bus_id"]}
        for d, h in zip(devices, handles):
            d["nvlink"] = _nvlinks(s, d["index"], h, by_bus)
    else:
        for d in devices:
            d["nvlink"] = None

    value["devices"] = devices
    value["topology"] = _topology(s, devices, handles) if params.get("topology", True) else None

    if params.get("processes", True):
        procs: list[dict[str, Any]] = []
        for d, h in zip(devices, handles):
            listed = s.call(f"devices[{d['index']}].processes", "nvmlDeviceGetComputeRunningProcesses", h)
            for p in listed or []:
                procs.append({"pid": int(p.pid), "device": d["index"], "uuid": d["uuid"],
                              "used_memory": None if p.usedGpuMemory is None else int(p.usedGpuMemory)})
        value["processes"] = sorted(procs, key=lambda p: (p["device"], p["pid"]))
    else:
        value["processes"] = None

    for d in devices:
        prefix = f"devices[{d['index']}]."
        d["unsupported"] = [p[len(prefix):] for p in s.unsupported if p.startswith(prefix)]
    value["unsupported"] = list(s.unsupported)
    value["field_errors"] = dict(s.field_errors)
    return value


def _device(s: _Session, i: int, h: Any) -> dict[str, Any]:
    p = f"devices[{i}]."
    d: dict[str, Any] = {"index": i,
                         "name": _text(s.call(p + "name", "nvmlDeviceGetName", h)),
                         "uuid": _text(s.call(p + "uuid", "nvmlDeviceGetUUID", h))}
    cc = s.call(p + "compute_capability", "nvmlDeviceGetCudaComputeCapability", h)
    major, minor = (int(cc[0]), int(cc[1])) if cc is not None else (None, None)
    d.update(compute_capability=None if cc is None else f"{major}.{minor}", cc_major=major, cc_minor=minor)
    mem = s.call(p + "memory", "nvmlDeviceGetMemoryInfo", h)
    d.update(memory_total=None if mem is None else int(mem.total),
             memory_used=None if mem is None else int(mem.used),
             memory_free=None if mem is None else int(mem.free))
    pci = s.call(p + "pci_bus_id", "nvmlDeviceGetPciInfo", h)
    d["pci_bus_id"] = None if pci is None else _text(pci.busId)
    d["mig"] = _on_off(s.call(p + "mig", "nvmlDeviceGetMigMode", h))
    d["ecc"] = _on_off(s.call(p + "ecc", "nvmlDeviceGetEccMode", h))
    persistence = s.call(p + "persistence_mode", "nvmlDeviceGetPersistenceMode", h)
    d["persistence_mode"] = None if persistence is None else int(persistence) == 1
    power_mw = s.call(p + "power_limit_w", "nvmlDeviceGetPowerManagementLimit", h)
    d["power_limit_w"] = None if power_mw is None else round(int(power_mw) / 1000.0, 3)
    return d


def _nvlinks(s: _Session, i: int, h: Any, by_bus: Mapping[Any, int]) -> dict[str, Any] | None:
    """Per-link state; links are probed from 0 until NVML says there are no more."""
    nv = s.nv
    end_of_links = cast("tuple[type[BaseException], ...]",
                        tuple(t for t in (getattr(nv, "NVMLError_InvalidArgument", None),
                                          getattr(nv, "NVMLError_NotSupported", None),
                                          getattr(nv, "NVMLError_NotFound", None)) if isinstance(t, type)))
    max_links = int(getattr(nv, "NVML_NVLINK_MAX_LINKS", 18))
    links: list[dict[str, Any]] = []
    for link in range(max_links):
        try:
            state = s.raw("nvmlDeviceGetNvLinkState", h, link)
        except _Unavailable:
            s.unsupported.append(f"devices[{i}].nvlink")
            return None
        except end_of_links as exc:
            if link == 0 and isinstance(exc, getattr(nv, "NVMLError_NotSupported", ())):
                s.unsupported.append(f"devices[{i}].nvlink")  # a GPU without NVLink
                return None
            break
        entry: dict[str, Any] = {"link": link, "active": int(state) == 1, "remote_pci_bus_id": None,
                                 "remote_type": None, "remote_device": None}
        if entry["active"]:
            remote = s.call(f"devices[{i}].nvlink.links[{link}].remote_pci_bus_id",
                            "nvmlDeviceGetNvLinkRemotePciInfo", h, link)
            entry["remote_pci_bus_id"] = None if remote is None else _text(remote.busId)
            rtype = s.call(f"devices[{i}].nvlink.links[{link}].remote_type",
                           "nvmlDeviceGetNvLinkRemoteDeviceType", h, link)
            entry["remote_device"] = by_bus.get(_bus_key(entry["remote_pci_bus_id"]))
            if rtype is not None:
                entry["remote_type"] = NVLINK_REMOTE_TYPES.get(int(rtype), "unknown")
            elif entry["remote_device"] is not None:
                entry["remote_type"] = "gpu"  # an old driver without the type query; the bus id says GPU
        links.append(entry)
    active = [e for e in links if e["active"]]
    return {"links": links, "active": len(active),
            "switch_links": sum(1 for e in active if e["remote_type"] == "switch")}


def _direct_links(a: Mapping[str, Any], b_index: int) -> int:
    nvl = a.get("nvlink") or {}
    return sum(1 for e in nvl.get("links", []) if e["active"] and e["remote_device"] == b_index)


def _topology(s: _Session, devices: list[dict[str, Any]], handles: list[Any]) -> dict[str, Any]:
    n = len(devices)
    matrix: list[list[str | None]] = [["X" if i == j else None for j in range(n)] for i in range(n)]
    pairs: list[dict[str, Any]] = []
    for i in range(n):
        for j in range(i + 1, n):
            level = s.call(f"topology[{i},{j}]", "nvmlDeviceGetTopologyCommonAncestor", handles[i], handles[j])
            name, pcie = TOPOLOGY_LEVELS.get(int(level), (f"LEVEL_{level}", None)) if level is not None \
                else (None, None)
            a, b = devices[i], devices[j]
            # Links to the peer counted from either side (one side's remote PCI info may be missing).
            direct = max(_direct_links(a, j), _direct_links(b, i))
            sw_a = (a.get("nvlink") or {}).get("switch_links", 0)
            sw_b = (b.get("nvlink") or {}).get("switch_links", 0)
            # Through NVSwitch every GPU reaches every other; nvidia-smi reports the links the
            # pair can use at once, i.e. the smaller side (NV18 on an HGX H100/H200 board).
            via_switch = min(sw_a, sw_b)
            nvlinks = direct + via_switch
            via = "direct" if direct and not via_switch else "nvswitch" if via_switch and not direct \
                else "mixed" if nvlinks else None
            smi = f"NV{nvlinks}" if nvlinks else pcie
            pairs.append({"a": i, "b": j, "level": name, "level_code": level, "pcie": pcie,
                          "nvlinks": nvlinks, "via": via, "smi": smi})
            matrix[i][j] = matrix[j][i] = smi
    return {"pairs": pairs, "matrix": matrix}


PROBES = [GpuNvmlProbe()]
