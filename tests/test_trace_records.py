"""The typed dicts the evaluation builds records as (policyrun.trace.records) have the fields of the
trace models they are validated into: a field added to one and not the other fails here, not at the
end of some evaluation that happens to set it."""

from __future__ import annotations

import dataclasses
import typing

import pytest
from pydantic import BaseModel, ValidationError

from policyrun.trace import model as trace

from policyrun.trace import records as tracerecords

PAIRS = [(tracerecords.ReadRec, trace.Read), (tracerecords.CheckRec, trace.CheckRecord),
         (tracerecords.PhaseRec, trace.PhaseRecord), (tracerecords.DerivedRec, trace.DerivedRecord),
         (tracerecords.VerdictRec, trace.VerdictRecord)]


def _model_fields(model: type) -> set[str]:
    if isinstance(model, type) and issubclass(model, BaseModel):
        return set(model.model_fields)
    return {f.name for f in dataclasses.fields(model)}


@pytest.mark.parametrize(("typed", "model"), PAIRS, ids=[p[0].__name__ for p in PAIRS])
def test_a_record_has_exactly_its_models_fields(typed: type, model: type) -> None:
    keys = {k for k in typing.get_type_hints(typed) if not k.startswith("_")}
    assert keys == _model_fields(model)


@pytest.mark.parametrize(("typed", "model"), PAIRS, ids=[p[0].__name__ for p in PAIRS])
def test_every_field_the_model_requires_the_record_requires(typed: type, model: type) -> None:
    required = typed.__required_keys__  # type: ignore[attr-defined]
    if issubclass(model, BaseModel):
        model_required = {n for n, f in model.model_fields.items() if f.is_required()}
    else:
        model_required = {f.name for f in dataclasses.fields(model)
                          if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING}
    assert model_required <= required


def test_working_notes_never_reach_the_trace() -> None:
    # The interpreter's notes start with `_`; the models forbid extra fields, so one left behind
    # would fail the evaluation rather than leak into the trace.
    notes = {k for t, _ in PAIRS for k in typing.get_type_hints(t) if k.startswith("_")}
    assert notes == {"_violations", "_unavailable", "_templated"}
    with pytest.raises(ValidationError, match="_templated"):
        trace.PhaseRecord.model_validate({"phase": "P", "status": "PASS", "reason": "r", "next_allowed_action": "",
                                          "_templated": True})
