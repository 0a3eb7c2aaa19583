"""`evaluate --keep-facts` and `--baseline DIR`: an earlier evaluation read as `baseline.*`."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from policyrun.cli import main

RULEBOOK = """\
policyrun: 1
name: drift
version: "1.0.0"
inputs:
  version: {type: string}
modes:
  check: {phases: [SAME]}
probes:
  lock: {uses: const, with: {value: {version: "${inputs.version}", arch: x86_64}}}  # keys not in sorted order
phases:
  - id: SAME
    evidence:
      - id: version_kept
        applies_when: has(baseline.verdict)
        check: baseline.facts.lock.version == facts.lock.version
        message: "lock version ${facts.lock.version}, baseline had ${baseline.facts.lock.version}"
      - id: baseline_passed
        applies_when: has(baseline.verdict)
        check: baseline.phases.SAME.status == 'PASS' && baseline.verdict == 'complete'
verdicts:
  - {id: complete, when: "phases.SAME.status == 'PASS'", summary: same}
  - {id: changed, when: "true", summary: changed}
"""


def _facts(tmp_path: Path, name: str, version: str) -> str:
    """The arguments giving the const probe this version (collected, not a snapshot file)."""
    return f"version={version}"


def _run(tmp_path: Path, *args: str) -> int:
    return main(["evaluate", str(tmp_path / "drift.yaml"), "--no-timestamp", "-q", *args])


@pytest.fixture
def rulebook(tmp_path: Path) -> Path:
    (tmp_path / "drift.yaml").write_text(RULEBOOK)
    return tmp_path


def test_keep_facts_writes_the_snapshot_listed_in_the_manifest(rulebook: Path) -> None:
    out = rulebook / "base"
    assert _run(rulebook, "--set", (_facts(rulebook, "f.json", "1.0")), "--out", str(out), "--keep-facts") == 0
    manifest = json.loads((out / "manifest.json").read_text())["files"]
    assert manifest["facts.json"] == hashlib.sha256((out / "facts.json").read_bytes()).hexdigest()
    trace = json.loads((out / "trace.json").read_text())
    assert "baseline" not in trace  # written only with --baseline
    # Without --baseline, `baseline` is an empty map: the checks asking has(baseline.verdict) do not apply.
    assert all(e["result"] == "NOT_APPLICABLE" for e in trace["phases"][0]["evidence"]), trace["phases"][0]


def test_without_keep_facts_no_facts_file(rulebook: Path) -> None:
    out = rulebook / "base"
    assert _run(rulebook, "--set", (_facts(rulebook, "f.json", "1.0")), "--out", str(out)) == 0
    assert not (out / "facts.json").exists()


def test_baseline_is_readable_and_recorded(rulebook: Path) -> None:
    base, now = rulebook / "base", rulebook / "now"
    assert _run(rulebook, "--set", (_facts(rulebook, "a.json", "1.0")), "--out", str(base), "--keep-facts") == 0
    assert _run(rulebook, "--set", (_facts(rulebook, "b.json", "2.0")), "--out", str(now),
                "--baseline", str(base)) == 1
    trace = json.loads((now / "trace.json").read_text())
    checks = {e["id"]: e for e in trace["phases"][0]["evidence"]}
    assert checks["version_kept"]["result"] == "UNSATISFIED"
    assert checks["version_kept"]["message"] == "lock version 2.0, baseline had 1.0"
    assert checks["baseline_passed"]["result"] == "SATISFIED"
    assert trace["baseline"] == {"path": str(base / "trace.json"),
                                 "sha256": hashlib.sha256((base / "trace.json").read_bytes()).hexdigest(),
                                 "facts_sha256": hashlib.sha256((base / "facts.json").read_bytes()).hexdigest(),
                                 "verdict": "complete", "mode": "check"}


def test_baseline_without_facts_leaves_fact_reads_unknown(rulebook: Path) -> None:
    base, now = rulebook / "base", rulebook / "now"
    assert _run(rulebook, "--set", (_facts(rulebook, "a.json", "1.0")), "--out", str(base)) == 0
    assert _run(rulebook, "--set", (_facts(rulebook, "b.json", "1.0")), "--out", str(now),
                "--baseline", str(base)) == 2  # BLOCKED: never a pass on a fact the baseline did not keep
    trace = json.loads((now / "trace.json").read_text())
    assert trace["baseline"]["facts_sha256"] is None
    assert trace["phases"][0]["evidence"][0]["result"] == "UNKNOWN"


def test_an_edited_baseline_is_refused(rulebook: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = rulebook / "base"
    assert _run(rulebook, "--set", (_facts(rulebook, "a.json", "1.0")), "--out", str(base), "--keep-facts") == 0
    facts = base / "facts.json"
    facts.write_text(facts.read_text().replace('"1.0"', '"9.9"', 1))
    assert _run(rulebook, "--set", (_facts(rulebook, "b.json", "1.0")), "--out", str(rulebook / "now"),
                "--baseline", str(base)) == 3
    err = capsys.readouterr().err
    assert "U060 --baseline: " in err and "changed after that evaluation wrote it" in err and "facts.json" in err
    assert not (rulebook / "now").exists()  # refused before anything ran or was written


def test_a_folder_without_a_trace_is_refused(rulebook: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (rulebook / "empty").mkdir()
    assert _run(rulebook, "--set", (_facts(rulebook, "a.json", "1.0")), "--baseline",
                str(rulebook / "empty")) == 3
    err = capsys.readouterr().err
    assert "U060 --baseline: " in err and "has no trace.json" in err


def test_a_probe_cannot_read_baseline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(RULEBOOK.replace('"${inputs.version}"', '"${baseline.verdict}"'))
    assert main(["lint", str(path)]) == 1
    assert "L043" in capsys.readouterr().out


def test_verify_refuses_a_trace_evaluated_with_a_baseline(rulebook: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base, now = rulebook / "base", rulebook / "now"
    facts = _facts(rulebook, "a.json", "1.0")
    assert _run(rulebook, "--set", facts, "--out", str(base), "--keep-facts") == 0
    assert _run(rulebook, "--set", facts, "--out", str(now), "--baseline", str(base)) == 0
    capsys.readouterr()
    assert main(["verify", str(now / "trace.json"), "--set", facts, "--rulebook",
                 str(rulebook / "drift.yaml")]) == 3
    err = capsys.readouterr().err
    assert "V008 " in err and "evaluated with --baseline" in err
