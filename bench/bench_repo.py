"""Time policyrun's repository probes against the same raw `git` commands run one after another.

    .venv/bin/python bench/bench_repo.py [--files 6000] [--repeat 5] [--keep DIR]

Generates (in a temp dir) a repository of ~6,000 files with annotated tags v1 and v2 whose diff
touches ~1,600 files (modifications, renames with edits, deletions, additions). Then times

  (a) `collect()` of an in-memory rulebook: git.repo, git.resolve v1, git.resolve v2, a rename-aware
      git.diff v1 v2 with line stats and three search.regex probes, run in parallel as policyrun does;
  (b) the equivalent raw commands, sequentially: `git status`, two `git rev-parse`, one
      `git diff --raw --numstat -z -M`, three `git grep -P`.

Prints the best of --repeat for each and the ratio. Target: (a) <= 1.3 x (b).
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from policyrun.collection.run import collect  # noqa: E402
from policyrun.model import Rulebook  # noqa: E402
sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/timing.py, also when imported by tests
from timing import best_of  # noqa: E402

PATTERNS = (r"vllm==([0-9][\w.]*)", r"^from (\w+) import", r"TODO\((\w+)\)")
ENV = {**os.environ, "GIT_OPTIONAL_LOCKS": "0", "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "b@x",
       "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "b@x", "GIT_CONFIG_NOSYSTEM": "1"}


def _content(rnd: random.Random, i: int, lines: int = 30) -> str:
    out = [f"# module {i}", f"from pkg{i % 17} import thing{i % 5}", "import os", ""]
    for j in range(lines):
        r = rnd.random()
        if r < 0.02:
            out.append(f"PIN = 'vllm==0.{i % 9}.{j % 4}'")
        elif r < 0.08:
            out.append(f"    # TODO(owner{j % 11}): tidy line {j}")
        else:
            out.append(f"    value_{j} = compute({i}, {j})  # filler text for file {i}")
    return "\n".join(out) + "\n"


def generate(root: Path, n_files: int, seed: int = 11) -> dict[str, int]:
    """Build the repository with `git fast-import` (seconds, not minutes) and check it out."""
    rnd = random.Random(seed)
    paths = [f"src/pkg{i % 60}/mod_{i}.py" for i in range(n_files)]
    contents = {p: _content(rnd, i) for i, p in enumerate(paths)}
    stream: list[bytes] = []

    def commit(message: str, ops: list[bytes], parent: bool, ts: int) -> None:
        msg = message.encode()
        stream.extend([b"commit refs/heads/main\n", f"committer bench <b@x> {ts} +0000\n".encode(),
                       f"data {len(msg)}\n".encode(), msg, b"\n"])
        if not parent:
            stream.append(b"deleteall\n")
        stream.extend(ops)
        stream.append(b"\n")

    def tag(name: str, ts: int) -> None:
        stream.extend([f"tag {name}\nfrom refs/heads/main\ntagger bench <b@x> {ts} +0000\n".encode(),
                       f"data {len(name)}\n{name}\n".encode()])

    def inline(path: str, text: str) -> bytes:
        data = text.encode()
        return f"M 100644 inline {path}\ndata {len(data)}\n".encode() + data + b"\n"

    commit("v1 tree", [inline(p, c) for p, c in contents.items()], parent=False, ts=1_700_000_000)
    tag("v1", 1_700_000_001)
    order = paths[:]
    rnd.shuffle(order)
    modified, renamed, deleted = order[:1300], order[1300:1500], order[1500:1550]
    ops: list[bytes] = []
    for p in modified:
        lines = contents[p].splitlines(keepends=True)
        lines[10] = "    value_changed = compute(0, 0)\n"
        lines.append("    extra = 1  # TODO(bench): added\n")
        ops.append(inline(p, "".join(lines)))
    for p in renamed:
        ops.append(f"D {p}\n".encode())
        ops.append(inline(p.replace("/mod_", "/renamed_"), contents[p] + "# renamed\n"))
    ops += [f"D {p}\n".encode() for p in deleted]
    ops += [inline(f"src/new/added_{i}.py", _content(rnd, 100_000 + i)) for i in range(50)]
    commit("v2 changes", ops, parent=True, ts=1_700_000_100)
    tag("v2", 1_700_000_101)

    root.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True, env=ENV)
    subprocess.run(["git", "fast-import", "--quiet"], cwd=root, input=b"".join(stream), check=True, env=ENV)
    subprocess.run(["git", "reset", "-q", "--hard", "main"], cwd=root, check=True, env=ENV)
    return {"files": n_files - len(deleted) + 50, "touched": len(modified) + len(renamed) + len(deleted) + 50}


def rulebook(repo: Path) -> Rulebook:
    p = str(repo)
    probes = {
        "state": {"uses": "git.repo", "with": {"path": p}},
        "base": {"uses": "git.resolve", "with": {"path": p, "ref": "v1"}},
        "head": {"uses": "git.resolve", "with": {"path": p, "ref": "v2"}},
        "diff": {"uses": "git.diff", "with": {"path": p, "base": "v1", "head": "v2"}},
        **{f"search{i}": {"uses": "search.regex", "with": {"root": p, "pattern": pat}}
           for i, pat in enumerate(PATTERNS)},
    }
    return Rulebook.model_validate({"policyrun": 1, "name": "bench", "modes": {"m": {"phases": ["P"]}},
                                    "phases": [{"id": "P"}], "probes": probes})


def raw_git(repo: Path) -> None:
    def git(*args: str) -> None:
        subprocess.run(["git", *args], cwd=repo, env=ENV, capture_output=True, check=True)

    git("status", "--porcelain=v2", "-z", "--branch")
    git("rev-parse", "v1^{}")
    git("rev-parse", "v2^{}")
    git("diff", "--raw", "--numstat", "-z", "-M", "v1", "v2")
    for pat in PATTERNS:
        git("grep", "-P", "-I", "-n", "--null", "-e", pat)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=6000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--keep", type=Path, help="build the repository here instead of a temp dir")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        repo = args.keep or Path(tmp) / "repo"
        t0 = time.perf_counter()
        shape = generate(repo, args.files)
        built = time.perf_counter() - t0
        rb = rulebook(repo)
        first = collect(rb, "m", {}, base_dir=repo)  # warm-up: imports, page cache
        bad = {k: f.error.code for k, f in first.facts.items() if f.error}
        assert not bad, bad
        diff = first.facts["diff"].value["totals"]
        assert diff["files"] == shape["touched"] and diff["renamed"] == 200, diff
        hits = {k: first.facts[k].value["total"] for k in first.facts if k.startswith("search")}
        raw_git(repo)
        t_policyrun = best_of(lambda: collect(rb, "m", {}, base_dir=repo), args.repeat)
        t_raw = best_of(lambda: raw_git(repo), args.repeat)
    print(f"repo: {shape['files']} files, diff v1..v2 touches {diff['files']} files ({diff['renamed']} renames, "
          f"{diff['deleted_files']} deletions, +{diff['added']} -{diff['deleted']} lines); built in {built:.1f}s")
    print(f"search hits: {hits}; cpus: {os.cpu_count()}")
    print(f"(a) policyrun collect (7 probes, parallel): {t_policyrun:.3f} s  (best of {args.repeat})")
    print(f"(b) raw git, sequential (7 commands):       {t_raw:.3f} s  (best of {args.repeat})")
    ratio = t_policyrun / t_raw
    print(f"ratio (a)/(b): {ratio:.2f}x  (target <= 1.3x)")
    return 0 if ratio <= 1.3 else 1


if __name__ == "__main__":
    raise SystemExit(main())
