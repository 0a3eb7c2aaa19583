"""The implementation tier of the real corpus: the afd-plugin tip upgraded to vLLM v0.27.0.

`build_upgrade` clones the plugin, applies the corpus's seven real upgrade commits with `git am`
(a fixed identity and dates, so the SHAs are the same in every session), completes what the skill
asks after them (the GPU/general support claims refreshed to v0.27.0 in one documentation
commit) and writes the evidence beside the clone, never into it: the corpus's attestations with
their SHAs rewritten to this clone's vLLM v0.26.0/v0.27.0 commits (and a stage for the
documentation commit), the unit JUnit files, and passing GPU evidence for the upgraded HEAD.

`evaluate_upgrade` collects every fact for real in the upgraded checkout, replaces only the
machine facts (the target interpreter, NVML, nvcc, clean-up) by those of the two-H200 node of
examples/final-pass (set to the target's vLLM and PyTorch), and evaluates that snapshot: a GPU
cannot be probed here, everything else is read from the real repositories.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from policyrun.cli import main
from policyrun.trace.records import phase_checks
from tests.real.conftest import ROOT, _git

UPGRADE_DIR = "afd-plugin-upgrade-0.27.0"
# The corpus's attestations name the v0.26.0/v0.27.0 commits of another build of the same release sources.
CORPUS_SHAS = {"current": "ed6c43d3d7b938539f9ec93917c8824c87e5b553",
               "target": "98945f69035af6035660609b04d7b4a34fcc94be"}
IDENTITY = {"GIT_AUTHOR_NAME": "AFD upgrade test", "GIT_AUTHOR_EMAIL": "upgrade@example.invalid",
            "GIT_COMMITTER_NAME": "AFD upgrade test", "GIT_COMMITTER_EMAIL": "upgrade@example.invalid"}
DOCS_DATE = "2026-12-03T08:00:00+00:00"

# The documentation commit an engineer makes once the GPU gates pass (skill phase 10): every GPU or
# general support claim moves to the target; NPU rows, vLLM-Ascend baselines and history stay.
DOC_REFRESH: list[tuple[str, str, str]] = [
    ("README.md", "The target runtime is **vLLM `v0.26.0`**", "The target runtime is **vLLM `v0.27.0`**"),
    ("README.md", "vLLM versions other than `0.26.0` are not claimed", "vLLM versions other than `0.27.0` are not claimed"),
    ("README.md", "The optional extra pins `vllm==0.26.0`.", "The optional extra pins `vllm==0.27.0`."),
    ("docs/gpu/NCCL_P2P_CONNECTOR_USER_GUIDE.md", "On vLLM 0.26,", "On vLLM 0.27,"),
    ("docs/design/module/compatibility_and_patches.md", "The package extra pins vLLM `0.26.0`",
     "The package extra pins vLLM `0.27.0`"),
    ("docs/design/module/index.md", '"vLLM 0.26.0"', '"vLLM 0.27.0"'),
    ("docs/design/module/execution_platforms.md",
     "The validated CUDA and synchronous Ascend paths use vLLM 0.26.0 and model\nrunner v1.",
     "The validated CUDA path uses vLLM 0.27.0 and model runner v1 (the synchronous\nAscend path was "
     "validated on the previous release; see docs/npu)."),
    ("recipe/gpu/P2pNcclAFDConnector/deepseek_v2_lite/README.md", "plugin on vLLM `v0.26.0`.",
     "plugin on vLLM `v0.27.0`."),
    ("recipe/gpu/P2pNcclAFDConnector/deepseek_v2_lite/README.md", "- vLLM `v0.26.0` and the", "- vLLM `v0.27.0` and the"),
    (".github/PULL_REQUEST_TEMPLATE.md", "vLLM v0.26.0", "vLLM v0.27.0"),
    # The package README and the recipes index are public claims too (every Markdown file the repository ships).
    ("afd_plugin/connectors/README.md",
     "The vLLM 0.26 support matrix validates GPU `P2pNcclAFDConnector` and NPU\n`CAMP2pAFDConnector` and "
     "`CAMAsyncAFDConnector`. CAM async is validated without\nPCP on v0.26;",
     "The vLLM 0.27 support matrix validates GPU `P2pNcclAFDConnector`. The NPU\n`CAMP2pAFDConnector` and "
     "`CAMAsyncAFDConnector` were validated on the previous release; CAM async\nwas validated without PCP there;"),
    ("recipe/README.md", "not supported by the current\nvLLM 0.26 runtime.",
     "not supported by the current\nvLLM 0.27 runtime."),
    ("recipe/README.md", "| Recommended stage | v0.26 status | Recipe |",
     "| Recommended stage | v0.27 status | Recipe |"),
    ("recipe/README.md", "| Ascend NPU | `CAMP2pAFDConnector` | DeepSeek-V3.2 | Decode | Validated |",
     "| Ascend NPU | `CAMP2pAFDConnector` | DeepSeek-V3.2 | Decode | "
     "Not revalidated (validated on the previous release) |"),
    (".github/ISSUE_TEMPLATE/100-bug-report.yml", "targets vLLM v0.26.0", "targets vLLM v0.27.0"),
    (".github/ISSUE_TEMPLATE/100-bug-report.yml", "against vLLM v0.26.0", "against vLLM v0.27.0"),
    (".github/ISSUE_TEMPLATE/200-feature-request.yml", "tied to vLLM v0.26.0", "tied to vLLM v0.27.0"),
    (".github/ISSUE_TEMPLATE/200-feature-request.yml", "the vLLM v0.26.0 source tree", "the vLLM v0.27.0 source tree"),
]
DOC_FILES = sorted({path for path, _, _ in DOC_REFRESH})

# The one patch region of the tip documented in prose only (its function's docstring): the skill asks
# every patched function for reason and functionality comments, and FINAL_AUDIT requires them.
NPU_WRAPPER = "afd_plugin/v1/worker/npu/npu_ubatch_wrapper.py"
NPU_WRAPPER_FIELDS = (
    "    # ### PATCH START: Ascend auxiliary hidden-state output\n",
    "    # ### PATCH START: Ascend auxiliary hidden-state output\n"
    "    # Patch reason: Ascend auxiliary hidden states are tuple[Tensor, list[Tensor]], not upstream's\n"
    "    # tuple of tensors.\n"
    "    # Patch functionality: concatenate the nested auxiliary outputs across ubatches.\n")


@dataclass
class Upgrade:
    """The upgraded clone and the evidence written for it (outside the clone)."""

    repo: Path
    vllm: Path
    base: str
    head: str
    evidence: Path
    shas: dict[str, str]
    unit_junit: Path          # the corpus's unit-target.xml (450 tests, 39 NPU-only skips), stamped with HEAD
    unit_junit_nonpu: Path    # the same run without the NPU-only modules, stamped with HEAD
    e2e_junit: Path
    accuracy: Path
    upgrade_commits: list[str] = field(default_factory=list)


def upgrade_corpus(corpus: Path) -> Path:
    where = corpus / UPGRADE_DIR
    needed = ["patches", "evidence/architecture.yaml", "evidence/plan.yaml", "evidence/unit-target.xml",
              "evidence/unit-target-nonpu.xml"]
    missing = [n for n in needed if not (where / n).exists()]
    if missing:
        pytest.fail(f"real upgrade not found: expected {', '.join(missing)} in {where}", pytrace=False)
    return where


def git_env(repo: Path, *args: str, date: str | None = None) -> str:
    env = dict(IDENTITY)
    if date:
        env.update(GIT_AUTHOR_DATE=date, GIT_COMMITTER_DATE=date)
    return _git(*args, cwd=repo, extra_env=env)


def apply_patches(repo: Path, patches: Path) -> None:
    """`git am` the corpus's upgrade commits; committer dates follow the patches' own, so the
    resulting SHAs are stable across sessions."""
    files = sorted(str(p) for p in patches.glob("*.patch"))
    assert len(files) == 7, files
    git_env(repo, "am", "-q", "--committer-date-is-author-date", *files)


def document_npu_wrapper(repo: Path) -> None:
    old, new = NPU_WRAPPER_FIELDS
    edit_and_commit(repo, NPU_WRAPPER, old, new, "npu: give the auxiliary hidden-state patch its comment fields",
                    date=DOCS_DATE)


def refresh_docs(repo: Path) -> None:
    for path, old, new in DOC_REFRESH:
        file = repo / path
        text = file.read_text()
        assert old in text, (path, old)
        file.write_text(text.replace(old, new))
    git_env(repo, "add", *DOC_FILES)
    git_env(repo, "commit", "-q", "-m", "docs: claim vLLM v0.27.0 for the GPU backend after the GPU gates",
            date=DOCS_DATE)


def readdress_annotation_commits(repo: Path, target: str) -> None:
    """The upgrade's `# Commit:` annotations name upstream's v0.27.0 commit, which this clone's vLLM
    (built from release archives) does not hold: the final audit cannot verify them and blocks. As
    with the attestations, the annotations are re-addressed to this clone's v0.27.0 commit."""
    old_full, old_short = CORPUS_SHAS["target"], CORPUS_SHAS["target"][:12]
    changed = []
    for path in _git("ls-files", "*.py", cwd=repo).split():
        file = repo / path
        text = file.read_text()
        if old_short in text:
            file.write_text(text.replace(old_full, target).replace(old_short, target[:12]))
            changed.append(path)
    assert changed
    git_env(repo, "add", *changed)
    git_env(repo, "commit", "-q", "-m", "compat: annotations name this vLLM source's v0.27.0 commit", date=DOCS_DATE)


