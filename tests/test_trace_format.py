"""Trace format 2 (a phase's checks in fields of their own) and reading format 1.

tests/data/traces/format1-architecture-stop.json is examples/architecture-stop/expected/trace.json
as format 1 wrote it (before trace format 2): preconditions, stop conditions and evidence all in
each phase's `evidence` list.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from policyrun.cli import main
from policyrun.errors import UsageError
from policyrun.render.explain import render_explain
from policyrun.render.junit import render_junit
from policyrun.trace.model import TRACE_FORMAT, Trace, load_trace, upgrade_format1

ROOT = Path(__file__).resolve().parent.parent
FORMAT1 = ROOT / "tests" / "data" / "traces" / "format1-architecture-stop.json"
EXAMPLE = ROOT / "examples" / "architecture-stop"

FIELDS = {"mode_check": "mode_selection", "preconditions": "precondition", "stop_when": "stop_when",
          "evidence": "evidence", "next_action_check": "template"}


def as_format1(data: dict[str, Any]) -> dict[str, Any]:
    """A format-2 trace's data as format 1 wrote it: every check back in `evidence`, in order."""
    phases = []
    for phase in data["phases"]:
        checks = [c for f in FIELDS for c in (phase[f] if isinstance(phase[f], list) else [phase[f]]) if c]
        rest = {k: v for k, v in phase.items() if k not in FIELDS}
        phases.append({**{k: rest[k] for k in ("phase", "title", "status", "reason")}, "evidence": checks,
                       **{k: v for k, v in rest.items() if k not in ("phase", "title", "status", "reason")}})
    return {**data, "policyrun_trace": 1, "phases": phases}


def test_the_format_1_fixture_is_format_1() -> None:
    data = json.loads(FORMAT1.read_text())
    assert data["policyrun_trace"] == 1
    kinds = {c["kind"] for p in data["phases"] for c in p["evidence"]}
    assert {"precondition", "stop_when", "evidence"} <= kinds


def test_a_format_1_trace_loads_with_each_check_in_the_field_of_its_kind() -> None:
    old = json.loads(FORMAT1.read_text())
    trace = load_trace(FORMAT1)
    assert trace.policyrun_trace == TRACE_FORMAT == 2
    for before, after in zip(old["phases"], trace.phases, strict=True):
        # Every check kept, in the same order, and nothing else about the phase changed.
        assert [c.__pydantic_serializer__.to_python(c, mode="json") for c in after.checks()] == before["evidence"]
        for field, kind in FIELDS.items():
            value = getattr(after, field)
            assert all(c.kind == kind for c in (value if isinstance(value, list) else [value] if value else []))
        assert {k: v for k, v in after.model_dump(mode="json").items() if k not in FIELDS} == \
               {k: v for k, v in before.items() if k != "evidence"}
    arch = trace.phase("ARCHITECTURE_GATE")
    assert arch is not None and arch.status == "STOPPED"
    assert [c.kind for c in arch.preconditions] == ["precondition", "precondition"]
    assert [c.id for c in arch.stop_when] == [c["id"] for p in old["phases"] if p["phase"] == "ARCHITECTURE_GATE"
                                              for c in p["evidence"] if c["kind"] == "stop_when"]
    assert arch.stop_when[0].outcome == "STOPPED" and arch.mode_check is None and arch.next_action_check is None
    assert all(c.kind == "evidence" for p in trace.phases for c in p.evidence)


def test_mode_and_next_action_checks_of_format_1_get_their_own_fields() -> None:
    def check(cid: str, kind: str, outcome: str | None = None) -> dict[str, Any]:
        return {"id": cid, "kind": kind, "expression": "x", "result": "UNKNOWN", "outcome": outcome}

    data = {"policyrun_trace": 1, "phases": [{"phase": "P", "status": "BLOCKED", "reason": "r", "evidence": [
        check("mode.P", "mode_selection"), check("ready", "precondition"), check("e", "evidence"),
        check("next:PASS", "template", "BLOCKED")], "next_allowed_action": "x"}]}
    phase = upgrade_format1(data)["phases"][0]
    assert phase["mode_check"]["id"] == "mode.P" and phase["next_action_check"]["id"] == "next:PASS"
    assert [c["id"] for c in phase["preconditions"]] == ["ready"] and [c["id"] for c in phase["evidence"]] == ["e"]
    assert phase["stop_when"] == [] and list(phase) .index("mode_check") == list(phase).index("reason") + 1
    assert upgrade_format1(upgrade_format1(data)) == upgrade_format1(data)  # format 2 is left as it is


