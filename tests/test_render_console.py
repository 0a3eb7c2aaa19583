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


# A fact value that would drive the CI system reading the log: a GitHub annotation (at a line's
# start, after the runner trims the indent), Azure variable, GitHub/Azure log group, TeamCity message.
CI_EVIL = ("0.26.1\n::error title=x::pwned\n   ::add-mask::y ##vso[task.setvariable variable=OK]true "
           "##[group]hidden ##teamcity[buildStatus text='ok'] std::vector x ::warning::wrapped")


def _ci_commands(text: str) -> list[str]:
    return [line for line in text.splitlines()
            if line.strip().startswith("::") or any(k in line.lower() for k in ("##vso[", "##[", "##teamcity["))]


def test_console_output_never_starts_a_ci_log_command() -> None:
    from policyrun.trace.model import CheckRecord, PhaseRecord, Read

    check = CheckRecord(id="c", kind="evidence", expression="e", result="UNSATISFIED", outcome="FAIL",
                        message=CI_EVIL, reads=[Read(path="facts.x", value=CI_EVIL)])
    phase = PhaseRecord(phase="P", status="FAIL", reason="r", evidence=[check], blocker=CI_EVIL,
                        next_allowed_action=CI_EVIL, location="rulebooks/r.yaml:3:5")
    trace = tf.generic().model_copy(update={"phases": [phase], "provenance": {}})
    trace = trace.model_copy(update={"verdict": trace.verdict.model_copy(update={"summary": CI_EVIL})})
    for width in (64, 30, 12):  # wrapping moves `::warning::` to a line of its own
        text = plain_table(trace, reason_width=width)
        assert _ci_commands(text) == [] and "\\::error title=x::pwned" in text and "std::vector" in text
    for kwargs in ({}, {"quiet": True}, {"as_json": True}):
        out = io.StringIO()
        print_trace(trace, stream=out, **kwargs)  # type: ignore[arg-type]
        assert _ci_commands(out.getvalue()) == [], kwargs
    out = io.StringIO()
    print_trace(trace, stream=out, as_json=True)
    assert json.loads(out.getvalue())["phases"][0]["blocker"] == CI_EVIL  # the same JSON value
