"""The table of library functions and its registration with the CEL runtime."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from policyrun.language.functions import factstatus, hostgroups, jsontext, lists, packages, paths, regex, rows, versions
from policyrun.language.functions.base import UNKNOWN_MARKER, FunctionError, check_bounds, fail

# CEL type names an overload may use. A parameter is never "dyn": the binding's dispatcher never
# matches a value against a dyn parameter at run time ("No matching overloads found").
TYPES = ("list", "map", "string", "int", "double", "bool", "null")


@dataclass(frozen=True)
class Overload:
    params: tuple[str, ...]  # CEL type names from TYPES
    result: str  # a name from TYPES, or "dyn"
    member: bool = False  # callable as `x.f(...)` (receiver is params[0]) as well as `f(x, ...)`
    names: tuple[str, ...] = ()  # parameter names, for the reference


def sig(text: str, member: bool = False) -> Overload:
    """`"rows: list, key: string -> map"` as an Overload."""
    args, result = text.split(" -> ")
    pairs = [a.split(": ") for a in args.split(", ")] if args else []
    return Overload(tuple(t for _, t in pairs), result, member, tuple(n for n, _ in pairs))


@dataclass(frozen=True)
class Function:
    name: str
    overloads: tuple[Overload, ...]
    impl: Callable[..., Any]
    doc: str
    complexity: str
    example: str  # a CEL expression; the tests evaluate it and compare with `result`
    result: Any = None
    group: str = ""
    outcome: str = "value"  # "unknown": the example is UNKNOWN, and `result` is its reason


def unknown(reason: str) -> Any:
    if not reason.strip():
        fail("unknown: give the reason the result cannot be decided, e.g. unknown('no test report')")
    raise FunctionError(UNKNOWN_MARKER + reason)


_ROWS = "Rows and keys"
_LISTS = "Lists"
_MAPS = "Maps"
_PATHS = "Paths"
_VERSIONS = "Versions"
_PACKAGES = "Python packages"
_TEXT = "Text"
_REGEX = "Regular expressions"
_CONTROL = "Undecidable results"
_HOSTS = "Hosts of a cell"
_GIVEN = "Given values"


def given(value: Any) -> bool:
    """Neither null nor empty: what a hand-written `x != null && x != ''` guard asks."""
    if value is None:
        return False
    if isinstance(value, (str, list, dict, bytes)):
        return len(value) > 0
    return True  # a number or bool is a value, zero and false included

LIBRARY: tuple[Function, ...] = (
    Function("index_by", (sig("rows: list, key: string -> map", member=True),), rows.index_by,
             "A map from each row's key to the row. Two rows with the same key are an error naming both "
             "rows (use group_by to keep every row).",
             "O(n)", "[{'id': 'a', 'n': 1}, {'id': 'b', 'n': 2}].index_by('id')",
             {"a": {"id": "a", "n": 1}, "b": {"id": "b", "n": 2}}, _ROWS),
    Function("group_by", (sig("rows: list, key: string -> map", member=True),), rows.group_by,
             "A map from each key to the list of rows that have it, in the rows' order.",
             "O(n)", "[{'dir': 'src', 'f': 'a.py'}, {'dir': 'docs', 'f': 'x.md'}, {'dir': 'src', 'f': 'b.py'}]"
                     ".group_by('dir')",
             {"docs": [{"dir": "docs", "f": "x.md"}],
              "src": [{"dir": "src", "f": "a.py"}, {"dir": "src", "f": "b.py"}]}, _ROWS),
    Function("count_by", (sig("rows: list, key: string -> map", member=True), sig("values: list -> map", member=True)),
             lambda values, key=None: rows.count_values(values) if key is None else rows.count_by(values, key),
             "How many rows have each key; with no key, how many times each value occurs (the values "
             "must be strings, ints or bools).",
             "O(n)", "[{'status': 'M'}, {'status': 'A'}, {'status': 'M'}].count_by('status')",
             {"A": 1, "M": 2}, _ROWS),
    Function("unique_by", (sig("rows: list, key: string -> list", member=True),), rows.unique_by,
             "The first row for each distinct key, in the rows' order.",
             "O(n)", "[{'id': 1, 'v': 'x'}, {'id': 2, 'v': 'y'}, {'id': 1, 'v': 'z'}].unique_by('id')",
             [{"id": 1, "v": "x"}, {"id": 2, "v": "y"}], _ROWS),
    Function("sort_by", (sig("rows: list, key: string -> list", member=True),), rows.sort_by,
             "The rows in ascending order of their key; rows with equal keys keep their order (stable). "
             "The keys must all be numbers, all strings, all bools or all bytes.",
             "O(n log n)", "[{'f': 'b', 'n': 2}, {'f': 'a', 'n': 10}, {'f': 'c', 'n': 2}].sort_by('n')",
             [{"f": "b", "n": 2}, {"f": "c", "n": 2}, {"f": "a", "n": 10}], _ROWS),
    Function("pluck", (sig("rows: list, key: string -> list", member=True),), rows.pluck,
             "The key of each row, in order (null values included).",
             "O(n)", "[{'left': {'path': 'a.py'}}, {'left': {'path': 'b.py'}}].pluck('left.path')",
             ["a.py", "b.py"], _ROWS),
    Function("where", (sig("rows: list, key: string, values: list -> list", member=True),), rows.where,
             "The rows whose key equals one of `values` (CEL equality: 1 == 1.0, true != 1), in order.",
             "O(n + m)", "[{'p': 'a', 's': 'M'}, {'p': 'b', 's': 'D'}, {'p': 'c', 's': 'A'}].where('s', ['A', 'M'])",
             [{"p": "a", "s": "M"}, {"p": "c", "s": "A"}], _ROWS),
    Function("where_not", (sig("rows: list, key: string, values: list -> list", member=True),), rows.where_not,
             "The rows whose key equals none of `values`, in order.",
             "O(n + m)", "[{'p': 'a', 's': 'M'}, {'p': 'b', 's': 'D'}].where_not('s', ['D'])",
             [{"p": "a", "s": "M"}], _ROWS),
    Function("where_has", (sig("rows: list, key: string -> list", member=True),), rows.where_has,
             "The rows that have the key with a value other than null: the filter to apply before "
             "another function when some rows legitimately lack the key.",
             "O(n)", "[{'p': 'a', 'v': '1.0'}, {'p': 'b'}, {'p': 'c', 'v': null}].where_has('v')",
             [{"p": "a", "v": "1.0"}], _ROWS),
    Function("where_glob", (sig("rows: list, key: string, patterns: list -> list", member=True),
                            sig("paths: list, patterns: list -> list", member=True)),
             lambda items, a, b=None: rows.where_glob_paths(items, a) if b is None else rows.where_glob(items, a, b),
             "The rows whose key (a path) matches any of the glob patterns; with no key, the paths "
             "that match. Patterns as in glob_match.",
             "O(n · path length)", "['src/a.py', 'docs/x.md', 'src/sub/b.py'].where_glob(['src/**/*.py'])",
             ["src/a.py", "src/sub/b.py"], _ROWS),
    Function("lookup", (sig("rows: list, key: string, index: map -> list", member=True),), rows.lookup,
             "For each row, `index[row's key]`, in the rows' order; a key absent from the index, or "
             "null, is skipped (so the result can be shorter than the rows).",
             "O(n)", "[{'path': 'a.py'}, {'path': 'gone.py'}, {'path': 'b.py'}]"
                     ".lookup('path', {'a.py': 'owner-a', 'b.py': 'owner-b'})",
             ["owner-a", "owner-b"], _ROWS),
    Function("inner_join", (sig("left: list, lkey: string, right: list, rkey: string -> list", member=True),),
             rows.inner_join,
             "Every pair of a left row and a right row whose keys are equal, as `{'left': l, 'right': r}`, "
             "in left order, then right order (a hash join). Null keys never match. The number of pairs "
             "is counted before any is built, so a product over MAX_ITEMS fails at once.",
             "O(n + m + pairs)", "[{'path': 'a.py', 'status': 'M'}, {'path': 'b.py', 'status': 'A'}]"
                                 ".inner_join('path', [{'path': 'a.py', 'site': 'x.py:3'}], 'path')",
             [{"left": {"path": "a.py", "status": "M"}, "right": {"path": "a.py", "site": "x.py:3"}}], _ROWS),

    Function("group_hosts", (sig("by_host: map -> list", member=True),
                             sig("by_host: map, key: string -> list", member=True)), hostgroups.group_hosts,
             "Hosts grouped by their value, or by the value at a dotted `key` inside it (null where absent): "
             "`[{'value': v, 'hosts': [labels]}]`, the largest group first, ties in order of the first label. "
             "Read from `hosts.<probe>` (docs/semantics.md, Hosts).",
             "O(n log n)", "{'node-a': {'driver': '550.1'}, 'node-b': {'driver': '550.1'}, 'node-c': {'driver': '560.3'}}"
                           ".group_hosts('driver')",
             [{"value": "550.1", "hosts": ["node-a", "node-b"]}, {"value": "560.3", "hosts": ["node-c"]}], _HOSTS),
    Function("disagreeing", (sig("by_host: map -> list", member=True),
                             sig("by_host: map, key: string -> list", member=True)), hostgroups.disagreeing,
             "The hosts whose value (or value at a dotted `key`) differs from the largest group's, sorted; "
             "empty when every host agrees. With a tie, the group of the first host label is the norm.",
             "O(n log n)", "{'node-a': {'driver': '550.1'}, 'node-b': {'driver': '550.1'}, 'node-c': {'driver': '560.3'}}"
                           ".disagreeing('driver')", ["node-c"], _HOSTS),

    Function("distinct", (sig("values: list -> list", member=True),), lists.distinct,
             "The values without repeats, each where it first occurs.",
             "O(n)", "[3, 1, 3, 2, 1].distinct()", [3, 1, 2], _LISTS),
    Function("duplicates", (sig("values: list -> list", member=True),), lists.duplicates,
             "The values that occur more than once, each once, where it first occurs.",
             "O(n)", "['a.py', 'b.py', 'a.py', 'c.py', 'b.py'].duplicates()", ["a.py", "b.py"], _LISTS),
    Function("sorted", (sig("values: list -> list", member=True),), lists.sorted_,
             "The values in ascending order: all numbers, all strings (by code point), all bools or all bytes.",
             "O(n log n)", "['b', 'C', 'a'].sorted()", ["C", "a", "b"], _LISTS),
    Function("flatten", (sig("lists: list -> list", member=True),), lists.flatten,
             "The elements of each list, in order (one level: lists inside them stay lists).",
             "O(n)", "[[1, 2], [], [3, [4]]].flatten()", [1, 2, 3, [4]], _LISTS),
    Function("sum", (sig("values: list -> dyn", member=True),), lists.sum_,
             "The total of ints and doubles: an int when every value is an int, else a double. "
             "sum([]) is 0.",
             "O(n)", "[1, 2, 3].sum()", 6, _LISTS),
    Function("min", (sig("values: list -> dyn", member=True),), lists.min_,
             "The smallest value (numbers or strings; an empty list is an error).",
             "O(n)", "[3, 1.5, 2].min()", 1.5, _LISTS),
    Function("max", (sig("values: list -> dyn", member=True),), lists.max_,
             "The largest value (numbers or strings; an empty list is an error).",
             "O(n)", "['0.26', '0.3'].max()", "0.3", _LISTS),
    Function("union", (sig("a: list, b: list -> list", member=True),), lists.union,
             "The distinct values of `a` then `b`, in order of first appearance.",
             "O(n + m)", "['a', 'b'].union(['b', 'c'])", ["a", "b", "c"], _LISTS),
    Function("intersect", (sig("a: list, b: list -> list", member=True),), lists.intersect,
             "The distinct values of `a` that are also in `b`, in `a`'s order.",
             "O(n + m)", "['a', 'b', 'c'].intersect(['c', 'a'])", ["a", "c"], _LISTS),
    Function("difference", (sig("a: list, b: list -> list", member=True),), lists.difference,
             "The distinct values of `a` that are not in `b`, in `a`'s order.",
             "O(n + m)", "['a', 'b', 'c', 'a'].difference(['b'])", ["a", "c"], _LISTS),
    Function("owners", (sig("ids: list, names: list -> list", member=True),), lists.owners,
             "The names that are a dotted prefix of at least one id: the id equals the name or continues it "
             "with `.` or `::`; a pytest node id's path (`tests/unit/test_a.py::test_x`) counts as its dotted "
             "module. Which test modules (`tests.unit.test_a`) a test report's ids "
             "(`tests.unit.test_a.TestA::test_x`) come from; each name once, in the names' order.",
             "O(total length)", "['tests.unit.test_a::test_x', 'tests.unit.test_b.TestB::test_y']"
                                ".owners(['tests.unit.test_a', 'tests.unit.test_b', 'tests.unit.test_c'])",
             ["tests.unit.test_a", "tests.unit.test_b"], _LISTS),

    Function("keys", (sig("map: map -> list", member=True),), lists.keys,
             "The map's keys, sorted (bools, then ints, then strings): CEL maps have no order, so a "
             "list built from one should not depend on it.",
             "O(n log n)", "{'b': 1, 'a': 2}.keys()", ["a", "b"], _MAPS),
    Function("values", (sig("map: map -> list", member=True),), lists.values,
             "The map's values, in the order of its sorted keys.",
             "O(n log n)", "{'b': 1, 'a': 2}.values()", [2, 1], _MAPS),
    Function("select_keys", (sig("map: map, keys: list -> map", member=True),), lists.select_keys,
             "The entries of the map whose keys are listed; listed keys the map lacks are left out.",
             "O(k)", "{'a': 1, 'b': 2, 'c': 3}.select_keys(['a', 'c', 'z'])", {"a": 1, "c": 3}, _MAPS),
    Function("has_any", (sig("map: map, keys: list -> bool", member=True),), lists.has_any,
             "Whether the map has at least one of the keys.",
             "O(k)", "{'a.py': 1}.has_any(['b.py', 'a.py'])", True, _MAPS),

    Function("dirname", (sig("path: string -> string", member=True),), paths.dirname,
             "The path without its last component ('' for a bare name, '/' for a top-level absolute "
             "path); trailing slashes are ignored.",
             "O(len)", "'src/pkg/mod.py'.dirname()", "src/pkg", _PATHS),
    Function("basename", (sig("path: string -> string", member=True),), paths.basename,
             "The last component of the path; trailing slashes are ignored.",
             "O(len)", "'src/pkg/mod.py'.basename()", "mod.py", _PATHS),
    Function("glob_match", (sig("path: string, pattern: string -> bool", member=True),), paths.glob_match,
             "Whether a .gitignore holding the pattern would make git ignore the path (the same rules as "
             "probes' `include`/`exclude`): a pattern without '/' matches a name at any depth (`*.py`), "
             "one with a leading or inner '/' is anchored at the root (`/setup.py`, `src/*.py`), a match on "
             "a directory covers everything below it, and a trailing '/' matches directories only. `*` any "
             "characters within one component, `?` one character, `[abc]`, `[a-z]`, `[!abc]`, "
             "`[[:digit:]]` one character of (not of) a set, `**` as a whole component any number of "
             "directories (`a/**/b`, `**/x.py`, `dir/**`), `\\` escapes. No wildcard matches '/'; a leading "
             "'.' is not special; a path's own leading '/' is its root. Refused: an empty pattern, a "
             "leading '!' (negation) or '#', an unescaped trailing space.",
             "O(len) (RE2)", "'src/pkg/mod.py'.glob_match('*.py')", True, _PATHS),
    Function("path_under", (sig("path: string, prefix: string -> bool", member=True),), paths.path_under,
             "Whether the path is the prefix or inside it, component by component (`a/bc` is not under "
             "`a/b`), after normalising `.`, `..` and repeated slashes; absolute and relative paths are "
             "never under each other.",
             "O(len)", "'a/bc/x.py'.path_under('a/b')", False, _PATHS),

    Function("version_compare", (sig("a: string, b: string -> int", member=True),), versions.version_compare,
             "-1, 0 or 1 as PEP 440 orders the versions (`1.0 == 1.0.0`; `0.26.0+cu128` is after "
             "`0.26.0`; `2.0rc1` before `2.0`). An invalid version is an error naming it.",
             "O(len)", "'0.26.0'.version_compare('v0.27.0')", -1, _VERSIONS),
    Function("version_valid", (sig("text: string -> bool", member=True),), versions.version_valid,
             "Whether the text is a PEP 440 version (a leading `v` is allowed).",
             "O(len)", "'0.27.0.dev12+g3a1b2c'.version_valid()", True, _VERSIONS),
    Function("version_release", (sig("text: string -> string", member=True),), versions.version_release,
             "The release segment alone: no epoch, pre-, post- or dev-release, or local label.",
             "O(len)", "'v0.26.0rc1+cu128'.version_release()", "0.26.0", _VERSIONS),
    Function("version_matches", (sig("version: string, spec: string -> bool", member=True),),
             versions.version_matches,
             "Whether the version satisfies a PEP 440 specifier set such as `>=2.0,<3` or `==0.26.*`. "
             "Pre-releases inside the range match (the version is a fact, not a candidate to install); "
             "an empty spec matches every version.",
             "O(len)", "'0.26.0+cu128'.version_matches('>=0.26,<0.27')", True, _VERSIONS),
    Function("version_unique", (sig("versions: list -> dyn", member=True),), versions.version_unique,
             "The one version the list names, by PEP 440 equality (`0.26` and `0.26.0` are one; the first "
             "spelling is returned), or null when the list is empty or names two: the version a project's "
             "exact pins and lock agree on. An invalid version is an error naming it.",
             "O(n)", "['0.26.0', '0.26', 'v0.26.0'].version_unique()", "0.26.0", _VERSIONS),

    Function("version_major", (sig("version: string -> int", member=True),), versions.version_major,
             "The first number of the release segment (`v2.1.3` → 2). An invalid version is an error naming it.",
             "O(len)", "'v0.26.3rc1'.version_major()", 0, _VERSIONS),
    Function("version_minor", (sig("version: string -> int", member=True),), versions.version_minor,
             "The second number of the release segment, 0 when the version has none (`2` is `2.0.0` in PEP 440).",
             "O(len)", "'0.26.3rc1'.version_minor()", 26, _VERSIONS),
    Function("version_patch", (sig("version: string -> int", member=True),), versions.version_patch,
             "The third number of the release segment, 0 when the version has none: with the two above, "
             "\"the latest patch of the current major\" is a filter over an index's versions.",
             "O(len)", "['0.26.1', '0.27.0', '0.26.4'].filter(v, v.version_minor() == 26)"
                       ".map(v, v.version_patch()).max()", 4, _VERSIONS),

    Function("requirement", (sig("text: string -> map", member=True),), packages.requirement,
             "A PEP 508 requirement as a map: `name` as written, `normalized_name` (PEP 503), `specifier` "
             "(its clauses sorted and joined by commas; '' for none), `extras` (sorted), `marker` and `url` "
             "(null when absent). Text that is not a requirement is an error naming it.",
             "O(len)", "\"vllm[audio]>=0.26,<0.28; python_version >= '3.10'\".requirement()",
             {"name": "vllm", "normalized_name": "vllm", "specifier": "<0.28,>=0.26", "extras": ["audio"],
              "marker": 'python_version >= "3.10"', "url": None}, _PACKAGES),
    Function("requirements", (sig("texts: list -> list", member=True),), packages.requirements,
             "`requirement` of each string, in order (a `project.dependencies` list as `file.read` gives it); "
             "an item that is not a requirement is an error naming its index.",
             "O(total len)", "['Torch==2.9.0', 'numpy'].requirements().map(r, [r.normalized_name, r.specifier])",
             [["torch", "==2.9.0"], ["numpy", ""]], _PACKAGES),
    Function("normalize_name", (sig("name: string -> string", member=True),), packages.normalize_name,
             "A distribution name as PEP 503 compares it: lower case, each run of `-`, `_` and `.` one `-`.",
             "O(len)", "'Flash_Attn'.normalize_name() == 'flash-attn'", True, _PACKAGES),

    Function("json", (sig("text: string -> dyn"),), jsontext.json_,
             "The JSON document in the text (an HTTP body, a command's stdout), read with the bounds of a "
             "facts file: NaN, Infinity, duplicate keys, numbers longer than 100 characters or outside 64 bits "
             "and nesting deeper than 128 are errors giving the line and column, never a silent value.",
             "O(len)", "json('{\"data\": [{\"id\": \"m\"}]}').data[0].id", "m", _TEXT),
    Function("dotted_under", (sig("text: string, prefix: string -> bool", member=True),), paths.dotted_under,
             "Whether the text is the prefix or continues it after a '.': a Python dotted name inside a "
             "module or class (`vllm.a.b` is under `vllm.a`, `vllm.ab` is not), a version within a release "
             "line (`0.26.1` is under `0.26`, `0.26.10` is not under `0.26.1`). Textual: nothing is "
             "normalised (`0.26` is not under `0.26.0`, nor `v0.26.1` under `0.26`).",
             "O(len)", "'vllm.config.VllmConfig'.dotted_under('vllm.config')", True, _TEXT),

    Function("capture", (sig("text: string, regex: string -> list", member=True),), regex.capture,
             "The groups of the first match of an RE2 regex (a group that did not take part is ''), "
             "the whole match when the regex has no groups, or [] when nothing matches.",
             "O(len) (RE2)", "'vllm==0.26.0'.capture('^([a-z-]+)==(.+)$')", ["vllm", "0.26.0"], _REGEX),
    Function("find_all", (sig("text: string, regex: string -> list", member=True),), regex.find_all,
             "Every non-overlapping match, left to right: group 1 when the regex has groups, else the "
             "whole match.",
             "O(len) (RE2)", "'v0.26.0 and v0.27.0'.find_all('v([0-9.]+)')", ["0.26.0", "0.27.0"], _REGEX),

    Function("failed", (sig("probe: string -> bool"),), factstatus.failed,
             "Whether a probe's fact is missing (its probe failed, was refused or did not run), without "
             "reading it: `failed(facts.gpu)` is written with the fact and compiled to `failed('gpu')`. "
             "A check that only asks whether a fact failed is not UNKNOWN when it did. For a probe with "
             "`for_each`, `failed(facts.p.k)` (or `facts.p['k']`) asks about one element: true when that "
             "element failed or `for_each` gave no such key (docs/language.md, \"Fan-out\").",
             "O(1)", "failed('gpu') ? 'no NVIDIA GPU' : 'GPU present'", "no NVIDIA GPU", _CONTROL),
    Function("error_code", (sig("probe: string -> dyn"),), factstatus.error_code,
             "A probe's error code (`nvml.library_not_found`, `refused.permission`, `not_collected` when "
             "it did not run), or null when its fact was collected: `error_code(facts.gpu)`.",
             "O(1)", "error_code('gpu') == 'not_collected'", True, _CONTROL),
    Function("error_message", (sig("probe: string -> dyn"),), factstatus.error_message,
             "A failed probe's error message, as the fact's error records it (an attestation that does not "
             "match its schema: every problem at file:line:col; a `command`: how it ended and the tail of its "
             "stderr), its code when there is no message, or null when its fact was collected: "
             "`error_message(facts.architecture)`, for a blocker that shows why.",
             "O(1)", "error_message('gpu')", "the probe was not collected in this evaluation", _CONTROL),
    Function("unknown", (sig("reason: string -> dyn"),), unknown,
             "Never returns: the check that evaluates it is UNKNOWN with this reason (never true, never "
             "an evaluation error). Its type is dyn, so it fits where a bool is expected.",
             "O(1)", "[].size() > 0 ? true : unknown('no test report was found')", "no test report was found",
             _CONTROL, outcome="unknown"),
    Function("given", tuple(sig(f"value: {t} -> bool") for t in ("string", "list", "map", "int", "double", "bool",
                                                                  "null")), given,
             "Whether a value is given: neither null nor empty ('', [], {}). A number or bool is given, 0 and "
             "false included. Replaces the hand-written guard `inputs.x != null && inputs.x != ''`: "
             "`given(inputs.x)`.",
             "O(1)", "[given('v0.9.1'), given(''), given(null), given([]), given({'a': 1}), given(0)]",
             [True, False, False, False, True, True], _GIVEN),
)


def _guarded(fn: Function) -> Callable[..., Any]:
    """The implementation as the runtime calls it: results checked against the bounds, and no
    Python exception text (a KeyError's bare key, a TypeError's wording) ever shown to a user."""
    impl, name = fn.impl, fn.name

    def call(*args: Any) -> Any:
        try:
            result = impl(*args)
        except FunctionError:
            raise
        except RecursionError:
            raise FunctionError(f"{name}: the value is nested too deeply") from None
        except Exception as exc:
            raise FunctionError(f"{name}: internal error ({type(exc).__name__}); this is a policyrun "
                                "defect, please report it with the expression") from None
        check_bounds(name, result)
        return result

    return call


def declarations() -> list[Any]:
    """The library as `cel.FunctionDecl`s for `cel.NewEnv(functions=...)`."""
    from cel_expr_python import cel

    dyn = cel.Type.DYN
    types = {"list": cel.Type.List(dyn), "map": cel.Type.Map(dyn, dyn), "string": cel.Type.STRING,
             "int": cel.Type.INT, "double": cel.Type.DOUBLE, "bool": cel.Type.BOOL, "null": cel.Type.NULL,
             "dyn": dyn}
    decls = []
    for fn in LIBRARY:
        impl = _guarded(fn)
        overloads = []
        for ov in fn.overloads:
            params = [types[p] for p in ov.params]
            sig_id = "_".join(ov.params)
            overloads.append(cel.Overload(f"{fn.name}_{sig_id}", types[ov.result], params, impl=impl))
            if ov.member:
                overloads.append(cel.Overload(f"{fn.name}_member_{sig_id}", types[ov.result], params,
                                              is_member=True, impl=impl))
        decls.append(cel.FunctionDecl(fn.name, overloads))
    return decls
