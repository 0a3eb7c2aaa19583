"""Compiled expressions stored on disk (policyrun.language.compilecache) load back as the very expression
compile_expr gives, and a damaged store is ignored, never trusted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from policyrun.language import compilecache
from policyrun.language.expr import compile_expr, compiled_from_record, evaluate

SOURCES = [
    "facts.a.n >= 0 && facts.a.name.startsWith('x')",
    "failed(facts.b) || has(facts.c) || error_code(facts.d.k) == ''",
    "derived.total.orValue(0) + size(inputs.items) > vars.limit",
    "[1, 2, 3].map(x, x * 2)",
]
VARIABLES = {"facts": {"a": {"n": 1, "name": "xy"}, "c": 1}, "derived": {}, "inputs": {"items": [1]},
             "vars": {"limit": 0}}


@pytest.mark.parametrize("source", SOURCES)
def test_a_stored_expression_loads_back_as_compiled(source: str) -> None:
    fresh = compile_expr(source)
    record = json.loads(json.dumps(compilecache.record_of(fresh)))
    loaded = compiled_from_record(source, record)
    assert loaded is not None
    for field in ("source", "result_type", "serialized", "reads", "read_parts", "roots", "facts", "derived",
                  "reads_all_facts", "fact_status", "element_status", "strict_facts", "strict_elements"):
        assert getattr(loaded, field) == getattr(fresh, field), field
    assert evaluate(loaded, VARIABLES) == evaluate(fresh, VARIABLES)


def test_a_damaged_record_is_not_loaded() -> None:
    record = compilecache.record_of(compile_expr(SOURCES[0]))
    assert compiled_from_record(SOURCES[0], {**record, "program": "AAAA"}) is None
    assert compiled_from_record(SOURCES[0], {k: v for k, v in record.items() if k != "read_parts"}) is None


RULEBOOK = """\
policyrun: 1
name: cached
probes:
  a: {uses: const, with: {value: {n: 3}}}
modes:
  m: {phases: [A]}
phases:
  - id: A
    evidence:
      - {id: big, check: "facts.a.n > 2", message: "n is ${facts.a.n}"}
"""


def test_evaluate_stores_then_uses_the_compiled_expressions(tmp_path: Path) -> None:
    """The second run reads the store the first wrote, and gives the same trace; a store that
    cannot be parsed is ignored."""
    rb = tmp_path / "rb.yaml"
    rb.write_text(RULEBOOK)
    env = {**os.environ, "POLICYRUN_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("POLICYRUN_NO_CACHE", None)

    def run(out: str) -> object:
        proc = subprocess.run([sys.executable, "-m", "policyrun", "evaluate", str(rb), "--out", str(tmp_path / out),
                               "--no-timestamp", "-q"], capture_output=True, text=True, env=env)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        trace = json.loads((tmp_path / out / "trace.json").read_text())
        return trace["phases"], trace["verdict"]  # provenance holds the collection's times
    first = run("o1")
    stored = list((tmp_path / "cache" / "compiled").glob("*.json"))
    assert len(stored) == 1
    expressions = json.loads(stored[0].read_text())["expressions"]
    assert set(expressions) == {"facts.a.n > 2", "facts.a.n"}
    assert run("o2") == first
    stored[0].write_text("{not json")
    assert run("o3") == first
