"""Console output: plain aligned text off a TTY, a rich table on one, quiet and JSON modes."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import tracefactory as tf

from policyrun.render.console import plain_table, print_trace


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_plain_golden() -> None:
    out = io.StringIO()
    print_trace(tf.flagship(), stream=out)
    tf.golden("console.txt", out.getvalue())


def test_plain_table_aligns_columns() -> None:
    lines = plain_table(tf.generic()).splitlines()
    assert lines[0].split() == ["PHASE", "STATUS", "REASON", "/", "BLOCKER", "NEXT", "ACTION"]
    col = lines[0].index("STATUS")
    assert all(line[col:].startswith(("PASS", "FAIL", "STATUS")) for line in lines)
    next_col = lines[0].index("NEXT ACTION")
    assert lines[2][next_col:] == "sign the tag with `git tag -s`"


def test_long_reasons_wrap_inside_their_column() -> None:
    text = plain_table(tf.flagship())
    header = text.splitlines()[0]
    next_col = header.index("NEXT ACTION")
    for line in text.splitlines()[1:]:
        assert len(line) <= next_col or line[next_col - 2:next_col] == "  "


def test_quiet_prints_only_the_verdict() -> None:
    out = io.StringIO()
    print_trace(tf.flagship(), stream=out, quiet=True)
    assert out.getvalue() == ("verdict: not_ready — final validation incomplete: architecture decision and "
                              "unit failures outstanding (exit 2)\n")


def test_json_prints_the_trace() -> None:
    out = io.StringIO()
    print_trace(tf.generic(), stream=out, as_json=True)
    assert json.loads(out.getvalue())["verdict"]["id"] == "not_released"


def test_tty_gets_a_rich_table_without_markup_injection() -> None:
    trace = tf.generic()
    phases = [trace.phases[0], trace.phases[1].model_copy(update={"blocker": "[red]x[/]"})]
    out = _Tty()
    print_trace(trace.model_copy(update={"phases": phases}), stream=out)
    text = out.getvalue()
    assert "│" in text  # a box-drawn table
    assert "[red]x[/]" in text  # shown literally, not interpreted as rich markup
    assert "verdict: not_released" in text


def test_rich_is_imported_only_for_a_tty() -> None:
    tests = str(Path(__file__).parent)
    code = (f"import io, sys; sys.path.insert(0, {tests!r}); import tracefactory as tf; "
            "from policyrun.render.console import print_trace; print_trace(tf.generic(), stream=io.StringIO()); "
            "print('rich' in sys.modules, 'jinja2' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False False"


def test_worst_status_follows_the_documented_severity() -> None:
    from policyrun.model import worst_status

    assert worst_status(["FAIL", "STOPPED", "BLOCKED", "PASS"]) == "STOPPED"
    assert worst_status(["FAIL", "BLOCKED"]) == "BLOCKED"
    assert worst_status(["PASS", "SKIPPED"]) == "PASS"
    assert worst_status(s for s in ["FAIL", "PASS"]) == "FAIL"  # any iterable, read once
