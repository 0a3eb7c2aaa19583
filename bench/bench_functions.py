"""Function-library benchmark: a 10,000 x 10,000 join through CEL, end to end.

Target (issue "CEL function library"): joining 10,000 diff files with 10,000 import sites on
their path, through `compile_expr` + `evaluate` (binding the facts, the library call, and the
plain value of the result), takes under 100 ms. Measured both ways a rulebook can write it:
`index_by` + `lookup`, and `inner_join`.

Timed as the engine evaluates: compiled once, with the cyclic GC paused (the interpreter pauses
it for a whole evaluation). The machine's two cores are shared: run it twice when a figure looks
high.

Baseline measured in the same run: the same work in plain Python (a dict comprehension), with
the ratio. Also shown: the nested comprehension a policy author would otherwise write fails on
the runtime's budget of 10,000 iterations, and the floor of just binding and returning the rows.

    python bench/bench_functions.py
"""

from __future__ import annotations

import gc
import random
import sys
from pathlib import Path
from typing import Any

from policyrun.language.expr import compile_expr, evaluate
sys.path.insert(0, str(Path(__file__).resolve().parent))  # bench/timing.py, also when imported by tests
from timing import best_of  # noqa: E402

N = 10_000
TARGET_MS = 100.0

LOOKUP = "facts.diff.lookup('path', facts.imports.index_by('path'))"
JOIN = "facts.diff.inner_join('path', facts.imports, 'path')"
NESTED = "facts.diff.map(d, facts.imports.filter(i, i.path == d.path))"
FLOOR = "facts.diff"


def make_facts(n: int, seed: int = 7) -> dict[str, Any]:
    """`n` changed files and `n` import sites over the same paths (unique keys), shuffled."""
    rng = random.Random(seed)
    paths = [f"afd_plugin/module_{i:05d}/impl.py" for i in range(n)]
    diff = [{"path": p, "status": rng.choice("AMD")} for p in paths]
    imports = [{"path": p, "site": f"vllm/model_executor/layer_{i % 97}.py:{i % 500 + 1}"} for i, p in enumerate(paths)]
    rng.shuffle(imports)
    return {"diff": diff, "imports": imports}


def run(expression: str, variables: dict[str, Any]) -> Any:
    outcome = evaluate(compile_expr(expression), variables)
    if not outcome.ok:
        raise RuntimeError(f"{expression}: {outcome.error}")
    return outcome.value


def python_lookup(facts: dict[str, Any]) -> list[Any]:
    index = {row["path"]: row for row in facts["imports"]}
    return [index[row["path"]] for row in facts["diff"] if row["path"] in index]


def python_join(facts: dict[str, Any]) -> list[Any]:
    index = {row["path"]: row for row in facts["imports"]}
    return [{"left": row, "right": index[row["path"]]} for row in facts["diff"] if row["path"] in index]


def main() -> None:
    facts = make_facts(N)
    variables = {"facts": facts}
    for expression in (LOOKUP, JOIN, FLOOR):
        compile_expr(expression)  # compiled once, as the engine does; not timed

    assert run(LOOKUP, variables) == python_lookup(facts)
    assert run(JOIN, variables) == python_join(facts)
    nested = evaluate(compile_expr(NESTED), variables)
    assert not nested.ok

    cases = [("index_by + lookup", lambda: run(LOOKUP, variables)), ("inner_join", lambda: run(JOIN, variables)),
             (f"floor: bind + return {N:,} rows", lambda: run(FLOOR, variables)),
             ("plain Python dict lookup", lambda: python_lookup(facts)),
             ("plain Python dict join", lambda: python_join(facts))]
    gc.disable()
    try:
        wall = {name: best_of(fn) for name, fn in cases}
    finally:
        gc.enable()

    print(f"join {N:,} x {N:,} rows on path, end to end through CEL (best of 5, GC paused)")
    for name, _ in cases:
        note = ""
        if name == "index_by + lookup":
            note = f"   target < {TARGET_MS:.0f} ms; {wall[name] / wall['plain Python dict lookup']:.0f}x plain Python"
        elif name == "inner_join":
            note = f"   target < {TARGET_MS:.0f} ms; {wall[name] / wall['plain Python dict join']:.0f}x plain Python"
        print(f"{name + ':':34s} {wall[name] * 1e3:6.1f} ms{note}")
    print(f"nested comprehension in CEL ({NESTED}):")
    print(f"  fails ({nested.kind}): {nested.error}")

if __name__ == "__main__":
    main()
