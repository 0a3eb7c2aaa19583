"""The flagship's planning audit on the real corpus, against the raw work it needs.

Target (issue "The flagship on the real afd-plugin"): the whole planning-audit (collect +
evaluate, `policyrun evaluate` in a fresh interpreter) on the real afd-plugin with the real vLLM
v0.26.0 -> v0.27.0 sources takes under 10 s here and no more than 1.5x the raw `git` + `ast` work
that answers the same questions, measured in the same run, alternating.

The raw baseline is what a careful script does without policyrun: git status/log/rev-parse/diff,
one `git cat-file --batch` per revision, `ast.parse` of every plugin module and of the upstream
modules its imports resolve to at both revisions, tomllib over pyproject.toml and uv.lock, the
README and docs read, and `pip check` in the target interpreter. It keeps no provenance, checks
nothing and writes no trace.

    python bench/bench_flagship_real.py [--runs 5] [--against DIR]

`--against DIR` also times another checkout of policyrun (an earlier commit, say `git worktree add
--detach ../base <sha>`) in the same alternation, and prints this checkout's time as a ratio of
that one's: how much a change slowed or sped the audit.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CORPUS = Path(os.environ.get("POLICYRUN_CORPUS") or ROOT.parent / "shared" / "corpus")
ENV = {**{k: v for k, v in os.environ.items() if not k.startswith("GIT_")}, "GIT_CONFIG_NOSYSTEM": "1",
       "GIT_CONFIG_GLOBAL": os.devnull, "CI": "1"}


def git(repo: Path, *args: str, stdin: bytes | None = None) -> bytes:
    return subprocess.run(["git", "-C", str(repo), *args], input=stdin, capture_output=True, env=ENV,
                          check=True).stdout


def blobs(repo: Path, rev: str, paths: list[str]) -> dict[str, bytes]:
    """Contents of `paths` at `rev` through one cat-file --batch."""
    out = git(repo, "cat-file", "--batch", stdin="".join(f"{rev}:{p}\n" for p in paths).encode())
    found: dict[str, bytes] = {}
    pos = 0
    for path in paths:
        nl = out.index(b"\n", pos)
        header = out[pos:nl].split()
        if header[-1] == b"missing":
            pos = nl + 1
            continue
        size = int(header[2])
        found[path] = out[nl + 1:nl + 1 + size]
        pos = nl + 1 + size + 1
    return found


def module_file(files: set[str], module: str) -> str | None:
    base = module.replace(".", "/")
    for candidate in (base + ".py", base + "/__init__.py"):
        if candidate in files:
            return candidate
    return None


def raw_planning(afd: Path, vllm: Path) -> int:
    """The raw work; returns how many upstream files the imports depend on (a sanity figure)."""
    git(afd, "status", "--porcelain=v2", "--branch")
    git(afd, "log", "-1", "--format=%H %cI")
    for ref in ("v0.26.0", "v0.27.0"):
        git(vllm, "rev-parse", "--verify", f"{ref}^{{commit}}")
    git(vllm, "status", "--porcelain=v2", "--untracked-files=no")
    tomllib.loads((afd / "pyproject.toml").read_text())
    tomllib.loads((afd / "uv.lock").read_text())
    tracked = git(afd, "ls-files", "-z").decode().split("\0")
    for md in [p for p in tracked if p.endswith(".md") and (p.startswith("docs/") or "/" not in p)]:
        (afd / md).read_text(encoding="utf-8", errors="replace")
    sources = [p for p in tracked if p.endswith(".py") and not p.startswith("tests/")]
    imported: set[str] = set()
    for path, data in blobs(afd, "HEAD", sources).items():
        tree = ast.parse(data)
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "vllm":
                imported.add(node.module)
                imported.update(f"{node.module}.{a.name}" for a in node.names)
            elif isinstance(node, ast.Import):
                imported.update(a.name for a in node.names if a.name.split(".")[0] == "vllm")
        data.count(b"PATCH START")
    git(vllm, "diff", "--name-status", "-M", "-z", "--numstat", "v0.26.0", "v0.27.0", "--", "vllm")
    git(vllm, "log", "--first-parent", "--format=%H", "v0.26.0..v0.27.0")
    needed: set[str] = set()
    for rev in ("v0.26.0", "v0.27.0"):
        files = set(git(vllm, "ls-tree", "-r", "--name-only", "-z", rev, "vllm").decode().split("\0"))
        wanted = sorted({f for m in imported if (f := module_file(files, m))}
                        | {f for m in imported if (f := module_file(files, m.rsplit(".", 1)[0]))})
        for data in blobs(vllm, rev, wanted).values():
            ast.parse(data)  # resolution follows re-exports out of these
        needed |= set(wanted)
    subprocess.run([sys.executable, "-I", "-m", "pip", "check"], capture_output=True, cwd=tempfile.gettempdir())
    return len(needed)


def policyrun_planning(afd: Path, vllm: Path, out: Path, checkout: Path = ROOT) -> dict:
    env = {**ENV, "PYTHONPATH": str(checkout)}  # this checkout's package, whatever is installed
    proc = subprocess.run([sys.executable, "-m", "policyrun", "evaluate", "upgrade-gpu-version", "--mode",
                           "planning-audit", "--set", f"vllm_src={vllm}", "--set", "target_ref=v0.27.0",
                           "--out", str(out), "-q"], cwd=afd, capture_output=True, text=True, env=env)
    if proc.returncode not in (0, 2):
        raise SystemExit(f"policyrun failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return json.loads((out / "trace.json").read_text())


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--against", type=Path, help="another policyrun checkout to time in the same runs")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        subprocess.run(["git", "clone", "-q", str(CORPUS / "afd-plugin.bundle"), str(base / "afd")], check=True, env=ENV)
        subprocess.run(["git", "clone", "-q", str(CORPUS / "vllm-0.26.0-0.27.0.bundle"), str(base / "vllm")],
                       check=True, env=ENV)
        git(base / "vllm", "fetch", "-q", "--tags")
        trace = policyrun_planning(base / "afd", base / "vllm", base / "out")  # warm the page cache
        raw_planning(base / "afd", base / "vllm")
        ours, raw, other = [], [], []
        if args.against:
            other_trace = policyrun_planning(base / "afd", base / "vllm", base / "out-against", args.against)
        for i in range(args.runs):  # alternate, so machine noise hits both sides alike
            t = time.perf_counter()
            trace = policyrun_planning(base / "afd", base / "vllm", base / f"out{i}")
            ours.append(time.perf_counter() - t)
            t = time.perf_counter()
            deps = raw_planning(base / "afd", base / "vllm")
            raw.append(time.perf_counter() - t)
            if args.against:
                t = time.perf_counter()
                other_trace = policyrun_planning(base / "afd", base / "vllm", base / f"against{i}", args.against)
                other.append(time.perf_counter() - t)
    statuses = {p["phase"]: p["status"] for p in trace["phases"] if p["status"] != "SKIPPED"}
    impact = next(d for d in trace["derived"] if d["id"] == "impact_matrix")
    print(f"planning-audit on the real corpus, {args.runs} alternating runs (medians)")
    print(f"  statuses: {statuses}")
    print(f"  impact rows: {impact['value'] if isinstance(impact['value'], int) else len(impact['value'])}; "
          f"upstream files parsed by the raw baseline: {deps}")
    print(f"  policyrun evaluate (collect + evaluate, fresh process): {statistics.median(ours):6.2f} s   target < 10 s")
    print(f"  raw git + ast baseline:                                  {statistics.median(raw):6.2f} s")
    print(f"  ratio: {statistics.median(ours) / statistics.median(raw):.2f}x   target <= 1.5x "
          f"(min {min(ours) / min(raw):.2f}x, max {max(ours) / max(raw):.2f}x)")
    if args.against:
        same = {p["phase"]: p["status"] for p in other_trace["phases"] if p["status"] != "SKIPPED"} == statuses
        print(f"  {args.against} (same statuses: {same}): {statistics.median(other):6.2f} s; this checkout / that one: "
              f"{statistics.median(ours) / statistics.median(other):.2f}x (min {min(ours) / min(other):.2f}x, "
              f"max {max(ours) / max(other):.2f}x)")


if __name__ == "__main__":
    main()
