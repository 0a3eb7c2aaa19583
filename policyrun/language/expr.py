"""CEL conditions, behind one small interface.

Everything the rest of policyrun knows about CEL is here: compile once (type-checked against
the declared variables, with the function library of `policyrun.language.functions`), evaluate, classify
evaluation errors, and list the variable paths an expression reads. The paths come from the
checked syntax tree the runtime itself produced (`policyrun.language.celast`), and serve three consumers:
lint (undeclared references, fact paths checked against probe fact schemas), the interpreter (a
read of a missing fact is UNKNOWN, never false) and the trace (the values each check saw).
`${ <cel> }` templates are split and rendered by policyrun.language.interpolation.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache, cached_property
from typing import Any, Protocol

from policyrun.language.celast import CheckedAst, PathRead, parse_serialized, variable_reads
from policyrun.language.celsyntax import explain as explain_syntax
from policyrun.language.functions import LIMIT_MARKER, UNKNOWN_MARKER

# `violations` is bound only while an evidence's own check and message are evaluated, `item` only
# while the `with:` and `key:` of a probe with `for_each` are resolved for one element. `baseline`
# is an earlier evaluation (`evaluate --baseline DIR`), an empty map without one. `hosts` maps a
# host-scoped probe id to {host label: value} (docs/semantics.md, "Hosts").
VARIABLES = ("facts", "inputs", "vars", "mode", "phases", "derived", "baseline", "violations", "item", "hosts")
_CONTEXTUAL = ("violations", "item")
_ROOTS = frozenset(VARIABLES)

_MISSING = object()


class ExprError(Exception):
    """A CEL syntax or type error. `line`/`column` are 1-based inside the expression text."""

    def __init__(self, code: str, message: str, line: int = 1, column: int = 1) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.line = line
        self.column = column


@dataclass(frozen=True)
class Compiled:
    source: str
    program: Any
    result_type: str
    serialized: bytes
    reads: tuple[str, ...]  # dotted paths rooted at one of VARIABLES, in source order
    read_parts: tuple[tuple[str, ...], ...]  # the same paths as parts (keys may contain dots)
    roots: frozenset[str] = frozenset()
    facts: frozenset[str] = frozenset()  # probe ids read as `facts.<id>...`
    derived: frozenset[str] = frozenset()  # derived ids read as `derived.<id>...`
    reads_all_facts: bool = False  # `facts[x]` with a computed key: bind every fact
    fact_status: frozenset[str] = frozenset()  # probe ids asked about with failed()/error_code()
    # failed(facts.p.k) / error_code(facts.p['k']): (probe id, element key) of fan-out elements asked about
    element_status: frozenset[tuple[str, str]] = frozenset()
    strict_facts: frozenset[str] = frozenset()  # probe ids tested with has(facts.x): must be present
    # (probe id, key) tested with has(facts.p.k): a fan-out's element that must have been collected
    strict_elements: frozenset[tuple[str, str]] = frozenset()

    def fact_ids(self) -> frozenset[str]:
        """Probe ids whose facts this expression reads (`facts.<id>...`)."""
        return self.facts

    @cached_property
    def sorted_facts(self) -> list[str]:
        """The probe ids backing this expression (read, or asked about with failed()), sorted;
        computed once: a check's trace record lists them. Not to be changed by the caller."""
        return sorted(self.facts | self.fact_status)

    @cached_property
    def ast(self) -> CheckedAst:
        return parse_serialized(self.serialized)

    @cached_property
    def path_reads(self) -> list[PathRead]:
        """Every path read with its syntax-tree node (for positions)."""
        return variable_reads(self.ast, _ROOTS)

    def column_of(self, read: str) -> tuple[int, int] | None:
        """(line, column) inside the source where the first read of `read` (or its prefix) starts."""
        for r in self.path_reads:
            if r.path == read or r.path.startswith(read + "."):
                return self.ast.location(r.root_id)
        return None


@dataclass(slots=True)  # not frozen: built once per expression evaluated, where frozen init costs
class Outcome:
    value: Any = None
    error: str | None = None  # evaluation error text, cleaned of the runtime's status prefixes
    # What kind of error: "missing_key" (a key or field that is not there), "unknown" (the rulebook
    # called unknown("why")), "limit" (a documented size bound), "budget" (the runtime's
    # iteration budget), "error" (anything else: a type error, a bad argument).
    kind: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


@cache
def _env() -> Any:
    from cel_expr_python import cel
    from cel_expr_python.ext import ext_math, ext_optional, ext_strings

    from policyrun.language.functions import declarations

    dyn_map = cel.Type.Map(cel.Type.STRING, cel.Type.DYN)
    variables = {name: dyn_map for name in VARIABLES}
    variables["mode"] = cel.Type.STRING
    variables["violations"] = cel.Type.List(cel.Type.DYN)
    variables["item"] = cel.Type.DYN
    return cel.NewEnv(variables=variables,
                      extensions=[ext_strings.ExtStrings(), ext_optional.ExtOptional(), ext_math.ExtMath()],
                      functions=declarations())


