"""Probes with `for_each` (one run per element, facts keyed by element) and `when` (collected only
when a condition over inputs and vars holds): collection, evaluation, replay and lint
(docs/language.md "Fan-out" and "Conditional probes", docs/semantics.md)."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml

from policyrun import limits
from policyrun.cli import main
from policyrun.collection.run import collect
from policyrun.collection.stale import stale_facts
from policyrun.evaluate.engine import evaluate
from policyrun.facts import FactsSnapshot, load_facts
from policyrun.model import Rulebook
from policyrun.language.rulebook import load_rulebook
from tests.test_collect import code, fake, message, rulebook, run  # noqa: F401 (fake is a fixture)

PKGS = [{"name": "numpy", "pin": "1.26"}, {"name": "torch", "pin": "2.9"}, {"name": "broken", "pin": "0"}]


def _pins(fake: Any) -> Any:
    def look(params: dict[str, Any]) -> Any:
        if params["package"] == "broken":
            from policyrun.probes.base import ProbeError

            raise ProbeError("pkg.not_found", "no such package: broken")
        return {"package": params["package"], "version": params["want"] + ".0"}
    return fake("test.pins", look)


def _fanout_rb(**extra: Any) -> Rulebook:
    return rulebook({"pkgs": {"uses": "test.pins", "for_each": "${vars.pkgs}", "key": "${item.name}",
                              "with": {"package": "${item.name}", "want": "${item.pin}"}, **extra}},
                    vars={"pkgs": PKGS})


def test_one_run_per_element_keyed_with_its_own_provenance_and_error(fake: Any, tmp_path: Path) -> None:
    probe = _pins(fake)
    fact = run(_fanout_rb(), tmp_path)["pkgs"]
    assert probe.calls == 3
    assert fact.ok  # one element failing does not fail the fan-out, nor its siblings
    assert fact.value == {"numpy": {"package": "numpy", "version": "1.26.0"},
                          "torch": {"package": "torch", "version": "2.9.0"}}
    elements = fact.provenance.elements
    assert elements is not None and list(elements) == ["broken", "numpy", "torch"]
    assert elements["torch"].params == {"package": "torch", "want": "2.9"}
    assert elements["torch"].error is None and elements["torch"].duration_s is not None
    assert elements["broken"].error is not None and elements["broken"].error.code == "pkg.not_found"


def test_string_elements_are_their_own_keys(tmp_path: Path) -> None:
    rb = rulebook({"c": {"uses": "const", "for_each": "${['a', 'b']}", "with": {"value": "${item + '!'}"}}})
    assert run(rb, tmp_path)["c"].value == {"a": "a!", "b": "b!"}


@pytest.mark.parametrize(("for_each", "key", "error", "text"), [
    ("${[{'n': 1}]}", None, "fanout.key", "the key of element 0 is dict, not a string: declare `key:`"),
    ("${['a', 'b', 'a']}", None, "fanout.duplicate_key", "elements 0 and 2 have the same key 'a'"),
    ("${[{'n': 'x'}, {'n': 'x'}]}", "${item.n}", "fanout.duplicate_key", "elements 0 and 1 have the same key 'x'"),
    ("${'abc'}", None, "fanout.not_a_list", "for_each gave str, not a list"),
    ("${facts.nope.x}", None, "dependency.failed", "depends on probe 'nope', which failed"),
    ("${vars.absent}", None, "params.interpolation", "for_each: `${vars.absent}` could not be evaluated"),
])
def test_a_fan_out_that_cannot_be_planned_fails_as_a_whole(tmp_path: Path, for_each: str, key: str | None,
                                                           error: str, text: str) -> None:
    spec: dict[str, Any] = {"uses": "const", "for_each": for_each, "with": {"value": 1}}
    if key is not None:
        spec["key"] = key
    probes = {"c": spec}
    if "facts.nope" in for_each:
        probes["nope"] = {"uses": "file.read", "with": {"path": "missing.yaml"}}
    fact = run(rulebook(probes), tmp_path)["c"]
    assert code(fact) == error
    assert text in message(fact)


def test_duplicate_keys_are_a_located_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "rb.yaml").write_text(
        "policyrun: 1\nname: dup\nmodes: {m: {phases: [A]}}\n"
        "probes:\n  c:\n    uses: const\n    for_each: \"${[{'n': 'x'}, {'n': 'x'}]}\"\n    key: ${item.n}\n"
        "    with: {value: 1}\nphases:\n  - id: A\n    evidence: [{id: e, check: \"size(facts.c) == 1\"}]\n")
    assert main(["collect", str(tmp_path / "rb.yaml"), "-o", str(tmp_path / "f.json")]) == 2
    fact = load_facts(tmp_path / "f.json").facts["c"]
    assert code(fact) == "fanout.duplicate_key"
    assert f"(key at {tmp_path / 'rb.yaml'}:8:10)" in message(fact)


def test_the_element_count_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "FANOUT_ELEMENTS", 5)
    fact = run(rulebook({"c": {"uses": "const", "for_each": "${['a', 'b', 'c', 'd', 'e', 'f']}",
                               "with": {"value": 1}}}), tmp_path)["c"]
    assert code(fact) == "fanout.too_many" and "limit is 5" in message(fact)


def test_ten_thousand_elements_run_on_the_bounded_pool(fake: Any, tmp_path: Path) -> None:
    """A fan-out over 10,000 elements never starts a thread per element: the pool's workers (plus
    one timeout thread each) run them a few at a time."""
    peak = [0]
    lock = threading.Lock()

    def look(params: dict[str, Any]) -> Any:
        with lock:
            peak[0] = max(peak[0], threading.active_count())
        return params["n"]

    fake("test.count", look)
    rb = rulebook({"c": {"uses": "test.count", "for_each": "${vars.names}", "with": {"n": "${item}"}}},
                  vars={"names": [f"e{i}" for i in range(limits.FANOUT_ELEMENTS)]})
    before = threading.active_count()
    fact = run(rb, tmp_path)["c"]
    assert fact.ok and len(fact.value) == limits.FANOUT_ELEMENTS
    assert peak[0] - before <= 2 * 8 + 2  # MAX_WORKERS pool threads and their timeout threads


def test_a_failed_element_reads_as_missing_and_failed_answers_per_element(fake: Any, tmp_path: Path) -> None:
    _pins(fake)
    rb = _fanout_rb()
    snapshot = collect(rb, "m", {}, base_dir=tmp_path)
    doc = {"policyrun": 1, "name": "t", "vars": {"pkgs": PKGS}, "modes": {"m": {"phases": ["A"]}},
           "probes": {"pkgs": {"uses": "test.pins", "for_each": "${vars.pkgs}", "key": "${item.name}",
                               "with": {"package": "${item.name}", "want": "${item.pin}"}}},
           "phases": [{"id": "A", "evidence": [
               {"id": "numpy", "check": "facts.pkgs.numpy.version == '1.26.0'"},
               {"id": "broken", "check": "facts.pkgs['broken'].version == '0.0'"},
               {"id": "asked", "check": "!failed(facts.pkgs) && failed(facts.pkgs.broken) && !failed(facts.pkgs.numpy)"
                                        " && error_code(facts.pkgs['broken']) == 'pkg.not_found'"
                                        " && error_code(facts.pkgs.absent) == 'not_collected'"},
               {"id": "count", "check": "size(facts.pkgs) == 2 && 'broken' in facts.pkgs == false"}]}]}
    path = tmp_path / "rb.yaml"
    path.write_text(yaml.safe_dump(doc))
    trace = evaluate(load_rulebook(path), mode="m", inputs={}, facts=snapshot, timestamp=False)
    checks = {c.id: c for c in trace.phases[0].evidence}
    assert {k: c.result for k, c in checks.items()} == {"numpy": "SATISFIED", "broken": "UNKNOWN",
                                                        "asked": "SATISFIED", "count": "SATISFIED"}
    assert checks["broken"].reads[0].error == "pkg.not_found: no such package: broken"
    assert trace.phases[0].status == "BLOCKED"
    assert trace.provenance["pkgs"].elements is not None  # each element's provenance reaches the trace


def test_replay_checks_each_element(fake: Any, tmp_path: Path) -> None:
    _pins(fake)
    rb = _fanout_rb()
    snapshot = collect(rb, "m", {}, base_dir=tmp_path)
    assert stale_facts(rb, "m", {}, snapshot) == []
    fewer = rb.model_copy(update={"vars": {"pkgs": PKGS[:2]}})
    assert stale_facts(fewer, "m", {}, snapshot) == [
        {"probe": "pkgs", "reason": "collected for other elements of for_each (not expected: 'broken')"}]
    other = rb.model_copy(update={"vars": {"pkgs": [{**PKGS[0], "pin": "2.0"}, *PKGS[1:]]}})
    assert stale_facts(other, "m", {}, snapshot) == [
        {"probe": "pkgs", "reason": "element 'numpy' was collected with other parameters "
                                    "(want: collected \"1.26\", expected \"2.0\")"}]


def test_a_fan_out_snapshot_replays_and_verifies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """collect → evaluate --facts → verify, over a fan-out of real `path` probes."""
    monkeypatch.chdir(tmp_path)
    for name in ("a.txt", "b.txt"):
        (tmp_path / name).write_text("x")
    (tmp_path / "rb.yaml").write_text(
        "policyrun: 1\nname: files\nvars: {names: [a, b, c]}\nmodes: {m: {phases: [A]}}\n"
        "probes:\n  files: {uses: path, for_each: '${vars.names}', with: {paths: ['${item}.txt']}}\n"
        "phases:\n  - id: A\n    evidence:\n"
        "      - {id: present, check: \"['a', 'b'].all(k, facts.files[k].missing == [])\"}\n"
        "      - {id: absent, check: \"facts.files.c.missing == ['c.txt']\"}\n")
    assert main(["collect", "rb.yaml", "-o", "facts.json"]) == 0
    assert main(["evaluate", "rb.yaml", "--facts", "facts.json", "--out", "out"]) == 0
    assert main(["verify", "out/trace.json", "--facts", "facts.json", "--rulebook", "rb.yaml"]) == 0
    trace = json.loads((tmp_path / "out" / "trace.json").read_text())
    assert sorted(trace["provenance"]["files"]["elements"]) == ["a", "b", "c"]
    capsys.readouterr()
    assert main(["lint", "rb.yaml"]) == 0


# --- when -------------------------------------------------------------------------------------

WHEN = """\
policyrun: 1
name: when
inputs:
  gpu: {type: bool, default: false}
