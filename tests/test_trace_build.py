"""build_trace constructs the trace from the interpreter's records without validating them again:
it must give the very trace validation would (the flagship examples hold derived values, violations,
stop conditions and every status), and still refuse a field the trace does not have."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from policyrun import engine
from policyrun.cli import main
from policyrun.trace import Trace, build_trace

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = {"planning-pass": "planning-audit", "identity-disagree": "planning-audit",
             "architecture-stop": "planning-audit", "final-unexplained-skip": "final-validation",
             "final-pass": "final-validation"}


@pytest.fixture
def compared(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Every trace the engine builds is also validated the old way, and both must agree."""
    seen: list[int] = []

    def both(data: dict[str, Any]) -> Trace:
        built = build_trace(data)
        validated = Trace.model_validate(data)
        assert built == validated
        assert built.to_json() == validated.to_json()
        seen.append(len(validated.phases))
        return built
    monkeypatch.setattr(engine, "build_trace", both)
    return seen


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_built_trace_equals_validated_trace(name: str, compared: list[int], tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    folder = ROOT / "examples" / name
    main(["evaluate", "upgrade-gpu-version", "--mode", SCENARIOS[name], "--inputs", str(folder / "inputs.yaml"),
          "--facts", str(folder / "facts.json"), "--out", str(tmp_path), "--no-timestamp", "-q"])
    capsys.readouterr()
    assert compared and compared[0] > 0


def test_unknown_field_is_refused() -> None:
    """A record with a field the trace does not have is a defect, as validation would say."""
    with pytest.raises(ValueError, match="CheckRecord has no field"):
        build_trace({"rulebook": {"name": "x", "version": "1", "sha256": "0"}, "mode": "m", "inputs": {},
                     "facts_sha256": "0", "exit_code": 0, "verdict": {"id": "complete"},
                     "phases": [{"phase": "P", "status": "PASS", "reason": "r", "next_allowed_action": "",
                                 "evidence": [{"id": "c", "kind": "evidence", "expression": "true",
                                               "result": "SATISFIED", "bogus": 1}]}]})
