"""The flagship examples (examples/<scenario>/) re-evaluate to their expected outputs, byte for byte.

Each scenario holds a facts snapshot, its inputs, the evidence files people wrote, and the outputs
`policyrun evaluate --no-timestamp --format md` produced: expected/trace.json and expected/report.md.
Any change to the rulebook, the engine or the report template that changes an output fails here;
when the change is intended, rewrite the expected outputs with

    POLICYRUN_UPDATE_EXAMPLES=1 .venv/bin/python -m pytest -q tests/test_flagship_examples.py

and review the diff. (`python -m tests.afdfixtures examples` regenerates the facts themselves.)
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from policyrun.cli import main

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
UPDATE = os.environ.get("POLICYRUN_UPDATE_EXAMPLES") == "1"

# scenario → (mode, expected exit code, expected verdict, {phase: status} that tell the story)
SCENARIOS: dict[str, tuple[str, int, str, dict[str, str]]] = {
    "planning-pass": ("planning-audit", 0, "plan_ready",
                      {"FREEZE_IDENTITY": "PASS", "INVENTORY_AFD_CONTRACTS": "PASS", "DIFF_VLLM": "PASS",
                       "ARCHITECTURE_GATE": "PASS", "PRODUCE_STAGED_PLAN": "PASS",
                       "IMPLEMENT_ATOMIC_ADAPTATIONS": "SKIPPED", "CAPTURE_LESSONS_AND_REPORT": "SKIPPED"}),
    "identity-disagree": ("planning-audit", 2, "incomplete",
                          {"FREEZE_IDENTITY": "BLOCKED", "INVENTORY_AFD_CONTRACTS": "SKIPPED"}),
    "architecture-stop": ("planning-audit", 2, "architecture_stopped",
                          {"DIFF_VLLM": "PASS", "ARCHITECTURE_GATE": "STOPPED", "PRODUCE_STAGED_PLAN": "SKIPPED"}),
    "final-unexplained-skip": ("final-validation", 1, "incomplete",
                               {"TARGET_NATIVE_GPU_CONTROL": "PASS", "GPU_BASIC_E2E_GATE": "FAIL",
                                "GPU_ACCURACY_GATE": "SKIPPED"}),
    "final-pass": ("final-validation", 0, "gpu_validated",
                   {"FREEZE_IDENTITY": "PASS", "STATIC_AND_UNIT_GATE": "PASS", "TARGET_NATIVE_GPU_CONTROL": "PASS",
                    "GPU_BASIC_E2E_GATE": "PASS", "GPU_ACCURACY_GATE": "PASS", "DOCUMENTATION_REFRESH_GATE": "PASS",
                    "FINAL_AUDIT": "PASS", "CAPTURE_LESSONS_AND_REPORT": "PASS", "INVENTORY_AFD_CONTRACTS": "SKIPPED"}),
    # final-pass with the machine facts of a real one-H200 node (examples/h200/facts.json): its
    # interpreter has no vLLM, so the target stack cannot be established and identity blocks.
    "final-h200-one-gpu": ("final-validation", 2, "incomplete",
                           {"FREEZE_IDENTITY": "BLOCKED", "TARGET_NATIVE_GPU_CONTROL": "SKIPPED"}),
}


def _evaluate(name: str, mode: str, out: Path, capsys: pytest.CaptureFixture[str]) -> int:
    folder = f"examples/{name}"
    code = main(["evaluate", "upgrade-gpu-version", "--mode", mode, "--inputs", f"{folder}/inputs.yaml",
                 "--facts", f"{folder}/facts.json", "--out", str(out), "--format", "md", "--no-timestamp", "-q"])
    capsys.readouterr()
    return code


@pytest.fixture(autouse=True)
def _repo_root(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)  # inputs.yaml and the README commands use paths relative to the repository


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_example_outputs_are_reproduced(name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    mode, exit_code, verdict, statuses = SCENARIOS[name]
    folder = EXAMPLES / name
    for required in ("facts.json", "inputs.yaml", "evidence"):
        assert (folder / required).exists(), f"{folder / required} is missing"
    assert _evaluate(name, mode, tmp_path, capsys) == exit_code

    trace = json.loads((tmp_path / "trace.json").read_text())
    assert trace["verdict"]["id"] == verdict
    assert {p["phase"]: p["status"] for p in trace["phases"] if p["phase"] in statuses} == statuses

    expected = folder / "expected"
    for produced in ("trace.json", "report.md"):
        if UPDATE:
            expected.mkdir(exist_ok=True)
            shutil.copyfile(tmp_path / produced, expected / produced)
            continue
        assert (expected / produced).is_file(), (f"{expected / produced} is missing; run with "
                                                 "POLICYRUN_UPDATE_EXAMPLES=1 to write it")
        assert (tmp_path / produced).read_bytes() == (expected / produced).read_bytes(), (
            f"{name}/{produced} differs from the expected output; if the change is intended, rerun with "
            "POLICYRUN_UPDATE_EXAMPLES=1 and review the diff")


def _phase(trace: dict[str, object], pid: str) -> dict[str, object]:
    phases = trace["phases"]
    assert isinstance(phases, list)
    return next(p for p in phases if p["phase"] == pid)


def test_identity_disagree_names_both_values_and_locations(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _evaluate("identity-disagree", "planning-audit", tmp_path, capsys)
    trace = json.loads((tmp_path / "trace.json").read_text())
    assert _phase(trace, "FREEZE_IDENTITY")["blocker"] == (
        "sources disagree on the current vLLM version: pin pyproject.toml:16 = 0.26.1, but constant "
        "afd_plugin/compat/vllm.py:12 = 0.26.0")
    # The README's historical lines (0.24.0, 0.25.0, 0.25.1.dev12) and the NPU claims are no sources.
    sources = next(d for d in trace["derived"] if d["id"] == "identity_sources")["value"]
    assert [s["source"] for s in sources] == ["pyproject.toml:16", "uv.lock:16", "uv.lock:38", "afd_plugin/compat/vllm.py:12",
                                              "README.md:8", "README.md:19", "README.md:30", "docs/gpu/user-guide.md:3"]


def test_final_unexplained_skip_names_the_skip(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _evaluate("final-unexplained-skip", "final-validation", tmp_path, capsys)
    trace = json.loads((tmp_path / "trace.json").read_text())
    assert _phase(trace, "GPU_BASIC_E2E_GATE")["blocker"] == (
        "unexplained skip(s), not a full pass: tests.e2e.test_upgrade::test_connector_cleanup "
        "(flaky on this runner, skipping for now)")


def test_h200_node_blocks_on_its_interpreter(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The machine facts are the real node's (examples/h200/facts.json), verbatim."""
    _evaluate("final-h200-one-gpu", "final-validation", tmp_path, capsys)
    trace = json.loads((tmp_path / "trace.json").read_text())
    assert "PyTorch or vLLM is not importable in the target interpreter /opt/torch/.venv/bin/python3" in \
        str(_phase(trace, "FREEZE_IDENTITY")["blocker"])
    real = json.loads((EXAMPLES / "h200" / "facts.json").read_text())["facts"]
    scenario = json.loads((EXAMPLES / "final-h200-one-gpu" / "facts.json").read_text())["facts"]
    for pid in ("gpu", "stack", "toolchain", "leftover_processes", "leftover_ports", "leftover_shm"):
        assert scenario[pid]["value"] == real[pid]["value"], pid


