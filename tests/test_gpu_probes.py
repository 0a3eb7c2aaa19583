"""gpu.nvml against a faithful fake pynvml (1, 2 and 4 GPUs, NOT_SUPPORTED fields, NVML-wide
failures) and once against the real nvidia-ml-py installed here."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from policyrun.probes import registry
from policyrun.probes.base import ProbeContext, ProbeError
from policyrun.probes.gpu.nvml import GpuNvmlProbe
from tests.fakes import fake_pynvml as fake


def _run(monkeypatch: pytest.MonkeyPatch, machine: fake.FakeMachine, tmp_path: Path,
         **params: Any) -> tuple[Any, Any]:
    mod = fake.make_module(machine)
    monkeypatch.setitem(sys.modules, "pynvml", mod)
    result = GpuNvmlProbe().run(params, ProbeContext(base_dir=tmp_path, timeout_s=30))
    return result, mod


def _error(monkeypatch: pytest.MonkeyPatch, machine: fake.FakeMachine, tmp_path: Path) -> tuple[ProbeError, Any]:
    mod = fake.make_module(machine)
    monkeypatch.setitem(sys.modules, "pynvml", mod)
    with pytest.raises(ProbeError) as info:
        GpuNvmlProbe().run({}, ProbeContext(base_dir=tmp_path, timeout_s=30))
    return info.value, mod


def test_registered_and_read_only() -> None:
    probe = registry.get("gpu.nvml")
    assert isinstance(probe, GpuNvmlProbe)
    assert probe.side_effects({}) == frozenset()


def test_fake_errors_mirror_real_pynvml() -> None:
    real = pytest.importorskip("pynvml")
    codes = {n: getattr(real, n) for n in dir(real) if n.startswith("NVML_ERROR_")}
    assert {n: getattr(fake, n) for n in codes} == codes
    real_classes = [n for n in dir(real) if n.startswith("NVMLError_")]
    assert real_classes and sorted(real_classes) == sorted(fake.ERROR_CLASSES)
    for name in real_classes:
        cls = getattr(fake, name)
        assert issubclass(cls, fake.NVMLError) and cls().value == getattr(real, name)().value
        assert type(fake.NVMLError(cls().value)) is cls  # the base class maps a code to its subclass
    assert type(fake.NVMLError(fake.NVML_ERROR_NOT_SUPPORTED)).__name__ == "NVMLError_NotSupported"
    assert real.NVML_TOPOLOGY_SYSTEM == fake.NVML_TOPOLOGY_SYSTEM
    assert real.NVML_NVLINK_DEVICE_TYPE_SWITCH == fake.NVML_NVLINK_DEVICE_TYPE_SWITCH


def test_one_h200(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    result, mod = _run(monkeypatch, fake.one_h200(), tmp_path)
    v = result.value
    assert v["driver_version"] == "570.124.06"
    assert v["nvml_version"] == "12.570.124.06"
    assert v["cuda_driver_version"] == "12.8" and v["cuda_driver_version_int"] == 12080
    assert v["device_count"] == 1
    d = v["devices"][0]
    assert d["name"] == "NVIDIA H200" and d["uuid"].startswith("GPU-")
    assert (d["compute_capability"], d["cc_major"], d["cc_minor"]) == ("9.0", 9, 0)
    assert d["memory_total"] == 150_754_820_096 and d["memory_used"] == 498_073_600
    assert d["memory_free"] == d["memory_total"] - d["memory_used"]
    assert d["pci_bus_id"] == "00000000:18:00.0"
    assert d["mig"] == {"current": False, "pending": False}
    assert d["ecc"] == {"current": True, "pending": True}
    assert d["persistence_mode"] is True and d["power_limit_w"] == 700.0
    assert d["nvlink"]["active"] == 18 and d["nvlink"]["switch_links"] == 18
    assert v["topology"] == {"pairs": [], "matrix": [["X"]]}
    assert v["processes"] == [{"pid": 4242, "device": 0, "uuid": d["uuid"], "used_memory": 1_073_741_824}]
    assert v["unsupported"] == [] and d["unsupported"] == [] and v["field_errors"] == {}
    # read-only: nothing but queries, and NVML is shut down exactly once
    assert all(c.startswith(("nvmlInit", "nvmlShutdown", "nvmlSystemGet", "nvmlDeviceGet")) for c in mod._calls)
    assert mod._calls.count("nvmlShutdown") == 1 and mod._state["refcount"] == 0
    assert result.commands[0] == "pynvml.nvmlInit" and "pynvml.nvmlDeviceGetTopologyCommonAncestor" not in result.commands


def test_fake_matches_a_real_h200_reading(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """tests/fakes/recorded_nvml_h200_device.json is this probe's value on a real H200 VM."""
    recorded = json.loads((Path(__file__).parent / "fakes" / "recorded_nvml_h200_device.json").read_text())
    assert _run(monkeypatch, fake.h200_passthrough(), tmp_path)[0].value == recorded


