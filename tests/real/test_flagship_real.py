"""The flagship on the real afd-plugin and the real vLLM v0.26.0 -> v0.27.0 sources.

Ground truth here is computed independently of policyrun: git plumbing for pins, markers and the
upstream diff, Python's `ast` for the constant and for the plugin's imports, resolved through the
upstream packages' `__init__` re-exports by a small resolver written for this test. policyrun's
output is only ever compared with it, never copied into it.
"""

from __future__ import annotations

import ast
import json
import re
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from policyrun.cli import main
from policyrun.trace.records import phase_checks
from tests.real.conftest import copy_repo, git

PLANNING = ["--mode", "planning-audit", "--set", "target_ref=v0.27.0"]


def evaluate(afd: Path, vllm: Path, out: Path, *extra: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    monkeypatch.chdir(afd)
    code = main(["evaluate", "upgrade-gpu-version", *PLANNING[:2], "--set", f"vllm_src={vllm}",
                 "--set", "target_ref=v0.27.0", "--out", str(out), "-q", *extra])
    trace = json.loads((out / "trace.json").read_text())
    assert code == trace["exit_code"]
    return trace


def phases(trace: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {p["phase"]: p for p in trace["phases"]}


def derived(trace: dict[str, Any], name: str) -> Any:
    record = next(d for d in trace["derived"] if d["id"] == name)
    assert record["error"] is None, record["error"]
    return record["value"]


@pytest.fixture(scope="module")
def planning(afd_repo: Path, vllm_repo: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    mp = pytest.MonkeyPatch()
    try:
        return evaluate(afd_repo, vllm_repo, tmp_path_factory.mktemp("planning"), monkeypatch=mp)
    finally:
        mp.undo()


# --- ground truth ------------------------------------------------------------------------------

def tracked_sources(repo: Path, rev: str = "HEAD") -> dict[str, str]:
    names = git(repo, "ls-tree", "-r", "--name-only", rev).split("\n")
    return {n: git(repo, "show", f"{rev}:{n}") for n in names
            if n.endswith(".py") and not n.startswith("tests/")}


class Upstream:
    """vLLM at one revision: module files, and names bound in them (re-exports followed)."""

    def __init__(self, repo: Path, rev: str) -> None:
        self.repo, self.rev = repo, rev
        self.files = set(git(repo, "ls-tree", "-r", "--name-only", rev, "vllm").split("\n"))
        self.trees: dict[str, ast.Module] = {}

    def module_file(self, module: str) -> str | None:
        base = module.replace(".", "/")
        return next((f for f in (base + ".py", base + "/__init__.py") if f in self.files), None)

    def tree(self, path: str) -> ast.Module:
        if path not in self.trees:
            self.trees[path] = ast.parse(git(self.repo, "show", f"{self.rev}:{path}"))
        return self.trees[path]

    def defining_chain(self, module: str, name: str, depth: int = 0) -> list[str]:
        """Files from `module` to where `name` is defined (the module's own file first)."""
        path = self.module_file(module)
        if path is None or depth > 16:
            return []
        package = module if path.endswith("__init__.py") else module.rsplit(".", 1)[0]
        for node in self.tree(path).body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.name == name:
                return [path]
            if isinstance(node, (ast.Assign, ast.AnnAssign)):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                    return [path]
            if isinstance(node, ast.ImportFrom):
                for alias in node.names:
                    if (alias.asname or alias.name) == name:
                        source = self.absolute(package, node)
                        if self.module_file(f"{source}.{alias.name}"):  # a submodule
                            return [path, self.module_file(f"{source}.{alias.name}") or ""]
                        return [path, *self.defining_chain(source, alias.name, depth + 1)]
        sub = self.module_file(f"{module}.{name}")
        return [path, sub] if sub else [path]

    @staticmethod
    def absolute(package: str, node: ast.ImportFrom) -> str:
        if not node.level:
            return node.module or ""
        parts = package.split(".")
        base = parts[:len(parts) - node.level + 1]
        return ".".join(base + ([node.module] if node.module else []))


def plugin_dependencies(afd: Path, upstream: Upstream) -> set[str]:
    """Every upstream file the plugin's vLLM imports depend on (module file, re-export chain)."""
    deps: set[str] = set()
    for path, text in tracked_sources(afd).items():
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.split(".")[0] == "vllm" and (f := upstream.module_file(alias.name)):
                        deps.add(f)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "vllm":
                module = node.module or ""
                if f := upstream.module_file(module):
                    deps.add(f)
                for alias in node.names:
                    deps.update(p for p in upstream.defining_chain(module, alias.name) if p)
    return deps


def annotated_paths(afd: Path) -> set[str]:
    out: set[str] = set()
    for text in tracked_sources(afd).values():
        for line in text.splitlines():
            m = re.match(r"\s*#\s*Upstream(?: source)?:\s*(.*)", line)
            if m:
                out.update(re.findall(r"\b(vllm/[A-Za-z0-9_./-]+\.py)\b", m.group(1)))
    return out


def changed_files(vllm: Path) -> dict[str, str]:
    """path at the current revision → status letter, from git's rename-aware name-status."""
    out: dict[str, str] = {}
    for line in git(vllm, "diff", "--name-status", "-M", "v0.26.0", "v0.27.0", "--", "vllm").splitlines():
        fields = line.split("\t")
        out[fields[1]] = fields[0][0]
    return out


# --- planning-audit -----------------------------------------------------------------------------

def test_planning_statuses(planning: dict[str, Any]) -> None:
    got = {pid: p["status"] for pid, p in phases(planning).items()}
    assert got["FREEZE_IDENTITY"] == "PASS", phases(planning)["FREEZE_IDENTITY"]["blocker"]
    assert got["INVENTORY_AFD_CONTRACTS"] == "PASS"
    assert got["DIFF_VLLM"] == "PASS", phases(planning)["DIFF_VLLM"]["blocker"]
    assert got["ARCHITECTURE_GATE"] == "BLOCKED"
    assert got["PRODUCE_STAGED_PLAN"] == "SKIPPED"


def test_architecture_gate_blocks_only_for_the_attestation(planning: dict[str, Any]) -> None:
    gate = phases(planning)["ARCHITECTURE_GATE"]
    imposed = [c["id"] for c in phase_checks(gate) if c["outcome"]]
    assert imposed == ["attestation_present"], imposed
    rows = derived(planning, "impact_matrix")
    assert gate["blocker"].startswith("no architecture attestation")
    assert f"these {len(rows)} impact rows" in gate["blocker"]
    for row in rows:
        assert row["upstream"] in gate["blocker"]


def test_identity_sources_are_the_pins_the_lock_and_the_constant(afd_repo: Path, planning: dict[str, Any]) -> None:
    sources = derived(planning, "identity_sources")
    by_kind: dict[str, set[str]] = {}
    for s in sources:
        by_kind.setdefault(s["kind"], set()).add(s["source"])
    # pyproject: the optional extra's exact pin, found by reading the file as TOML and as lines.
    pyproject = (afd_repo / "pyproject.toml").read_text()
    assert tomllib.loads(pyproject)["project"]["optional-dependencies"]["vllm"] == ["vllm==0.26.0"]
    pin_line = next(i for i, line in enumerate(pyproject.splitlines(), 1) if '"vllm==0.26.0"' in line)
    lock = (afd_repo / "uv.lock").read_text()
    lock_line = next(i for i, line in enumerate(lock.splitlines(), 1) if line.strip() == 'name = "vllm"')
    assert f"pyproject.toml:{pin_line}" in by_kind["pin"]
    assert any(s.startswith("uv.lock:") and abs(int(s.split(":")[1]) - lock_line) <= 2 for s in by_kind["pin"])
    # the constant, by ast: an annotated assignment of a string literal.
    tree = ast.parse((afd_repo / "afd_plugin/compat/vllm.py").read_text())
    node = next(n for n in tree.body if isinstance(n, ast.AnnAssign) and getattr(n.target, "id", "") ==
                "TARGET_VLLM_VERSION")
    assert isinstance(node.value, ast.Constant) and node.value.value == "0.26.0"
    assert by_kind["constant"] == {f"afd_plugin/compat/vllm.py:{node.lineno}"}
    assert {s["value"] for s in sources if s["kind"] != "doc"} == {"0.26.0"}
    assert "README.md:19" in by_kind["doc"]  # "The target runtime is **vLLM `v0.26.0`**"


def test_inventory_matches_grep(afd_repo: Path, planning: dict[str, Any]) -> None:
    counts: dict[str, list[int]] = {}
    fields_present: dict[str, set[str]] = {}
    labels = {"reason": "Patch reason:", "functionality": "Patch functionality:"}
    for path, text in tracked_sources(afd_repo).items():
        starts = len(re.findall(r"^\s*#\s*###\s*PATCH START\b", text, re.M))
        ends = len(re.findall(r"^\s*#\s*###\s*PATCH END\b", text, re.M))
        if starts or ends:
            counts[path] = [starts, ends]
            fields_present[path] = {k for k, label in labels.items() if re.search(rf"^\s*#\s*{label}", text, re.M)}
    assert len(counts) == 13 and sum(s for s, _ in counts.values()) == 50 and sum(e for _, e in counts.values()) == 50
    rows = {r["file"]: r for r in derived(planning, "patch_inventory")}
    marked = {f: [r["starts"], r["ends"]] for f, r in rows.items() if r["starts"] or r["ends"]}
    assert marked == counts
    for path, present in fields_present.items():
        assert set(rows[path]["missing_comments"]) == {"reason", "functionality"} - present, path
    assert all(r["upstream_known"] for r in rows.values())


def test_runtime_check_found(planning: dict[str, Any]) -> None:
    checks = {r["site"]: r["context"] for r in derived(planning, "runtime_checks")}
    assert checks["afd_plugin/compat/vllm.py:35"] == "compare"  # _parse_release(v) == _parse_release(TARGET)
    assert sum(c == "call_arg" for c in checks.values()) >= 3  # version_text.startswith(TARGET)
    pin_check = next(c for c in phase_checks(phases(planning)["INVENTORY_AFD_CONTRACTS"])
                     if c["id"] == "pin_matches_runtime_check")
    assert pin_check["result"] == "SATISFIED"


def test_impact_rows_equal_ast_and_git_diff_truth(afd_repo: Path, vllm_repo: Path, planning: dict[str, Any]) -> None:
    upstream = Upstream(vllm_repo, "v0.26.0")
    deps = plugin_dependencies(afd_repo, upstream) | annotated_paths(afd_repo)
    changed = changed_files(vllm_repo)
    expected = {p for p in deps if p in changed}
    got = {r["upstream"] for r in derived(planning, "impact_matrix") if r["kind"] == "file"}
    assert got == expected
    # re-exports included: these depend on the plugin's imports only through a package __init__
    assert "vllm/config/compilation.py" in got  # from vllm.config import CUDAGraphMode
    assert "vllm/model_executor/layers/fused_moe/__init__.py" in got


def test_patched_signature_change_is_an_impact_row(vllm_repo: Path, planning: dict[str, Any]) -> None:
    rows = {r["upstream"]: r for r in derived(planning, "impact_matrix") if r["kind"] == "signature"}
    # launch_core_engines' parameters differ between the releases (checked here with ast directly).
    sigs = []
    for rev in ("v0.26.0", "v0.27.0"):
        tree = ast.parse(git(vllm_repo, "show", f"{rev}:vllm/v1/engine/utils.py"))
        fn = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "launch_core_engines")
        sigs.append(ast.unparse(fn.args))
    assert sigs[0] != sigs[1]
    assert rows["vllm.v1.engine.utils.launch_core_engines"]["consumers"] == [
        "afd_plugin/compat/patches/async_dp_engine.py"]


def test_target_toolchain_is_shown(vllm_repo: Path, planning: dict[str, Any]) -> None:
    def torch_pin(rev: str) -> str:
        text = git(vllm_repo, "show", f"{rev}:requirements/cuda.txt")
        return re.search(r"^torch==(\S+)", text, re.M).group(1)  # type: ignore[union-attr]
    change = f"torch {torch_pin('v0.26.0')} -> {torch_pin('v0.27.0')}"
    assert change in derived(planning, "toolchain_changes")
    assert change in phases(planning)["DIFF_VLLM"]["next_allowed_action"]


def test_native_gpu_sources_are_not_the_ascend_build(afd_repo: Path, planning: dict[str, Any]) -> None:
    native = next(c for c in phase_checks(phases(planning)["INVENTORY_AFD_CONTRACTS"])
                  if c["id"] == "native_sources_inventoried")
    assert native["result"] == "SATISFIED"
    cuda = [p for p in git(afd_repo, "ls-files").split("\n") if p.endswith((".cu", ".cuh"))]
    assert cuda == []


# --- identity edits -------------------------------------------------------------------------------

def _edit_and_commit(repo: Path, path: str, old: str, new: str) -> None:
    file = repo / path
    text = file.read_text()
    assert old in text
    file.write_text(text.replace(old, new, 1))
    git(repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qam", f"edit {path}")


@pytest.mark.parametrize("path, old, new, where", [
    ("afd_plugin/compat/vllm.py", 'TARGET_VLLM_VERSION: Final[str] = "0.26.0"',
     'TARGET_VLLM_VERSION: Final[str] = "0.25.0"', "afd_plugin/compat/vllm.py:12"),
    ("README.md", "The target runtime is **vLLM `v0.26.0`**", "The target runtime is **vLLM `v0.25.0`**",
     "README.md:19"),
])
def test_a_disagreeing_source_blocks_identity_naming_both(afd_repo: Path, vllm_repo: Path, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch, path: str, old: str,
                                                          new: str, where: str) -> None:
    repo = copy_repo(afd_repo, tmp_path / "afd")
    _edit_and_commit(repo, path, old, new)
    trace = evaluate(repo, vllm_repo, tmp_path / "out", monkeypatch=monkeypatch)
    freeze = phases(trace)["FREEZE_IDENTITY"]
    assert freeze["status"] == "BLOCKED"
    blocker = freeze["blocker"]
    assert blocker.startswith("sources disagree on the current vLLM version: pin pyproject.toml:")
    assert "= 0.26.0, but" in blocker and f"{where} = 0.25.0" in blocker
    assert phases(trace)["INVENTORY_AFD_CONTRACTS"]["status"] == "SKIPPED"


def test_an_npu_claim_is_not_the_gpu_identity(afd_repo: Path, vllm_repo: Path, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    repo = copy_repo(afd_repo, tmp_path / "afd")
    _edit_and_commit(repo, "docs/npu/CAM_P2P_CONNECTOR_USER_GUIDE.md", "vLLM `0.26.0`", "vLLM `0.25.0`")
    trace = evaluate(repo, vllm_repo, tmp_path / "out", monkeypatch=monkeypatch)
    assert phases(trace)["FREEZE_IDENTITY"]["status"] == "PASS"


def test_no_op_upgrade_says_already_at_target(afd_repo: Path, vllm_repo: Path, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(afd_repo)
    out = tmp_path / "out"
    assert main(["evaluate", "upgrade-gpu-version", "--mode", "planning-audit", "--set", f"vllm_src={vllm_repo}",
                 "--set", "target_ref=v0.26.0", "--out", str(out), "-q"]) == 2
    freeze = phases(json.loads((out / "trace.json").read_text()))["FREEZE_IDENTITY"]
    assert freeze["status"] == "BLOCKED" and freeze["blocker"].startswith("already at target")
    assert freeze["next_allowed_action"].startswith("nothing to upgrade")


# --- implementation mode with the real unit JUnit ---------------------------------------------------

@pytest.fixture(scope="module")
def implemented(afd_repo: Path, vllm_repo: Path, planning: dict[str, Any],
                tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A copy of the plugin with one implementation commit on top of its tip (pins, constant and
    vLLM annotations moved to 0.27.0), and the attestations a reviewer would write for it."""
    base_dir = tmp_path_factory.mktemp("impl")
    repo = copy_repo(afd_repo, base_dir / "afd")
    base = git(repo, "rev-parse", "HEAD").strip()
    changed: list[str] = []
    for path in git(repo, "ls-files").split("\n"):
        file = repo / path
        if not path or not file.is_file() or path.startswith("tests/"):
            continue
        text = file.read_text(errors="surrogateescape")
        new = text
        if path == "pyproject.toml":
            new = new.replace("vllm==0.26.0", "vllm==0.27.0")
        if path == "uv.lock":
            new = new.replace('name = "vllm"\nversion = "0.26.0"', 'name = "vllm"\nversion = "0.27.0"')
            new = re.sub(r'(name = "vllm", [^}]*specifier = "==)0\.26\.0"', r'\g<1>0.27.0"', new)
        if path == "afd_plugin/compat/vllm.py":
            new = new.replace('= "0.26.0"', '= "0.27.0"')
        if path.endswith(".py"):
            # comment and docstring annotations alike (`Upstream source: vLLM v0.26.0 commit ...`)
            new = re.sub(r"((?:#\s*)?Upstream(?: source)?:\s*vLLM )v0\.26\.0", r"\g<1>v0.27.0", new)
        if new != text:
            file.write_text(new, errors="surrogateescape")
            changed.append(path)
    git(repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qam", "Move to vLLM 0.27.0")
    rows = derived(planning, "impact_matrix")
    current = derived(planning, "current_ref")
    shas = {ref: git(vllm_repo, "rev-parse", f"{ref}^{{commit}}").strip() for ref in (current, "v0.27.0")}
    evidence = repo / ".policyrun" / "evidence"
    evidence.mkdir(parents=True)
    (evidence / "architecture.yaml").write_text(yaml.safe_dump({
        "decision": "continue", "reviewer": "test", "current_sha": shas[current], "target_sha": shas["v0.27.0"],
        "rows": [{"upstream": r["upstream"], "classification": "MECHANICAL", "invariant": "unchanged",
                  **({"replacement": "reviewed"} if r["status"] == "D" else {})} for r in rows]}))
    inventory = [r["file"] for r in derived(planning, "patch_inventory")]
    (evidence / "plan.yaml").write_text(yaml.safe_dump({
        "current_sha": shas[current], "target_sha": shas["v0.27.0"],
        "stages": [{"id": "s1", "upstream": [r["upstream"] for r in rows], "files": sorted(changed),
                    "invariant": "behaviour preserved", "tests": ["tests/unit"]}],
        "patches": [{"file": f, "disposition": "port"} for f in inventory]}))
    return repo, base


# The sed-only implementation above ports no code: IMPLEMENT_ATOMIC_ADAPTATIONS refuses it (issue 18
# items 1, 2, 9; tests/real/test_upgrade_real.py). These tests are about the static gate behind it,
# so they waive exactly those three checks, and the first asserts that they failed.
SED_ONLY_FAILURES = ("replacements_match_target", "upstream_names_present", "changed_bodies_ported")


def _implementation(repo: Path, base: str, vllm: Path, junit: Path, out: Path, monkeypatch: pytest.MonkeyPatch
                    ) -> dict[str, Any]:
    monkeypatch.chdir(repo)
    out.mkdir(parents=True, exist_ok=True)
    waivers = out / "waivers.yaml"
    waivers.write_text(yaml.safe_dump({"policyrun_waivers": 1, "waivers": [
        {"rulebook": "upgrade-gpu-version", "phase": "IMPLEMENT_ATOMIC_ADAPTATIONS", "check": check,
         "reason": "sed-only implementation; these tests judge the static gate", "owner": "tests",
         "expires": "2099-12-31"} for check in SED_ONLY_FAILURES]}))
    main(["evaluate", "upgrade-gpu-version", "--mode", "implementation", "--set", f"vllm_src={vllm}",
          "--set", "target_ref=v0.27.0", "--set", f"afd_base={base}", "--set", f"python={sys.executable}",
          "--set", f"unit_junit={junit}", "--waivers", str(waivers), "--out", str(out), "-q"])
    return json.loads((out / "trace.json").read_text())


def test_static_gate_names_the_failure_and_the_collection_skips(implemented: tuple[Path, str], vllm_repo: Path,
                                                                afd_unit_junit: Path, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    repo, base = implemented
    trace = _implementation(repo, base, vllm_repo, afd_unit_junit, tmp_path / "out", monkeypatch)
    by_id = phases(trace)
    for earlier in ("FREEZE_IDENTITY", "INVENTORY_AFD_CONTRACTS", "DIFF_VLLM", "ARCHITECTURE_GATE",
                    "PRODUCE_STAGED_PLAN", "IMPLEMENT_ATOMIC_ADAPTATIONS"):
        assert by_id[earlier]["status"] == "PASS", (earlier, by_id[earlier]["blocker"])
    implement = {c["id"]: c for c in phase_checks(by_id["IMPLEMENT_ATOMIC_ADAPTATIONS"])}
    assert all(implement[c]["result"] == "UNSATISFIED" and implement[c]["waiver"] for c in SED_ONLY_FAILURES)
    gate = by_id["STATIC_AND_UNIT_GATE"]
    assert gate["status"] != "PASS"
    messages = {c["id"]: c["message"] or "" for c in phase_checks(gate)}
    # independent truth from the XML itself
    from xml.etree import ElementTree
    cases = ElementTree.parse(afd_unit_junit).getroot().iter("testcase")
    collection = [c for c in cases if (s := c.find("skipped")) is not None and s.get("message") == "collection skipped"]
    assert len(collection) == 15
    assert f"{len(collection)} test module(s) were skipped at collection" in messages["no_collection_skips"]
    assert "No module named 'torch'" in messages["no_collection_skips"]
    assert "test_entry_point_is_registered" in messages["unit_passed"]
    assert any("test_entry_point_is_registered" in b for b in gate["blockers"] + [gate["blocker"]])


def test_static_gate_is_not_a_pass_without_the_failure(implemented: tuple[Path, str], vllm_repo: Path,
                                                       afd_unit_junit: Path, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    repo, base = implemented
    text = afd_unit_junit.read_text()
    no_failure = re.sub(r'<testcase [^>]*name="test_entry_point_is_registered".*?</testcase>', "", text, flags=re.S)
    no_failure = no_failure.replace('failures="1"', 'failures="0"').replace('tests="202"', 'tests="201"')
    junit = tmp_path / "unit.xml"
    junit.write_text(no_failure)
    # the run's commit, recorded as the flagship asks (a sidecar): only the collection skips remain
    (tmp_path / "unit.xml.commit").write_text(git(repo, "rev-parse", "HEAD"))
    trace = _implementation(repo, base, vllm_repo, junit, tmp_path / "out", monkeypatch)
    gate = phases(trace)["STATIC_AND_UNIT_GATE"]
    assert gate["status"] == "BLOCKED"
    assert {c["id"]: c["result"] for c in phase_checks(gate)}["unit_passed"] == "SATISFIED"
    assert "skipped at collection" in gate["blocker"]


# --- a synthetic upgrade twice the real one's size --------------------------------------------------

def test_twice_the_size_evaluates_without_budget_errors(afd_repo: Path, vllm_repo: Path, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """3,200 changed upstream files and 600 import sites: derived values and checks stay within the
    runtime's budget because joins go through the function library."""
    monkeypatch.chdir(afd_repo)
    facts_path = tmp_path / "facts.json"
    assert main(["collect", "upgrade-gpu-version", *PLANNING, "--set", f"vllm_src={vllm_repo}",
                 "-o", str(facts_path)]) in (0, 2)
    data = json.loads(facts_path.read_text())
    diff = data["facts"]["vllm_diff"]["value"]
    imports = data["facts"]["plugin_imports"]["value"]
    extra = [f"vllm/synthetic/m{i}.py" for i in range(3200)]
    diff["files"] += [{"path": p, "old_path": None, "status": "M", "added": 1, "deleted": 1, "binary": False,
                       "similarity": None} for p in extra]
    for i in range(600):
        site = f"afd_plugin/synthetic.py:{i + 1}"
        imports["imports"].append({**imports["imports"][0], "site": site, "file": "afd_plugin/synthetic.py",
                                   "line": i + 1})
        imports["by_upstream_file"].setdefault(extra[i * 5], []).append(site)
    facts_path.write_text(json.dumps(data))
    out = tmp_path / "out"
    main(["evaluate", "upgrade-gpu-version", *PLANNING, "--set", f"vllm_src={vllm_repo}", "--facts", str(facts_path),
          "--out", str(out), "-q"])
    trace = json.loads((out / "trace.json").read_text())
    assert all(d["error"] is None or "budget" not in d["error"] for d in trace["derived"])
    impact = derived(trace, "impact_matrix")  # large: the trace keeps its length and sha256
    assert (impact["length"] if isinstance(impact, dict) else len(impact)) >= 31 + 600
    assert phases(trace)["DIFF_VLLM"]["status"] == "PASS"
    text = json.dumps(trace)
    assert "iteration" not in text.lower() or "budget" not in text


# --- issue 18: symbol-level rows, computed independently --------------------------------------------

def _strip_strings(node: ast.AST) -> str:
    """ast.dump of a definition without docstrings or other bare string statements."""
    import copy

    clean = copy.deepcopy(node)
    for sub in ast.walk(clean):
        for name in ("body", "orelse", "finalbody"):
            block = getattr(sub, name, None)
            if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
                setattr(sub, name, [s for s in block if not (isinstance(s, ast.Expr) and isinstance(
                    s.value, ast.Constant) and isinstance(s.value.value, str))])
    return ast.dump(clean)


def _definition(upstream: Upstream, dotted: str) -> ast.AST | None:
    """The def/class `dotted` names at this revision: the longest module prefix, the name there
    (followed once through a re-export), then class members."""
    parts = dotted.split(".")
    cut = next((i for i in range(len(parts), 0, -1) if upstream.module_file(".".join(parts[:i]))), 0)
    if cut == 0 or cut == len(parts):
        return None
    chain = upstream.defining_chain(".".join(parts[:cut]), parts[cut])
    if not chain:
        return None
    node: ast.AST | None = None
    for stmt in upstream.tree(chain[-1]).body:
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and stmt.name == parts[cut]:
            node = stmt
    for attr in parts[cut + 1:]:
        if not isinstance(node, ast.ClassDef):
            return None
        node = next((s for s in node.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                     and s.name == attr), None)
    return node


def plugin_replacements(afd: Path) -> tuple[set[str], set[str]]:
    """(upstream names the plugin replaces or overrides, upstream `module.Name` it reads) from the
    source: assignments and setattr on names its vLLM imports bind, methods of subclasses of them."""
    replaced: set[str] = set()
    read: set[str] = set()
    for text in tracked_sources(afd).values():
        tree = ast.parse(text)
        bound: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.startswith("vllm"):
                        bound[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
            elif isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").startswith("vllm"):
                for a in node.names:
                    bound[a.asname or a.name] = f"{node.module}.{a.name}"

        def dotted(e: ast.AST) -> str | None:
            if isinstance(e, ast.Name):
                return bound.get(e.id)
            if isinstance(e, ast.Attribute):
                base = dotted(e.value)
                return f"{base}.{e.attr}" if base else None
            return None

        for node in ast.walk(tree):
            if isinstance(node, ast.Assign):
                value = node.value
                while isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and \
                        value.func.id in ("staticmethod", "classmethod"):
                    value = value.args[0]
                if isinstance(value, ast.Constant) or dotted(value) is not None:
                    continue  # module state or the original put back
                for target in node.targets:
                    if isinstance(target, ast.Attribute) and (base := dotted(target.value)):
                        replaced.add(f"{base}.{target.attr}")
            elif isinstance(node, ast.ClassDef):
                for b in node.bases:
                    if base := dotted(b):
                        replaced.update(f"{base}.{s.name}" for s in node.body
                                        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)))
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Load) and \
                    isinstance(node.value, ast.Name) and node.value.id in bound:
                read.add(f"{bound[node.value.id]}.{node.attr}")
    return replaced, read


def test_changed_bodies_and_gone_names_equal_ast_truth(afd_repo: Path, vllm_repo: Path,
                                                       planning: dict[str, Any]) -> None:
    current, target = Upstream(vllm_repo, "v0.26.0"), Upstream(vllm_repo, "v0.27.0")
    replaced, read = plugin_replacements(afd_repo)
    changed = set()
    for name in replaced:
        before, after = _definition(current, name), _definition(target, name)
        if isinstance(before, (ast.FunctionDef, ast.AsyncFunctionDef)) and after is not None \
                and _strip_strings(before) != _strip_strings(after):
            changed.add(name)
    rows = derived(planning, "impact_matrix")
    got = [r["upstream"] for r in rows if r["kind"] == "body"]
    assert set(got) == changed
    assert [r["kind"] for r in rows[:len(got)]] == ["body"] * len(got)  # ranked above the file rows
    assert "vllm.v1.engine.core.EngineCore._initialize_kv_caches" in changed  # a copy patch 0002 ports
    assert "vllm.v1.worker.gpu_model_runner.GPUModelRunner._dummy_run" in changed  # an override 0005 ports

    def bound_in(up: Upstream, module: str, name: str) -> bool:
        """The module binds `name` at its top level (also inside if/try blocks), or has it as a submodule."""
        path = up.module_file(module)
        if path is None:
            return False
        if up.module_file(f"{module}.{name}"):
            return True
        todo: list[ast.stmt] = list(up.tree(path).body)
        while todo:
            stmt = todo.pop()
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and stmt.name == name:
                return True
            if isinstance(stmt, (ast.Import, ast.ImportFrom)) and any(
                    (a.asname or a.name.split(".")[0]) == name for a in stmt.names):
                return True
            if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and any(
                    isinstance(t, ast.Name) and t.id == name
                    for t in (stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target])):
                return True
            for block in ("body", "orelse", "finalbody", "handlers"):
                todo.extend(getattr(stmt, block, []) or [])
        return False

    gone = {n for n in read if (m := n.rsplit(".", 1))[0] and current.module_file(m[0])
            and bound_in(current, m[0], m[1]) and not bound_in(target, m[0], m[1])}
    assert {r["upstream"] for r in rows if r["kind"] == "name" and "gone at the target" in r["change"]} == gone
    assert gone == {"vllm.model_executor.layers.fused_moe.FusedMoE"}  # the rename patch 0004 follows