def test_planning_report_shows_the_derived_tables(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _evaluate("planning-pass", "planning-audit", tmp_path, capsys)
    report = (tmp_path / "report.md").read_text()
    for line in (
        "| pin | `pyproject.toml:16` | `0.26.1` |",
        "| constant | `afd_plugin/compat/vllm.py:12` | `0.26.1` |",
        "| `afd_plugin/v1/worker/ubatch_wrapper.py` | no | 1 | 1 | none | "
        "`vLLM v0.26.1, vllm/v1/worker/gpu_ubatch_wrapper.py` |",
        "| file | `vllm/v1/worker/worker_base.py` | deleted |  | `afd_plugin/v1/worker/ffn_worker.py:10` |",
        "| signature | `vllm.forward_context.set_forward_context` | patched signature changed | "
        "`vllm/forward_context.py` | `afd_plugin/compat/patches/forward_context.py` |",
        "| file | `vllm/v1/worker/gpu_ubatch_wrapper.py` | modified | `vllm/v1/worker/gpu_ubatch_wrapper.py` | "
        "(annotation only) |",
        "`torch 2.8.0 -> 2.9.0`, `torchaudio 2.8.0 -> 2.9.0`, `torchvision 0.23.0 -> 0.24.0`",
        "Proposed name: `references/20250401-v0.26.1-to-v0.27.0-lessons.md`",
    ):
        assert line in report, line


def test_final_report_labels_what_final_validation_does_not_compute(tmp_path: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    _evaluate("final-pass", "final-validation", tmp_path, capsys)
    report = (tmp_path / "report.md").read_text()
    impact = report.split("## Impact matrix", 1)[1].split("##", 1)[0]
    assert "Not computed in mode `final-validation`" in impact and "| Kind |" not in impact
    assert "| `afd_plugin/compat/patches/engine_core.py` | 2 | 2 | none |" in report  # retained patches
    assert "**GPU-validated** (the GPU gates of report.hardware_phases, passed):\n" \
           "- TARGET_NATIVE_GPU_CONTROL (attested): declared a hardware phase: hardware facts gpu (gpu.nvml)\n" \
           "- GPU_BASIC_E2E_GATE (attested): declared a hardware phase: hardware facts gpu (gpu.nvml)\n" \
           "- GPU_ACCURACY_GATE (attested): declared a hardware phase\n" in report


def test_readme_first_command_exits_zero(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """examples/README.md's first command (after `pip install .`), from the repository root."""
    readme = (EXAMPLES / "README.md").read_text()
    first = next(line for line in readme.splitlines() if line.startswith("pip install . && policyrun evaluate"))
    argv = first.split("&& policyrun ", 1)[1].split()
    assert main([*argv, "--out", str(tmp_path)]) == 0
    capsys.readouterr()
    assert json.loads((tmp_path / "trace.json").read_text())["verdict"]["id"] == "plan_ready"
