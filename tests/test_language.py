"""The interpreter's semantics as data: every file under tests/language/ is one case.

A case gives a rulebook fragment, facts by probe id (a value, or `{__error__: code}` for a probe
that failed), inputs and a mode, and expects phase statuses (and optionally reasons, blockers,
check results, the verdict and the exit code) or a lint error code.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from policyrun.language.lint import findings_for
from policyrun.evaluate.engine import evaluate
from policyrun.errors import RulebookError
from policyrun.facts import Fact, FactError, FactsSnapshot, Provenance
from policyrun.language.inputs import resolve_inputs, select_mode
from policyrun.language.rulebook import load_rulebook

CASES = sorted((Path(__file__).parent / "language").glob("*.yaml"))


def _rulebook(case: dict[str, Any]) -> dict[str, Any]:
    rb = {"policyrun": 1, "name": "case", **case["rulebook"]}
    rb.setdefault("modes", {"m": {"phases": [p["id"] for p in rb["phases"]]}})
    probes = rb.setdefault("probes", {})
    for pid in case.get("facts", {}):
        probes.setdefault(pid, {"uses": "const", "with": {"value": None}})
    return rb


def _facts(case: dict[str, Any]) -> FactsSnapshot:
    out = {}
    for pid, value in case.get("facts", {}).items():
        prov = Provenance(probe=pid, kind="const")
        if isinstance(value, dict) and "__error__" in value:
            out[pid] = Fact(error=FactError(code=value["__error__"], message=value.get("message", "probe failed")),
                            provenance=prov)
        elif isinstance(value, dict) and "__range__" in value:  # a long list without a long file
            out[pid] = Fact(value=list(range(value["__range__"])), provenance=prov)
        else:
            out[pid] = Fact(value=value, provenance=prov)
    return FactsSnapshot(facts=out)


@pytest.mark.parametrize("path", CASES, ids=[c.stem for c in CASES])
def test_case(path: Path, tmp_path: Path) -> None:
    case = yaml.safe_load(path.read_text())
    rb_path = tmp_path / "rulebook.yaml"
    rb_path.write_text(yaml.safe_dump(_rulebook(case), sort_keys=False))
    expect = case["expect"]
    if "error" in expect:
        try:
            rb = load_rulebook(rb_path)
        except RulebookError as exc:
            codes = [f.code for f in exc.findings] or [exc.code]
        else:
            codes = [f.code for f in findings_for(rb) if f.severity == "error"]
        assert expect["error"] in codes, codes
        return
    rb = load_rulebook(rb_path)
    findings = findings_for(rb)
    assert [f for f in findings if f.severity == "error"] == []
    if "warnings" in expect:
        assert sorted(f.code for f in findings if f.severity == "warning") == sorted(expect["warnings"])
    mode = select_mode(rb.model, case.get("mode"))
    inputs = resolve_inputs(rb.model, values=case.get("inputs", {}))
    trace = evaluate(rb, mode=mode, inputs=inputs, facts=_facts(case), timestamp=False)
    got = {p.phase: p.status for p in trace.phases}
    assert got == expect["phases"], [(p.phase, p.status, p.reason, p.blocker) for p in trace.phases]
    by_id = {p.phase: p for p in trace.phases}
    for pid, text in expect.get("reasons", {}).items():
        assert text in by_id[pid].reason, by_id[pid].reason
    for pid, text in expect.get("blockers", {}).items():
        assert by_id[pid].blocker is not None and text in by_id[pid].blocker, by_id[pid].blocker
    for pid, text in expect.get("next", {}).items():
        assert text in by_id[pid].next_allowed_action, by_id[pid].next_allowed_action
    for pid, texts in expect.get("all_blockers", {}).items():
        assert by_id[pid].blockers == texts, by_id[pid].blockers
    for pid, text in expect.get("blocker_excludes", {}).items():
        assert text not in (by_id[pid].blocker or ""), by_id[pid].blocker
    derived = {d.id: d for d in trace.derived}
    for did, value in expect.get("derived", {}).items():
        assert derived[did].error is None and derived[did].value == value, derived[did]
    for did, text in expect.get("derived_errors", {}).items():
        assert derived[did].error is not None and text in derived[did].error, derived[did]
    for ref, value in expect.get("violations", {}).items():
        pid, cid = ref.split(".")
        found = {c.id: c.violations for c in by_id[pid].checks()}
        assert found.get(cid) == value, found
    for ref, result in expect.get("checks", {}).items():
        pid, cid = ref.split(".")
        found = {c.id: c.result for c in by_id[pid].checks()}
        assert found.get(cid) == result, found
    for ref, outcome in expect.get("outcomes", {}).items():
        pid, cid = ref.split(".")
        found_outcomes = {c.id: c.outcome for c in by_id[pid].checks()}
        assert cid in found_outcomes and found_outcomes[cid] == outcome, found_outcomes
    for ref, text in expect.get("messages", {}).items():
        pid, cid = ref.split(".")
        found_messages = {c.id: c.message for c in by_id[pid].checks()}
        assert text in (found_messages.get(cid) or ""), found_messages
    for pid, fields in expect.get("fields", {}).items():
        # Which checks each field of the phase's record holds (trace format 2), in order.
        for field, ids in fields.items():
            value = getattr(by_id[pid], field)
            got_ids = [c.id for c in value] if isinstance(value, list) else value.id if value else None
            assert got_ids == ids, (pid, field, got_ids)
    if "verdict" in expect:
        assert trace.verdict.id == expect["verdict"]
    if "exit_code" in expect:
        assert trace.exit_code == expect["exit_code"]
