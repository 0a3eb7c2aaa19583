"""A fake `pynvml` (nvidia-ml-py) for tests, injected through `sys.modules`.

It mirrors the real module at the boundary policyrun uses: the same NVML_ERROR_* constants,
the same `NVMLError` class whose constructor maps a code to its generated subclass
(`NVMLError_NotSupported`, `NVMLError_LibraryNotFound`, ... built by the same name rule as
pynvml's `_extractNVMLErrorsAsClasses`), `NVMLLibraryMismatchError`, and the same function
names and return shapes (bytes `busId` in PCI info structs, `(major, minor)` tuples, memory
structs with total/free/used, process objects with pid/usedGpuMemory). A test builds a
`FakeMachine` and calls `make_module(machine)`; the module records every call in `_calls`.
"""

from __future__ import annotations

import string
import sys
import types
from dataclasses import dataclass, field
from typing import Any

# --- constants, as in pynvml ---------------------------------------------------------------
NVML_SUCCESS = 0
NVML_ERROR_UNINITIALIZED = 1
NVML_ERROR_INVALID_ARGUMENT = 2
NVML_ERROR_NOT_SUPPORTED = 3
NVML_ERROR_NO_PERMISSION = 4
NVML_ERROR_ALREADY_INITIALIZED = 5
NVML_ERROR_NOT_FOUND = 6
NVML_ERROR_INSUFFICIENT_SIZE = 7
NVML_ERROR_INSUFFICIENT_POWER = 8
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_TIMEOUT = 10
NVML_ERROR_IRQ_ISSUE = 11
NVML_ERROR_LIBRARY_NOT_FOUND = 12
NVML_ERROR_FUNCTION_NOT_FOUND = 13
NVML_ERROR_CORRUPTED_INFOROM = 14
NVML_ERROR_GPU_IS_LOST = 15
NVML_ERROR_RESET_REQUIRED = 16
NVML_ERROR_OPERATING_SYSTEM = 17
NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18
NVML_ERROR_IN_USE = 19
NVML_ERROR_MEMORY = 20
NVML_ERROR_NO_DATA = 21
NVML_ERROR_VGPU_ECC_NOT_SUPPORTED = 22
NVML_ERROR_INSUFFICIENT_RESOURCES = 23
NVML_ERROR_FREQ_NOT_SUPPORTED = 24
NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25
NVML_ERROR_DEPRECATED = 26
NVML_ERROR_NOT_READY = 27
NVML_ERROR_GPU_NOT_FOUND = 28
NVML_ERROR_INVALID_STATE = 29
NVML_ERROR_RESET_TYPE_NOT_SUPPORTED = 30
NVML_ERROR_UNKNOWN = 999

NVML_FEATURE_DISABLED = 0
NVML_FEATURE_ENABLED = 1
NVML_DEVICE_MIG_DISABLE = 0
NVML_DEVICE_MIG_ENABLE = 1
NVML_NVLINK_MAX_LINKS = 36

NVML_TOPOLOGY_INTERNAL = 0
NVML_TOPOLOGY_SINGLE = 10
NVML_TOPOLOGY_MULTIPLE = 20
NVML_TOPOLOGY_HOSTBRIDGE = 30
NVML_TOPOLOGY_NODE = 40
NVML_TOPOLOGY_CPU = NVML_TOPOLOGY_NODE
NVML_TOPOLOGY_SYSTEM = 50

NVML_NVLINK_DEVICE_TYPE_GPU = 0x00
NVML_NVLINK_DEVICE_TYPE_IBMNPU = 0x01
NVML_NVLINK_DEVICE_TYPE_SWITCH = 0x02
NVML_NVLINK_DEVICE_TYPE_UNKNOWN = 0xFF


class NVMLLibraryMismatchError(Exception):
    pass


