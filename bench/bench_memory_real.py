"""Peak memory of the flagship's planning audit on the real corpus, against the raw floor.

Issue 24, item 4: goal peak memory of the real planning audit <= 2.5x the raw floor.

    python bench/bench_memory_real.py [--runs 5] [--against DIR]

Each measurement runs in a fresh child process (alternating, `--runs` rounds):
  audit  `python -m policyrun evaluate upgrade-gpu-version --mode planning-audit` on a clone of the
         real afd-plugin, vLLM v0.26.0 -> v0.27.0 (as bench_flagship_real.py runs it);
  floor  the raw git + ast work without policyrun: the plugin's Python files at HEAD listed with
         `git ls-tree`, read through one `git cat-file --batch` and `ast.parse`d one by one; then
         the vLLM files the plugin imports (and their packages) at both tags, read and parsed alike.

Three figures per child, in MB (1e6 bytes):
  main   the child interpreter's own peak RSS (getrusage(RUSAGE_SELF).ru_maxrss at exit);
  any    the largest peak of any one process in its tree (the wait4 rusage of the child: the
         kernel's maximum over it and every descendant it reaped — parse helpers, git, pip);
  tree   the largest sum of PSS (shared pages counted once) over the child and its live
         descendants, sampled every 10 ms from /proc (what the machine had to hold at once;
         sampling can miss a short spike).
The ratio printed is audit / floor for each figure (medians; min and max too). `--against DIR`
measures another checkout of policyrun in the same alternation (`git worktree add --detach ../base
<sha>`). Clones go to a temporary directory; the corpus is never written to.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_flagship_real import CORPUS, ENV, blobs, git, module_file  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def floor(afd: Path, vllm: Path) -> int:
    """The raw git + ast work; returns how many files it parsed. Trees are dropped as it goes."""
    files = [p for p in git(afd, "ls-tree", "-r", "--name-only", "-z", "HEAD").decode().split("\0")
             if p.endswith(".py") and not p.startswith("tests/")]
    imported: set[str] = set()
    for data in blobs(afd, "HEAD", files).values():
        for node in ast.walk(ast.parse(data)):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "vllm":
                imported.add(node.module)
                imported.update(f"{node.module}.{a.name}" for a in node.names)
            elif isinstance(node, ast.Import):
                imported.update(a.name for a in node.names if a.name.split(".")[0] == "vllm")
    parsed = len(files)
    for rev in ("v0.26.0", "v0.27.0"):
        names = set(git(vllm, "ls-tree", "-r", "--name-only", "-z", rev, "vllm").decode().split("\0"))
        wanted = sorted({f for m in imported if (f := module_file(names, m))}
                        | {f for m in imported if (f := module_file(names, m.rsplit(".", 1)[0]))})
        for data in blobs(vllm, rev, wanted).values():
            ast.parse(data)
            parsed += 1
    return parsed


def child(argv: list[str], report: Path) -> None:
    """Run inside the measured child: do the work, then write its own and its children's peaks."""
    code = 0
    try:
        if argv[0] == "floor":
            floor(Path(argv[1]), Path(argv[2]))
        else:
            # What `python -m policyrun` does (cli.entry), less its os._exit, so the peaks can be read.
            import gc

            from policyrun.cli import main as policyrun_main
            gc.disable()
            code = policyrun_main(argv[1:])
    finally:
        report.write_text(json.dumps({"self_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                                      "children_kb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss,
                                      "code": code}))


