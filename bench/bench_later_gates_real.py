"""The flagship's implementation and final-validation evaluations on the real corpus upgrade,
against the raw git + `ast` work they need.

Target (issue 18 acceptance, "Speed"): each mode's whole evaluation (collect + evaluate, each a
fresh `policyrun` process) on the corpus upgrade of the afd-plugin to vLLM v0.27.0
(tests/real/upgrade.py builds it: the seven real upgrade commits, the documentation commit, the
re-addressed attestations and evidence) takes no more than 1.5x the raw work that answers the same
questions, measured in the same run, alternating.

The raw baseline is what a careful script does without policyrun for the later gates: the planning
work of bench/bench_flagship_real.py (git status/log/rev-parse/diff, `ast.parse` of the plugin and
of the upstream modules its imports resolve to at both revisions, the lock and pins read), plus
the history since afd_base (`git log`, `git diff --name-status`), every plugin module parsed at
afd_base as well as HEAD (patch regions and replacement bodies compared), every upstream module the
plugin names parsed at both revisions (signatures and bodies of the patched symbols), every
shipped Markdown file read (documentation claims), the test inventory listed and the unit, E2E and
accuracy evidence parsed (`xml.etree`, YAML), and `pip check` in the target interpreter. It keeps
no provenance, checks nothing and writes no trace. The machine facts (NVML, nvcc, the target
stack) are injected as tests/real/upgrade.py does: no GPU is probed on either side.

    python bench/bench_later_gates_real.py [--runs 5]
"""

from __future__ import annotations

import argparse
import ast
import json
import statistics
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.bench_flagship_real import CORPUS, ENV, ROOT, blobs, git, raw_planning  # noqa: E402
from tests.real.upgrade import Upgrade, build_upgrade, machine_facts  # noqa: E402

MODES = ("implementation", "final-validation")


def raw_later(up: Upgrade, mode: str) -> int:
    """The raw work of one later mode; returns how many plugin files changed since afd_base."""
    raw_planning(up.repo, up.vllm)
    afd, vllm = up.repo, up.vllm
    git(afd, "rev-parse", up.base)
    git(afd, "merge-base", "--is-ancestor", up.base, "HEAD")
    git(afd, "log", "--format=%H %s", f"{up.base}..HEAD")
    changed = [p for p in git(afd, "diff", "--name-only", "-z", up.base, "HEAD").decode().split("\0") if p]
    tracked = [p for p in git(afd, "ls-files", "-z").decode().split("\0") if p]
    sources = [p for p in tracked if p.endswith(".py") and not p.startswith("tests/")]
    upstream_names: set[str] = set()
    for rev in (up.base, "HEAD"):
        for data in blobs(afd, rev, sources).values():
            tree = ast.parse(data)
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "vllm":
                    upstream_names.add(node.module)
                elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    ast.dump(ast.Module(body=node.body, type_ignores=[]))  # a replacement body, normalised
    for rev in ("v0.26.0", "v0.27.0"):
        files = set(git(vllm, "ls-tree", "-r", "--name-only", "-z", rev, "vllm").decode().split("\0"))
        wanted = sorted(f for m in upstream_names if (f := _module_file(files, m)))
        for data in blobs(vllm, rev, wanted).values():
            for node in ast.walk(ast.parse(data)):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    ast.dump(node.args)
                    ast.dump(ast.Module(body=node.body, type_ignores=[]))
    for md in (p for p in tracked if p.endswith(".md")):
        (afd / md).read_text(encoding="utf-8", errors="replace")
    inventory = [p for p in tracked if p.startswith("tests/") and p.rsplit("/", 1)[-1].startswith("test_")]
    assert inventory  # the unit-evidence reconciliation needs the repository's own test modules
    ET.parse(up.unit_junit)
    for doc in up.evidence.glob("*.yaml"):
        yaml.safe_load(doc.read_text())
    if mode == "final-validation":
        ET.parse(up.e2e_junit)
        yaml.safe_load(up.accuracy.read_text())
    return len(changed)


def _module_file(files: set[str], module: str) -> str | None:
    base = module.replace(".", "/")
    return next((c for c in (base + ".py", base + "/__init__.py") if c in files), None)


