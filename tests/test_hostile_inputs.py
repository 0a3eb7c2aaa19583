"""Broken and hostile input: every case ends in a located error (exit 3) or a safe rendering, never a
traceback (exit 4), a hang, a read outside the rulebook's folder, or a silent pass.

Cases that would hang or exhaust memory on a policyrun without the guard run in a subprocess with a
timeout and an address-space limit, so a regression fails the test instead of the machine.
"""

from __future__ import annotations

import fcntl
import json
import os
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import tracefactory as tf

from policyrun.cli import main
from policyrun.errors import PolicyrunError, RulebookError

RULEBOOK = """\
policyrun: 1
name: hostile
modes:
  m: {phases: [A]}
probes:
  x: {uses: const, with: {value: 1}}
phases:
  - id: A
    evidence:
      - {id: score, check: "!(facts.x < 0.85)", message: "score is ${facts.x}"}
"""

PROV = {"probe": "x", "kind": "const", "params": {"value": 1}}


def _rulebook(tmp_path: Path, text: str = RULEBOOK, name: str = "rb.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def _facts(tmp_path: Path, value: Any) -> Path:
    path = tmp_path / "facts.json"
    path.write_text(json.dumps({"policyrun_facts": 1, "facts": {"x": {"value": value, "provenance": PROV}}}))
    return path


def _evaluate(rb: Path, facts: Path, out: Path, *extra: str) -> int:
    return main(["evaluate", str(rb), "--facts", str(facts), "--out", str(out), *extra])


def _cli(*args: str, env: dict[str, str] | None = None, timeout: float = 60,
         cwd: Path | None = None) -> subprocess.CompletedProcess[bytes]:
    """The CLI in a child process with 3 GiB of address space: a read without a bound dies of it."""
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))

    full_env = {**os.environ, "PYTHONIOENCODING": "utf-8", **(env or {})}
    return subprocess.run([sys.executable, "-m", "policyrun", *args], capture_output=True, timeout=timeout,
                          env=full_env, preexec_fn=limit, cwd=cwd)


# --- facts that lie ------------------------------------------------------------------------------