def tree_pss(root: int) -> int:
    """Bytes resident in `root` and every live process below it, pages shared between them counted
    once (PSS, /proc/PID/smaps_rollup): the evaluation guard is a fork of the main process, and
    adding RSS would count every page the two share twice."""
    parents: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    parents[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        try:
            with open(f"/proc/{pid}/smaps_rollup") as f:
                total += next(int(line.split()[1]) * 1024 for line in f if line.startswith("Pss:"))
        except (OSError, StopIteration):
            pass
        todo.extend(p for p, parent in parents.items() if parent == pid)
    return total


def measure(argv: list[str], cwd: Path, checkout: Path, tmp: Path) -> dict[str, float]:
    report = tmp / "report.json"
    report.unlink(missing_ok=True)
    env = {**ENV, "PYTHONPATH": str(checkout)}  # that checkout's policyrun, whatever is installed
    proc = subprocess.Popen([sys.executable, __file__, "--child", str(report), *argv], cwd=cwd, env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    peak = [0]
    done = threading.Event()

    def sample() -> None:
        while not done.wait(0.01):
            peak[0] = max(peak[0], tree_pss(proc.pid))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    done.set()
    sampler.join()
    result = json.loads(report.read_text()) if report.exists() else None
    if proc.returncode != 0 or result is None or result["code"] not in (0, 2):
        raise SystemExit(f"{' '.join(argv)} failed ({proc.returncode}): {err[-2000:].decode(errors='replace')}")
    return {"main": result["self_kb"] * 1024 / 1e6, "any": usage.ru_maxrss * 1024 / 1e6, "tree": peak[0] / 1e6}


def spread(values: list[float]) -> str:
    return f"{min(values):6.1f} / {statistics.median(values):6.1f} / {max(values):6.1f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--against", type=Path, help="another policyrun checkout, measured in the same rounds")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        subprocess.run(["git", "clone", "-q", str(CORPUS / "afd-plugin.bundle"), str(tmp / "afd")], check=True, env=ENV)
        subprocess.run(["git", "clone", "-q", str(CORPUS / "vllm-0.26.0-0.27.0.bundle"), str(tmp / "vllm")],
                       check=True, env=ENV)
        git(tmp / "vllm", "fetch", "-q", "--tags")

        def audit(checkout: Path, out: str) -> dict[str, float]:
            return measure(["policyrun", "evaluate", "upgrade-gpu-version", "--mode", "planning-audit", "--set",
                            f"vllm_src={tmp / 'vllm'}", "--set", "target_ref=v0.27.0", "--out", str(tmp / out), "-q"],
                           tmp / "afd", checkout, tmp)

        sides: dict[str, list[dict[str, float]]] = {"audit": [], "floor": []}
        if args.against:
            sides["against"] = []
        audit(ROOT, "warm")  # the page cache and __pycache__, for both checkouts
        if args.against:
            audit(args.against, "warm-against")
        for i in range(args.runs):  # alternate, so the machine's state hits every side alike
            sides["audit"].append(audit(ROOT, f"out{i}"))
            sides["floor"].append(measure(["floor", str(tmp / "afd"), str(tmp / "vllm")], tmp, ROOT, tmp))
            if args.against:
                sides["against"].append(audit(args.against, f"against{i}"))
    print(f"peak memory, planning-audit on the real corpus; {args.runs} alternating runs; nproc {os.cpu_count()}, "
          f"load average {os.getloadavg()[0]:.2f}")
    print("  MB (min / median / max)   main process          any one process       process tree (sampled)")
    labels = {"audit": "policyrun audit", "floor": "raw git + ast floor", "against": f"audit at {args.against}"}
    for side, runs in sides.items():
        print(f"  {labels[side]:24} " + "   ".join(spread([r[k] for r in runs]) for k in ("main", "any", "tree")))

    def ratio(a: str, b: str) -> str:
        return "   ".join(
            f"{statistics.median(x[k] for x in sides[a]) / statistics.median(x[k] for x in sides[b]):5.2f}x"
            f" ({min(x[k] for x in sides[a]) / min(x[k] for x in sides[b]):.2f}-"
            f"{max(x[k] for x in sides[a]) / max(x[k] for x in sides[b]):.2f})   " for k in ("main", "any", "tree"))
    print(f"  audit / floor            {ratio('audit', 'floor')}   goal <= 2.5x")
    if args.against:
        print(f"  audit / against          {ratio('audit', 'against')}")


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        child(sys.argv[3:], Path(sys.argv[2]))
    else:
        main()