class NVMLError(Exception):
    _valClassMapping: dict[int, type] = {}
    _errcode_to_string = {
        NVML_ERROR_UNINITIALIZED: "Uninitialized",
        NVML_ERROR_INVALID_ARGUMENT: "Invalid Argument",
        NVML_ERROR_NOT_SUPPORTED: "Not Supported",
        NVML_ERROR_NO_PERMISSION: "Insufficient Permissions",
        NVML_ERROR_ALREADY_INITIALIZED: "Already Initialized",
        NVML_ERROR_NOT_FOUND: "Not Found",
        NVML_ERROR_INSUFFICIENT_SIZE: "Insufficient Size",
        NVML_ERROR_INSUFFICIENT_POWER: "Insufficient External Power",
        NVML_ERROR_DRIVER_NOT_LOADED: "Driver Not Loaded",
        NVML_ERROR_TIMEOUT: "Timeout",
        NVML_ERROR_IRQ_ISSUE: "Interrupt Request Issue",
        NVML_ERROR_LIBRARY_NOT_FOUND: "NVML Shared Library Not Found",
        NVML_ERROR_FUNCTION_NOT_FOUND: "Function Not Found",
        NVML_ERROR_CORRUPTED_INFOROM: "Corrupted infoROM",
        NVML_ERROR_GPU_IS_LOST: "GPU is lost",
        NVML_ERROR_RESET_REQUIRED: "GPU requires restart",
        NVML_ERROR_OPERATING_SYSTEM: "The operating system has blocked the request.",
        NVML_ERROR_LIB_RM_VERSION_MISMATCH: "RM has detected an NVML/RM version mismatch.",
        NVML_ERROR_MEMORY: "Insufficient Memory",
        NVML_ERROR_UNKNOWN: "Unknown Error",
    }

    def __new__(typ, value):  # noqa: N804 - same signature as pynvml
        if typ == NVMLError:
            typ = NVMLError._valClassMapping.get(value, typ)
        obj = Exception.__new__(typ)
        obj.value = value
        return obj

    def __str__(self) -> str:
        return NVMLError._errcode_to_string.get(self.value, "NVML Error with code %d" % self.value)

    def __eq__(self, other: object) -> bool:
        return self.value == getattr(other, "value", None)

    __hash__ = Exception.__hash__


def _extract_errors_as_classes() -> dict[str, type]:
    """pynvml's rule: NVML_ERROR_ALREADY_INITIALIZED → NVMLError_AlreadyInitialized."""
    this = sys.modules[__name__]
    made: dict[str, type] = {}
    for err_name in [x for x in dir(this) if x.startswith("NVML_ERROR_")]:
        class_name = "NVMLError_" + string.capwords(err_name.replace("NVML_ERROR_", ""), "_").replace("_", "")
        err_val = getattr(this, err_name)

        def gen_new(val: int) -> Any:
            def new(typ: type, *args: Any) -> Any:
                return NVMLError.__new__(typ, val)
            return new

        cls = type(class_name, (NVMLError,), {"__new__": gen_new(err_val)})
        cls.__module__ = "pynvml"
        setattr(this, class_name, cls)
        NVMLError._valClassMapping[err_val] = cls
        made[class_name] = cls
    return made


ERROR_CLASSES = _extract_errors_as_classes()

NOT_SUPPORTED = object()  # a FakeDevice field set to this raises NVMLError_NotSupported


# --- the machine a test describes --------------------------------------------------------------
@dataclass
class FakeLink:
    active: bool = True
    remote_bus_id: str = ""
    remote_type: int = NVML_NVLINK_DEVICE_TYPE_GPU


@dataclass
class FakeProcess:
    pid: int
    usedGpuMemory: int | None  # noqa: N815 - pynvml's attribute name
    gpuInstanceId: int = 0xFFFFFFFF  # noqa: N815
    computeInstanceId: int = 0xFFFFFFFF  # noqa: N815


@dataclass
class FakeDevice:
    bus_id: str
    name: Any = "NVIDIA H200"
    uuid: Any = "GPU-00000000-0000-0000-0000-000000000000"
    cc: Any = (9, 0)
    memory_total: int = 150_754_820_096  # what an H200 reports (143771 MiB)
    memory_used: int = 498_073_600
    mig: Any = (NVML_DEVICE_MIG_DISABLE, NVML_DEVICE_MIG_DISABLE)
    ecc: Any = (NVML_FEATURE_ENABLED, NVML_FEATURE_ENABLED)
    persistence: Any = NVML_FEATURE_ENABLED
    power_limit_mw: Any = 700_000
    links: Any = field(default_factory=list)  # list[FakeLink] or NOT_SUPPORTED
    processes: Any = field(default_factory=list)  # list[FakeProcess] or NOT_SUPPORTED or an error code
    remote_type_missing: bool = False  # an old driver without nvmlDeviceGetNvLinkRemoteDeviceType


@dataclass
class FakeMachine:
    devices: list[FakeDevice]
    driver: str = "570.124.06"
    nvml: str = "12.570.124.06"
    cuda: int = 12080
    topology: dict[tuple[int, int], int] = field(default_factory=dict)
    init_error: int | None = None  # an NVML_ERROR_* code nvmlInit raises
    fail: dict[str, int] = field(default_factory=dict)  # function name → error code it raises


class _Handle:
    def __init__(self, index: int) -> None:
        self.index = index


class _Struct:
    def __init__(self, **kw: Any) -> None:
        self.__dict__.update(kw)


