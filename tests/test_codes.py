"""The one table of codes (policyrun/lintcodes.py) against the package and the docs (issue 23, item 5).

Every code the package constructs is in the table and every entry is used; each code's docs link
names an existing page and heading; docs/errors.md lists the table as it is; and the codes split
apart so that each means one thing reach the user as the table says.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import errors_doc
import pytest

from policyrun.cli import main
from policyrun.errors import EXIT_USAGE, PolicyrunError, RulebookError, UsageError
from policyrun.lintcodes import CODES, FAMILIES, LINT_CODES, describe

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "policyrun"
CODE = re.compile(r"^[A-Z][0-9]{3}$")
# Callables that take a code as an argument other than `code=`: findings, the loaders' and static
# checks' helpers (`sink.add("L011", ...)`, `_ref(rb, "L001", ...)`, `self.fail(node, "Y003", ...)`).
CODE_TAKERS = {"Finding", "LintCode", "TypeFinding", "ExprError", "add", "_add", "_ref", "fail"}


def _name(func: ast.expr) -> str:
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _constants(node: ast.expr) -> set[str]:
    return {n.value for n in ast.walk(node) if isinstance(n, ast.Constant) and isinstance(n.value, str)
            and CODE.match(n.value)}


def constructed_codes() -> dict[str, list[str]]:
    """Each code the package builds, with where: `code=` arguments (and the `code` parameter's
    default), the code-taking callables' arguments, comparisons with an error's `.code`, and the
    JSON loader's prefixes (`load_json_model(code="F")` builds F001–F003)."""
    found: dict[str, list[str]] = {}

    def note(codes: set[str], path: Path, line: int) -> None:
        for code in codes:
            found.setdefault(code, []).append(f"{path.relative_to(ROOT)}:{line}")

    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "lintcodes.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call):
                for kw in node.keywords:
                    if kw.arg != "code":
                        continue
                    if _name(node.func) == "load_json_model" and isinstance(kw.value, ast.Constant):
                        note({f"{kw.value.value}00{i}" for i in (1, 2, 3)}, path, node.lineno)
                    note(_constants(kw.value), path, node.lineno)
                if _name(node.func) in CODE_TAKERS:
                    for arg in node.args:
                        note(_constants(arg), path, node.lineno)
            elif isinstance(node, ast.Compare) and any(isinstance(side, ast.Attribute) and side.attr == "code"
                                                       for side in [node.left, *node.comparators]):
                note(set().union(*(_constants(side) for side in node.comparators)), path, node.lineno)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                args = node.args
                named = [*args.posonlyargs, *args.args][-len(args.defaults):] if args.defaults else []
                pairs = [*zip(named, args.defaults), *zip(args.kwonlyargs, args.kw_defaults)]
                for arg, default in pairs:
                    if arg.arg == "code" and default is not None:
                        note(_constants(default), path, node.lineno)
    return found


def test_the_scan_sees_every_form_a_code_is_built_in() -> None:
    found = constructed_codes()
    # code= keywords, Finding(...), sink.add, _ref, self.fail, a `.code` comparison, a JSON loader
    # prefix, the base error's default.
    assert {"U003", "R002", "L011", "L001", "Y003", "Y006", "F002", "T003", "E000"} <= set(found)


def test_every_code_the_package_constructs_is_in_the_table() -> None:
    found = constructed_codes()
    missing = {code: where for code, where in found.items() if code not in CODES}
    assert not missing, f"codes missing from policyrun/lintcodes.py: {missing}"


def test_every_table_entry_is_used() -> None:
    assert set(CODES) - set(constructed_codes()) == set()


def test_every_entry_is_complete_and_in_a_named_family() -> None:
    for code, entry in CODES.items():
        assert entry.code == code and CODE.match(code) and code[0] in FAMILIES, code
        assert entry.severity in ("error", "warning") and (entry.lint or entry.severity == "error"), code
        assert entry.short and not entry.short.endswith(".") and len(entry.help) > 20, code
    assert {code[0] for code in CODES} == set(FAMILIES)
    assert set(LINT_CODES) == {c for c, e in CODES.items() if e.lint}
    # "exit 3" in docs/errors.md: every run-time error class exits 3.
    assert PolicyrunError.exit_code == UsageError.exit_code == RulebookError.exit_code == EXIT_USAGE


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation but `-` and `_` dropped, spaces to `-`."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    anchors, fenced = set(), False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and (m := re.match(r"#{1,6} (.+)", line)):
            anchors.add(_slug(m.group(1)))
    return anchors


def test_slug_matches_github() -> None:
    assert _slug("`--format vsa`: a SLSA Verification Summary") == "--format-vsa-a-slsa-verification-summary"
    assert _slug("Rulebook resolution and the MCP server's roots") == "rulebook-resolution-and-the-mcp-servers-roots"
    assert _slug("Fan-out: `for_each`") == "fan-out-for_each"


def test_every_docs_link_names_an_existing_heading() -> None:
    broken = []
    for code, entry in CODES.items():
        page, _, anchor = entry.docs_link.partition("#")
        path = ROOT / "docs" / page
        if not anchor or not path.is_file() or anchor not in _anchors(path):
            broken.append(f"{code}: {entry.docs_link}")
    assert not broken