def rewrite_attestation(src: Path, shas: dict[str, str]) -> dict[str, Any]:
    text = src.read_text()
    for key, old in CORPUS_SHAS.items():
        assert old in text, (src, old)
        text = text.replace(old, shas[key])
    data: dict[str, Any] = yaml.safe_load(text)
    return data


def stamp_commit(src: Path, dest: Path, sha: str | None, *, how: str = "property") -> Path:
    """A copy of a JUnit file recording the commit it ran on: a `policyrun.commit` property of its
    first testsuite (`how="property"`) or a `<dest>.commit` sidecar (`how="sidecar"`)."""
    text = src.read_text()
    text = re.sub(r'\s*<properties>\s*<property name="policyrun\.commit" value="[^"]*"\s*/>\s*</properties>', "", text)
    if sha is not None and how == "property":
        at = re.search(r"<testsuite\b[^>]*?(?<!/)>", text)
        assert at, src
        text = (text[:at.end()] + f'<properties><property name="policyrun.commit" value="{sha}" /></properties>'
                + text[at.end():])
    dest.write_text(text)
    sidecar = dest.with_name(dest.name + ".commit")
    if sha is not None and how == "sidecar":
        sidecar.write_text(sha + "\n")
    elif sidecar.exists():
        sidecar.unlink()
    return dest