def _pci(bus_id: str) -> _Struct:
    dom, bus, rest = bus_id.split(":")
    dev = rest.split(".")[0]
    return _Struct(busIdLegacy=f"{int(dom, 16):04x}:{bus}:{rest}".upper().encode(), domain=int(dom, 16),
                   bus=int(bus, 16), device=int(dev, 16), pciDeviceId=0x233510DE, pciSubSystemId=0x18A610DE,
                   busId=bus_id.encode())


def make_module(machine: FakeMachine) -> types.ModuleType:
    mod = types.ModuleType("pynvml")
    this = sys.modules[__name__]
    for name in dir(this):
        if name.startswith(("NVML_", "NVMLError")) or name == "NVMLLibraryMismatchError":
            setattr(mod, name, getattr(this, name))
    state = {"refcount": 0}
    calls: list[str] = []
    mod._calls = calls  # type: ignore[attr-defined]
    mod._state = state  # type: ignore[attr-defined]

    def api(fn: Any) -> Any:
        def wrapper(*args: Any) -> Any:
            calls.append(fn.__name__)
            if fn.__name__ in machine.fail:
                raise NVMLError(machine.fail[fn.__name__])
            if fn.__name__ != "nvmlInit" and state["refcount"] == 0:
                raise NVMLError(NVML_ERROR_UNINITIALIZED)
            return fn(*args)
        wrapper.__name__ = fn.__name__
        setattr(mod, fn.__name__, wrapper)
        return wrapper

    def dev(handle: Any) -> FakeDevice:
        if not isinstance(handle, _Handle) or not 0 <= handle.index < len(machine.devices):
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        return machine.devices[handle.index]

    def field_of(value: Any) -> Any:
        if value is NOT_SUPPORTED:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        return value

    @api
    def nvmlInit() -> None:
        if machine.init_error is not None:
            raise NVMLError(machine.init_error)
        state["refcount"] += 1

    @api
    def nvmlShutdown() -> None:
        state["refcount"] -= 1

    @api
    def nvmlSystemGetDriverVersion() -> str:
        return machine.driver

    @api
    def nvmlSystemGetNVMLVersion() -> str:
        return machine.nvml

    @api
    def nvmlSystemGetCudaDriverVersion_v2() -> int:
        return machine.cuda

    @api
    def nvmlDeviceGetCount() -> int:
        return len(machine.devices)

    @api
    def nvmlDeviceGetHandleByIndex(index: int) -> _Handle:
        if not 0 <= index < len(machine.devices):
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        return _Handle(index)

    @api
    def nvmlDeviceGetName(h: Any) -> str:
        return field_of(dev(h).name)

    @api
    def nvmlDeviceGetUUID(h: Any) -> str:
        return field_of(dev(h).uuid)

    @api
    def nvmlDeviceGetCudaComputeCapability(h: Any) -> tuple[int, int]:
        return tuple(field_of(dev(h).cc))  # type: ignore[return-value]

    @api
    def nvmlDeviceGetMemoryInfo(h: Any, version: Any = None) -> _Struct:
        d = dev(h)
        return _Struct(total=d.memory_total, used=d.memory_used, free=d.memory_total - d.memory_used)

    @api
    def nvmlDeviceGetPciInfo(h: Any) -> _Struct:
        return _pci(dev(h).bus_id)

    @api
    def nvmlDeviceGetMigMode(h: Any) -> list[int]:
        return list(field_of(dev(h).mig))

    @api
    def nvmlDeviceGetEccMode(h: Any) -> list[int]:
        return list(field_of(dev(h).ecc))

    @api
    def nvmlDeviceGetPersistenceMode(h: Any) -> int:
        return field_of(dev(h).persistence)

    @api
    def nvmlDeviceGetPowerManagementLimit(h: Any) -> int:
        return field_of(dev(h).power_limit_mw)

    @api
    def nvmlDeviceGetTopologyCommonAncestor(h1: Any, h2: Any) -> int:
        a, b = sorted((h1.index, h2.index))
        dev(h1), dev(h2)
        return field_of(machine.topology.get((a, b), NVML_TOPOLOGY_SYSTEM))

    def link_of(h: Any, link: int) -> FakeLink:
        links = field_of(dev(h).links)
        if not links:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        if not 0 <= link < len(links):
            raise NVMLError(NVML_ERROR_INVALID_ARGUMENT)
        return links[link]

    @api
    def nvmlDeviceGetNvLinkState(h: Any, link: int) -> int:
        return NVML_FEATURE_ENABLED if link_of(h, link).active else NVML_FEATURE_DISABLED

    @api
    def nvmlDeviceGetNvLinkRemotePciInfo(h: Any, link: int) -> _Struct:
        ln = link_of(h, link)
        if not ln.active:
            raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
        return _pci(ln.remote_bus_id)

    @api
    def nvmlDeviceGetNvLinkRemoteDeviceType(h: Any, link: int) -> int:
        if dev(h).remote_type_missing:
            raise NVMLError(NVML_ERROR_FUNCTION_NOT_FOUND)
        return link_of(h, link).remote_type

    @api
    def nvmlDeviceGetComputeRunningProcesses(h: Any) -> list[FakeProcess]:
        procs = field_of(dev(h).processes)
        if isinstance(procs, int):
            raise NVMLError(procs)
        return list(procs)

    return mod


