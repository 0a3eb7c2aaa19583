"""The gpu-node-preflight example (examples/gpu-node-preflight-h200/): facts a real H200 node gave.

The facts were collected on the node by bench/device_preflight.sh; the expected outputs are what
`policyrun evaluate gpu-node-preflight --mode M --facts ... --no-timestamp --format md` wrote.
When a change to the rulebook, the engine or the built-in report is intended, rewrite them with

    POLICYRUN_UPDATE_EXAMPLES=1 .venv/bin/python -m pytest -q tests/test_preflight_example.py

and review the diff.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from policyrun.cli import main

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "gpu-node-preflight-h200"
UPDATE = os.environ.get("POLICYRUN_UPDATE_EXAMPLES") == "1"

# mode → (facts file, expected outputs' suffix)
MODES = {"preflight": ("facts.json", ""), "inventory": ("inventory-facts.json", "-inventory")}


def _evaluate(mode: str, out: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    facts, _ = MODES[mode]
    code = main(["evaluate", "gpu-node-preflight", "--mode", mode, "--facts", str(EXAMPLE / facts),
                 "--out", str(out), "--format", "md", "--no-timestamp"])
    return code, capsys.readouterr().out


@pytest.mark.parametrize("mode", list(MODES))
def test_outputs_are_reproduced(mode: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _ = _evaluate(mode, tmp_path, capsys)
    assert code == 2
    _, suffix = MODES[mode]
    for produced in ("trace.json", "report.md"):
        stem, ext = produced.split(".")
        expected = EXAMPLE / "expected" / f"{stem}{suffix}.{ext}"
        if UPDATE:
            expected.parent.mkdir(exist_ok=True)
            shutil.copyfile(tmp_path / produced, expected)
            continue
        assert expected.is_file(), f"{expected} is missing; run with POLICYRUN_UPDATE_EXAMPLES=1 to write it"
        assert (tmp_path / produced).read_bytes() == expected.read_bytes(), (
            f"{expected} differs from the output; if the change is intended, rerun with "
            "POLICYRUN_UPDATE_EXAMPLES=1 and review the diff")


def test_real_node_blocks_only_on_the_missing_vllm(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _evaluate("preflight", tmp_path, capsys)
    trace = json.loads((tmp_path / "trace.json").read_text())
    statuses = {p["phase"]: p["status"] for p in trace["phases"]}
    assert statuses == {"DRIVER": "PASS", "DEVICES": "PASS", "STACK": "BLOCKED", "VLLM_COMMAND": "BLOCKED",
                        "MEMORY": "PASS", "CLEAN": "PASS"}
    stack = next(p for p in trace["phases"] if p["phase"] == "STACK")
    assert stack["blocker"] == ("not importable in /opt/torch/.venv/bin/python3: vllm: "
                                "ModuleNotFoundError: No module named 'vllm'")
    assert "verdict: incomplete" in out
    derived = {d["id"]: d["value"] for d in trace["derived"]}
    assert derived["torch_cuda_int"] == 13000  # PyTorch 2.11.0+cu130, as NVML writes CUDA 13.0


def test_the_facts_agree_with_nvidia_smi() -> None:
    """What NVML gave the probe is what nvidia-smi printed on the same node, minutes apart."""
    smi = (EXAMPLE / "nvidia-smi.txt").read_text()
    gpu = json.loads((EXAMPLE / "facts.json").read_text())["facts"]["gpu"]["value"]
    assert f"Driver Version: {gpu['driver_version']}" in smi
    assert f"CUDA Version: {gpu['cuda_driver_version']}" in smi
    device = gpu["devices"][0]
    assert device["name"] in smi and device["pci_bus_id"] in smi
    assert f"{device['memory_total'] // 2**20}MiB" in smi.replace(" ", "") or \
        f"{device['memory_total'] // 2**20 - 1}MiB" in smi.replace(" ", "")  # nvidia-smi rounds down one MiB
    assert "No running processes found" in smi and gpu["processes"] == []


def test_the_overlay_in_the_docs_lints_and_takes_effect(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """docs/preflight.md adapts the rulebook with an overlay: it lints clean, and its extra module
    changes what the `modules` probe must collect, so the node's snapshot is refused (F005)."""
    import re

    doc = (ROOT / "docs" / "preflight.md").read_text()
    [block] = [b for b in re.findall(r"```yaml\n(.*?)```", doc, re.S) if b.startswith("# preflight-70b.yaml\n")]
    overlay = tmp_path / "preflight-70b.yaml"
    overlay.write_text(block)
    assert main(["lint", str(overlay)]) == 0
    assert main(["evaluate", str(overlay), "--mode", "inventory", "--facts", str(EXAMPLE / "inventory-facts.json"),
                 "--out", str(tmp_path / "o"), "-q"]) == 3
    assert "modules: collected with other parameters" in capsys.readouterr().err
