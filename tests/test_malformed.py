"""A corpus of malformed rulebooks: each must give a located error and the right exit code,
from `lint` (exit 1) and from `evaluate` (exit 3), and never a traceback."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from policyrun.cli import main

CORPUS = sorted((Path(__file__).parent / "malformed").glob("*.yaml"))
EXPECT = re.compile(rb"^# expect: (\w+) (\d+):(\d+)")


def _expected(path: Path) -> tuple[str, str]:
    m = EXPECT.match(path.read_bytes())
    assert m, f"{path.name} lacks an `# expect: CODE line:col` header"
    return m.group(1).decode(), f"{m.group(2).decode()}:{m.group(3).decode()}"


def test_corpus_is_large_enough() -> None:
    assert len(CORPUS) >= 30


@pytest.mark.parametrize("path", CORPUS, ids=[p.stem for p in CORPUS])
def test_lint_reports_located_error(path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, where = _expected(path)
    assert main(["lint", str(path)]) == 1
    out, err = capsys.readouterr()
    assert f"{path}:{where}: {code} " in out, out
    assert "Traceback" not in out + err


@pytest.mark.parametrize("path", CORPUS, ids=[p.stem for p in CORPUS])
def test_evaluate_refuses_with_exit_3(path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    facts = tmp_path / "facts.json"
    facts.write_text('{"facts": {}}')
    rc = main(["evaluate", str(path), "--mode", "m", "--facts", str(facts), "--out", str(tmp_path / "out")])
    out, err = capsys.readouterr()
    assert rc == 3, out + err
    code, _ = _expected(path)
    assert f" {code} " in err, err
    assert str(path) in err
    assert "Traceback" not in out + err
    assert not (tmp_path / "out" / "trace.json").exists()


def test_expression_errors_name_the_column_inside_the_expression(capsys: pytest.CaptureFixture[str]) -> None:
    path = Path(__file__).parent / "malformed" / "17-cel-type.yaml"
    assert main(["lint", str(path)]) == 1
    out = capsys.readouterr().out
    # `mode + 1 > 0` sits at column 17 of line 11; the `+` is its 6th character → file column 22.
    assert f"{path}:11:22: X002 type error: found no matching overload for '_+_' applied to '(string, int)' " \
           "(at phases[0] → evidence[0] → check)\n  mode + 1 > 0\n       ^\n" in out  # a ^ under the '+'