# Impact rows the corpus's attestations predate (issue 18 items 2 and 9): upstream symbols the plugin
# patches or overrides whose body changed, and the upstream name the plugin used through a module
# attribute that v0.27.0 removed. Each is classified like the file it lives in and staged where that
# file is; the bodies the upgrade did not port were reviewed against the target (their hash).
SYMBOL_ROWS = [
    "vllm.config.vllm.VllmConfig.__post_init__",
    "vllm.engine.arg_utils.EngineArgs.create_engine_config",
    "vllm.model_executor.models.deepseek_v2.DeepseekV2MoE.__init__",
    "vllm.model_executor.models.deepseek_v2.DeepseekV2Model.forward",
    "vllm.v1.engine.core.DPEngineCoreProc.run_busy_loop",
    "vllm.v1.engine.core.EngineCore.__init__",
    "vllm.v1.engine.core.EngineCore._initialize_kv_caches",
    "vllm.v1.engine.core.EngineCoreProc.run_busy_loop",
    "vllm.v1.engine.core_client.launch_core_engines",
    "vllm.v1.worker.gpu_model_runner.GPUModelRunner.__init__",
    "vllm.v1.worker.gpu_model_runner.GPUModelRunner._build_attention_metadata",
    "vllm.v1.worker.gpu_model_runner.GPUModelRunner._dummy_run",
    "vllm.v1.worker.gpu_model_runner.GPUModelRunner._warmup_and_capture",
    "vllm.v1.worker.gpu_model_runner.GPUModelRunner.execute_model",
    "vllm.v1.worker.gpu_worker.Worker.__init__",
    "vllm.v1.worker.gpu_worker.Worker.compile_or_warm_up_model",
    "vllm.model_executor.layers.fused_moe.FusedMoE",
]
# Bodies the upgrade did not port (its overrides call super() or wrap the original and pass the real
# 0.27.0 unit run): the completed attestation records their review against the target body.
REVIEWED_BODIES = [
    "vllm.config.vllm.VllmConfig.__post_init__",
    "vllm.engine.arg_utils.EngineArgs.create_engine_config",
    "vllm.model_executor.models.deepseek_v2.DeepseekV2MoE.__init__",
    "vllm.model_executor.models.deepseek_v2.DeepseekV2Model.forward",
    "vllm.v1.worker.gpu_model_runner.GPUModelRunner.__init__",
    "vllm.v1.worker.gpu_model_runner.GPUModelRunner._build_attention_metadata",
    "vllm.v1.worker.gpu_model_runner.GPUModelRunner.execute_model",
    "vllm.v1.worker.gpu_worker.Worker.__init__",
    "vllm.v1.worker.gpu_worker.Worker.compile_or_warm_up_model",
]
# Patch 0004 follows the rename.
REPLACEMENTS = {"vllm.model_executor.layers.fused_moe.FusedMoE": "vllm.model_executor.layers.fused_moe.FusedMoEFactory"}