_CEL_ERROR = re.compile(r"<input>:(\d+):(\d+): (.*?)(?:\n|$)")


def _parse_cel_error(text: str) -> ExprError:
    m = _CEL_ERROR.search(text)
    if not m:
        return ExprError("X001", text.strip().splitlines()[0] if text.strip() else "invalid expression")
    line, col, msg = int(m.group(1)), int(m.group(2)), m.group(3).strip().removesuffix("[INVALID_ARGUMENT]").strip()
    if msg.startswith("Syntax error:"):
        words = explain_syntax(msg.removeprefix("Syntax error:"))
        return ExprError("X001", f"syntax error in the expression: {words}", line, col)
    if msg.startswith("undeclared reference"):
        msg = msg.replace(" (in container '')", "")
        return ExprError("X003", f"{msg}; conditions may read only {', '.join(v for v in VARIABLES if v not in _CONTEXTUAL)}", line, col)
    return ExprError("X002", f"type error: {msg}", line, col)


def caret(source: str, line: int, column: int) -> str:
    """The line of `source` that holds (line, column), and a `^` under the column, each indented
    two spaces: shown under a message about an expression."""
    lines = source.splitlines() or [""]
    text = lines[min(max(line, 1), len(lines)) - 1]
    return f"  {text}\n  {' ' * (max(column, 1) - 1)}^"


# Expressions longer than this are refused at compile time: the runtime's parser recurses, and a
# rulebook is policy text a person reads, not generated data.
MAX_EXPRESSION_CHARS = 20_000


@cache
def compile_expr(source: str) -> Compiled:
    """Compile and type-check; raises ExprError with the position inside `source`."""
    if not source.strip():
        raise ExprError("X001", "empty expression")
    if len(source) > MAX_EXPRESSION_CHARS:
        raise ExprError("X005", f"expression of {len(source)} characters; the limit is {MAX_EXPRESSION_CHARS} "
                                "(move the computation into `derive` values or a probe)")
    offered = _offered.pop(source, None)
    if offered is not None:
        loaded = compiled_from_record(source, offered)
        if loaded is not None:
            return loaded
    try:
        program = _env().compile(source)
    except RuntimeError as exc:
        raise _parse_cel_error(str(exc)) from None
    serialized = program.serialize()
    tree = parse_serialized(serialized)
    rewritten, status, elements = _fact_status_sugar(source, tree)
    if rewritten != source:
        # failed(facts.x) / error_code(facts.x) ask about a fact without reading it: compiled as
        # failed('x'), so the argument is never evaluated and is not a read of facts.x.
        program = _env().compile(rewritten)
        tree = parse_serialized(program.serialize())
    reads = variable_reads(tree, _ROOTS)
    parts = tuple(dict.fromkeys(r.parts for r in reads))
    paths = tuple(".".join(p) for p in parts)
    compiled = Compiled(source, program, program.return_type().name(), serialized, paths, parts,
                        roots=frozenset(p[0] for p in parts),
                        facts=frozenset(p[1] for p in parts if p[0] == "facts" and len(p) > 1),
                        derived=frozenset(p[1] for p in parts if p[0] == "derived" and len(p) > 1),
                        reads_all_facts=any(r.parts == ("facts",) for r in reads),
                        fact_status=frozenset(status), element_status=frozenset(elements),
                        strict_facts=frozenset(r.parts[1] for r in reads if len(r.parts) == 2 and r.parts[0] == "facts"
                                               and r.test_only),
                        strict_elements=frozenset((r.parts[1], r.parts[2]) for r in reads if len(r.parts) == 3
                                                  and r.parts[0] == "facts" and r.test_only))
    if rewritten == source:
        # `ast` is the tree of `serialized`, just decoded: keep it rather than decode it again
        # (lint's type and position checks read it for every expression).
        compiled.__dict__["ast"] = tree
        compiled.__dict__["path_reads"] = reads
    return compiled


# Compiled expressions stored on disk (policyrun.language.compilecache), by source text: compile_expr loads
# one instead of compiling it.
_offered: dict[str, Any] = {}


def offer_compiled(records: Mapping[str, Any]) -> None:
    """Make stored compiled expressions (compilecache.record_of) available to compile_expr."""
    _offered.update(records)


