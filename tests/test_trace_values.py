"""Values the trace summarises are kept whole beside it (issue 24, item 7): `evaluate --out DIR`
writes DIR/values/<sha256>.json, the trace is unchanged, and report, explain, the MCP server and
verify read them back (verify catching a missing or edited file)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from policyrun import limits
from policyrun.cli import main

ROW = {"file": "vllm/model_executor/layers/fused_moe/layer.py", "symbol": "FusedMoE"}
ROWS = 2 ** 9  # 512 rows of ~80 bytes: well over limits.TRACE_VALUE_BYTES, summarised in the trace
RULEBOOK = f"""\
policyrun: 1
name: big-values
modes:
  m: {{phases: [A]}}
derive:
  d0: {{value: "[{json.dumps(ROW).replace('"', "'")}]"}}
""" + "".join(f"  d{i}: {{value: \"derived.d{i - 1} + derived.d{i - 1}\"}}\n" for i in range(1, 10)) + """\
phases:
  - id: A
    evidence:
      - {id: many, check: "size(derived.d9) == 1"}
"""


@pytest.fixture
def run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    rb = tmp_path / "big.yaml"
    rb.write_text(RULEBOOK)
    facts = tmp_path / "facts.json"
    facts.write_text('{"policyrun_facts": 1, "facts": {}}')
    out = tmp_path / "out"
    assert main(["evaluate", str(rb), "--facts", str(facts), "--out", str(out), "-q", "--no-timestamp"]) == 1
    capsys.readouterr()
    return out


def _summary(out: Path) -> dict[str, Any]:
    trace = json.loads((out / "trace.json").read_text())
    value = trace["derived"][-1]["value"]
    assert value["truncated"] is True and value["length"] == ROWS
    assert trace["phases"][0]["evidence"][0]["reads"][0]["value"] == value
    return value  # type: ignore[no-any-return]


def _verify(out: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(["verify", str(out / "trace.json"), "--facts", str(out.parent / "facts.json")])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_a_large_value_round_trips(run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    summary = _summary(run)
    kept = run / "values" / f"{summary['sha256']}.json"
    data = kept.read_bytes()
    assert hashlib.sha256(data).hexdigest() == summary["sha256"]  # content-addressed by the trace's checksum
    assert json.loads(data) == [ROW] * ROWS
    index = json.loads((run / "values" / "index.json").read_text())
    assert index["kept"][summary["sha256"]] == {"type": "list", "bytes": len(data)} and index["omitted"] == {}
    manifest = json.loads((run / "manifest.json").read_text())
    assert "values/index.json" in manifest["files"]

    assert main(["explain", str(run / "trace.json")]) == 0
    shown = capsys.readouterr().out
    assert 'read derived.d9 = [{"file": "vllm/model_executor' in shown and '"truncated": true' not in shown

    report = run.parent / "report.json"
    assert main(["report", str(run / "trace.json"), "--format", "json", "-o", str(report)]) == 0
    assert json.loads(report.read_text())["derived"][-1]["value"] == [ROW] * ROWS

    from policyrun.mcp.tools import explain

    read = explain(trace=str(run / "trace.json")).phases[0].checks[0].reads[0]
    assert read.truncated and str(read.value).startswith('[{"file": "vllm/')

    code, out, _ = _verify(run, capsys)
    assert code == 0 and out.startswith("verified:")


def test_the_trace_is_the_same_with_or_without_kept_values(run: Path, tmp_path: Path,
                                                           capsys: pytest.CaptureFixture[str],
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits, "TRACE_VALUES_BYTES", 0)  # nothing fits: nothing kept
    again = tmp_path / "again"
    main(["evaluate", str(tmp_path / "big.yaml"), "--facts", str(tmp_path / "facts.json"), "--out", str(again), "-q",
          "--no-timestamp"])
    capsys.readouterr()
    assert (again / "trace.json").read_bytes() == (run / "trace.json").read_bytes()
    summary = _summary(again)
    assert not (again / "values" / f"{summary['sha256']}.json").exists()
    index = json.loads((again / "values" / "index.json").read_text())
    assert summary["sha256"] in index["omitted"] and index["kept"] == {}
    code, out, err = _verify(again, capsys)
    assert code == 0 and f"{len(index['omitted'])} summarised value(s) were not kept" in err
    assert main(["explain", str(again / "trace.json")]) == 0
    assert '"truncated": true' in capsys.readouterr().out  # the summary, as before


def test_an_edited_value_file_is_caught_by_verify(run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    summary = _summary(run)
    kept = run / "values" / f"{summary['sha256']}.json"
    kept.write_text(json.dumps([ROW] * (ROWS - 1), sort_keys=True, ensure_ascii=False))
    code, out, _ = _verify(run, capsys)
    assert code == 1
    assert f"VALUE MISMATCH: {kept}:1:1: content has sha256 " in out
    assert f"not the {summary['sha256']} the trace records for derived[d9].value" in out
    assert "NOT VERIFIED: 1 value file(s)" in out
    # Readers never show an edited value: the summary stays.
    assert main(["explain", str(run / "trace.json")]) == 0
    assert '"truncated": true' in capsys.readouterr().out


def test_a_missing_value_file_is_caught_by_verify(run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    summary = _summary(run)
    kept = run / "values" / f"{summary['sha256']}.json"
    kept.unlink()
    code, out, _ = _verify(run, capsys)
    assert code == 1 and f"VALUE MISMATCH: {kept}:1:1: missing; it holds the value derived[d9].value" in out


def test_a_trace_on_its_own_verifies_by_checksums(run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for f in (run / "values").iterdir():
        f.unlink()
    (run / "values").rmdir()
    code, out, err = _verify(run, capsys)
    assert code == 0 and out.startswith("verified:") and "values" not in err


def test_a_values_folder_without_its_index_is_caught(run: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (run / "values" / "index.json").unlink()
    code, out, _ = _verify(run, capsys)
    assert code == 1 and f"VALUE MISMATCH: {run / 'values' / 'index.json'}:1:1: missing, though values/ is there" in out


def test_the_mcp_server_keeps_values_as_evaluate_does(run: Path, tmp_path: Path) -> None:
    from policyrun.mcp.tools import evaluate

    out = tmp_path / "mcp-out"
    result = evaluate(str(tmp_path / "big.yaml"), "m", facts_files=[str(tmp_path / "facts.json")], out_dir=str(out),
                      timestamp=False)
    assert result.exit_code == 1
    assert (out / "trace.json").read_bytes() == (run / "trace.json").read_bytes()
    assert sorted(p.name for p in (out / "values").iterdir()) == sorted(p.name for p in (run / "values").iterdir())


def test_a_long_string_is_kept_as_text(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    chain = "".join(f"  s{i}: {{value: \"derived.s{i - 1} + derived.s{i - 1}\"}}\n" for i in range(1, 14))
    rb = tmp_path / "text.yaml"
    rb.write_text("policyrun: 1\nname: text\nmodes:\n  m: {phases: [A]}\nderive:\n  s0: {value: \"'abc'\"}\n" + chain
                  + "phases:\n  - id: A\n    evidence:\n      - {id: e, check: \"size(derived.s13) > 0\"}\n")
    facts = tmp_path / "facts.json"
    facts.write_text('{"policyrun_facts": 1, "facts": {}}')
    out = tmp_path / "out"
    assert main(["evaluate", str(rb), "--facts", str(facts), "--out", str(out), "-q"]) == 0
    value = json.loads((out / "trace.json").read_text())["derived"][-1]["value"]
    assert value["type"] == "str" and value["length"] == 3 * 2 ** 13
    kept = out / "values" / f"{value['sha256']}.txt"
    assert kept.read_text(encoding="utf-8") == "abc" * 2 ** 13
    assert main(["verify", str(out / "trace.json"), "--facts", str(facts)]) == 0
    assert main(["explain", str(out / "trace.json")]) == 0
    assert 'derived.s13 = "abcabc' in capsys.readouterr().out