def upstream_file(vllm: Path, name: str, rev: str = "v0.26.0") -> tuple[str, list[str]]:
    """(the file defining the longest module prefix of `name`, the rest of the name)."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        for path in ("/".join(parts[:cut]) + ".py", "/".join(parts[:cut]) + "/__init__.py"):
            if _git("ls-tree", "--name-only", rev, path, cwd=vllm).strip():
                return path, parts[cut:]
    raise AssertionError(name)


def target_body_hash(vllm: Path, name: str) -> str:
    """The target's body hash of `name` (policyrun's hash: its AST without docstrings)."""
    import ast

    from policyrun.probes.python.shape import code_hash
    path, rest = upstream_file(vllm, name, "v0.27.0")
    node: Any = ast.parse(_git("show", f"v0.27.0:{path}", cwd=vllm))
    for attr in rest:
        node = next(n for n in node.body if isinstance(n, (ast.ClassDef, ast.FunctionDef)) and n.name == attr)
    return str(code_hash(node))


def complete_symbol_rows(architecture: dict[str, Any], plan: dict[str, Any], vllm: Path) -> None:
    by_file = {r["upstream"]: r for r in architecture["rows"]}
    for name in SYMBOL_ROWS:
        path, _ = upstream_file(vllm, name)
        row = {"upstream": name, "classification": by_file[path]["classification"],
               "invariant": f"symbol-level row of {path}: " + by_file[path]["invariant"]}
        if name in REPLACEMENTS:
            row["replacement"] = REPLACEMENTS[name]
        if name in REVIEWED_BODIES:
            row["reviewed_body"] = target_body_hash(vllm, name)
        architecture["rows"].append(row)
        stage = next(s for s in plan["stages"] if path in s["upstream"])
        stage["upstream"].append(name)


def gpu_evidence(up_dir: Path, head: str) -> tuple[Path, Path]:
    """Passing E2E and accuracy results for `head` (examples/final-pass's, re-addressed)."""
    example = ROOT / "examples" / "final-pass" / "evidence"
    e2e = stamp_commit(example / "e2e.xml", up_dir / "e2e.xml", head)
    accuracy = up_dir / "accuracy.yaml"
    doc = yaml.safe_load((example / "accuracy.yaml").read_text())
    doc["afd_sha"] = head
    accuracy.write_text(yaml.safe_dump(doc, sort_keys=False))
    return e2e, accuracy


def build_upgrade(afd_repo: Path, vllm_repo: Path, corpus: Path, dest: Path) -> Upgrade:
    source = upgrade_corpus(corpus)
    dest.mkdir(parents=True, exist_ok=True)
    repo = dest / "afd"
    shutil.copytree(afd_repo, repo, symlinks=True)
    base = _git("rev-parse", "HEAD", cwd=repo).strip()
    apply_patches(repo, source / "patches")
    document_npu_wrapper(repo)
    shas = {"current": _git("rev-parse", "v0.26.0^{commit}", cwd=vllm_repo).strip(),
            "target": _git("rev-parse", "v0.27.0^{commit}", cwd=vllm_repo).strip()}
    readdress_annotation_commits(repo, shas["target"])
    refresh_docs(repo)
    head = _git("rev-parse", "HEAD", cwd=repo).strip()
    commits = _git("rev-list", "--reverse", f"{base}..HEAD", cwd=repo).split()
    evidence = dest / "evidence"
    evidence.mkdir()
    architecture = rewrite_attestation(source / "evidence" / "architecture.yaml", shas)
    plan = rewrite_attestation(source / "evidence" / "plan.yaml", shas)
    complete_symbol_rows(architecture, plan, vllm_repo)
    (evidence / "architecture.yaml").write_text(yaml.safe_dump(architecture, sort_keys=False))
    # The corpus plan defers the claims "until the GPU gates pass"; the documentation commit is that
    # deferred stage, so the plan names it (as the skill's plan does for documentation impact).
    plan["stages"].append({"id": "s7-documentation", "upstream": ["vllm v0.27.0 release identity (support claims)"],
                           "files": DOC_FILES,
                           "invariant": "GPU and general support claims name exactly the validated target; NPU "
                                        "rows and history are left alone",
                           "tests": ["policyrun DOCUMENTATION_REFRESH_GATE"]})
    # The GPU evidence written below is examples/final-pass's E2E run, whose two skips are cells the
    # support matrix excludes: the plan names them (a skip is excused only by the plan's exclusions).
    plan["exclusions"] = [
        *plan.get("exclusions", []),
        {"test": "tests.e2e.test_features::test_dbo_tp2", "reason": "DBO with TP>1 is an excluded cell"},
        {"test": "tests.e2e.test_models::test_npu_parity", "reason": "NPU-only scenario"}]
    # The upgrade is the GPU backend's: NPU-only test modules are out of its scope (issue 18 item 11).
    plan["backends"] = ["gpu"]
    (evidence / "plan.yaml").write_text(yaml.safe_dump(plan, sort_keys=False))
    native = yaml.safe_load((ROOT / "examples" / "final-pass" / "evidence" / "native-control.yaml").read_text())
    (evidence / "native-control.yaml").write_text(yaml.safe_dump(native, sort_keys=False))
    unit = stamp_commit(source / "evidence" / "unit-target.xml", dest / "unit-target.xml", head)
    nonpu = stamp_commit(source / "evidence" / "unit-target-nonpu.xml", dest / "unit-target-nonpu.xml", head,
                         how="sidecar")
    e2e, accuracy = gpu_evidence(dest, head)
    return Upgrade(repo=repo, vllm=vllm_repo, base=base, head=head, evidence=evidence, shas=shas,
                   unit_junit=unit, unit_junit_nonpu=nonpu, e2e_junit=e2e, accuracy=accuracy,
                   upgrade_commits=commits)


# --- machine facts --------------------------------------------------------------------------------

FIXTURE_TARGET = "a4e5195b9b34ad3891e6ed55028c43f211c60915"  # examples/final-pass's target: the fixture's v0.27.0
MACHINE_PROBES = ("stack", "runtime_build", "gpu", "toolchain", "leftover_processes", "leftover_ports", "leftover_shm")


def machine_facts(python: str) -> dict[str, Any]:
    """The two-H200 node of examples/final-pass with the target's runtime installed: vLLM 0.27.0 and
    the PyTorch v0.27.0's requirements/cuda.txt pins (2.13.0). `runtime_build` says that vLLM is the
    build of vllm_src at the target: evaluate_upgrade sets its commit to the target this collection
    resolved (a runtime_build with another commit is not the target's build)."""
    snapshot = json.loads((ROOT / "examples" / "final-pass" / "facts.json").read_text())["facts"]
    values = {probe: json.loads(json.dumps(snapshot[probe]["value"])) for probe in MACHINE_PROBES}
    stack = values["stack"]
    stack["interpreter"] = python
    stack["python"]["executable"] = python
    stack["vllm"]["version"] = "0.27.0"
    stack["torch"]["version"] = "2.13.0+cu128"
    values["runtime_build"]["python"] = python
    return values


def evaluate_upgrade(up: Upgrade, mode: str, out: Path, monkeypatch: pytest.MonkeyPatch, *,
                     repo: Path | None = None, gpu_validation: bool = False,
                     machine: dict[str, Any] | None = None, formats: str | None = None,
                     **inputs: Any) -> dict[str, Any]:
    """Collect the facts for real in the checkout, inject the machine facts, evaluate the snapshot.

    `inputs` override the defaults (unit_junit, e2e_junit, accuracy_results, evidence_dir, ...);
    an input set to None is left out. `formats` (e.g. "md") writes those reports into `out`."""
    checkout = repo or up.repo
    monkeypatch.chdir(checkout)
    defaults: dict[str, Any] = {
        "vllm_src": up.vllm, "target_ref": "v0.27.0", "afd_base": up.base, "python": sys.executable,
        "evidence_dir": up.evidence, "unit_junit": up.unit_junit}
    if mode == "final-validation" or gpu_validation:
        defaults.update(e2e_junit=up.e2e_junit, accuracy_results=up.accuracy)
    if gpu_validation:
        defaults["gpu_validation"] = "true"
    defaults.update(inputs)
    sets = [arg for key, value in defaults.items() if value is not None for arg in ("--set", f"{key}={value}")]
    out.mkdir(parents=True, exist_ok=True)
    facts_path = out / "facts.json"
    assert main(["collect", "upgrade-gpu-version", "--mode", mode, *sets, "-o", str(facts_path)]) in (0, 2)
    data = json.loads(facts_path.read_text())
    for probe, value in (machine if machine is not None else machine_facts(sys.executable)).items():
        if probe in data["facts"]:
            if probe == "runtime_build" and value.get("commit") == FIXTURE_TARGET:
                rev = data["facts"][probe]["provenance"]["params"]["rev"]
                value = {**value, "rev": rev, "commit": rev}
            data["facts"][probe]["value"] = value
            data["facts"][probe]["error"] = None
            data["facts"][probe]["provenance"]["error"] = None
    facts_path.write_text(json.dumps(data))
    code = main(["evaluate", "upgrade-gpu-version", "--mode", mode, *sets, "--facts", str(facts_path),
                 "--out", str(out), "-q", *(["--format", formats] if formats else [])])
    trace: dict[str, Any] = json.loads((out / "trace.json").read_text())
    assert code == trace["exit_code"]
    return trace


def phase(trace: dict[str, Any], pid: str) -> dict[str, Any]:
    return next(p for p in trace["phases"] if p["phase"] == pid)


def checks(trace: dict[str, Any], pid: str) -> dict[str, dict[str, Any]]:
    return {c["id"]: c for c in phase_checks(phase(trace, pid))}


def statuses(trace: dict[str, Any]) -> dict[str, str]:
    return {p["phase"]: p["status"] for p in trace["phases"]}


def edit_and_commit(repo: Path, path: str, old: str, new: str, message: str, *, date: str | None = None) -> None:
    """Replace the first `old` in `path` by `new` and commit it (tests' single mistakes)."""
    file = repo / path
    text = file.read_text()
    assert old in text, (path, old)
    file.write_text(text.replace(old, new, 1))
    git_env(repo, "commit", "-qam", message, date=date)


def sed_annotations(text: str) -> str:
    """What `sed -i 's/v0.26.0/v0.27.0/'` over every annotation does (comment and docstring forms)."""
    return re.sub(r"((?:#\s*)?Upstream(?: source)?:\s*vLLM )v0\.26\.0", r"\g<1>v0.27.0", text)
