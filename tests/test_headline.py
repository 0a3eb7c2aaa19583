"""Headlines and next actions an agent can act on (issue 18 item 12): a BLOCKED phase's FAILs lead
its REASON column and the verdict line; a passing phase whose successor passed too says "none"
instead of repeating work already done; a phase blocked beside a FAIL says to fix the FAIL first."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

RULEBOOK = """\
policyrun: 1
name: headline
version: "1"
probes:
  unit: {uses: const, with: {value: {failed: 1}}}
  env: {uses: const, with: {value: {ok: false}}}
modes: {m: {phases: [{phase: A}, {phase: B}, {phase: C}]}}
phases:
  - {id: A, evidence: [{id: e, check: "true"}], next: {PASS: "classify all 31 rows"}}
  - {id: B, evidence: [{id: e, check: "true"}], next: {PASS: "run the unit suite"}}
  - id: C
    evidence:
      - {id: env, check: "facts.env.ok", on_fail: BLOCKED, message: "the target interpreter has no CUDA"}
      - {id: tests, check: "facts.unit.failed == 0", message: "1 unit test failed: tests/test_x.py::test_y"}
"""


def _evaluate(tmp_path: Path) -> tuple[int, str, str]:
    (tmp_path / "rb.yaml").write_text(RULEBOOK)
    proc = subprocess.run([sys.executable, "-m", "policyrun", "evaluate", "rb.yaml", "--mode", "m", "--out", "out"],
                          cwd=tmp_path, capture_output=True, text=True)
    return proc.returncode, proc.stdout, (tmp_path / "out" / "trace.json").read_text()


def test_fail_leads_the_headline_of_a_blocked_phase(tmp_path: Path) -> None:
    code, out, _ = _evaluate(tmp_path)
    assert code == 2  # the status is still the most severe: BLOCKED
    row = out[out.index("\nC "):]
    # The test failure is named before the environment block, in the table and in the verdict line.
    assert row.index("FAIL: 1 unit test failed") < row.index("BLOCKED: the target interpreter")
    verdict = next(line for line in out.splitlines() if line.startswith("verdict:"))
    assert verdict.startswith("verdict: incomplete — C is BLOCKED: FAIL: 1 unit test failed: tests/test_x.py::test_y;")
    assert "fix the failures C reports first" in row


def test_a_passing_phase_whose_successor_passed_says_none(tmp_path: Path) -> None:
    import json

    _, _, text = _evaluate(tmp_path)
    actions = {p["phase"]: p["next_allowed_action"] for p in json.loads(text)["phases"]}
    assert actions["A"].startswith("none: B has passed too")  # not "classify all 31 rows" again
    assert actions["B"] == "run the unit suite"  # C has not passed: B's own action still stands


def test_headline_without_fail_is_the_blocker() -> None:
    from policyrun.trace.headline import headline

    rec = {"status": "BLOCKED", "blocker": "no GPU"}
    assert headline(rec, [{"outcome": "BLOCKED", "message": "no GPU"}]) == "no GPU"
    assert headline({"status": "FAIL", "blocker": "x"}, [{"outcome": "FAIL", "message": "x"}]) == "x"