def test_docs_errors_md_lists_the_table_as_it_is() -> None:
    assert errors_doc.main([]) == 0, "run: python -m tests.errors_doc --update"
    text = errors_doc.PAGE.read_text(encoding="utf-8")
    rows = re.findall(r"^\| ([A-Z][0-9]{3}) \|", text, re.MULTILINE)
    assert sorted(rows) == sorted(CODES) and len(rows) == len(set(rows))


def test_cli_md_links_the_code_page() -> None:
    assert "[errors.md](errors.md)" in (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")


def test_sarif_help_links_the_code_docs_section() -> None:
    from policyrun.lintcodes import help_markdown

    assert help_markdown(CODES["L030"]).endswith("See docs/lint.md#l030-a-gate-an-empty-test-report-passes.")
    assert describe("U006") is CODES["U006"]
    assert help_markdown(describe("L999")).endswith("See docs/lint.md.")  # a plugin's code


# --- codes that were split so that each means one thing ------------------------------------------------


def _rulebook(tmp_path: Path) -> Path:
    path = tmp_path / "rb.yaml"
    path.write_text("policyrun: 1\nname: rb\ninputs:\n  repo: {type: string, default: x}\nmodes:\n  m: {phases: [A]}\n"
                    "probes:\n  c: {uses: const, with: {value: 1}}\nphases:\n  - id: A\n    evidence:\n"
                    "      - {id: e, check: facts.c == 1}\n")
    return path


def test_an_inputs_file_that_is_not_a_mapping_is_u006(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    inputs = tmp_path / "inputs.yaml"
    inputs.write_text("- repo\n")
    assert main(["evaluate", str(_rulebook(tmp_path)), "--inputs", str(inputs), "--out", str(tmp_path / "o")]) == 3
    assert "U006 an inputs file is a mapping of input name to value" in capsys.readouterr().err


def test_an_unknown_input_is_u006(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["evaluate", str(_rulebook(tmp_path)), "--set", "rpeo=y", "--out", str(tmp_path / "o")]) == 3
    assert "U006 unknown input 'rpeo'" in capsys.readouterr().err


def test_test_paths_that_hold_no_test_file_are_u009(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["test", str(tmp_path / "missing.test.yaml")]) == 3
    assert "U009 " in capsys.readouterr().err
    assert main(["test", str(tmp_path)]) == 3
    assert "U009 no *.test.yaml files under" in capsys.readouterr().err


def test_an_evidence_file_of_unknown_format_is_u041(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "x.txt").write_text("a: 1\n")
    code = main(["evidence", "upgrade-gpu-version", "--schema", "architecture", "--check", str(tmp_path / "x.txt")])
    assert code == 3 and "U041 cannot tell the format of" in capsys.readouterr().err


def test_an_unknown_report_format_stays_r004_and_a_stray_option_is_r009(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import tracefactory as tf

    trace = tmp_path / "trace.json"
    trace.write_text(tf.flagship().to_json())
    assert main(["evaluate", str(_rulebook(tmp_path)), "--format", "md,pdf", "--out", str(tmp_path / "o")]) == 3
    assert "R004 unknown report format pdf" in capsys.readouterr().err
    assert main(["report", str(trace), "--format", "junit", "--template", "t.md.j2"]) == 3
    assert "R009 " in capsys.readouterr().err


def test_an_expression_over_the_length_bound_is_x005_not_a_syntax_error() -> None:
    from policyrun.language.expr import MAX_EXPRESSION_CHARS, ExprError, compile_expr

    with pytest.raises(ExprError) as err:
        compile_expr("1 + " * (MAX_EXPRESSION_CHARS // 4) + "1 == 2")
    assert err.value.code == "X005" and "the limit is 20000" in err.value.message
    with pytest.raises(ExprError) as err:
        compile_expr("1 +")
    assert err.value.code == "X001"


def test_an_overlay_without_a_name_is_o006_not_a_bad_extends(tmp_path: Path) -> None:
    from policyrun.language.rulebook import load_rulebook

    overlay = tmp_path / "overlay.yaml"
    overlay.write_text("policyrun: 1\nextends: upgrade-gpu-version\n")
    with pytest.raises(RulebookError) as exc:
        load_rulebook(overlay)
    assert exc.value.code == "O006" and "an overlay needs its own `name`" in exc.value.message
    overlay.write_text("policyrun: 1\nname: x\nextends: upgrade-gpu-verison\n")
    with pytest.raises(RulebookError) as exc:
        load_rulebook(overlay)
    assert exc.value.code == "O001"


def test_a_merge_key_of_a_scalar_is_y010_not_a_tag() -> None:
    from policyrun.yamlsource import load_yaml_text

    with pytest.raises(PolicyrunError) as err:
        load_yaml_text("x:\n  <<: 3\n  b: 1\n", "f.yaml")
    assert err.value.code == "Y010" and "`<<` merges a mapping" in err.value.message
    with pytest.raises(PolicyrunError) as err:
        load_yaml_text("x: !custom 3\n", "f.yaml")
    assert err.value.code == "Y003"
