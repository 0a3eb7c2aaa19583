"""Cost bounds: a runaway expression ends as one located line, never minutes of CPU or GBs of memory."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from policyrun.cli import main

RUNAWAY = "'a'" + ".replace('a', 'aa')" * 29 + ".size() > 0"  # 2**29 characters if left to run

RULEBOOK = f"""\
policyrun: 1
name: guard-demo
modes:
  m: {{phases: [A, B]}}
phases:
  - id: A
    requires: []
    evidence:
      - id: runaway
        check: "{RUNAWAY}"
      - id: fine
        check: "1 + 1 == 2"
  - id: B
    requires: []
    evidence:
      - {{id: other, check: "true"}}
"""


def _run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict, float]:
    rb = tmp_path / "rb.yaml"
    rb.write_text(RULEBOOK)
    start = time.monotonic()
    code = main(["evaluate", str(rb), "--facts", str(_empty_facts(tmp_path)), "--out", str(tmp_path / "o"), "-q"])
    elapsed = time.monotonic() - start
    capsys.readouterr()
    return code, json.loads((tmp_path / "o" / "trace.json").read_text()), elapsed


def _empty_facts(tmp_path: Path) -> Path:
    path = tmp_path / "facts.json"
    path.write_text('{"policyrun_facts": 1, "facts": {}}')
    return path


def test_time_limit_blocks_the_expression_with_its_location(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("POLICYRUN_EXPRESSION_SECONDS", "1")
    monkeypatch.setenv("POLICYRUN_EVALUATION_MEMORY_MB", "8192")  # so the time limit is what stops it
    code, trace, elapsed = _run(tmp_path, capsys)
    assert code == 2
    a, b = trace["phases"]
    assert a["status"] == "BLOCKED" and b["status"] == "PASS"  # the rest of the evaluation is decided
    checks = {c["id"]: c for c in a["evidence"]}
    assert checks["fine"]["result"] == "SATISFIED"
    blocker = a["blocker"]
    assert blocker.startswith("evidence runaway could not be established: the expression at ")
    assert f"{tmp_path / 'rb.yaml'}:10:" in blocker and "time limit of 1s" in blocker
    assert "replace" not in blocker and "\n" not in blocker  # one line, no dump of the expression
    assert elapsed < 30


def test_memory_limit_blocks_the_expression(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("POLICYRUN_EXPRESSION_SECONDS", "60")
    monkeypatch.setenv("POLICYRUN_EVALUATION_MEMORY_MB", "256")
    code, trace, elapsed = _run(tmp_path, capsys)
    assert code == 2
    assert "memory limit of 256 MiB" in trace["phases"][0]["blocker"]
    assert trace["phases"][1]["status"] == "PASS"
    assert elapsed < 60


def test_deadline_stops_a_child_stuck_outside_any_expression() -> None:
    """Collection forks the guarded child from a process whose other threads run probes; a child
    that hangs outside an expression (a lock held at the fork) is stopped by the deadline."""
    from policyrun.errors import PolicyrunError
    from policyrun.language.guard import run_guarded

    def stuck() -> int:
        time.sleep(120)
        return 1

    with pytest.raises(PolicyrunError) as err:
        run_guarded(stuck, deadline_s=1)
    assert err.value.code == "G004" and "deadline of 1s" in err.value.message
