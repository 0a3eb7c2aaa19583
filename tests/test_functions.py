"""The CEL function library, exercised through the real CEL runtime (compile_expr + evaluate)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from policyrun.language.expr import Outcome, compile_condition, compile_expr, evaluate
from policyrun.language.functions import LIBRARY, LIMIT_MARKER, MAX_ITEMS, MAX_STRING_BYTES, UNKNOWN_MARKER, FunctionError
from policyrun.language.functions.library import TYPES, Function, _guarded, sig
from policyrun.language.functions.reference import entry
from policyrun.language.functions import base as functions_base
from policyrun.language.functions import regex as functions_regex
from policyrun.language.functions.regex import _compiled

DOCS = Path(__file__).resolve().parent.parent / "docs" / "functions.md"


def run(expr: str, **facts: Any) -> Outcome:
    return evaluate(compile_expr(expr), {"facts": facts, "vars": {}})


def value(expr: str, **facts: Any) -> Any:
    outcome = run(expr, **facts)
    assert outcome.ok, outcome.error
    return outcome.value


def error(expr: str, kind: str = "error", **facts: Any) -> str:
    outcome = run(expr, **facts)
    assert not outcome.ok, f"expected an error, got {outcome.value!r}"
    assert outcome.kind == kind, (outcome.kind, outcome.error)
    assert outcome.error is not None
    if kind == "limit":  # the engine may introduce the message; the library's text ends it
        found = re.search(r"[a-z_]+: the result .*", outcome.error)
        assert found is not None, outcome.error
        return found.group()
    return outcome.error


DIFF = [{"path": "src/a.py", "status": "M"}, {"path": "src/b.py", "status": "A"}, {"path": "docs/x.md", "status": "M"}]


# --- the table, its examples and its documentation ------------------------------------------------

@pytest.mark.parametrize("fn", LIBRARY, ids=lambda fn: fn.name)
def test_every_example_evaluates_to_its_documented_result(fn: Function) -> None:
    outcome = run(fn.example)
    if fn.outcome == "unknown":
        assert (outcome.kind, outcome.error) == ("unknown", fn.result)
    else:
        assert outcome.ok, outcome.error
        assert outcome.value == fn.result
        assert type(outcome.value) is type(fn.result)  # 6 is not 6.0, true is not 1


def test_docs_document_exactly_the_library() -> None:
    text = DOCS.read_text(encoding="utf-8")
    documented = re.findall(r"^### (\S+)$", text, flags=re.M)
    assert sorted(documented) == sorted(fn.name for fn in LIBRARY)
    assert len(documented) == len(set(documented))
    for fn in LIBRARY:
        assert entry(fn) in text, (f"docs/functions.md: the entry for {fn.name} is out of date; "
                                   "`python -m policyrun.language.functions.reference` prints the current entries")


def test_every_function_is_declared_once_and_no_parameter_is_dyn() -> None:
    names = [fn.name for fn in LIBRARY]
    assert len(names) == len(set(names))
    for fn in LIBRARY:
        for ov in fn.overloads:
            # A dyn parameter never matches at run time in this binding ("No matching overloads").
            assert set(ov.params) <= set(TYPES), (fn.name, ov.params)
            assert len(ov.names) == len(ov.params)
            assert fn.complexity.startswith("O(")
            assert fn.doc and fn.example


def test_member_and_global_forms_agree() -> None:
    assert value("facts.diff.index_by('path') == index_by(facts.diff, 'path')", diff=DIFF) is True
    assert value("'a/b.py'.basename() == basename('a/b.py')") is True
    assert value("facts.diff.inner_join('path', facts.diff, 'path') == inner_join(facts.diff, 'path', facts.diff, 'path')",
                 diff=DIFF) is True


def test_the_strings_extension_join_still_works_beside_the_library() -> None:
    # `join` is taken by the strings extension (`list.join(sep)`); a second declaration of the
    # name would make every expression fail to compile, so the hash join is `inner_join`.
    assert "join" not in {fn.name for fn in LIBRARY}
    assert value("['a', 'b'].join('-')") == "a-b"


def test_bool_results_type_check_as_conditions() -> None:
    for expr in ("'a/b'.glob_match('a/*')", "'a/b'.path_under('a')", "'1.0'.version_valid()",
                 "'1.0'.version_matches('>=1')", "{'a': 1}.has_any(['a'])"):
        assert compile_condition(expr).result_type == "BOOL"


# --- rows and keys --------------------------------------------------------------------------------

def test_index_by_maps_each_key_to_its_row() -> None:
    assert value("facts.diff.index_by('path')['src/b.py'].status", diff=DIFF) == "A"
    assert value("facts.rows.index_by('n')", rows=[{"n": 2}, {"n": 7}]) == {2: {"n": 2}, 7: {"n": 7}}


def test_index_by_duplicate_key_names_both_rows_and_suggests_group_by() -> None:
    rows = [{"path": "a"}, {"path": "b"}, {"path": "a"}]
    assert error("facts.rows.index_by('path')", rows=rows) == (
        "index_by: rows 0 and 2 both have path = 'a'; an index needs unique keys "
        "(group_by(rows, 'path') keeps every row)")


def test_a_row_missing_the_key_is_an_error_naming_the_row_and_key() -> None:
    rows = [{"path": "a"}, {"status": "M"}]
    for fn in ("index_by", "group_by", "count_by", "unique_by", "sort_by", "pluck"):
        assert error(f"facts.rows.{fn}('path')", rows=rows) == (
            f"{fn}: row 1 has no key 'path'; keep only the rows that have it with where_has(rows, 'path')")
    assert error("facts.rows.where('path', ['a'])", rows=rows).startswith("where: row 1 has no key 'path'")
    assert error("facts.rows.lookup('path', {})", rows=rows).startswith("lookup: row 1 has no key 'path'")


def test_rows_must_be_maps() -> None:
    assert error("facts.rows.group_by('k')", rows=[{"k": 1}, "oops"]) == (
        "group_by: row 1 is a string ('oops'), not a map; the rows must be a list of maps")
    assert error("group_by(facts.m, 'k')", m={"k": 1})  # a map where a list is declared: CEL refuses


def test_dotted_keys_read_nested_maps_and_an_exact_key_wins() -> None:
    rows = [{"left": {"path": "a"}, "uv.lock": 1}, {"left": {"path": "b"}, "uv.lock": 2}]
    assert value("facts.rows.pluck('left.path')", rows=rows) == ["a", "b"]
    assert value("facts.rows.pluck('uv.lock')", rows=rows) == [1, 2]
    bad = [{"left": {"path": "a"}}, {"left": "flat"}]
    assert error("facts.rows.pluck('left.path')", rows=bad) == (
        "pluck: row 1 has no key 'left.path' ('left' is a string ('flat')); "
        "keep only the rows that have it with where_has(rows, 'left.path')")
    assert error("facts.rows.pluck('')", rows=bad).startswith("pluck: the key is empty")


def test_map_keys_must_be_strings_ints_or_bools() -> None:
    assert error("facts.rows.group_by('v')", rows=[{"v": "a"}, {"v": 1.5}]) == (
        "group_by: 'v' of row 1 is a double (1.5); map keys must be strings, ints or bools")
    assert error("facts.rows.index_by('v')", rows=[{"v": None}]) == (
        "index_by: 'v' of row 0 is null; map keys must be strings, ints or bools")
    # The binding stores CEL maps as Python dicts, where True == 1: refuse rather than merge.
    assert error("facts.rows.group_by('v')", rows=[{"v": 1}, {"v": True}]).startswith(
        "group_by: both true and 1 occur as keys")
    assert value("facts.rows.group_by('v')", rows=[{"v": True}, {"v": False}, {"v": True}]) == {
        True: [{"v": True}, {"v": True}], False: [{"v": False}]}


def test_group_by_keeps_row_order_within_groups() -> None:
    rows = [{"k": "x", "i": 0}, {"k": "y", "i": 1}, {"k": "x", "i": 2}, {"k": "x", "i": 3}]
    assert value("facts.rows.group_by('k')", rows=rows) == {
        "x": [rows[0], rows[2], rows[3]], "y": [rows[1]]}


def test_count_by_rows_and_values() -> None:
    assert value("facts.diff.count_by('status')", diff=DIFF) == {"M": 2, "A": 1}
    assert value("['a', 'b', 'a', 'a'].count_by()") == {"a": 3, "b": 1}
    assert value("count_by([1, 2, 1])") == {1: 2, 2: 1}
    assert error("[[1]].count_by()") == "count_by: element 0 is a list of 1 item; map keys must be strings, ints or bools"


def test_unique_by_keeps_the_first_row_and_uses_cel_equality() -> None:
    rows = [{"k": 1, "i": 0}, {"k": 1.0, "i": 1}, {"k": True, "i": 2}, {"k": None, "i": 3}, {"k": None, "i": 4}]
    assert value("facts.rows.unique_by('k')", rows=rows) == [rows[0], rows[2], rows[3]]


def test_sort_by_is_stable_and_refuses_mixed_types() -> None:
    rows = [{"n": 2, "i": 0}, {"n": 1.5, "i": 1}, {"n": 2, "i": 2}, {"n": -1, "i": 3}]
    assert [r["i"] for r in value("facts.rows.sort_by('n')", rows=rows)] == [3, 1, 0, 2]
    assert error("facts.rows.sort_by('n')", rows=[{"n": 1}, {"n": "2"}]) == (
        "sort_by: 'n' of row 1 is a string ('2') but 'n' of row 0 is an int (1); "
        "values of different types cannot be ordered")
    assert error("facts.rows.sort_by('n')", rows=[{"n": 1}, {"n": None}]) == (
        "sort_by: 'n' of row 1 is null, which has no order; order numbers, strings, bools or bytes")
    assert error("facts.rows.sort_by('n')", rows=[{"n": 1.0}, {"n": float("nan")}]) == (
        "sort_by: 'n' of row 1 is NaN, which has no order")


def test_pluck_keeps_nulls() -> None:
    assert value("facts.rows.pluck('v')", rows=[{"v": 1}, {"v": None}]) == [1, None]


def test_where_and_where_not_use_cel_equality() -> None:
    assert value("facts.diff.where('status', ['A', 'D'])", diff=DIFF) == [DIFF[1]]
    assert value("facts.diff.where_not('status', ['A'])", diff=DIFF) == [DIFF[0], DIFF[2]]
    rows = [{"v": 1}, {"v": True}, {"v": 1.0}, {"v": None}, {"v": [1]}]
    assert value("facts.rows.where('v', [1])", rows=rows) == [rows[0], rows[2]]
    assert value("facts.rows.where('v', [true, null, [1]])", rows=rows) == [rows[1], rows[3], rows[4]]


def test_where_is_linear_where_a_comprehension_exhausts_the_budget() -> None:
    rows = [{"path": f"f{i}.py", "status": "M" if i % 3 else "A"} for i in range(30_000)]
    assert error("facts.rows.filter(r, r.status == 'A')", kind="budget", rows=rows)
    assert len(value("facts.rows.where('status', ['A'])", rows=rows)) == 10_000


def test_where_has_keeps_rows_with_a_non_null_value() -> None:
    rows = [{"v": 1}, {}, {"v": None}, {"v": {"w": 0}}, {"v": {"x": 1}}]
    assert value("facts.rows.where_has('v')", rows=rows) == [rows[0], rows[3], rows[4]]
    assert value("facts.rows.where_has('v.w')", rows=rows) == [rows[3]]
    assert error("facts.rows.where_has('v')", rows=[{}, 3]) == (
        "where_has: row 1 is an int (3); expected a map (rows must be maps)")


def test_where_glob_filters_rows_and_paths() -> None:
    assert value("facts.diff.where_glob('path', ['src/*.py'])", diff=DIFF) == DIFF[:2]
    assert value("facts.diff.where_glob('path', ['**/*.md', 'src/b.*'])", diff=DIFF) == DIFF[1:]
    assert value("['a.py', 'b/c.py'].where_glob(['/*.py'])") == ["a.py"]  # '/' anchors; '*.py' is any depth
    assert value("['a.py', 'b/c.py'].where_glob(['*.py'])") == ["a.py", "b/c.py"]
    assert value("['a.py'].where_glob([])") == []
    assert error("[1].where_glob(['*'])") == "where_glob: element 0 is an int (1); expected a string path"
    assert error("['a'].where_glob(['[a'])") == "where_glob: pattern '[a' has a '[' without its closing ']'"


def test_lookup_skips_absent_and_null_keys() -> None:
    owners = {"src/a.py": "team-a", "docs/x.md": "team-docs"}
    rows = DIFF + [{"path": None, "status": "M"}]
    assert value("facts.diff.lookup('path', facts.owners)", diff=rows, owners=owners) == ["team-a", "team-docs"]
    assert value("facts.rows.lookup('n', {1: 'one', 2: 'two'})", rows=[{"n": 2}, {"n": 3}, {"n": 1}]) == ["two", "one"]
    # CEL keeps true and 1 apart even though Python's dict does not.
    assert value("facts.rows.lookup('n', {1: 'one'})", rows=[{"n": True}, {"n": 1}]) == ["one"]
    assert value("facts.rows.lookup('n', {true: 'yes'})", rows=[{"n": 1}, {"n": True}]) == ["yes"]
    assert error("facts.rows.lookup('n', {})", rows=[{"n": 1.5}]) == (
        "lookup: 'n' of row 0 is a double (1.5); index keys are strings, ints or bools")


def test_index_by_then_lookup_joins_without_comprehensions() -> None:
    diff = [{"path": f"m{i}.py", "status": "M"} for i in range(12_000)]
    imports = [{"path": f"m{i}.py", "site": f"x.py:{i}"} for i in range(0, 24_000, 2)]
    got = value("facts.diff.lookup('path', facts.imports.index_by('path'))", diff=diff, imports=imports)
    assert [r["site"] for r in got] == [f"x.py:{i}" for i in range(0, 12_000, 2)]
    assert error("facts.diff.map(d, facts.imports.filter(i, i.path == d.path))", kind="budget",
                 diff=diff, imports=imports)


def test_inner_join_pairs_every_match_in_left_then_right_order() -> None:
    left = [{"k": 1, "l": "a"}, {"k": 2, "l": "b"}, {"k": 1, "l": "c"}, {"k": None, "l": "d"}]
    right = [{"k": 1, "r": "x"}, {"k": None, "r": "n"}, {"k": 1, "r": "y"}, {"k": 3, "r": "z"}]
    got = value("facts.left.inner_join('k', facts.right, 'k')", left=left, right=right)
    assert [(p["left"]["l"], p["right"]["r"]) for p in got] == [("a", "x"), ("a", "y"), ("c", "x"), ("c", "y")]
    unique_right = [{"k": 2, "r": "x"}, {"k": None, "r": "n"}, {"k": 1.0, "r": "y"}]
    got = value("facts.left.inner_join('k', facts.right, 'k')", left=left, right=unique_right)
    assert [(p["left"]["l"], p["right"]["r"]) for p in got] == [("a", "y"), ("b", "x"), ("c", "y")]
    assert error("facts.left.inner_join('k', facts.right, 'path')", left=left, right=right).startswith(
        "inner_join: right row 0 has no key 'path'")


def test_inner_join_refuses_a_product_over_the_bound_before_building_it() -> None:
    side = [{"k": "same"}] * 100_000
    # Refused before building: 10^10 pairs would take hours and all memory, so the test would not end.
    message = error("facts.a.inner_join('k', facts.b, 'k')", kind="limit", a=side, b=side)
    assert message == ("inner_join: the result would have 10,000,000,000 items; the bound is 1,000,000 (MAX_ITEMS)")


# --- lists ----------------------------------------------------------------------------------------

def test_distinct_and_duplicates_keep_first_occurrence_order() -> None:
    assert value("[3, 1, 3, 2, 1].distinct()") == [3, 1, 2]
    assert value("facts.v.distinct()", v=[1, 1.0, True, "1", None, None, {"a": 1}, {"a": 1}, [1], [1]]) == [
        1, True, "1", None, {"a": 1}, [1]]
    assert value("[b'a', b'b', b'a'].distinct()") == [b"a", b"b"]
    assert value("['a', 'b', 'a', 'c', 'b', 'a'].duplicates()") == ["a", "b"]
    assert value("[].duplicates()") == []


def test_sorted() -> None:
    assert value("[3, 1.5, 2].sorted()") == [1.5, 2, 3]
    assert value("[].sorted()") == []
    assert value("[true, false].sorted()") == [False, True]
    assert error("[1, true].sorted()") == (
        "sorted: element 1 is a bool (true) but element 0 is an int (1); values of different types cannot be ordered")
    assert error("[{}].sorted()") == (
        "sorted: element 0 is a map of 0 entries, which has no order; order numbers, strings, bools or bytes")


def test_flatten_one_level() -> None:
    assert value("[[1, [2]], [], [3]].flatten()") == [1, [2], 3]
    assert error("[[1], 2].flatten()") == "flatten: element 1 is an int (2); expected a list (flatten takes a list of lists)"


def test_sum_keeps_ints_and_refuses_non_numbers() -> None:
    assert value("[1, 2, 3].sum()") == 6 and type(value("[1, 2, 3].sum()")) is int
    assert value("[1, 2.5].sum()") == 3.5
    assert value("[].sum()") == 0 and type(value("[].sum()")) is int
    assert error("[1, true].sum()") == "sum: element 1 is a bool (true); expected an int or a double"
    assert error("[9223372036854775807, 1].sum()") == "sum: the total 9223372036854775808 overflows a 64-bit int"


def test_min_and_max() -> None:
    assert value("[3, 1, 2].min()") == 1 and type(value("[3, 1, 2].min()")) is int
    assert value("[3, 7.5, 2].max()") == 7.5
    assert value("['b', 'a'].min()") == "a"
    assert error("[].min()") == "min: the list is empty; check size(list) > 0 first"
    assert error("[].max()") == "max: the list is empty; check size(list) > 0 first"
    assert error("[1, 'a'].max()").startswith("max: element 1 is a string ('a') but element 0 is an int (1)")


def test_set_operations_are_distinct_in_order_of_first_appearance() -> None:
    assert value("['b', 'a', 'b'].union(['c', 'a', 'd'])") == ["b", "a", "c", "d"]
    assert value("['c', 'a', 'b', 'a'].intersect(['a', 'c', 'x'])") == ["c", "a"]
    assert value("['c', 'a', 'b', 'a'].difference(['b'])") == ["c", "a"]
    assert value("[1, true].intersect([1.0])") == [1]
    assert value("[{'a': 1}, {'a': 2}].difference([{'a': 2}])") == [{"a": 1}]


# --- maps -----------------------------------------------------------------------------------------

def test_keys_and_values_follow_sorted_keys() -> None:
    m = {f"k{i:03d}": i for i in reversed(range(200))}
    assert value("facts.m.keys()", m=m) == sorted(m)
    assert value("facts.m.values()", m=m) == list(range(200))
    assert value("{2: 'b', 'a': 'c', 1: 'a'}.keys()") == [1, 2, "a"]


def test_select_keys_and_has_any() -> None:
    assert value("{'a': 1, 'b': 2}.select_keys(['b', 'z'])") == {"b": 2}
    assert value("{'a': 1}.has_any(['x', 'a'])") is True
    assert value("{'a': 1}.has_any([])") is False
    assert error("{'a': 1}.has_any([1.5])") == "has_any: element 0 is a double (1.5); map keys must be strings, ints or bools"


# --- paths ----------------------------------------------------------------------------------------

@pytest.mark.parametrize(("path", "dirname", "basename"), [
    ("src/pkg/mod.py", "src/pkg", "mod.py"), ("mod.py", "", "mod.py"), ("/mod.py", "/", "mod.py"),
    ("src/pkg/", "src", "pkg"), ("/", "/", ""), ("", "", ""), ("a//b", "a", "b"),
])
def test_dirname_and_basename(path: str, dirname: str, basename: str) -> None:
    assert value(f"'{path}'.dirname()") == dirname
    assert value(f"'{path}'.basename()") == basename


@pytest.mark.parametrize(("path", "pattern", "matches"), [
    # the CEL binding; tests/test_globs.py checks the rules themselves against `git check-ignore`
    ("src/a.py", "src/*.py", True), ("src/sub/a.py", "src/*.py", False), ("src/sub/a.py", "*.py", True),
    ("src/a.py", "src/**/*.py", True), ("src/x/y/a.py", "src/**/*.py", True), ("src/a.pyc", "src/**/*.py", False),
    ("vendor/x/y", "vendor/**", True), ("vendor/x/y", "vendor", True), ("vendorx/y", "vendor/**", False),
    ("a/b", "a**b", False), ("a/xb", "a/**b", True), ("ab", "a**b", True), ("/abs/p.py", "/abs/*.py", True),
    ("abs/p.py", "/abs/*.py", True), ("x/abs/p.py", "/abs/*.py", False), ("é/ü.py", "é/*.py", True),
])
def test_glob_match(path: str, pattern: str, matches: bool) -> None:
    compiled = compile_expr("glob_match(facts.p, facts.g)")
    outcome = evaluate(compiled, {"facts": {"p": path, "g": pattern}})
    assert outcome.value is matches, (path, pattern, outcome)


def test_glob_match_errors_name_the_pattern() -> None:
    assert error("glob_match('a', 'a[b')") == "glob_match: pattern 'a[b' has a '[' without its closing ']'"
    assert error("glob_match('a', 'a[z-a]')") == "glob_match: pattern 'a[z-a]' has the empty range 'z-a'"
    assert error("glob_match('a', '[+-0]')").startswith("glob_match: pattern '[+-0]' has a [...] range over '/'")
    assert error("glob_match('a', 'a\\\\')") == "glob_match: pattern 'a\\' ends with a lone backslash"


@pytest.mark.parametrize(("path", "prefix", "under"), [
    ("a/b/c.py", "a/b", True), ("a/b", "a/b", True), ("a/b", "a/b/", True), ("a/bc", "a/b", False),
    ("a", "a/b", False), ("a/./b/../b/c", "a/b", True), ("a/../b/c", "a", False), ("x", "", True),
    ("x", ".", True), ("../x", ".", False), ("../x", "..", True), ("/a/b", "/a", True), ("a/b", "/a", False),
    ("/a/b", "a", False), ("a//b", "a/b", True),
])
def test_path_under_is_component_wise(path: str, prefix: str, under: bool) -> None:
    assert value("path_under(facts.p, facts.q)", p=path, q=prefix) is under


@pytest.mark.parametrize(("text", "prefix", "under"), [
    ("vllm.a.b", "vllm.a", True), ("vllm.a", "vllm.a", True), ("vllm.ab", "vllm.a", False),
    ("vllm", "vllm.a", False), ("0.26.1", "0.26", True), ("0.26.10", "0.26.1", False),
    ("0.26", "0.26.0", False), ("v0.26.1", "0.26", False), ("0.26.1", "", False),
])
def test_dotted_under_is_component_wise_and_textual(text: str, prefix: str, under: bool) -> None:
    # The rulebooks' "a doc claim of 0.26 agrees with 0.26.0" and "a name under a missing import"
    # read this; nothing is normalised, so `0.26` never covers `0.26.0`'s neighbour `0.260`.
    assert value("dotted_under(facts.t, facts.p)", t=text, p=prefix) is under
    assert value("facts.t.dotted_under(facts.p)", t=text, p=prefix) is under


# --- versions -------------------------------------------------------------------------------------

@pytest.mark.parametrize(("a", "b", "order"), [
    ("0.26.0", "0.27.0", -1), ("v0.27.0", "0.27.0", 0), ("1.0", "1.0.0", 0), ("0.26.0+cu128", "0.26.0", 1),
    ("2.0rc1", "2.0", -1), ("0.27.0.dev5+g1a2b", "0.27.0", -1), ("0.10.0", "0.9.9", 1), ("1!0.1", "2.0", 1),
])
def test_version_compare(a: str, b: str, order: int) -> None:
    assert value(f"'{a}'.version_compare('{b}')") == order


def test_version_errors_name_the_version_or_spec() -> None:
    assert error("'0.26.x'.version_compare('1.0')") == (
        "version_compare: '0.26.x' is not a PEP 440 version (such as 1.2, 0.26.0+cu128, 2.0rc1 or v0.27.0)")
    assert error("'1.0'.version_release()".replace("1.0", "latest")).startswith("version_release: 'latest' is not")
    assert error("'1.0'.version_matches('>=2.0,<')") == (
        "version_matches: '>=2.0,<' is not a PEP 440 specifier set (such as '>=2.0,<3' or '==0.26.*')")


def test_version_valid_release_and_matches() -> None:
    assert value("'v0.27.0'.version_valid()") is True
    assert value("'0.27-final-final'.version_valid()") is False
    assert value("'0.26.0+cu128'.version_release()") == "0.26.0"
    assert value("'v0.27.0'.version_release()") == "0.27.0"
    assert value("'1!2.0.post3'.version_release()") == "2.0"
    assert value("'2.5'.version_matches('>=2.0,<3')") is True
    assert value("'3.0'.version_matches('>=2.0,<3')") is False
    assert value("'2.1rc1'.version_matches('>=2.0,<3')") is True  # a fact, not an install candidate
    assert value("'0.26.3'.version_matches('==0.26.*')") is True
    assert value("'0.26.0+cu128'.version_matches('==0.26.0')") is True
    assert value("'9.9'.version_matches('')") is True


def test_version_unique_names_the_one_version_or_null() -> None:
    # The identity of a plugin whose exact pins and lock agree, spelled differently in each.
    pins = {"pinned": ["0.26"], "locked": ["0.26.0"]}
    assert value("version_unique(facts.p.pinned + facts.p.locked)", p=pins) == "0.26"
    assert value("['0.26.0', '0.27.0'].version_unique()") is None  # they disagree: no guess
    assert value("[].version_unique()") is None
    assert error("['0.26.0', 'latest'].version_unique()") == (
        "version_unique: 'latest' is not a PEP 440 version (such as 1.2, 0.26.0+cu128, 2.0rc1 or v0.27.0)")
    assert error("['0.26.0', 26].version_unique()") == (
        "version_unique: item 1 is an int (26); expected a list of version strings")


def test_a_range_admits_a_version_only_through_a_valid_specifier() -> None:
    # The one-line rule a plugin pinned by a range needs: does every range admit the target?
    ranges = [{"specifier_set": ">=0.24.0"}, {"specifier_set": "<0.27,>=0.24"}]
    assert value("facts.p.filter(s, !'0.27.0'.version_matches(s.specifier_set)).map(s, s.specifier_set)",
                 p=ranges) == ["<0.27,>=0.24"]
    assert error("'0.27.0'.version_matches('>= 0.24 or newer')").startswith("version_matches: '>= 0.24 or newer' is "
                                                                          "not a PEP 440 specifier set")


# --- regular expressions --------------------------------------------------------------------------

def test_capture() -> None:
    assert value("'vllm==0.26.0'.capture('^([a-z]+)==(.+)$')") == ["vllm", "0.26.0"]
    assert value("'abc123'.capture('[0-9]+')") == ["123"]
    assert value("'abc'.capture('[0-9]+')") == []
    assert value("'ac'.capture('a(b)?(c)')") == ["", "c"]


def test_find_all() -> None:
    assert value("'v1 v22 x3'.find_all('v([0-9]+)')") == ["1", "22"]
    assert value("'a1b22'.find_all('[0-9]+')") == ["1", "22"]
    assert value("'abc'.find_all('x')") == []
    assert value("'é1 ü22 ñ'.find_all('(.)[0-9]+')") == ["é", "ü"]
    assert value("'ab'.find_all('x*')") == ["", "", ""]
    assert value("'ab'.find_all('(x)?b')") == [""]


def test_invalid_regex_names_the_pattern() -> None:
    assert error("'a'.capture('(a')") == "capture: invalid regular expression '(a': missing ): (a (RE2 syntax, as in matches())"
    assert error("'a'.find_all('(?<=a)b')").startswith("find_all: invalid regular expression '(?<=a)b'")


def test_regex_is_linear_time_and_compiled_once() -> None:
    text = "a" * 200_000 + "!"
    # Catastrophic for a backtracking engine (the test would not end); RE2 answers at once.
    assert value("facts.t.capture('^(a+)+$')", t=text) == []
    assert _compiled.cache_info().maxsize == 512
    value("'x'.capture('cache-probe-(x)?')")
    hits = _compiled.cache_info().hits
    value("'y'.capture('cache-probe-(x)?')")
    assert _compiled.cache_info().hits == hits + 1


# --- unknown() ------------------------------------------------------------------------------------

def test_unknown_carries_its_reason_to_the_outcome() -> None:
    outcome = run("size(facts.junit) > 0 ? facts.junit.all(t, t.ok) : unknown('no JUnit report was found')", junit=[])
    assert (outcome.kind, outcome.error) == ("unknown", "no JUnit report was found")
    assert outcome.value is None


def test_unknown_raises_with_the_marker_and_the_reason_verbatim() -> None:
    impl = _guarded(next(fn for fn in LIBRARY if fn.name == "unknown"))
    with pytest.raises(FunctionError) as info:
        impl("the GPU probe was refused: no gpu_context")
    assert str(info.value) == UNKNOWN_MARKER + "the GPU probe was refused: no gpu_context"


def test_unknown_type_checks_as_a_condition_and_follows_cel_error_absorption() -> None:
    assert compile_condition("facts.x > 1 && unknown('why')").result_type == "BOOL"
    assert compile_condition("unknown('why')").result_type == "DYN"
    # `||` and `&&` absorb an error when the other side decides the result, as CEL specifies.
    assert value("true || unknown('why')") is True
    assert value("false && unknown('why')") is False
    assert error("unknown('   ')") == "unknown: give the reason the result cannot be decided, e.g. unknown('no test report')"


# --- bounds and error hygiene ---------------------------------------------------------------------

def test_results_over_max_items_are_refused_with_the_limit_marker() -> None:
    assert MAX_ITEMS == 1_000_000
    assert error("facts.v.distinct()", kind="limit", v=list(range(MAX_ITEMS + 1))) == (
        "distinct: the result would have 1,000,001 items; the bound is 1,000,000 (MAX_ITEMS)")
    assert error("facts.v.flatten()", kind="limit", v=[[0] * 600_000, [1] * 400_001]) == (
        "flatten: the result would have 1,000,001 items; the bound is 1,000,000 (MAX_ITEMS)")


def test_find_all_stops_at_the_bound_while_matching(monkeypatch: pytest.MonkeyPatch) -> None:
    # A million matches take seconds through the RE2 wrapper; the same code path with a bound of 10.
    monkeypatch.setattr(functions_base, "MAX_ITEMS", 10)
    monkeypatch.setattr(functions_regex, "MAX_ITEMS", 10)
    assert error("facts.t.find_all('a')", kind="limit", t="a" * 50) == (
        "find_all: the result would have at least 11 items; the bound is 10 (MAX_ITEMS)")


def test_string_results_over_max_string_bytes_are_refused() -> None:
    assert MAX_STRING_BYTES == 16 * 1024 * 1024
    name = "é" * (MAX_STRING_BYTES // 2 + 1)  # 2 bytes a character in UTF-8
    assert error("facts.p.basename()", kind="limit", p="dir/" + name) == (
        "basename: the result is a string of 16,777,218 bytes; the bound is 16,777,216 (MAX_STRING_BYTES)")


def test_limit_errors_carry_the_marker() -> None:
    impl = _guarded(next(fn for fn in LIBRARY if fn.name == "flatten"))
    with pytest.raises(FunctionError) as info:
        impl([[0] * MAX_ITEMS, [0]])
    assert str(info.value).startswith(LIMIT_MARKER + "flatten: ")


def test_python_exception_text_never_reaches_the_user() -> None:
    def broken(rows: Any, key: Any) -> Any:
        return rows[0][key]  # a KeyError whose text would be just the key

    fn = Function("broken", (sig("rows: list, key: string -> dyn"),), broken, "d", "O(1)", "x")
    with pytest.raises(FunctionError) as info:
        _guarded(fn)([{}], "k")
    assert str(info.value) == ("broken: internal error (KeyError); this is a policyrun defect, please report it "
                               "with the expression")


# --- version parts, requirements, names, json ------------------------------------------------------

@pytest.mark.parametrize(("text", "parts"), [("2", [2, 0, 0]), ("v0.26.3rc1+cu128", [0, 26, 3]),
                                             ("1!4.5.6.7", [4, 5, 6]), ("2025.10", [2025, 10, 0])])
def test_version_parts_read_the_release_segment(text: str, parts: list[int]) -> None:
    assert value(f"['{text}'.version_major(), '{text}'.version_minor(), '{text}'.version_patch()]") == parts


def test_version_parts_refuse_what_is_not_a_version() -> None:
    assert error("'latest'.version_minor()").startswith("version_minor: 'latest' is not a PEP 440 version")


def test_requirement_parses_pep_508() -> None:
    assert value("'flash_attn @ https://x.org/f.whl'.requirement()") == {
        "name": "flash_attn", "normalized_name": "flash-attn", "specifier": "", "extras": [], "marker": None,
        "url": "https://x.org/f.whl"}
    # Two spellings of one specifier set compare equal: the clauses are sorted.
    assert value("'a<2,>=1'.requirement().specifier == 'a>=1,<2'.requirement().specifier") is True
    assert value("'A[z,b]'.requirement().extras") == ["b", "z"]


def test_requirement_errors_name_the_text_and_the_item() -> None:
    assert error("'vllm >= '.requirement()").startswith("requirement: 'vllm >= ' is not a PEP 508 requirement")
    assert error("['ok', 'bad req'].requirements()").startswith(
        "requirements: item 1, 'bad req' is not a PEP 508 requirement")
    assert error("['ok', 3].requirements()") == (
        "requirements: item 1 is an int (3); expected a list of requirement strings")


@pytest.mark.parametrize(("name", "normal"), [("Flash_Attn", "flash-attn"), ("zope.interface", "zope-interface"),
                                              ("a-_.b", "a-b"), ("vllm", "vllm")])
def test_normalize_name_is_pep_503(name: str, normal: str) -> None:
    assert value(f"'{name}'.normalize_name()") == normal


def test_json_reads_a_document() -> None:
    assert value("json(facts.r.body).models.map(m, m.id)", r={"body": '{"models": [{"id": "a"}, {"id": "b"}]}'}) \
        == ["a", "b"]
    assert value("json('3') + 1") == 4
    assert value("json('null') == null") is True


@pytest.mark.parametrize(("text", "message"), [
    ('[1, NaN]', "json: line 1, column 5: NaN at 1: numbers must be finite"),
    ('[1e400]', "json: line 1, column 2: 1e400 at 0 overflows to Infinity"),
    ('{"a": 1, "a": 2}', "json: line 1, column 10: duplicate key 'a'"),
    ('[' + '9' * 101 + ']', "json: line 1, column 2: a number of 101 characters at 0"),
    ('[99999999999999999999999]', "json: the integer 99999999999999999999999 does not fit in 64 bits"),
    ('{"a": ', "json: line 1, column 7: the text is not valid JSON"),
    ('[' * 200 + ']' * 200, "json: line 1, column 129: the text nests deeper than 128 levels"),
])
def test_json_holds_text_to_the_facts_file_bounds(text: str, message: str) -> None:
    assert error("json(facts.t.s)", t={"s": text}).startswith(message)


# --- CEL's own functions, as docs/functions.md lists them ------------------------------------------

def _builtin_rows() -> list[tuple[str, str]]:
    text = DOCS.read_text(encoding="utf-8")
    section = text[text.index("## CEL's own functions"):text.index("## Notes on the CEL binding")]
    return re.findall(r"^\| `(.+)` \| `(.+)` \|$", section, flags=re.M)


def test_the_documented_builtin_examples_are_many() -> None:
    rows = dict(_builtin_rows())
    for name in ("[?", ".?", "orValue", "hasValue", "lowerAscii", "upperAscii", "trim", "split", "join", "charAt",
                 "indexOf", "lastIndexOf", "replace", "substring", "reverse", "format", "strings.quote",
                 "math.greatest", "math.least"):
        assert any(name in expr for expr in rows), name


@pytest.mark.parametrize(("expr", "shown"), _builtin_rows())
def test_every_documented_builtin_example_gives_its_result(expr: str, shown: str) -> None:
    from policyrun.language.functions.base import literal

    assert literal(value(expr)) == shown


def test_owners_matches_whole_dotted_segments_only() -> None:
    ids = ["tests.unit.test_ab::test_x", "tests.unit.test_c", "tests.unit.pkg.test_d.TestK::test_y[1.5]"]
    names = ["tests.unit.test_a", "tests.unit.test_ab", "tests.unit.test_c", "tests.unit.pkg.test_d", "tests.unit.pkg"]
    # test_a is a prefix of test_ab's text but not of its dotted path; an id equal to a name (a module
    # skipped at collection) is owned by it; the parameter's `1.5` after `::` is not a path segment.
    assert value("facts.ids.owners(facts.names)", ids=ids, names=names) == [
        "tests.unit.test_ab", "tests.unit.test_c", "tests.unit.pkg.test_d", "tests.unit.pkg"]
    assert value("owners([], ['a'])") == []


def test_owners_refuses_what_is_not_a_string() -> None:
    assert "owners" in error("owners(['a.b::c', 1], ['a'])")


def test_owners_reads_a_pytest_node_id_as_its_module() -> None:
    """Report-logs identify tests by node id: the same modules as JUnit's dotted ids."""
    ids = ["tests/unit/test_a.py::TestA::test_x[1]", "tests/unit/sub/test_b.py"]
    assert value("facts.ids.owners(facts.names)", ids=ids,
                 names=["tests.unit.test_a", "tests.unit.sub.test_b", "tests.unit"]) == [
        "tests.unit.test_a", "tests.unit.sub.test_b", "tests.unit"]


# --- given ----------------------------------------------------------------------------------------

@pytest.mark.parametrize(("expr", "expected"), [
    ("given(facts.v)", True), ("given(facts.empty)", False), ("given(facts.none)", False),
    ("given(facts.rows)", True), ("given(facts.no_rows)", False), ("given(facts.m)", True),
    ("given(facts.no_m)", False), ("given(facts.zero)", True), ("given(facts.no)", True),
    ("given(facts.half)", True), ("facts.v.given()", None),
])
def test_given_is_true_for_a_value_that_is_neither_null_nor_empty(expr: str, expected: bool | None) -> None:
    facts = {"v": "v0.9.1", "empty": "", "none": None, "rows": [{}], "no_rows": [], "m": {"a": 1}, "no_m": {},
             "zero": 0, "no": False, "half": 0.5}
    if expected is None:  # a plain function, not a method: a value is not the subject of a question about it
        assert compile_fails(expr)
        return
    assert value(expr, **facts) is expected
    assert compile_condition(expr).result_type == "BOOL"


def compile_fails(expr: str) -> bool:
    from policyrun.language.expr import ExprError
    try:
        compile_expr(expr)
    except ExprError:
        return True
    return not run(expr, v="x").ok
