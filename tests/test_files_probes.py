"""file.read parses YAML/JSON/TOML safely; attestation validates against the rulebook's schema and
reports every problem at file:line:col, as an error fact, never a crash."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

from policyrun.collection.run import collect
from policyrun.model import Rulebook
from policyrun.probes.base import ProbeError
from tests.gitfixtures import run_probe

DECISION_SCHEMA = {
    "type": "object",
    "required": ["decision", "reviewers"],
    "properties": {
        "decision": {"enum": ["proceed", "stop"]},
        "reviewers": {"type": "array", "minItems": 1, "items": {"type": "string"}},
        "notes": {"type": "string"},
    },
    "additionalProperties": False,
}


def read(path: Path, **params: Any) -> Any:
    return run_probe("file.read", {"path": str(path), **params}, path.parent).value


def failure(kind: str, path: Path, **params: Any) -> ProbeError:
    with pytest.raises(ProbeError) as info:
        run_probe(kind, {"path": str(path), **params}, path.parent)
    return info.value


def test_read_by_extension_or_format(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text("gpus: 4\nnames: [a, b]\n")
    (tmp_path / "b.json").write_text('{"ok": true}')
    (tmp_path / "c.toml").write_text("[tool]\nwhen = 2024-05-01\n")
    (tmp_path / "d.txt").write_text('{"from": "txt"}')
    assert read(tmp_path / "a.yaml") == {"gpus": 4, "names": ["a", "b"]}
    assert read(tmp_path / "b.json") == {"ok": True}
    assert read(tmp_path / "c.toml") == {"tool": {"when": "2024-05-01"}}  # dates become ISO strings
    assert read(tmp_path / "d.txt", format="json") == {"from": "txt"}


def test_read_errors_are_located(tmp_path: Path) -> None:
    assert failure("file.read", tmp_path / "absent.yaml").code == "file.not_found"
    (tmp_path / "bad.json").write_text('{\n  "a": 1,\n}')
    err = failure("file.read", tmp_path / "bad.json")
    assert err.code == "file.parse_error" and "bad.json:3:1" in err.message
    (tmp_path / "evil.yaml").write_text("x: !!python/object/apply:os.system ['true']\n")
    err = failure("file.read", tmp_path / "evil.yaml")
    assert err.code == "file.parse_error" and "evil.yaml:1:4" in err.message
    (tmp_path / "f.ini").write_text("")
    assert failure("file.read", tmp_path / "f.ini").code == "params.invalid"


@pytest.mark.parametrize("suffix", ["json", "yaml", "toml"])
@pytest.mark.parametrize("digits", [200, 5000])
def test_a_number_too_long_for_a_facts_file_is_a_parse_error(tmp_path: Path, suffix: str, digits: int) -> None:
    """Issue 19, item 5: whatever a probe reads, a facts file can hold and every command read back.
    5,000 digits used to stop Python's conversion (a crash); 200 reached the facts, and the trace,
    which report then refused."""
    number = "9" * digits
    text = {"json": '{"tool": {"n": %s}}', "yaml": "tool:\n  n: %s\n", "toml": "[tool]\nn = %s\n"}[suffix]
    (tmp_path / f"doc.{suffix}").write_text(text % number)
    err = failure("file.read", tmp_path / f"doc.{suffix}")
    assert err.code == "file.parse_error" and f"a number of {digits:,} characters" in err.message \
        or (suffix == "toml" and digits == 5000 and "invalid TOML" in err.message), err.message


@pytest.mark.parametrize("kind", ["file.read", "attestation"])
def test_yaml_nan_and_infinity_are_refused_like_json_ones(tmp_path: Path, kind: str) -> None:
    """A NaN score in an evidence file would pass `!(score < 0.85)`; JSON's NaN is refused, and so is YAML's."""
    (tmp_path / "accuracy.yaml").write_text("decision: go\nscores:\n  gsm8k: .nan\n")
    params = {"schema": {"type": "object"}} if kind == "attestation" else {}
    err = failure(kind, tmp_path / "accuracy.yaml", **params)
    assert err.code == "file.parse_error", err.message
    assert "accuracy.yaml:3:10: nan at scores → gsm8k: numbers must be finite" in err.message


def test_attestation_valid(tmp_path: Path) -> None:
    doc = tmp_path / "decision.yaml"
    doc.write_text("decision: proceed\nreviewers: [ada]\n")
    v = run_probe("attestation", {"path": str(doc), "schema": DECISION_SCHEMA}, tmp_path).value
    assert v == {"path": str(doc), "document": {"decision": "proceed", "reviewers": ["ada"]},
                 "sha256": hashlib.sha256(doc.read_bytes()).hexdigest()}


def test_attestation_invalid_lists_every_problem_with_its_position(tmp_path: Path) -> None:
    doc = tmp_path / "decision.yaml"
    doc.write_text("notes: fine\ndecision: maybe\nreviewers:\n  - ada\n  - 7\nextra: 1\n")
    err = failure("attestation", doc, schema=DECISION_SCHEMA)
    assert err.code == "attestation.invalid"
    assert "(3 problems)" in err.message
    name = str(doc)
    assert f"{name}:2:11: at decision: 'maybe' is not one of ['proceed', 'stop']" in err.message
    assert f"{name}:5:5: at reviewers[1]: 7 is not of type 'string'" in err.message
    assert "'extra' was unexpected" in err.message
    # Sorted by position: the whole-document problem (line 1) comes first.
    assert err.message.index("'extra'") < err.message.index("maybe") < err.message.index("7 is not")


def test_attestation_json_problems_are_located_too(tmp_path: Path) -> None:
    doc = tmp_path / "decision.json"
    doc.write_text('{\n  "decision": "stop",\n  "reviewers": []\n}\n')
    err = failure("attestation", doc, schema=DECISION_SCHEMA)
    assert err.code == "attestation.invalid" and f"{doc}:3:16: at reviewers:" in err.message


def test_attestation_missing_file_and_bad_schema(tmp_path: Path) -> None:
    assert failure("attestation", tmp_path / "absent.yaml", schema=DECISION_SCHEMA).code == "file.not_found"
    (tmp_path / "d.yaml").write_text("decision: stop\n")
    err = failure("attestation", tmp_path / "d.yaml", schema={"type": "objekt"})
    assert err.code == "attestation.bad_schema"
    assert failure("attestation", tmp_path / "d.yaml", schema="nowhere.json").code == "attestation.schema_not_found"


def _rulebook(schemas: dict[str, Any], schema_param: str) -> Rulebook:
    return Rulebook.model_validate({
        "policyrun": 1, "name": "att", "modes": {"m": {"phases": ["P"]}}, "phases": [{"id": "P"}],
        "schemas": schemas,
        "probes": {"decision": {"uses": "attestation",
                                "with": {"path": "evidence/decision.yaml", "schema": schema_param}}},
    })


def test_collect_passes_the_rulebook_schema_by_name(tmp_path: Path) -> None:
    (tmp_path / "evidence").mkdir()
    (tmp_path / "evidence" / "decision.yaml").write_text("decision: stop\nreviewers: [ada]\n")
    facts = collect(_rulebook({"decision": DECISION_SCHEMA}, "decision"), "m", {}, base_dir=tmp_path).facts
    assert facts["decision"].value["document"]["decision"] == "stop"
    assert facts["decision"].provenance.params["schema"] == "decision"  # the name, not the inlined schema


def test_collect_resolves_a_schema_path_against_the_rulebook(tmp_path: Path) -> None:
    rules = tmp_path / "rules"
    (rules / "schemas").mkdir(parents=True)
    (rules / "schemas" / "decision.yaml").write_text("type: object\nrequired: [decision]\n")
    (tmp_path / "evidence").mkdir()
    (tmp_path / "evidence" / "decision.yaml").write_text("reviewers: [ada]\n")
    facts = collect(_rulebook({"decision": "schemas/decision.yaml"}, "decision"), "m", {}, base_dir=tmp_path,
                    rulebook_dir=rules).facts
    error = facts["decision"].error
    assert error is not None and error.code == "attestation.invalid"
    assert "'decision' is a required property" in error.message
