"""CEL syntax errors are explained in words, with the expression and a `^` under the column,
never as the parser's token lists ("mismatched input ')' expecting {'[', '{', ...}")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from policyrun.cli import main
from policyrun.language.expr import ExprError, compile_expr

PREFIX = "syntax error in the expression: "


@pytest.mark.parametrize(("source", "column", "words"), [
    ("size(facts.x, ) > 1", 15, "unexpected ')' — an operand is missing before it"),
    ("facts.a && || facts.b", 12, "unexpected '||' — an operand is missing before it"),
    ("{'a': }", 7, "unexpected '}' — an operand is missing before it"),
    ("facts.a || ", 12, "the expression ends where an operand should follow — finish it or remove the last operator"),
    ("facts.x]", 8, "unexpected ']' — there is no '[' before it to close"),
    ("1 2", 3, "unexpected '2' after a complete expression — an operator (&&, ||, ==, + ...) is missing before it"),
    ("facts.a and facts.b", 9, "'and' is not a CEL operator: write &&"),
    ("facts.x == 'it''s'", 16, "unexpected string 's' right after a value — an operator such as + is missing "
                               "before it, or a quote inside the string before it needs a backslash"),
    ("[1,,2]", 4, "unexpected ',' — ']' should come here"),
    ("facts.x[1", 10, "']' is missing at the end (a '[' is not closed)"),
    ("{'a' 1}", 6, "':' is missing before '1'"),
    ("facts.x == 'abc", 12, "a string is not closed: its closing ' is missing"),
    ("a = b", 3, "'=' alone is not an operator: write == to compare (CEL has no assignment, === or !==)"),
    ("facts.x & facts.y", 9, "'&' is not an operator: write && for 'and'"),
    ("facts.x | facts.y", 9, "'|' is not an operator: write || for 'or'"),
    ("1 # two", 3, "'#' is not part of CEL (an expression has no comments)"),
    ("facts.a => 1", 9, "'=>' is not an operator: write >= to compare"),
    ("facts.", 7, "'.' must be followed by a field or function name"),
    ("facts.in", 7, "'in' is a reserved word in CEL and cannot follow '.': write ['in'] instead"),
])
def test_syntax_errors_are_worded(source: str, column: int, words: str) -> None:
    with pytest.raises(ExprError) as caught:
        compile_expr(source)
    err = caught.value
    assert (err.code, err.line, err.column, err.message) == ("X001", 1, column, PREFIX + words)
    for token_list in ("mismatched input", "extraneous input", "expecting", "viable alternative", "token recognition",
                       "IDENTIFIER", "<EOF>", "INVALID_ARGUMENT"):
        assert token_list not in err.message


RULEBOOK = """\
policyrun: 1
name: syn
modes:
  m: {phases: [P]}
probes:
  x: {uses: const, with: {value: {n: 1}}}
phases:
  - id: P
    evidence:
      - {id: c, check: "size(facts.x.n, ) > 1", message: "m"}
      - id: d
        check: >-
          facts.x.n == 1 &&
          (facts.x.n >
"""


def test_lint_marks_the_column_under_the_expression(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("POLICYRUN_CACHE_DIR", str(tmp_path / "cache"))
    path = tmp_path / "rb.yaml"
    path.write_text(RULEBOOK)
    for _ in range(2):  # the second answer comes from the lint cache, excerpts included
        assert main(["lint", str(path)]) == 1
        out = capsys.readouterr().out
        assert (f"{path}:10:41: X001 {PREFIX}unexpected ')' — an operand is missing before it "
                "(at phases[0] → evidence[0] → check)\n"
                "  size(facts.x.n, ) > 1\n"
                "                  ^\n") in out
        # In a folded block the position is found on the file line that holds it (line 14, after
        # `(facts.x.n >`), and the excerpt shows the expression as CEL reads it (lines joined).
        assert (f"{path}:14:23: X001 {PREFIX}the expression ends where an operand should follow — finish it or "
                "remove the last operator (at phases[0] → evidence[1] → check)\n"
                "  facts.x.n == 1 && (facts.x.n >\n"
                "                                ^\n") in out


def test_lint_json_carries_the_excerpt(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "rb.yaml"
    path.write_text(RULEBOOK)
    assert main(["lint", str(path), "--format", "json"]) == 1
    first = next(f for f in json.loads(capsys.readouterr().out) if f["code"] == "X001")
    assert first["message"] == PREFIX + "unexpected ')' — an operand is missing before it"
    assert first["excerpt"] == "  size(facts.x.n, ) > 1\n                  ^"


def test_eval_shows_the_worded_error_and_the_caret(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "f.json").write_text("{}")
    assert main(["eval", "facts.a && || facts.b", "--facts", str(tmp_path / "f.json")]) == 3
    err = capsys.readouterr().err
    assert err == (f"<expression>:1:12: X001 {PREFIX}unexpected '||' — an operand is missing before it\n"
                   "  facts.a && || facts.b\n"
                   "             ^\n")


def test_the_example_in_docs_lint_is_what_lint_prints(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    import re

    text = (Path(__file__).resolve().parent.parent / "docs" / "lint.md").read_text(encoding="utf-8")
    example = re.search(r"```\n(rb\.yaml:10:41: X001 .*?)```", text, flags=re.S)
    assert example is not None
    monkeypatch.chdir(tmp_path)
    Path("rb.yaml").write_text(RULEBOOK)
    assert main(["lint", "rb.yaml"]) == 1
    assert example.group(1) in capsys.readouterr().out