# --- machines the tests use -------------------------------------------------------------------
_HGX_BUSES = ["00000000:18:00.0", "00000000:2A:00.0", "00000000:3A:00.0", "00000000:5D:00.0",
              "00000000:9A:00.0", "00000000:AB:00.0", "00000000:BA:00.0", "00000000:DB:00.0"]
_SWITCH_BUSES = ["00000000:05:00.0", "00000000:06:00.0", "00000000:07:00.0", "00000000:08:00.0"]


def _switch_links(n: int = 18) -> list[FakeLink]:
    # HGX H100/H200: 18 links per GPU spread over four NVSwitches (5+4+4+5).
    spread = [0] * 5 + [1] * 4 + [2] * 4 + [3] * 5
    return [FakeLink(True, _SWITCH_BUSES[spread[i % 18]], NVML_NVLINK_DEVICE_TYPE_SWITCH) for i in range(n)]


def _uuid(i: int) -> str:
    return f"GPU-5c3a{i:04x}-1b2c-4d5e-8f90-0123456789a{i}"


def one_h200() -> FakeMachine:
    """One H200 SXM of an HGX board, as a one-GPU slice of a server sees it."""
    return FakeMachine(devices=[FakeDevice(bus_id=_HGX_BUSES[0], uuid=_uuid(0), links=_switch_links(),
                                           processes=[FakeProcess(4242, 1_073_741_824)])])


def h200_passthrough() -> FakeMachine:
    """What gpu.nvml read on a real one-H200 VM (driver 580.159.04): NVLink NOT_SUPPORTED there."""
    return FakeMachine(driver="580.159.04", nvml="13.580.159.04", cuda=13000,
                       devices=[FakeDevice(bus_id="00000000:00:06.0", uuid="GPU-7ab58dcd-5b59-f46e-94dd-b838e1f9748f",
                                           memory_used=644_939_776, links=NOT_SUPPORTED)])


def hgx_h200(n: int = 4) -> FakeMachine:
    """n H200 SXM behind NVSwitch; GPUs 0-3 on socket 0, 4-7 on socket 1."""
    devices = [FakeDevice(bus_id=_HGX_BUSES[i], uuid=_uuid(i), links=_switch_links()) for i in range(n)]
    topo = {}
    for i in range(n):
        for j in range(i + 1, n):
            topo[(i, j)] = NVML_TOPOLOGY_NODE if i // 4 == j // 4 else NVML_TOPOLOGY_SYSTEM
    return FakeMachine(devices=devices, topology=topo)


def h100_nvl_pair() -> FakeMachine:
    """Two H100 NVL cards joined by NVLink bridges (12 links, GPU to GPU), behind one PCIe switch."""
    a, b = "00000000:17:00.0", "00000000:65:00.0"
    devices = [
        FakeDevice(bus_id=a, name="NVIDIA H100 NVL", uuid=_uuid(0), links=[FakeLink(True, b)] * 12 + [FakeLink(False)] * 6,
                   memory_total=100_485_038_080),
        FakeDevice(bus_id=b, name="NVIDIA H100 NVL", uuid=_uuid(1), links=[FakeLink(True, a)] * 12 + [FakeLink(False)] * 6,
                   memory_total=100_485_038_080, processes=[FakeProcess(777, 2_000_000_000), FakeProcess(778, None)]),
    ]
    return FakeMachine(devices=devices, topology={(0, 1): NVML_TOPOLOGY_MULTIPLE})


def workstation_card() -> FakeMachine:
    """A PCIe card without ECC, MIG, NVLink, power limit or process accounting."""
    return FakeMachine(devices=[FakeDevice(bus_id="00000000:01:00.0", name="NVIDIA GeForce RTX 4090", cc=(8, 9),
                                           mig=NOT_SUPPORTED, ecc=NOT_SUPPORTED, power_limit_mw=NOT_SUPPORTED,
                                           links=NOT_SUPPORTED, processes=NOT_SUPPORTED)],
                       cuda=12040)