def test_hgx_four_gpus_nvswitch(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    v = _run(monkeypatch, fake.hgx_h200(4), tmp_path)[0].value
    assert v["device_count"] == 4 and [d["index"] for d in v["devices"]] == [0, 1, 2, 3]
    pairs = v["topology"]["pairs"]
    assert [(p["a"], p["b"]) for p in pairs] == [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]
    assert all(p["nvlinks"] == 18 and p["via"] == "nvswitch" and p["smi"] == "NV18" for p in pairs)
    assert {p["level"] for p in pairs} == {"NODE"} and {p["pcie"] for p in pairs} == {"NODE"}
    assert v["topology"]["matrix"][0] == ["X", "NV18", "NV18", "NV18"]
    link = v["devices"][0]["nvlink"]["links"][0]
    assert link == {"link": 0, "active": True, "remote_pci_bus_id": "00000000:05:00.0",
                    "remote_type": "switch", "remote_device": None}


def test_hgx_eight_gpus_two_sockets(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    v = _run(monkeypatch, fake.hgx_h200(8), tmp_path, nvlink=False)[0].value
    assert len(v["topology"]["pairs"]) == 28
    by_pair = {(p["a"], p["b"]): p for p in v["topology"]["pairs"]}
    assert by_pair[(0, 4)]["level"] == "SYSTEM" and by_pair[(0, 4)]["smi"] == "SYS"
    assert by_pair[(0, 1)]["smi"] == "NODE" and by_pair[(0, 1)]["nvlinks"] == 0
    assert all(d["nvlink"] is None for d in v["devices"])


def test_two_gpus_direct_nvlink(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    v = _run(monkeypatch, fake.h100_nvl_pair(), tmp_path)[0].value
    (pair,) = v["topology"]["pairs"]
    assert pair == {"a": 0, "b": 1, "level": "MULTIPLE", "level_code": 20, "pcie": "PXB",
                    "nvlinks": 12, "via": "direct", "smi": "NV12"}
    nvl = v["devices"][0]["nvlink"]
    assert nvl["active"] == 12 and len(nvl["links"]) == 18 and nvl["switch_links"] == 0
    assert nvl["links"][0]["remote_device"] == 1 and nvl["links"][0]["remote_type"] == "gpu"
    assert nvl["links"][17] == {"link": 17, "active": False, "remote_pci_bus_id": None,
                                "remote_type": None, "remote_device": None}
    assert v["processes"] == [
        {"pid": 777, "device": 1, "uuid": v["devices"][1]["uuid"], "used_memory": 2_000_000_000},
        {"pid": 778, "device": 1, "uuid": v["devices"][1]["uuid"], "used_memory": None},
    ]


def test_old_driver_without_remote_type_still_maps_peers(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    machine = fake.h100_nvl_pair()
    for d in machine.devices:
        d.remote_type_missing = True
    v = _run(monkeypatch, machine, tmp_path)[0].value
    assert v["topology"]["pairs"][0]["smi"] == "NV12"
    assert v["devices"][0]["nvlink"]["links"][0]["remote_type"] == "gpu"
    assert "devices[0].nvlink.links[0].remote_type" in v["unsupported"]


def test_not_supported_fields_become_null(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    v = _run(monkeypatch, fake.workstation_card(), tmp_path)[0].value
    d = v["devices"][0]
    assert d["mig"] is None and d["ecc"] is None and d["power_limit_w"] is None and d["nvlink"] is None
    assert d["compute_capability"] == "8.9" and v["cuda_driver_version"] == "12.4"
    assert sorted(d["unsupported"]) == ["ecc", "mig", "nvlink", "power_limit_w", "processes"]
    assert "devices[0].mig" in v["unsupported"] and v["processes"] == []


def test_no_permission_on_one_field_is_recorded(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    machine = fake.one_h200()
    machine.devices[0].processes = fake.NVML_ERROR_NO_PERMISSION
    v = _run(monkeypatch, machine, tmp_path)[0].value
    assert v["field_errors"] == {"devices[0].processes": "Insufficient Permissions"}
    assert v["processes"] == []


@pytest.mark.parametrize(("code", "expected", "hint"), [
    (fake.NVML_ERROR_LIBRARY_NOT_FOUND, "nvml.library_not_found", "libnvidia-ml.so.1"),
    (fake.NVML_ERROR_DRIVER_NOT_LOADED, "nvml.driver_not_loaded", "kernel driver is not loaded"),
    (fake.NVML_ERROR_NO_PERMISSION, "nvml.no_permission", "/dev/nvidia"),
    (fake.NVML_ERROR_LIB_RM_VERSION_MISMATCH, "nvml.lib_rm_version_mismatch", "reboot"),
    (fake.NVML_ERROR_UNKNOWN, "nvml.unknown", "NVML_ERROR_UNKNOWN"),
])
def test_nvml_wide_failures(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, code: int, expected: str,
                            hint: str) -> None:
    err, mod = _error(monkeypatch, fake.FakeMachine(devices=[], init_error=code), tmp_path)
    assert err.code == expected
    assert "nvmlInit failed" in err.message and hint in err.message
    assert "nvmlShutdown" not in mod._calls  # nothing to shut down when init failed


def test_gpu_lost_mid_collection_still_shuts_down(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    machine = fake.hgx_h200(2)
    machine.fail["nvmlDeviceGetMemoryInfo"] = fake.NVML_ERROR_GPU_IS_LOST
    err, mod = _error(monkeypatch, machine, tmp_path)
    assert err.code == "nvml.gpu_is_lost" and "nvmlDeviceGetMemoryInfo" in err.message
    assert mod._calls[-1] == "nvmlShutdown" and mod._state["refcount"] == 0
    assert "pynvml.nvmlDeviceGetMemoryInfo" in err.commands


def test_module_missing(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes `import pynvml` raise ImportError
    with pytest.raises(ProbeError) as info:
        GpuNvmlProbe().run({}, ProbeContext(base_dir=tmp_path, timeout_s=5))
    assert info.value.code == "nvml.module_missing"


def test_real_pynvml_here(tmp_path: Path) -> None:
    """The real nvidia-ml-py: a value on a GPU machine, an nvml.* fact error anywhere else."""
    pytest.importorskip("pynvml")
    try:
        value = GpuNvmlProbe().run({}, ProbeContext(base_dir=tmp_path, timeout_s=30)).value
    except ProbeError as exc:
        assert exc.code.startswith("nvml.") and exc.message
    else:
        assert value["device_count"] == len(value["devices"])


MACHINE_KINDS = ("gpu.nvml", "python.stack", "toolchain", "tests.junit", "results", "system.processes",
                 "system.ports", "system.shm")


def test_machine_probe_schemas_are_valid() -> None:
    import jsonschema

    for kind in MACHINE_KINDS:
        probe = registry.get(kind)
        assert probe is not None, kind
        jsonschema.Draft202012Validator.check_schema(probe.params_schema)
        jsonschema.Draft202012Validator.check_schema(probe.fact_schema)
        assert probe.summary


def test_example_rulebook_uses_these_probes_validly() -> None:
    import jsonschema
    import yaml

    from policyrun.model import Rulebook

    path = Path(__file__).parents[1] / "examples" / "gpu-probes.yaml"
    rulebook = Rulebook.model_validate(yaml.safe_load(path.read_text()))
    kinds = {spec.uses for spec in rulebook.probes.values()}
    assert {"gpu.nvml", "python.stack", "toolchain", "system.processes"} <= kinds
    for pid, spec in rulebook.probes.items():
        probe = registry.get(spec.uses)
        assert probe is not None, pid
        params = {k: v for k, v in spec.with_.items() if not (isinstance(v, str) and "${" in v)}
        if spec.uses == "system.processes":
            params["pattern"] = "x"  # interpolated from an input in the rulebook
        jsonschema.Draft202012Validator(probe.params_schema).validate(params)
        effects = probe.side_effects(params)
        for mode in spec.modes or list(rulebook.modes):
            granted = {e for e, ok in rulebook.modes[mode].permissions.items() if ok}
            assert effects <= granted, (pid, mode)
    # init_cuda follows the mode, so only the mode that grants gpu_context initialises CUDA.
    from policyrun.language.interpolation import interpolate

    stack = rulebook.probes["stack"]
    for mode, expected in (("inventory", frozenset()), ("on-device", frozenset({"gpu_context"}))):
        params = interpolate(stack.with_, {"inputs": {"python": ""}, "mode": mode})
        assert registry.get("python.stack").side_effects(params) == expected
        assert rulebook.modes[mode].permissions["gpu_context"] is bool(expected)