def test_a_check_in_the_field_of_another_kind_is_refused(tmp_path: Path) -> None:
    data = json.loads((EXAMPLE / "expected" / "trace.json").read_text())
    arch = next(p for p in data["phases"] if p["phase"] == "ARCHITECTURE_GATE")
    arch["evidence"].append(arch["preconditions"][0])
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(data))
    with pytest.raises(UsageError) as err:
        load_trace(path)
    assert err.value.code == "T003" and "`evidence` holds a precondition check" in err.value.message


def test_a_format_1_trace_reports_as_its_format_2_form(tmp_path: Path) -> None:
    old = load_trace(FORMAT1)
    again = tmp_path / "trace.json"
    again.write_text(old.to_json())
    new = load_trace(again)
    assert new == old
    assert render_junit(new) == render_junit(old) and render_explain(new) == render_explain(old)


def test_the_example_trace_is_format_2_and_its_format_1_form_reads_back_to_it(tmp_path: Path) -> None:
    text = (EXAMPLE / "expected" / "trace.json").read_text()
    assert json.loads(text)["policyrun_trace"] == 2
    old = tmp_path / "trace.json"
    old.write_text(json.dumps(as_format1(json.loads(text)), indent=2))
    assert load_trace(old).to_json() == Trace.model_validate_json(text).to_json()


@pytest.mark.parametrize("edit", [False, True])
def test_verify_verifies_a_format_1_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str], edit: bool) -> None:
    data = as_format1(json.loads((EXAMPLE / "expected" / "trace.json").read_text()))
    if edit:
        arch = next(p for p in data["phases"] if p["phase"] == "ARCHITECTURE_GATE")
        arch["evidence"][-1]["message"] = "edited"
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(data, indent=2))
    code = main(["verify", str(path), "--facts", str(EXAMPLE / "facts.json")])
    captured = capsys.readouterr()
    out = captured.out
    # The auditor is told the file was format 1 and how it was compared.
    assert f"policyrun: note: {path} is trace format 1; it was read as format 2" in captured.err
    if not edit:
        assert code == 0 and out.startswith(f"verified: {path}"), out
    else:
        assert code == 1 and "NOT VERIFIED" in out and "edited" in out, out


def test_an_attestation_over_a_format_1_trace_verifies_against_it(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    from tests.test_attestations import _keys

    private, public = _keys(tmp_path)
    data = as_format1(json.loads((EXAMPLE / "expected" / "trace.json").read_text()))
    path = tmp_path / "trace.json"
    path.write_text(json.dumps(data, indent=2))
    assert main(["report", str(path), "-f", "in-toto"]) == 0
    statement = capsys.readouterr().out
    # The statement made over format 1 is the one its format-2 form gives, and verifies against either.
    new = tmp_path / "new.json"
    new.write_text((EXAMPLE / "expected" / "trace.json").read_text())
    assert main(["report", str(new), "-f", "in-toto"]) == 0
    assert capsys.readouterr().out == statement
    envelope = tmp_path / "env.json"
    assert main(["report", str(path), "-f", "in-toto", "--sign-key", str(private), "-o", str(envelope)]) == 0
    for trace in (path, new):
        code = main(["verify", str(envelope), "--key", str(public), "--trace", str(trace),
                     "--facts", str(EXAMPLE / "facts.json")])
        out = capsys.readouterr().out
        assert code == 0 and "NOT VERIFIED" not in out, out


def test_verify_says_nothing_of_formats_for_a_trace_of_this_format(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "trace.json"
    path.write_text((EXAMPLE / "expected" / "trace.json").read_text())
    assert main(["verify", str(path), "--facts", str(EXAMPLE / "facts.json")]) == 0
    assert "trace format" not in capsys.readouterr().err