modes:
  planning: {phases: [A], on_missing: UNKNOWN}
  final: {phases: [A]}
probes:
  nvml: {uses: const, when: "inputs.gpu && mode == 'final'", with: {value: {count: 2}}}
  after: {uses: const, with: {value: "${facts.nvml.count}"}}
phases:
  - id: A
    stop_when:
      - {id: no_gpus, when: "facts.nvml.count == 0", blocker: "no GPU"}
    evidence:
      - {id: gpus, check: "facts.nvml.count > 0"}
      - {id: chained, check: "facts.after == 2"}
      - {id: asked, check: "inputs.gpu || error_code(facts.nvml) == 'probe.not_applicable'"}
"""


def _when(tmp_path: Path) -> Path:
    path = tmp_path / "rb.yaml"
    path.write_text(WHEN)
    return path


@pytest.mark.parametrize(("mode", "sets", "code_", "nvml", "status", "results"), [
    ("final", ["gpu=true"], 0, "ok", "PASS", ["SATISFIED", "SATISFIED", "SATISFIED"]),
    # not applicable: the evidence reading it is NOT_APPLICABLE; the stop condition is UNKNOWN as for
    # any missing fact, and its on_missing (the mode's: BLOCKED in final) decides.
    ("final", [], 2, "probe.not_applicable", "BLOCKED", ["NOT_APPLICABLE", "NOT_APPLICABLE", "SATISFIED"]),
    ("planning", ["gpu=true"], 0, "probe.not_applicable", "PASS", ["NOT_APPLICABLE", "NOT_APPLICABLE", "SATISFIED"]),
])
def test_when_decides_before_collection(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str], mode: str, sets: list[str], code_: int,
                                        nvml: str, status: str, results: list[str]) -> None:
    monkeypatch.chdir(tmp_path)
    _when(tmp_path)
    args = [a for s in sets for a in ("--set", s)]
    assert main(["collect", "rb.yaml", "--mode", mode, *args, "-o", "facts.json"]) == 0
    err = capsys.readouterr().err
    fact = load_facts(tmp_path / "facts.json").facts["nvml"]
    assert (code(fact) or "ok") == nvml
    if nvml != "ok":
        assert "not collected: `when: inputs.gpu && mode == 'final'` is false" in message(fact)
        assert "2 not applicable (after, nvml)" in err and "0 failed" in err
        after = load_facts(tmp_path / "facts.json").facts["after"]
        assert code(after) == "probe.not_applicable" and "depends on probe 'nvml'" in message(after)
    assert main(["evaluate", "rb.yaml", "--mode", mode, *args, "--facts", "facts.json", "--out", "out"]) == code_
    trace = json.loads((tmp_path / "out" / "trace.json").read_text())
    phase = trace["phases"][0]
    assert phase["status"] == status
    assert [c["result"] for c in phase["evidence"] if c["kind"] == "evidence"] == results


def test_replay_refuses_a_snapshot_collected_with_the_other_when(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    _when(tmp_path)
    assert main(["collect", "rb.yaml", "--mode", "final", "-o", "facts.json"]) == 0
    capsys.readouterr()
    assert main(["evaluate", "rb.yaml", "--mode", "final", "--set", "gpu=true", "--facts", "facts.json"]) == 3
    assert "nvml: `when: inputs.gpu && mode == 'final'` is true with these inputs, but the snapshot lacks its " \
           "fact" in capsys.readouterr().err


def test_a_when_that_cannot_be_decided_fails_closed(tmp_path: Path) -> None:
    rb = rulebook({"p": {"uses": "const", "when": "inputs.level > 2", "with": {"value": 1}}},
                  inputs={"level": {"type": "string"}})
    fact = run(rb, tmp_path, inputs={"level": "high"})["p"]
    assert code(fact) == "probe.when_error" and "could not be decided" in message(fact)


def test_snapshot_digest_of_probes_without_fan_out_is_unchanged() -> None:
    """`elements` is left out of facts without it: digests (and traces' facts_sha256) stay as they were."""
    snap = FactsSnapshot.model_validate(
        {"facts": {"a": {"value": 1, "provenance": {"probe": "a", "kind": "const"}}}})
    assert "elements" not in snap.to_json()
    assert snap.digest() == "e4b89fe9f9fe89e500e6a0abed303c920bd97fda8fdb8d96761a652e6623782d"


def test_explain_shows_each_elements_provenance_failed_first(fake: Any, tmp_path: Path) -> None:
    from policyrun.render.explain import render_explain

    _pins(fake)
    snapshot = collect(_fanout_rb(), "m", {}, base_dir=tmp_path)
    path = tmp_path / "rb.yaml"
    path.write_text(yaml.safe_dump({
        "policyrun": 1, "name": "t", "vars": {"pkgs": PKGS}, "modes": {"m": {"phases": ["A"]}},
        "probes": {"pkgs": {"uses": "test.pins", "for_each": "${vars.pkgs}", "key": "${item.name}",
                            "with": {"package": "${item.name}", "want": "${item.pin}"}}},
        "phases": [{"id": "A", "evidence": [{"id": "e", "check": "size(facts.pkgs) == 2"}]}]}))
    text = render_explain(evaluate(load_rulebook(path), mode="m", inputs={}, facts=snapshot, timestamp=False))
    lines = text.splitlines()
    at = next(i for i, line in enumerate(lines) if "for_each: 3 element(s), 1 failed" in line)
    assert "[broken] package='broken', want='0' -> error: pkg.not_found: no such package: broken" in lines[at + 1]
    assert "[numpy] package='numpy', want='1.26'" in lines[at + 2]


def _doc_block(heading: str) -> dict[str, Any]:
    text = (Path(__file__).resolve().parent.parent / "docs" / "language.md").read_text()
    section = text.split(heading, 1)[1]
    block = section.split("```yaml\n", 1)[1].split("```", 1)[0]
    loaded: dict[str, Any] = yaml.safe_load(block)
    return loaded


def test_the_language_doc_examples_lint_clean(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fan = _doc_block("### Fan-out: `for_each`")
    when = _doc_block("### Conditional probes: `when`")
    doc = {"policyrun": 1, "name": "doc", "inputs": {"backend": {"type": "string"}, "repo": {"type": "path"}},
           "vars": fan["vars"], "modes": {"m": {"phases": ["PINNED"]}},
           "probes": {**fan["probes"], **when["probes"]}, "phases": fan["phases"]}
    doc["phases"][0]["evidence"].append({"id": "gpus", "check": "facts.gpu.device_count > 0"})
    (tmp_path / "doc.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    assert main(["lint", str(tmp_path / "doc.yaml")]) == 0, capsys.readouterr().out


def test_presence_of_a_failed_element_is_unknown_and_a_missing_key_names_failed_elements(tmp_path: Path) -> None:
    """`has(facts.p.k)` on a failed element is UNKNOWN (as `has(facts.x)` on a failed probe), never
    false; a computed key that is missing names the fan-out's failed elements."""
    from policyrun.facts import Fact, FactError, Provenance

    path = tmp_path / "rb.yaml"
    path.write_text(yaml.safe_dump({
        "policyrun": 1, "name": "t", "vars": {"pk": ["a", "b"]}, "modes": {"m": {"phases": ["A"]}},
        "probes": {"p": {"uses": "const", "for_each": "${vars.pk}", "with": {"value": 1}}},
        "phases": [{"id": "A", "evidence": [
            {"id": "dyn", "check": "vars.pk.all(k, facts.p[k] == 1)"},
            {"id": "absent", "check": "!has(facts.p.b)"},
            {"id": "present", "check": "has(facts.p.a)"}]}]}))
    prov = Provenance(probe="p", kind="const", elements={
        "a": Provenance(probe="p", kind="const"),
        "b": Provenance(probe="p", kind="const", error=FactError(code="x.bad", message="boom"))})
    snap = FactsSnapshot(facts={"p": Fact(value={"a": 1}, provenance=prov)})
    trace = evaluate(load_rulebook(path), mode="m", inputs={}, facts=snap, timestamp=False)
    checks = {c.id: c for c in trace.phases[0].evidence}
    assert {k: c.result for k, c in checks.items()} == {"dyn": "UNKNOWN", "absent": "UNKNOWN", "present": "SATISFIED"}
    assert checks["dyn"].message is not None and \
        "(facts.p has failed elements: 'b' x.bad: boom)" in checks["dyn"].message
    assert checks["absent"].message is not None and "x.bad: boom" in checks["absent"].message
