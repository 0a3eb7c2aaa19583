"""Sample traces for renderer tests, built from the trace models directly (no evaluation).

`flagship()` covers every phase status, every check result and kind, provenance with commands,
files, repositories and errors, an impact matrix read from an attestation, and an evidence gap.
`generic()` is a rulebook that shares no fact names with the flagship, to prove the templates
know nothing about particular facts. `golden()` compares output with tests/golden/ and rewrites
the file when POLICYRUN_UPDATE_GOLDEN=1.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from policyrun.facts import FactError, Provenance, RepoState
from policyrun.trace.model import CHECK_FIELDS, CheckRecord, PhaseRecord, Read, RulebookRef, Trace, VerdictRecord

GOLDEN = Path(__file__).parent / "golden"
RULEBOOK = "rulebooks/upgrade-gpu-version.yaml"

TARGET_SHA = "4f8e2c1b9a7d6e5f4c3b2a1908f7e6d5c4b3a291"
CURRENT_SHA = "0a1b2c3d4e5f60718293a4b5c6d7e8f901234567"
AFD_HEAD = "9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a2f1e0d"


def _prov(probe: str, kind: str, **kw: Any) -> Provenance:
    return Provenance(probe=probe, kind=kind, started_at="2025-01-01T00:00:00Z",
                      finished_at="2025-01-01T00:00:01Z", duration_s=0.25, **kw)


def provenance() -> dict[str, Provenance]:
    nvml_missing = FactError(code="nvml.library_not_found",
                             message="libnvidia-ml.so.1 not found; install the NVIDIA driver or run on a GPU host")
    return {
        "afd_git": _prov("afd_git", "git.repo", params={"path": "."}, commands=["git status --porcelain=v2"],
                         repo=RepoState(path="/src/afd", head=AFD_HEAD)),
        "target": _prov("target", "git.resolve", params={"path": "/src/vllm", "ref": "v0.9.1"},
                        commands=["git rev-parse --verify v0.9.1^{commit}"],
                        repo=RepoState(path="/src/vllm", head=TARGET_SHA)),
        "vllm_pins": _prov("vllm_pins", "search.regex", params={"pattern": 'vllm==([0-9][^"\\s]*)'},
                           sources=["pyproject.toml:14", "requirements/cuda.txt:3"]),
        "lessons": _prov("lessons", "files.glob", params={"pattern": "references/*lessons.md"},
                         error=FactError(code="file.not_found", message="no file matches references/*lessons.md")),
        "vllm_diff": _prov("vllm_diff", "git.diff", commands=[f"git diff --name-status -M {CURRENT_SHA} {TARGET_SHA}"],
                           repo=RepoState(path="/src/vllm", head=TARGET_SHA)),
        "plan": _prov("plan", "files.attestation", sources=["evidence/plan.yaml"],
                      params={"schema": "staged_plan"}),
        "unit_junit": _prov("unit_junit", "tests.junit", sources=["build/unit-junit.xml"]),
        "gpu": _prov("gpu", "gpu.nvml", commands=["nvmlInit()", "nvmlDeviceGetCount()",
                                                  "nvmlDeviceGetHandleByIndex(0)"]),
        "torch": _prov("torch", "python.stack", commands=[".venv/bin/python -c 'import torch, vllm'"]),
        "e2e_junit": _prov("e2e_junit", "tests.junit", sources=["build/e2e-junit.xml"],
                           error=FactError(code="file.not_found", message="build/e2e-junit.xml does not exist; "
                                           "run the GPU E2E suite first")),
        "gpu_missing": _prov("gpu_missing", "gpu.nvml", error=nvml_missing),
    }


def _c(id: str, kind: str, expression: str, result: str, reads: list[Read] | None = None,
       outcome: str | None = None, message: str | None = None, line: int = 0, facts: list[str] | None = None
       ) -> CheckRecord:
    reads = reads or []
    if facts is None:
        facts = sorted({r.path.split(".")[1] for r in reads if r.path.startswith("facts.")})
    return CheckRecord(id=id, kind=kind, expression=expression,  # type: ignore[arg-type]
                       result=result, outcome=outcome, reads=reads, facts=facts, message=message,
                       location=f"{RULEBOOK}:{line}:9" if line else None)


def _p(phase: str, title: str, status: str, reason: str, next_action: str, line: int,
       evidence: list[CheckRecord] | None = None, blocker: str | None = None) -> PhaseRecord:
    # `evidence` lists every check in evaluation order (as format 1 did); each goes to its field.
    fields: dict[str, Any] = {name: [c for c in evidence or [] if c.kind == kind] for name, kind in CHECK_FIELDS.items()}
    for name in ("mode_check", "next_action_check"):
        fields[name] = fields[name][0] if fields[name] else None
    return PhaseRecord(phase=phase, title=title, status=status, reason=reason,  # type: ignore[arg-type]
                       **fields, blocker=blocker, next_allowed_action=next_action,
                       location=f"{RULEBOOK}:{line}:5")


IMPACT_MATRIX = [
    {"stage": "S1", "upstream_cause": "KV connector API renamed", "files": "afd/connector.py",
     "invariant": "KV layout unchanged", "disposition": "adapt"},
    {"stage": "S2", "upstream_cause": "model runner moved to vllm/v1/worker/gpu/", "files": "afd/runner_patch.py",
     "invariant": "ownership of CUDA graphs", "disposition": "architecture decision | pending"},
]


def flagship_phases() -> list[PhaseRecord]:
    return [
        _p("FREEZE_IDENTITY", "Freeze identity", "PASS", "all evidence satisfied", "inventory AFD contracts", 40, [
            _c("target_ref_given", "precondition", "inputs.target_ref != ''", "SATISFIED",
               [Read(path="inputs.target_ref", value="v0.9.1")], line=44),
            _c("pins_disagree", "stop_when", "size(facts.vllm_pins.distinct) > 1", "UNSATISFIED",
               [Read(path="facts.vllm_pins.distinct", value=["0.9.0"])], line=46),
            _c("target_sha", "evidence", "facts.target.sha.matches('^[0-9a-f]{40}$')", "SATISFIED",
               [Read(path="facts.target", value={"ref": "v0.9.1", "sha": TARGET_SHA})], line=50),
            _c("afd_clean", "evidence", "!facts.afd_git.dirty", "SATISFIED",
               [Read(path="facts.afd_git.dirty", value=False)], line=54),
        ]),
        _p("INVENTORY_AFD_CONTRACTS", "Inventory AFD contracts", "PASS", "all evidence satisfied; 1 UNKNOWN tolerated",
           "diff vLLM between the frozen SHAs", 60, [
               _c("lessons_read", "evidence", "size(facts.lessons.files) > 0", "UNKNOWN",
                  [Read(path="facts.lessons.files", missing=True, error="file.not_found: no file matches "
                        "references/*lessons.md")], message="fact lessons could not be collected", line=66),
               _c("contracts_listed", "evidence", "size(facts.vllm_pins.hits) >= 1", "SATISFIED",
                  [Read(path="facts.vllm_pins.hits", value=[{"path": "pyproject.toml", "line": 14}])], line=70),
           ]),
        _p("DIFF_VLLM", "Diff vLLM", "PASS", "all evidence satisfied", "run the architecture gate", 80, [
            _c("diff_collected", "evidence", "facts.vllm_diff.files_changed > 0", "SATISFIED",
               [Read(path="facts.vllm_diff.files_changed", value=212),
                Read(path="facts.vllm_diff.base", value=CURRENT_SHA)], line=84),
            _c("impact_matrix_complete", "evidence", "size(facts.plan.impact_matrix) > 0", "SATISFIED",
               [Read(path="facts.plan.impact_matrix", value=IMPACT_MATRIX)], line=88),
        ]),
        _p("ARCHITECTURE_GATE", "Architecture gate", "STOPPED", "stop condition moved_runner held",
           "record the architecture decision in evidence/architecture.yaml; leave AFD production files unchanged",
           100, [
               _c("moved_runner", "stop_when", "facts.vllm_diff.renamed.exists(r, r.from.startsWith('vllm/v1/worker'))",
                  "SATISFIED", [Read(path="facts.vllm_diff.renamed", value=[
                      {"from": "vllm/v1/worker/gpu_model_runner.py", "to": "vllm/v1/worker/gpu/model_runner.py"}])],
                  outcome="STOPPED", message="a moved implementation needs a design decision", line=104),
               _c("architecture_attested", "evidence", "facts.architecture.decision == 'approved'",
                  "NOT_EVALUATED", line=110, facts=["architecture"]),
           ], blocker="major architecture change: vllm/v1/worker/gpu_model_runner.py moved to "
                      "vllm/v1/worker/gpu/model_runner.py | needs <design> decision"),
        _p("PRODUCE_STAGED_PLAN", "Produce staged plan", "SKIPPED", "gated by ARCHITECTURE_GATE=STOPPED",
           "resolve ARCHITECTURE_GATE first", 120),
        _p("IMPLEMENT_ATOMIC_ADAPTATIONS", "Implement atomic adaptations", "SKIPPED", "outside mode",
           "none in this mode", 140, [
               _c("selected", "mode_selection", "inputs.write_scope == 'afd'", "UNSATISFIED",
                  [Read(path="inputs.write_scope", value="none")], line=142),
           ]),
        _p("STATIC_AND_UNIT_GATE", "Static and unit gate", "FAIL", "evidence unit_tests_pass failed",
           "fix the failing unit tests, then re-run the gate", 160, [
               _c("unit_tests_pass", "evidence", "facts.unit_junit.failed == 0 && facts.unit_junit.errors == 0",
                  "UNSATISFIED", [Read(path="facts.unit_junit.failed", value=3),
                                  Read(path="facts.unit_junit.errors", value=0)],
                  outcome="FAIL", message="3 unit tests failed", line=166),
               _c("no_unexplained_skips", "evidence",
                  "facts.unit_junit.skipped_reasons.all(r, r in vars.documented_skip_reasons)", "SATISFIED",
                  [Read(path="facts.unit_junit.skipped_reasons", value=["requires 4 GPUs"]),
                   Read(path="vars.documented_skip_reasons", value=["requires 4 GPUs"])], line=170),
           ], blocker="3 unit tests failed in build/unit-junit.xml: tests/test_connector.py::test_kv_layout, "
                      "tests/test_runner.py::test_graph_capture, tests/test_runner.py::test_dbo"),
        _p("TARGET_NATIVE_GPU_CONTROL", "Target native GPU control", "PASS", "all evidence satisfied",
           "run the basic GPU E2E gate", 180, [
               _c("gpu_visible", "evidence", "size(facts.gpu.devices) >= 1", "SATISFIED",
                  [Read(path="facts.gpu", value={"driver": "570.124.06", "cuda_driver": "12.8", "devices": [
                      {"name": "NVIDIA H200", "uuid": "GPU-5d0c2f1e", "compute_capability": "9.0",
                       "memory_total_mib": 143771}]})], line=184),
               _c("torch_cuda", "evidence", "facts.torch.torch_cuda == '12.8'", "SATISFIED",
                  [Read(path="facts.torch.torch_version", value="2.7.0+cu128"),
                   Read(path="facts.torch.torch_cuda", value="12.8")], line=188),
               _c("dbo_supported", "evidence", "facts.torch.dbo", "NOT_APPLICABLE",
                  [Read(path="inputs.enable_dbo", value=False)], line=192, facts=[]),
           ]),
        _p("GPU_BASIC_E2E_GATE", "GPU basic E2E gate", "BLOCKED",
           "evidence e2e_passed is UNKNOWN and the mode's on_missing is BLOCKED",
           "run the basic GPU E2E suite and write build/e2e-junit.xml", 200, [
               _c("e2e_passed", "evidence", "facts.e2e_junit.failed == 0", "UNKNOWN",
                  [Read(path="facts.e2e_junit.failed", missing=True,
                        error="file.not_found: build/e2e-junit.xml does not exist; run the GPU E2E suite first")],
                  outcome="BLOCKED", line=206),
           ], blocker="facts.e2e_junit could not be collected (file.not_found): build/e2e-junit.xml does not exist"),
        _p("GPU_ACCURACY_GATE", "GPU accuracy gate", "SKIPPED", "gated by GPU_BASIC_E2E_GATE=BLOCKED",
           "resolve GPU_BASIC_E2E_GATE first", 220),
        _p("DOCUMENTATION_REFRESH_GATE", "Documentation refresh gate", "SKIPPED",
           "gated by GPU_BASIC_E2E_GATE=BLOCKED", "resolve GPU_BASIC_E2E_GATE first", 240),
        _p("FINAL_AUDIT", "Final audit", "SKIPPED", "gated by STATIC_AND_UNIT_GATE=FAIL",
           "resolve STATIC_AND_UNIT_GATE first", 260),
        _p("CAPTURE_LESSONS_AND_REPORT", "Capture lessons and report", "SKIPPED", "outside mode",
           "none in this mode", 280),
    ]


def flagship(**overrides: Any) -> Trace:
    data: dict[str, Any] = {
        "generated_at": "2025-01-01T00:00:05Z",
        "rulebook": RulebookRef(name="upgrade-gpu-version", version="1.0", sha256="ab" * 32, path=RULEBOOK),
        "mode": "final-validation",
        "inputs": {"afd_repo": "/src/afd", "vllm_src": "/src/vllm", "target_ref": "v0.9.1", "write_scope": "none",
                   "enable_dbo": False, "remote": "https://github.com/example/afd.git"},
        "vars": {"documented_skip_reasons": ["requires 4 GPUs", "DBO unsupported on NPU"]},
        "facts_sha256": "cd" * 32,
        "phases": flagship_phases(),
        "verdict": VerdictRecord(id="not_ready", summary="final validation incomplete: architecture decision "
                                 "and unit failures outstanding", expression="phases.FINAL_AUDIT.status == 'PASS'"),
        "exit_code": 2,
        "provenance": {k: v for k, v in provenance().items() if k != "gpu_missing"},
    }
    data.update(overrides)
    return Trace(**data)


def shipped(path: str = "<shipped>/upgrade-gpu-version.yaml") -> Trace:
    """flagship() of the shipped rulebook: every rulebook location in `path` (as the engine names a
    shipped rulebook), or in another path to try (an installed package's file)."""
    return Trace.model_validate_json(flagship().to_json().replace(RULEBOOK, path))


def all_pass() -> Trace:
    """The flagship's first three phases, all PASS (planning-audit)."""
    phases = flagship_phases()[:3]
    return flagship(mode="planning-audit", phases=phases, exit_code=0,
                    verdict=VerdictRecord(id="planned", summary="planning audit complete"))


def generic() -> Trace:
    """A rulebook unrelated to GPUs; no stack, no SHAs, no impact matrix."""
    phases = [
        PhaseRecord(phase="CHANGELOG", title="Changelog entry", status="PASS", reason="all evidence satisfied",
                    next_allowed_action="tag the release", evidence=[
                        CheckRecord(id="entry", kind="evidence", expression="facts.changelog.has_entry",
                                    result="SATISFIED", reads=[Read(path="facts.changelog.has_entry", value=True)],
                                    facts=["changelog"])]),
        PhaseRecord(phase="TAG", status="FAIL", reason="evidence signed failed", blocker="tag v2.0 is not signed",
                    next_allowed_action="sign the tag with `git tag -s`", evidence=[
                        CheckRecord(id="signed", kind="evidence", expression="facts.tag.signed", result="UNSATISFIED",
                                    outcome="FAIL", reads=[Read(path="facts.tag.signed", value=False)],
                                    facts=["tag"])]),
    ]
    return Trace(rulebook=RulebookRef(name="release-checklist", version="3", sha256="ef" * 32), mode="release",
                 inputs={}, facts_sha256="01" * 32, phases=phases,
                 verdict=VerdictRecord(id="not_released"), exit_code=1,
                 provenance={"changelog": Provenance(probe="changelog", kind="files.yaml", sources=["CHANGELOG.md:1"]),
                             "tag": Provenance(probe="tag", kind="git.tag", commands=["git tag -v v2.0"])})


def golden(name: str, actual: str) -> None:
    """Assert `actual` equals tests/golden/<name>; POLICYRUN_UPDATE_GOLDEN=1 rewrites it."""
    path = GOLDEN / name
    if os.environ.get("POLICYRUN_UPDATE_GOLDEN") == "1":
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(actual, encoding="utf-8")
    assert path.exists(), f"missing golden file {path}; run with POLICYRUN_UPDATE_GOLDEN=1 to create it"
    expected = path.read_text(encoding="utf-8")
    assert actual == expected, f"{name} differs from its golden file; if the change is intended, " \
                               "re-run with POLICYRUN_UPDATE_GOLDEN=1 and review the diff"