@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_numbers_in_facts_are_refused_where_they_stand(tmp_path: Path, constant: str,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    facts = tmp_path / "facts.json"
    facts.write_text('{"policyrun_facts": 1,\n "facts": {"x": {\n   "value": ' + constant
                     + ', "provenance": {"probe": "x", "kind": "const"}}}}\n')
    assert _evaluate(_rulebook(tmp_path), facts, tmp_path / "out") == 3
    err = capsys.readouterr().err
    assert f"{facts}:3:13: F002 " in err and constant in err
    assert not (tmp_path / "out" / "trace.json").exists()


def test_duplicate_keys_in_facts_are_refused_at_the_second_key(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    facts = tmp_path / "facts.json"
    facts.write_text('{"policyrun_facts": 1, "facts": {"x": {"value": 0.1,\n'
                     '  "value": 1, "provenance": {"probe": "x", "kind": "const"}}}}\n')
    assert _evaluate(_rulebook(tmp_path), facts, tmp_path / "out") == 3
    err = capsys.readouterr().err
    assert f"{facts}:2:3: F002 duplicate key 'value'" in err and "line 1" in err


def test_unknown_facts_format_version_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    facts = tmp_path / "facts.json"
    facts.write_text('{"facts": {},\n "policyrun_facts": 2}\n')
    assert _evaluate(_rulebook(tmp_path), facts, tmp_path / "out") == 3
    err = capsys.readouterr().err
    assert f"{facts}:2:21: F003 " in err and "policyrun_facts: 1" in err


def test_facts_schema_errors_are_located(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    facts = tmp_path / "facts.json"
    facts.write_text('{"facts": {\n  "x": {"value": 1,\n    "provenance": {"probe": "x"}}}}\n')
    assert _evaluate(_rulebook(tmp_path), facts, tmp_path / "out") == 3
    err = capsys.readouterr().err
    assert f"{facts}:3:19: F003 " in err and "kind" in err


def test_unknown_trace_format_version_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = json.loads(tf.generic().to_json())
    data["policyrun_trace"] = 9
    trace = tmp_path / "trace.json"
    trace.write_text(json.dumps(data))
    assert main(["report", str(trace), "--format", "md"]) == 3
    err = capsys.readouterr().err
    assert f"{trace}:1:" in err and "T003" in err and "policyrun_trace: 2" in err and "trace formats 1 and 2 are read" in err


# --- numbers too long to convert (issue 19, item 5) ------------------------------------------------
# Python refuses to turn more than 4,300 digits into an int with a bare ValueError from inside the
# JSON decoder: that was exit 4 in every command reading the file. Every reader bounds numbers the
# same way and says where the number is.

HUGE = "9" * 5000


def _with_huge_number(text: str, marker: str) -> tuple[str, int, int]:
    """`text` with the (unique) `marker` replaced by a 5,000-digit integer; its line and column."""
    at = text.index(marker)
    return text.replace(marker, HUGE), text.count("\n", 0, at) + 1, at - text.rfind("\n", 0, at)


def _huge_trace(tmp_path: Path) -> tuple[Path, Path, Path, int, int]:
    """A good trace, the same trace with a 5,000-digit exit code (line, column), and its facts."""
    _failing_trace(tmp_path)
    good = tmp_path / "out" / "trace.json"
    text = json.dumps(json.loads(good.read_text()), indent=1).replace('"exit_code": 1', '"exit_code": @')
    text, line, col = _with_huge_number(text, "@")
    bad = tmp_path / "huge-trace.json"
    bad.write_text(text)
    return good, bad, tmp_path / "facts.json", line, col


@pytest.mark.parametrize("command", ["evaluate", "report", "explain", "verify", "diff"])
def test_a_5000_digit_integer_is_a_located_input_error(tmp_path: Path, command: str) -> None:
    if command == "evaluate":
        facts = tmp_path / "facts.json"
        facts.write_text('{"policyrun_facts": 1,\n "facts": {"x": {\n   "value": ' + HUGE
                         + ', "provenance": {"probe": "x", "kind": "const"}}}}\n')
        bad, line, col, code = facts, 3, 13, "F002"
        args = ["evaluate", str(_rulebook(tmp_path)), "--facts", str(facts), "--out", str(tmp_path / "o")]
    else:
        good, bad, facts, line, col = _huge_trace(tmp_path)
        code = "T002"
        args = {"report": ["report", str(bad), "--format", "md"], "explain": ["explain", str(bad)],
                "verify": ["verify", str(bad), "--facts", str(facts)],
                "diff": ["diff", str(good), str(bad)]}[command]
    proc = _cli(*args)
    err = proc.stderr.decode()
    assert proc.returncode == 3, err
    assert f"{bad}:{line}:{col}: {code} a number of 5,000 characters" in err and "100 characters" in err
    assert "internal error" not in err and "Traceback" not in err
    assert not (tmp_path / "o" / "trace.json").exists()


def test_a_number_that_overflows_to_infinity_is_refused_like_infinity(tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    facts = tmp_path / "facts.json"  # json.loads reads 1e400 as inf: `!(x < 0.85)` would pass on it
    facts.write_text('{"policyrun_facts": 1,\n "facts": {"x": {\n   "value": 1e400, '
                     '"provenance": {"probe": "x", "kind": "const"}}}}\n')
    assert _evaluate(_rulebook(tmp_path), facts, tmp_path / "out") == 3
    err = capsys.readouterr().err
    assert f"{facts}:3:13: F002 1e400 at facts → x → value overflows to Infinity" in err
    assert not (tmp_path / "out" / "trace.json").exists()


def test_a_results_file_with_a_5000_digit_integer_is_a_located_probe_error(tmp_path: Path) -> None:
    results = tmp_path / "results.json"
    results.write_text('{"acc":\n  ' + HUGE + "}\n")
    rb = _rulebook(tmp_path, RULEBOOK.replace("x: {uses: const, with: {value: 1}}",
                                              f"x: {{uses: results, with: {{path: '{results}'}}}}")
                   .replace("!(facts.x < 0.85)", "has(facts.x._file)"))
    out = tmp_path / "out"
    assert main(["evaluate", str(rb), "--out", str(out)]) == 2
    text = (out / "trace.json").read_text(encoding="utf-8")
    assert "results.parse_error" in text and f"{results}:2:3" in text and "5,000 characters" in text


def test_a_5000_digit_integer_in_yaml_is_a_located_lint_error(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    rb = _rulebook(tmp_path, RULEBOOK + f"vars:\n  big: {HUGE}\n")
    assert main(["lint", str(rb)]) == 1
    out = capsys.readouterr().out
    assert f"{rb}:12:8: Y009 a number of 5,000 characters" in out
    assert _evaluate(rb, _facts(tmp_path, 1), tmp_path / "out") == 3
    waivers = tmp_path / "waivers.yaml"
    waivers.write_text(f"waivers:\n  - phase: A\n    check: score\n    n: {HUGE}\n")
    assert _evaluate(_rulebook(tmp_path), _facts(tmp_path, 1), tmp_path / "out2", "--waivers", str(waivers)) == 3
    assert f"{waivers}:4:8: Y009" in capsys.readouterr().err


# --- traces that lie -----------------------------------------------------------------------------

def _failing_trace(tmp_path: Path) -> dict[str, Any]:
    out = tmp_path / "out"
    assert _evaluate(_rulebook(tmp_path), _facts(tmp_path, 0.5), out) == 1
    return json.loads((out / "trace.json").read_text())


def _edit_pass(t: dict[str, Any]) -> None:
    t["phases"][0]["status"] = "PASS"
    t["exit_code"] = 0


def _edit_blocker(t: dict[str, Any]) -> None:
    t["phases"][0]["blocker"] = None


def _edit_exit(t: dict[str, Any]) -> None:
    t["exit_code"] = 0


def _edit_result(t: dict[str, Any]) -> None:
    t["phases"][0]["evidence"][0]["result"] = "SATISFIED"


EDITS = {"status": (_edit_pass, "A is PASS but evidence score imposed FAIL"),
         "blocker": (_edit_blocker, "A is FAIL but records no blocker"),
         "exit": (_edit_exit, "exit_code 0 but phase A is FAIL"),
         "result": (_edit_result, "evidence score is SATISFIED but imposed FAIL")}


@pytest.mark.parametrize("edit", list(EDITS))
@pytest.mark.parametrize("command", [["explain"], ["report", "--format", "md"], ["report", "--format", "html"]])
def test_hand_edited_trace_is_refused(tmp_path: Path, edit: str, command: list[str],
                                      capsys: pytest.CaptureFixture[str]) -> None:
    trace = _failing_trace(tmp_path)
    change, expected = EDITS[edit]
    change(trace)
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(trace, indent=2))
    capsys.readouterr()
    assert main([command[0], str(path), *command[1:]]) == 3
    out, err = capsys.readouterr()
    assert out == ""
    assert f"{path}: T005 " in err and expected in err and "--force" in err


@pytest.mark.parametrize("command", [["explain"], ["report", "--format", "md"], ["report", "--format", "html"]])
def test_force_renders_an_inconsistent_trace_with_a_banner(tmp_path: Path, command: list[str],
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    trace = _failing_trace(tmp_path)
    _edit_pass(trace)
    path = tmp_path / "edited.json"
    path.write_text(json.dumps(trace))
    capsys.readouterr()
    assert main([command[0], str(path), *command[1:], "--force"]) == 0
    out, err = capsys.readouterr()
    assert "INCONSISTENT TRACE" in out[:2000] and "A is PASS but evidence score imposed FAIL" in out
    assert "INCONSISTENT TRACE" in err


def test_consistency_rules_accept_every_trace_the_engine_and_the_samples_produce() -> None:
    from policyrun.trace.model import Trace
    from policyrun.trace.consistency import inconsistencies

    examples = Path(__file__).parent.parent / "examples"
    files = [tf.GOLDEN / "trace.json", *sorted(examples.glob("*/expected/trace.json")),
             examples / "h200" / "gpu-probes-trace.json"]
    traces = [tf.flagship(), tf.generic(), *(Trace.model_validate_json(f.read_text()) for f in files)]
    assert len(traces) >= 9
    for trace in traces:
        assert inconsistencies(trace) == [], trace.rulebook.name


# --- templates and report files ------------------------------------------------------------------

def _template_rulebook(tmp_path: Path, template: str) -> Path:
    return _rulebook(tmp_path, RULEBOOK + f"report:\n  template: {json.dumps(template)}\n")


@pytest.mark.parametrize("template", ["/proc/self/environ", "../secret.md.j2"])
def test_rulebook_template_outside_its_folder_is_refused(tmp_path: Path, template: str,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "secret.md.j2").write_text("SECRET {{ report.mode }}\n")
    book = tmp_path / "book"
    book.mkdir()
    rb = _template_rulebook(book, template)
    assert main(["lint", str(rb)]) == 1
    out = capsys.readouterr().out
    assert f"{rb}:12:13: R007 " in out and "inside the rulebook's folder" in out
    assert _evaluate(rb, _facts(tmp_path, 1), tmp_path / "out", "--format", "md") == 3
    assert not (tmp_path / "out" / "report.md").exists()
    assert "SECRET" not in capsys.readouterr().out


def test_symlinked_template_pointing_outside_is_refused(tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "secret.txt").write_text("SECRET\n")
    book = tmp_path / "book"
    (book / "templates").mkdir(parents=True)
    (book / "templates" / "report.md.j2").symlink_to(tmp_path / "secret.txt")
    rb = _template_rulebook(book, "templates/report.md.j2")
    assert main(["lint", str(rb)]) == 1
    assert f"{rb}:12:13: R007 " in capsys.readouterr().out


def test_symlinked_include_pointing_outside_is_refused(tmp_path: Path) -> None:
    from policyrun.render.markdown import render_markdown

    (tmp_path / "secret.txt").write_text("SECRET\n")
    folder = tmp_path / "t"
    folder.mkdir()
    (folder / "part.j2").symlink_to(tmp_path / "secret.txt")
    tpl = folder / "main.md.j2"
    tpl.write_text("head\n{% include 'part.j2' %}\n")
    with pytest.raises(RulebookError) as err:
        render_markdown(tf.generic(), template=tpl)
    assert err.value.code == "R007" and "part.j2" in err.value.render()


def test_template_that_is_not_a_regular_file_is_refused(tmp_path: Path) -> None:
    from policyrun.render.templating import compile_template

    os.mkfifo(tmp_path / "fifo.md.j2")
    [finding] = compile_template(tmp_path / "fifo.md.j2")
    assert finding.code == "R007" and "not a regular file" in finding.message


@pytest.mark.parametrize("source, what", [
    ("{% for i in range(3000) %}{% for j in range(3000) %}{% endfor %}{% endfor %}", "seconds"),
    ("{% set ns = namespace(n=0) %}{% for i in range(3000) %}{% for j in range(3000) %}"
     "{% set ns.n = ns.n + 1 %}{% endfor %}{% endfor %}", "seconds"),
    ("{{ 'x' * (50 * 1024 * 1024) }}", "characters"),
    ("{{ ['x'] * (50 * 1024 * 1024) }}", "items"),
    ("{{ 10 ** 100000 > 1 }}", "digits"),
    ("{{ '%99999999d' % 1 }}", "characters"),
    ("{% for i in range(100000) %}{{ 'y' * 1000 }}{% endfor %}", "output"),
])
def test_template_rendering_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, source: str,
                                       what: str) -> None:
    from policyrun import limits
    from policyrun.render.markdown import render_markdown

    monkeypatch.setattr(limits, "TEMPLATE_SECONDS", 0.5)
    monkeypatch.setattr(limits, "TEMPLATE_OUTPUT_CHARS", 1 << 20)
    tpl = tmp_path / "bomb.md.j2"
    tpl.write_text(source)
    started = time.monotonic()
    with pytest.raises(RulebookError) as err:
        render_markdown(tf.generic(), template=tpl)
    assert time.monotonic() - started < 60  # the template alone would never end
    assert err.value.code == "R008" and what in err.value.message and "bomb.md.j2" in err.value.render()


# --- resource bounds -----------------------------------------------------------------------------

def _bomb(levels: int, width: int = 11) -> str:
    lines = ["a0: &a0 [" + ", ".join(["x"] * width) + "]"]
    for i in range(1, levels):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * width) + "]")
    return "\n".join(lines) + "\n"


def test_alias_bomb_in_a_results_file_is_refused(tmp_path: Path) -> None:
    from policyrun.probes.base import ProbeContext, ProbeError
    from policyrun.probes.results.resultsfile import ResultsProbe

    (tmp_path / "bench.yaml").write_text(_bomb(6))
    started = time.monotonic()
    with pytest.raises(ProbeError) as err:
        ResultsProbe().run({"path": "bench.yaml"}, ProbeContext(base_dir=tmp_path, timeout_s=5))
    assert time.monotonic() - started < 60  # 11^6 expanded nodes would take far longer
    assert err.value.code == "results.too_large" and "alias" in err.value.message


def test_alias_bomb_in_report_context_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "trace.json"
    trace.write_text(tf.generic().to_json())
    context = tmp_path / "context.yaml"
    context.write_text(_bomb(6))
    assert main(["report", str(trace), "--context", str(context)]) == 3
    err = capsys.readouterr().err
    assert f"{context}:" in err and "Y005" in err


def test_results_file_nested_too_deep_is_refused(tmp_path: Path) -> None:
    from policyrun.probes.base import ProbeContext, ProbeError
    from policyrun.probes.results.resultsfile import ResultsProbe

    (tmp_path / "deep.json").write_text('{"a": ' + "[" * 300 + "]" * 300 + "}")
    with pytest.raises(ProbeError) as err:
        ResultsProbe().run({"path": "deep.json"}, ProbeContext(base_dir=tmp_path, timeout_s=5))
    assert err.value.code == "results.too_large" and "deep.json:1:" in err.value.message


@pytest.mark.parametrize("where", ["facts", "inputs", "context", "trace"])
def test_device_files_are_refused_not_read(tmp_path: Path, where: str) -> None:
    rb = _rulebook(tmp_path)
    facts = _facts(tmp_path, 1)
    trace = tmp_path / "trace.json"
    trace.write_text(tf.generic().to_json())
    args = {"facts": ["evaluate", str(rb), "--facts", "/dev/zero", "--out", str(tmp_path / "o")],
            "inputs": ["evaluate", str(rb), "--facts", str(facts), "--inputs", "/dev/zero", "--out", str(tmp_path / "o")],
            "context": ["report", str(trace), "--context", "/dev/zero"],
            "trace": ["report", "/dev/zero"]}[where]
    proc = _cli(*args)
    assert proc.returncode == 3, proc.stderr
    assert b"/dev/zero" in proc.stderr and b"not a regular file" in proc.stderr


def test_fifo_as_facts_does_not_hang(tmp_path: Path) -> None:
    fifo = tmp_path / "facts.json"
    os.mkfifo(fifo)
    proc = _cli("evaluate", str(_rulebook(tmp_path)), "--facts", str(fifo), "--out", str(tmp_path / "o"), timeout=30)
    assert proc.returncode == 3 and b"not a regular file (a FIFO)" in proc.stderr


def _nested(depth: int) -> str:
    return "[" * depth + "1" + "]" * depth


def test_deeply_nested_rulebook_is_a_located_lint_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rb = _rulebook(tmp_path, RULEBOOK + f"vars:\n  deep: {_nested(400)}\n")
    assert main(["lint", str(rb)]) == 1
    out = capsys.readouterr().out
    assert f"{rb}:12:" in out and "Y008" in out and "64" in out
    assert _evaluate(rb, _facts(tmp_path, 1), tmp_path / "out") == 3


def test_deeply_nested_facts_are_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    facts = tmp_path / "facts.json"
    facts.write_text('{"facts": {"x": {\n"provenance": {"probe": "x", "kind": "const"},\n"value": '
                     + _nested(300) + "}}}")
    assert _evaluate(_rulebook(tmp_path), facts, tmp_path / "out") == 3
    err = capsys.readouterr().err
    assert f"{facts}:3:" in err and "F002" in err and "128" in err


def test_deeply_nested_set_list_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rb = _rulebook(tmp_path, RULEBOOK.replace("modes:", "inputs:\n  l: {type: list, default: []}\nmodes:"))
    assert _evaluate(rb, _facts(tmp_path, 1), tmp_path / "out", "--set", f"l={_nested(300)}") == 3
    assert "U004" in capsys.readouterr().err


def test_deeply_nested_inputs_file_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rb = _rulebook(tmp_path, RULEBOOK.replace("modes:", "inputs:\n  l: {type: list, default: []}\nmodes:"))
    inputs = tmp_path / "inputs.yaml"
    inputs.write_text(f"l: {_nested(100)}\n")
    assert _evaluate(rb, _facts(tmp_path, 1), tmp_path / "out", "--inputs", str(inputs)) == 3
    assert f"{inputs}:1:" in capsys.readouterr().err


# --- the command line ----------------------------------------------------------------------------

def test_non_utf8_rulebook_path(tmp_path: Path) -> None:
    name = os.fsdecode(b"rb\xff.yaml")
    rb = _rulebook(tmp_path, RULEBOOK.replace("id: score", "id: score, bogus: 1"), name)
    proc = _cli("lint", str(rb))
    assert proc.returncode == 1, proc.stderr
    assert b"rb\\xff.yaml:10:" in proc.stdout
    good = _rulebook(tmp_path, RULEBOOK, os.fsdecode(b"ok\xfe.yaml"))
    proc = _cli("evaluate", str(good), "--facts", str(_facts(tmp_path, 0.5)), "--out", str(tmp_path / "o"),
                "--format", "md,html,junit,sarif")
    assert proc.returncode == 1, proc.stderr
    trace = json.loads((tmp_path / "o" / "trace.json").read_text(encoding="utf-8"))
    assert trace["rulebook"]["path"].endswith(name.replace("rb\udcff", "ok\udcfe"))
    assert "ok%FE.yaml" in (tmp_path / "o" / "report.sarif").read_text()


def test_non_utf8_junit_glob(tmp_path: Path) -> None:
    rb = _rulebook(tmp_path, """\
policyrun: 1
name: junit
inputs:
  glob: {type: string, default: "*.xml"}
modes:
  m: {phases: [A]}
probes:
  j: {uses: tests.junit, with: {paths: ["${inputs.glob}"]}}
phases:
  - id: A
    evidence:
      - {id: ok, check: "facts.j.totals.failed == 0"}
""")
    proc = _cli("evaluate", str(rb), "--set", "glob=" + os.fsdecode(b"r\xff*.xml"), "--out", str(tmp_path / "o"),
                cwd=tmp_path)
    assert proc.returncode in (0, 1, 2), proc.stderr
    trace = json.loads((tmp_path / "o" / "trace.json").read_text(encoding="utf-8"))
    assert trace["inputs"]["glob"] == "r\udcff*.xml"  # written as a \udcff escape, read back as given


def test_ascii_stdout_does_not_crash(tmp_path: Path) -> None:
    proc = _cli("evaluate", str(_rulebook(tmp_path)), "--facts", str(_facts(tmp_path, 1)), "--out",
                str(tmp_path / "o"), "-q", env={"PYTHONIOENCODING": "ascii"})
    assert proc.returncode == 0, proc.stderr
    assert b"verdict: complete \\u2014 every phase" in proc.stdout


@pytest.mark.parametrize("bad", ["file", "file/sub"])
def test_out_that_cannot_be_a_folder_is_a_usage_error(tmp_path: Path, bad: str,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "file").write_text("not a folder")
    out = tmp_path / bad
    assert _evaluate(_rulebook(tmp_path), _facts(tmp_path, 1), out) == 3
    err = capsys.readouterr().err
    assert str(out) in err and "U007" in err and "--out" in err
    assert (tmp_path / "file").read_text() == "not a folder"


def test_concurrent_evaluations_into_one_out_never_mix(tmp_path: Path) -> None:
    """A second writer waits for the folder's lock; the folder then holds its complete set."""
    out = tmp_path / "out"
    rb = _rulebook(tmp_path)
    assert _evaluate(rb, _facts(tmp_path, 1), out, "--format", "md") == 0
    first = (out / "trace.json").read_bytes()
    fd = os.open(out, os.O_RDONLY)
    fcntl.flock(fd, fcntl.LOCK_EX)
    facts2 = tmp_path / "f2"
    facts2.mkdir()
    result: list[int] = []
    worker = threading.Thread(target=lambda: result.append(
        _evaluate(rb, _facts(facts2, 0.5), out, "--format", "md,junit", "-q")))
    worker.start()
    time.sleep(1.0)
    assert (out / "trace.json").read_bytes() == first  # still waiting for the lock
    fcntl.flock(fd, fcntl.LOCK_UN)
    os.close(fd)
    worker.join(30)
    assert result == [1]
    manifest = json.loads((out / "manifest.json").read_text())
    assert sorted(manifest["files"]) == ["junit.xml", "report.md", "trace.json"]
    import hashlib

    for name, digest in manifest["files"].items():
        assert hashlib.sha256((out / name).read_bytes()).hexdigest() == digest
    assert not [p.name for p in out.iterdir() if p.name.endswith(".tmp")]


def test_report_output_is_replaced_atomically(tmp_path: Path) -> None:
    trace = tmp_path / "trace.json"
    trace.write_text(tf.generic().to_json())
    target = tmp_path / "report.md"
    os.symlink(tmp_path / "victim.txt", target)
    (tmp_path / "victim.txt").write_text("keep me")
    assert main(["report", str(trace), "-o", str(target)]) == 0
    assert (tmp_path / "victim.txt").read_text() == "keep me"  # the link was replaced, not written through
    assert not target.is_symlink() and target.read_text().startswith("# Completion report")


CONTROL_RULEBOOK = RULEBOOK.replace('check: "!(facts.x < 0.85)"', 'check: "facts.x == \'ok\'"')


@pytest.mark.parametrize("surface", ["table", "explain", "md", "html", "lint"])
def test_control_characters_from_facts_never_reach_output_raw(tmp_path: Path, surface: str,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    hostile = "\x1b]0;owned\x07\x1b[2J\x9b31m\u202egnp.exe"
    out = tmp_path / "out"
    rb = _rulebook(tmp_path, CONTROL_RULEBOOK)
    assert _evaluate(rb, _facts(tmp_path, hostile), out, "--format", "md,html") == 1
    text = capsys.readouterr().out
    if surface == "explain":
        main(["explain", str(out / "trace.json")])
        text = capsys.readouterr().out
    elif surface in ("md", "html"):
        text = (out / f"report.{surface}").read_text()
    elif surface == "lint":
        bad = _rulebook(tmp_path, RULEBOOK.replace("!(facts.x < 0.85)", "facts.x == 1 \\e[2J"), "bad.yaml")
        main(["lint", str(bad)])
        text = capsys.readouterr().out
        assert "\\x1b[2J" in text
    assert not set(text) & {"\x1b", "\x07", "\x9b", "\u202e"}, repr(text[:400])
    if surface != "lint":
        assert "\\x1b]0;owned\\x07" in text or "\\u001b]0;owned\\u0007" in text


# --- YAML merge keys -----------------------------------------------------------------------------

def test_merge_keys_are_overridden_by_explicit_keys_and_stay_located() -> None:
    from policyrun.yamlsource import load_yaml_text

    data, smap = load_yaml_text("base: &b {a: 1, b: 2}\nmore: &m {c: 3, b: 9}\n"
                                "x:\n  <<: [*b, *m]\n  b: 3\n", "f.yaml")
    assert data["x"] == {"a": 1, "b": 3, "c": 3}
    assert str(smap.locate(("x", "b"))) == "f.yaml:5:6"
    assert str(smap.locate(("x", "a"))) == "f.yaml:1:14"
    assert str(smap.locate(("x", "c"))) == "f.yaml:2:14"
    with pytest.raises(PolicyrunError) as err:
        load_yaml_text("base: &b {a: 1}\nx:\n  <<: *b\n  b: 1\n  b: 2\n", "f.yaml")
    assert err.value.code == "Y001" and str(err.value.location) == "f.yaml:5:3"


def test_merge_keys_in_a_rulebook(tmp_path: Path) -> None:
    rb = _rulebook(tmp_path, """\
policyrun: 1
name: merge
modes:
  m: {phases: [A]}
probes:
  x: {uses: const, with: {value: 1}}
phases:
  - id: A
    evidence:
      - &ev {id: first, check: "facts.x == 1", on_fail: BLOCKED}
      - <<: *ev
        id: second
""")
    assert main(["lint", str(rb)]) == 0
    assert _evaluate(rb, _facts(tmp_path, 1), tmp_path / "out") == 0
    trace = json.loads((tmp_path / "out" / "trace.json").read_text())
    assert [c["id"] for c in trace["phases"][0]["evidence"]] == ["first", "second"]


def test_facts_deeper_than_a_facts_file_holds_are_a_probe_error(tmp_path: Path) -> None:
    """A probe (a plugin's, say) returning a value too deep for a facts file gets an error fact at
    collection, instead of a snapshot that `evaluate --facts` would then refuse."""
    from policyrun.collection.run import collect
    from policyrun.model import Rulebook

    deep: object = 1
    for _ in range(200):
        deep = [deep]
    rb = Rulebook.model_validate({"policyrun": 1, "name": "deep", "modes": {"m": {"phases": ["A"]}},
                                  "probes": {"d": {"uses": "const", "with": {"value": deep}}},
                                  "phases": [{"id": "A", "evidence": [{"id": "e", "check": "size(facts.d) > 0"}]}]})
    facts = collect(rb, "m", {}, base_dir=tmp_path)
    error = facts.facts["d"].error
    assert error is not None and error.code == "probe.crashed" and "deeper than 120 levels" in error.message