def policyrun_later(up: Upgrade, mode: str, out: Path) -> dict:
    """collect (fresh process), the machine facts injected, evaluate --facts (fresh process)."""
    env = {**ENV, "PYTHONPATH": str(ROOT)}
    sets = ["--set", f"vllm_src={up.vllm}", "--set", "target_ref=v0.27.0", "--set", f"afd_base={up.base}",
            "--set", f"python={sys.executable}", "--set", f"evidence_dir={up.evidence}",
            "--set", f"unit_junit={up.unit_junit}"]
    if mode == "final-validation":
        sets += ["--set", f"e2e_junit={up.e2e_junit}", "--set", f"accuracy_results={up.accuracy}"]
    out.mkdir(parents=True, exist_ok=True)
    facts = out / "facts.json"
    run = [sys.executable, "-m", "policyrun"]
    proc = subprocess.run([*run, "collect", "upgrade-gpu-version", "--mode", mode, *sets, "-o", str(facts)],
                          cwd=up.repo, capture_output=True, text=True, env=env)
    if proc.returncode not in (0, 2):
        raise SystemExit(f"policyrun collect failed ({proc.returncode}): {proc.stderr[-2000:]}")
    data = json.loads(facts.read_text())
    for probe, value in machine_facts(sys.executable).items():
        if probe in data["facts"]:
            data["facts"][probe].update(value=value, error=None)
            data["facts"][probe]["provenance"]["error"] = None
    facts.write_text(json.dumps(data))
    proc = subprocess.run([*run, "evaluate", "upgrade-gpu-version", "--mode", mode, *sets, "--facts", str(facts),
                           "--out", str(out), "-q"], cwd=up.repo, capture_output=True, text=True, env=env)
    if proc.returncode not in (0, 1, 2):
        raise SystemExit(f"policyrun evaluate failed ({proc.returncode}): {proc.stderr[-2000:]}")
    trace: dict = json.loads((out / "trace.json").read_text())
    return trace


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        subprocess.run(["git", "clone", "-q", str(CORPUS / "afd-plugin.bundle"), str(base / "afd")], check=True, env=ENV)
        subprocess.run(["git", "clone", "-q", str(CORPUS / "vllm-0.26.0-0.27.0.bundle"), str(base / "vllm")],
                       check=True, env=ENV)
        git(base / "vllm", "fetch", "-q", "--tags")
        up = build_upgrade(base / "afd", base / "vllm", CORPUS, base / "upgrade")
        ours: dict[str, list[float]] = {m: [] for m in MODES}
        raw: dict[str, list[float]] = {m: [] for m in MODES}
        traces = {m: policyrun_later(up, m, base / f"warm-{m}") for m in MODES}  # warm the page cache
        changed = raw_later(up, "final-validation")
        for i in range(args.runs):  # alternate, so machine noise hits both sides alike
            for mode in MODES:
                t = time.perf_counter()
                traces[mode] = policyrun_later(up, mode, base / f"out{i}-{mode}")
                ours[mode].append(time.perf_counter() - t)
                t = time.perf_counter()
                raw_later(up, mode)
                raw[mode].append(time.perf_counter() - t)
    print(f"later gates on the real corpus upgrade ({changed} plugin files changed since afd_base), "
          f"{args.runs} alternating runs (medians)")
    for mode in MODES:
        trace = traces[mode]
        statuses = {p["phase"]: p["status"] for p in trace["phases"] if p["status"] != "SKIPPED"}
        mine, theirs = statistics.median(ours[mode]), statistics.median(raw[mode])
        print(f"  {mode}: verdict {trace['verdict']['id']} (exit {trace['exit_code']}); statuses {statuses}")
        print(f"    policyrun collect + evaluate (fresh processes): {mine:6.2f} s")
        print(f"    raw git + ast baseline:                         {theirs:6.2f} s")
        print(f"    ratio: {mine / theirs:.2f}x   target <= 1.5x (min {min(ours[mode]) / min(raw[mode]):.2f}x, "
              f"max {max(ours[mode]) / max(raw[mode]):.2f}x)")


if __name__ == "__main__":
    main()
