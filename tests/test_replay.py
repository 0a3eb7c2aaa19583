"""Honest replay: `evaluate --facts` answers the rulebook's question, not the snapshot's.

Derived values are recomputed from the raw facts at every evaluation (never read from the
snapshot), and a snapshot collected by another probe kind or with other parameters is refused
(exit 3, naming the probe) unless --allow-stale-facts, which the trace records.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from policyrun.cli import main

RULEBOOK = """\
policyrun: 1
name: replay-demo
inputs:
  repo: {type: path, default: "."}
  limit: {type: int, default: 1}
modes:
  audit: {phases: [A]}
probes:
  diff: {uses: git.diff, with: {path: "${inputs.repo}", base: v1, head: v2}}
  log: {uses: git.log, with: {path: "${inputs.repo}", base: "${facts.diff.base_sha}", head: v2}}
derive:
  deleted: {value: "facts.diff.files.filter(f, f.status == 'D').map(f, f.path)"}
phases:
  - id: A
    evidence:
      - id: few_deletions
        check: "size(derived.deleted) <= inputs.limit && facts.log.count >= 0"
        message: "deleted: ${derived.deleted.join(', ')}"
"""

FACTS = {
    "policyrun_facts": 1,
    "facts": {
        "diff": {"value": {"base_sha": "a" * 40, "files": [{"path": "x.py", "status": "D"},
                                                          {"path": "y.py", "status": "M"}]},
                 "provenance": {"probe": "diff", "kind": "git.diff",
                                "params": {"path": ".", "base": "v1", "head": "v2"}}},
        "log": {"value": {"count": 3},
                "provenance": {"probe": "log", "kind": "git.log",
                               "params": {"path": ".", "base": "a" * 40, "head": "v2"}}},
    },
}


@pytest.fixture()
def setup(tmp_path: Path) -> tuple[Path, Path]:
    rb = tmp_path / "rb.yaml"
    rb.write_text(RULEBOOK)
    facts = tmp_path / "facts.json"
    facts.write_text(json.dumps(FACTS))
    return rb, facts


def _evaluate(rb: Path, facts: Path, out: Path, *extra: str) -> int:
    return main(["evaluate", str(rb), "--facts", str(facts), "--out", str(out), "-q", *extra])


def test_matching_snapshot_evaluates(setup: tuple[Path, Path], tmp_path: Path) -> None:
    rb, facts = setup
    assert _evaluate(rb, facts, tmp_path / "o") == 0
    trace = json.loads((tmp_path / "o" / "trace.json").read_text())
    assert trace["derived"][0]["value"] == ["x.py"]
    assert trace["stale_facts"] == []


def test_changed_derived_expression_changes_the_replayed_verdict(setup: tuple[Path, Path], tmp_path: Path) -> None:
    rb, facts = setup
    assert _evaluate(rb, facts, tmp_path / "o1") == 0
    rb.write_text(RULEBOOK.replace("f.status == 'D'", "f.status != ''"))  # now counts every change
    assert _evaluate(rb, facts, tmp_path / "o2") == 1
    trace = json.loads((tmp_path / "o2" / "trace.json").read_text())
    assert trace["phases"][0]["blocker"] == "deleted: x.py, y.py"


def test_other_parameters_are_refused(setup: tuple[Path, Path], tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    rb, facts = setup
    assert _evaluate(rb, facts, tmp_path / "o", "--set", "repo=../elsewhere") == 3
    err = capsys.readouterr().err
    assert "F005" in err and "diff: collected with other parameters" in err
    assert 'path: collected ".", expected "../elsewhere"' in err
    assert not (tmp_path / "o" / "trace.json").exists()


def test_dependent_parameters_are_checked_against_the_snapshot(setup: tuple[Path, Path], tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    rb, facts = setup
    data = json.loads(facts.read_text())
    data["facts"]["diff"]["value"]["base_sha"] = "b" * 40  # `log` was collected from another base
    facts.write_text(json.dumps(data))
    assert _evaluate(rb, facts, tmp_path / "o") == 3
    assert "log: collected with other parameters (base:" in capsys.readouterr().err


def test_another_kind_is_refused(setup: tuple[Path, Path], tmp_path: Path,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    rb, facts = setup
    data = json.loads(facts.read_text())
    data["facts"]["log"]["provenance"]["kind"] = "const"  # e.g. a snapshot from another rulebook
    facts.write_text(json.dumps(data))
    assert _evaluate(rb, facts, tmp_path / "o") == 3
    assert "log: collected by probe kind 'const'; the rulebook's probe 'log' uses 'git.log'" in \
        capsys.readouterr().err


def test_allow_stale_facts_is_recorded(setup: tuple[Path, Path], tmp_path: Path) -> None:
    rb, facts = setup
    assert _evaluate(rb, facts, tmp_path / "o", "--set", "repo=/x", "--allow-stale-facts") == 0
    trace = json.loads((tmp_path / "o" / "trace.json").read_text())
    assert [s["probe"] for s in trace["stale_facts"]] == ["diff", "log"]


def test_stale_facts_show_where_nested_parameters_differ(tmp_path: Path) -> None:
    """F005 names the item or key that changed; before, a long list was two cut-off texts."""
    from policyrun.collection.stale import stale_facts
    from policyrun.facts import Fact, FactsSnapshot, Provenance
    from policyrun.model import Rulebook

    names = [f"package-number-{i}" for i in range(12)]
    rb = Rulebook.model_validate({
        "policyrun": 1, "name": "t", "inputs": {"extra": {"type": "string", "default": "torch"}},
        "modes": {"m": {"phases": ["P"]}}, "phases": [{"id": "P"}],
        "probes": {"p": {"uses": "const", "with": {"value": {"names": [*names, "${inputs.extra}"],
                                                             "opts": {"a": 1, "b": "x"}}}}}})

    def snapshot(value: dict[str, object]) -> FactsSnapshot:
        prov = Provenance(probe="p", kind="const", params={"value": value})
        return FactsSnapshot(facts={"p": Fact(value=value, provenance=prov)})

    [stale] = stale_facts(rb, "m", {"extra": "torch"}, snapshot({"names": [*names, "vllm"], "opts": {"a": 2}}))
    assert stale["reason"] == ('collected with other parameters (value.names[12]: collected "vllm", expected "torch", '
                               'value.opts.a: collected 2, expected 1, value.opts.b: collected nothing, expected "x")')
    [stale] = stale_facts(rb, "m", {"extra": "torch"}, snapshot({"names": names, "opts": {"a": 1, "b": "x"}}))
    assert stale["reason"] == ('collected with other parameters (value.names: collected 12 items, expected 13 '
                               '(expected adds "torch"))')