def compiled_from_record(source: str, record: Mapping[str, Any]) -> Compiled | None:
    """A compiled expression loaded back from compilecache.record_of's data, or None when it does
    not load (then the expression is compiled as usual)."""
    import base64

    try:
        serialized = base64.b64decode(record["program"])
        program = _env().deserialize(serialized)
        parts = tuple(tuple(str(x) for x in p) for p in record["read_parts"])
        tree = serialized if record["ast"] is None else base64.b64decode(record["ast"])
        return Compiled(source, program, str(record["result_type"]), tree,
                        tuple(".".join(p) for p in parts), parts,
                        roots=frozenset(p[0] for p in parts),
                        facts=frozenset(p[1] for p in parts if p[0] == "facts" and len(p) > 1),
                        derived=frozenset(p[1] for p in parts if p[0] == "derived" and len(p) > 1),
                        reads_all_facts=bool(record["reads_all_facts"]),
                        fact_status=frozenset(str(x) for x in record["fact_status"]),
                        element_status=frozenset((str(a), str(b)) for a, b in record["element_status"]),
                        strict_facts=frozenset(str(x) for x in record["strict_facts"]),
                        strict_elements=frozenset((str(a), str(b)) for a, b in record["strict_elements"]))
    except (KeyError, TypeError, ValueError, RuntimeError):
        return None


_STATUS_FUNCTIONS = ("failed", "error_code", "error_message")
_STEP = r"(?:\.\s*([A-Za-z_][A-Za-z0-9_]*)|\[\s*(['\"])([^'\"\\]*)\{n}\s*\])"
_FACT_ARG = re.compile(r"facts\s*" + _STEP.replace("{n}", "2") + r"(?:\s*" + _STEP.replace("{n}", "5") + ")?")


def element_id(probe: str, key: str) -> str:
    """How failed()/error_code() name one element of a fan-out probe: `p[key]` (probe ids are
    identifiers, so the first `[` ends the id whatever the key holds)."""
    return f"{probe}[{key}]"


def _fact_status_sugar(source: str, tree: CheckedAst) -> tuple[str, set[str], set[tuple[str, str]]]:
    """The source with each `failed(facts.x)` / `error_code(facts.x)` argument replaced by 'x' (and
    `failed(facts.x.k)` / `failed(facts.x['k'])`, one element of a fan-out, by 'x[k]'), the probe
    ids so asked about and the elements. Only arguments the syntax tree shows to be exactly a fact
    path are rewritten (a string that looks like one is not)."""
    spans: list[tuple[int, int, str]] = []
    ids: set[str] = set()
    elements: set[tuple[str, str]] = set()
    stack = [tree.root]
    while stack:
        node = stack.pop()
        stack.extend(node.children())
        if node.kind != "call" or node.name not in _STATUS_FUNCTIONS or node.target is not None \
                or len(node.args) != 1:
            continue
        reads = variable_reads(CheckedAst(node.args[0], tree.positions, tree.line_offsets), frozenset({"facts"}))
        if len(reads) != 1 or len(reads[0].parts) not in (2, 3) or reads[0].node_id != node.args[0].id:
            continue
        start = tree.offset(reads[0].root_id)
        m = _FACT_ARG.match(source, start)
        parts = reads[0].parts
        probe = parts[1]
        if m is None or (m.group(1) or m.group(3)) != probe:
            continue
        if len(parts) == 3:
            if m.group(4) is None and m.group(6) is None or (m.group(4) or m.group(6)) != parts[2]:
                continue
            spans.append((m.start(), m.end(), element_id(probe, parts[2])))
            elements.add((probe, parts[2]))
        else:
            spans.append((m.start(), m.end(), probe))
        ids.add(probe)
    for start, end, name in sorted(spans, reverse=True):
        source = source[:start] + repr(name) + source[end:]
    return source, ids, elements


def compile_condition(source: str) -> Compiled:
    """Compile an expression that must produce a bool."""
    compiled = compile_expr(source)
    if compiled.result_type not in ("BOOL", "DYN"):
        raise ExprError("X002", f"a condition must be a bool, but this expression is {compiled.result_type}")
    return compiled


def bind(compiled: Compiled, variables: Mapping[str, Any]) -> dict[str, Any]:
    """The variables an expression reads, and only those facts and derived values it reads.

    Binding only what is read keeps an expression's cost independent of the snapshot's size: the
    CEL runtime converts every bound Python value.
    """
    data: dict[str, Any] = {}
    for root in compiled.roots:
        value = variables.get(root, "" if root == "mode" else ([] if root == "violations" else {}))
        if root == "facts" and not compiled.reads_all_facts:
            value = {k: value[k] for k in compiled.facts if k in value}
        elif root == "derived":
            value = {k: value[k] for k in compiled.derived if k in value}
        data[root] = value
    return data


class _Guard(Protocol):
    def enter(self, source: str) -> str | None: ...
    def leave(self) -> None: ...


_guard: _Guard | None = None
_refusals = 0  # expressions the guard refused in this process (see refusals())


def set_guard(guard: _Guard | None) -> None:
    """Install the watcher of expression evaluation (policyrun.language.guard, in its evaluation child)."""
    global _guard
    _guard = guard


def refusals() -> int:
    """How many evaluations the guard refused (an expression past its time or memory limit) in this
    process: an evaluation of several runs in one child (engine.evaluate_all) checks it, because a
    refusal then holds for every run, not only the one whose facts made the expression slow."""
    return _refusals


def guard_installed() -> bool:
    """Whether expressions are being evaluated under the guard (in its evaluation child)."""
    return _guard is not None


def evaluate(compiled: Compiled, variables: Mapping[str, Any], activation: Any = None) -> Outcome:
    """Evaluate with only what the expression reads bound, or against a prepared activation
    (`make_activation`) whose conversions are shared by every expression that uses it."""
    guard = _guard
    if guard is not None:
        refused = guard.enter(compiled.source)
        if refused is not None:
            global _refusals
            _refusals += 1
            return Outcome(error=refused, kind="limit")
    try:
        if activation is not None:
            result = compiled.program.eval(activation)
        else:
            result = compiled.program.eval(data=bind(compiled, variables))
    except RuntimeError as exc:
        return _error_outcome(str(exc))
    finally:
        if guard is not None:
            guard.leave()
    if compiled.result_type == "BOOL":
        # Most conditions: an error's plain value is its message (a string), so a bool is a result,
        # and asking the value's type (as below) is not needed.
        try:
            plain = result.plain_value()
        except (TypeError, AssertionError):
            plain = None
        if type(plain) is bool:
            return Outcome(value=plain)
    if result.type().name() == "ERROR":
        return _error_outcome(str(result.value()))
    try:
        value = result.plain_value()
    except (TypeError, AssertionError):  # an optional or type value that has no plain form
        return Outcome(error="the expression produced a value with no plain form (an optional? add "
                             ".orValue(...))", kind="error")
    kind = type(value)
    return Outcome(value=canonical(value) if kind is dict or kind is list else value)


def canonical(value: Any) -> Any:
    """The value with every map's keys in sorted order. The runtime returns maps in hash order,
    which differs between conversions of the same map; traces must be byte-for-byte stable."""
    kind = type(value)
    if kind is dict:
        items = sorted(value.items(), key=lambda kv: (type(kv[0]).__name__, kv[0]))
        return {k: canonical(v) for k, v in items}
    if kind is list:
        return [canonical(v) if type(v) in (dict, list) else v for v in value]
    return value


def make_activation(variables: Mapping[str, Any]) -> Any:
    """One binding shared by many evaluations: the runtime converts each variable on first use
    and keeps the result, so a fact read by a hundred checks is converted once. The variables
    must not change afterwards (the conversion is a snapshot)."""
    return _env().Activation(data=dict(variables))


_STATUS_PREFIX = re.compile(r"^(?:[A-Z_]+: )+")
_NOT_FOUND = re.compile(r'(?:Key not found in map|No such key)\s*:?\s*"?(.*?)"?\s*(?:\[[A-Z_]+\])?$')


def _error_outcome(text: str) -> Outcome:
    text = _STATUS_PREFIX.sub("", text.strip())
    text = re.sub(r"\s*\[[A-Z_]+\]$", "", text)
    if UNKNOWN_MARKER in text:
        return Outcome(error=text.split(UNKNOWN_MARKER, 1)[1].strip(), kind="unknown")
    if LIMIT_MARKER in text:
        return Outcome(error=f"hit a size bound: {text.split(LIMIT_MARKER, 1)[1].strip()}", kind="limit")
    if "Iteration budget exceeded" in text:
        return Outcome(error="iterates past the runtime's budget of 10,000 comprehension steps; compute it with "
                             "library functions (group_by, index_by, inner_join, where) in `derive` instead of nested "
                             "comprehensions", kind="budget")
    found = _NOT_FOUND.search(text)
    if found is not None:
        return Outcome(error=f'no key "{found.group(1)}"', kind="missing_key")
    return Outcome(error=text, kind="error")


def lookup(variables: Mapping[str, Any], path: str | tuple[str, ...]) -> Any:
    """The value at a dotted path (or a tuple of parts), or `MISSING`."""
    node: Any = variables
    for part in (path.split(".") if isinstance(path, str) else path):
        # Exact type checks: facts are JSON data (dict/list), and ABC isinstance checks are
        # measurably slow on the per-check hot path.
        kind = type(node)
        if kind is dict or (kind is not list and isinstance(node, Mapping)):
            if part not in node:
                return _MISSING
            node = node[part]
        elif kind is list and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return _MISSING
    return node


def is_missing(value: Any) -> bool:
    return value is _MISSING
