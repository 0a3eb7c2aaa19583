"""CEL conditions and `${ <cel> }` interpolation, behind one small interface.

Everything the rest of policyrun knows about CEL is here: compile once (type-checked against
the declared variables), evaluate, and list the variable paths an expression reads. The paths
serve three consumers: lint (undeclared references), the interpreter (a read of a missing fact
is UNKNOWN, never false) and the trace (the values each check saw).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from typing import Any

VARIABLES = ("facts", "inputs", "vars", "mode", "phases")

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
    reads: tuple[str, ...]  # dotted paths rooted at one of VARIABLES, in order of appearance
    roots: frozenset[str] = frozenset()
    facts: frozenset[str] = frozenset()  # probe ids read as `facts.<id>...`
    reads_all_facts: bool = False  # `facts` itself is read (e.g. `facts[x]`): bind every fact

    def fact_ids(self) -> frozenset[str]:
        """Probe ids whose facts this expression reads (`facts.<id>...`)."""
        return self.facts


@dataclass(frozen=True)
class Outcome:
    value: Any = None
    error: str | None = None  # evaluation error text (no such key, no matching overload, ...)

    @property
    def ok(self) -> bool:
        return self.error is None


@cache
def _env() -> Any:
    from cel_expr_python import cel
    from cel_expr_python.ext import ext_math, ext_optional, ext_strings

    dyn_map = cel.Type.Map(cel.Type.STRING, cel.Type.DYN)
    variables = {name: dyn_map for name in VARIABLES}
    variables["mode"] = cel.Type.STRING
    from policyrun.functions import declarations

    return cel.NewEnv(variables=variables,
                      extensions=[ext_strings.ExtStrings(), ext_optional.ExtOptional(), ext_math.ExtMath()],
                      functions=declarations())


_CEL_ERROR = re.compile(r"<input>:(\d+):(\d+): (.*?)(?:\n|$)")


def _parse_cel_error(text: str) -> ExprError:
    m = _CEL_ERROR.search(text)
    if not m:
        return ExprError("X001", text.strip().splitlines()[0] if text.strip() else "invalid expression")
    line, col, msg = int(m.group(1)), int(m.group(2)), m.group(3).strip()
    if msg.startswith("Syntax error:"):
        return ExprError("X001", msg, line, col)
    if msg.startswith("undeclared reference"):
        msg = msg.replace(" (in container '')", "")
        return ExprError("X003", f"{msg}; conditions may read only {', '.join(VARIABLES)}", line, col)
    return ExprError("X002", f"type error: {msg}", line, col)


@cache
def compile_expr(source: str) -> Compiled:
    """Compile and type-check; raises ExprError with the position inside `source`."""
    if not source.strip():
        raise ExprError("X001", "empty expression")
    try:
        program = _env().compile(source)
    except RuntimeError as exc:
        raise _parse_cel_error(str(exc)) from None
    reads = tuple(dict.fromkeys(_reads(source)))
    return Compiled(source, program, program.return_type().name(), reads,
                    roots=frozenset(p.split(".", 1)[0] for p in reads),
                    facts=frozenset(p.split(".")[1] for p in reads if p.startswith("facts.")),
                    reads_all_facts="facts" in reads)


def compile_condition(source: str) -> Compiled:
    """Compile an expression that must produce a bool."""
    compiled = compile_expr(source)
    if compiled.result_type not in ("BOOL", "DYN"):
        raise ExprError("X002", f"a condition must be a bool, but this expression is {compiled.result_type}")
    return compiled


def evaluate(compiled: Compiled, variables: Mapping[str, Any]) -> Outcome:
    """Evaluate with only the variables (and facts) the expression reads bound.

    Binding only what is read keeps a check's cost independent of the snapshot's size: the CEL
    runtime converts every bound Python value, so binding 50,000 facts per check would dominate.
    """
    data: dict[str, Any] = {}
    for root in VARIABLES:
        if root not in compiled.roots:
            continue
        value = variables.get(root, "" if root == "mode" else {})
        if root == "facts" and not compiled.reads_all_facts:
            value = {k: value[k] for k in compiled.facts if k in value}
        data[root] = value
    try:
        result = compiled.program.eval(data=data)
    except RuntimeError as exc:
        return Outcome(error=str(exc))
    if result.type().name() == "ERROR":
        return Outcome(error=str(result.value()))
    return Outcome(value=result.plain_value())


def lookup(variables: Mapping[str, Any], path: str) -> Any:
    """The value at a dotted path, or `MISSING`."""
    node: Any = variables
    for part in path.split("."):
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


# --- reading paths out of CEL source ---------------------------------------------------------

_TOKEN = re.compile(r"""
    (?P<ws>\s+)
  | (?P<string>[rRbB]{0,2}(?:'''(?:.|\n)*?'''|\"\"\"(?:.|\n)*?\"\"\"|'(?:\\.|[^'\\\n])*'|"(?:\\.|[^"\\\n])*"))
  | (?P<ident>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<num>\d+(?:\.\d+)?(?:[eE][+-]?\d+)?[uU]?)
  | (?P<op>.)
""", re.VERBOSE)


def _tokens(source: str) -> Iterator[tuple[str, str]]:
    for m in _TOKEN.finditer(source):
        kind = m.lastgroup or "op"
        if kind != "ws":
            yield kind, m.group()


def _string_value(literal: str) -> str | None:
    body = literal.lstrip("rRbB")
    if body[:3] in ("'''", '"""'):
        return body[3:-3]
    inner = body[1:-1]
    return None if "\\" in inner else inner


def _reads(source: str) -> Iterator[str]:
    toks = list(_tokens(source))
    i = 0
    while i < len(toks):
        kind, text = toks[i]
        prev = toks[i - 1][1] if i else ""
        if kind == "ident" and text in VARIABLES and prev != ".":
            parts = [text]
            j = i + 1
            while j < len(toks):
                if toks[j][1] == "." and j + 1 < len(toks) and toks[j + 1][0] == "ident":
                    # `.name(` is a method call on the path so far, not a field.
                    if j + 2 < len(toks) and toks[j + 2][1] == "(":
                        break
                    parts.append(toks[j + 1][1])
                    j += 2
                elif toks[j][1] == "." and j + 2 < len(toks) and toks[j + 1][1] == "?" and toks[j + 2][0] == "ident":
                    parts.append(toks[j + 2][1])  # optional field selection `a.?b`
                    j += 3
                elif (toks[j][1] == "[" and j + 2 < len(toks) and toks[j + 1][0] == "string"
                      and toks[j + 2][1] == "]" and _string_value(toks[j + 1][1]) is not None):
                    parts.append(_string_value(toks[j + 1][1]) or "")
                    j += 3
                else:
                    break
            yield ".".join(parts)
            i = j
        else:
            i += 1


# --- `${ <cel> }` interpolation --------------------------------------------------------------

@dataclass(frozen=True)
class Segment:
    text: str
    is_expr: bool
    offset: int  # offset of `text` inside the template (for error columns)


def split_template(template: str) -> list[Segment]:
    """Split a string into literal and `${...}` parts; `$${` is a literal `${`."""
    out: list[Segment] = []
    buf: list[str] = []
    buf_start = 0
    i = 0
    n = len(template)
    while i < n:
        if template.startswith("$${", i):
            buf.append("${")
            i += 3
            continue
        if template.startswith("${", i):
            end = _closing_brace(template, i + 2)
            if end < 0:
                raise ExprError("X004", "unterminated `${`: add the closing `}`", 1, i + 1)
            if buf:
                out.append(Segment("".join(buf), False, buf_start))
                buf = []
            out.append(Segment(template[i + 2:end], True, i + 2))
            i = end + 1
            buf_start = i
            continue
        buf.append(template[i])
        i += 1
    if buf:
        out.append(Segment("".join(buf), False, buf_start))
    return out


def _closing_brace(text: str, start: int) -> int:
    depth = 0
    quote = ""
    i = start
    while i < len(text):
        c = text[i]
        if quote:
            if c == "\\":
                i += 1
            elif c == quote:
                quote = ""
        elif c in "'\"":
            quote = c
        elif c == "{":
            depth += 1
        elif c == "}":
            if depth == 0:
                return i
            depth -= 1
        i += 1
    return -1


def has_template(value: Any) -> bool:
    if isinstance(value, str):
        return "${" in value
    if isinstance(value, Mapping):
        return any(has_template(v) for v in value.values())
    if isinstance(value, list):
        return any(has_template(v) for v in value)
    return False


def template_exprs(value: Any) -> Iterator[tuple[str, int]]:
    """Every `${...}` expression inside a (nested) value, with its offset in its string."""
    if isinstance(value, str):
        if "${" in value:
            for seg in split_template(value):
                if seg.is_expr:
                    yield seg.text, seg.offset
    elif isinstance(value, Mapping):
        for v in value.values():
            yield from template_exprs(v)
    elif isinstance(value, list):
        for v in value:
            yield from template_exprs(v)


class InterpolationError(Exception):
    def __init__(self, expression: str, message: str) -> None:
        super().__init__(message)
        self.expression = expression
        self.message = message


def render_value(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        return str(value)
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def interpolate(value: Any, variables: Mapping[str, Any]) -> Any:
    """Interpolate every string in a nested value.

    A string that is exactly one `${...}` keeps the expression's type (a list stays a list);
    otherwise the parts are rendered and joined. Raises InterpolationError when an expression
    cannot be evaluated (for example, it reads a fact that is missing).
    """
    if isinstance(value, Mapping):
        return {k: interpolate(v, variables) for k, v in value.items()}
    if isinstance(value, list):
        return [interpolate(v, variables) for v in value]
    if not isinstance(value, str) or "${" not in value:
        return value
    segments = split_template(value)
    results: list[Any] = []
    for seg in segments:
        if not seg.is_expr:
            results.append(seg.text)
            continue
        outcome = evaluate(compile_expr(seg.text.strip()), variables)
        if not outcome.ok:
            raise InterpolationError(seg.text.strip(), outcome.error or "evaluation error")
        results.append(outcome.value)
    if len(segments) == 1 and segments[0].is_expr:
        return results[0]
    return "".join(render_value(r) for r in results)


def interpolate_text(template: str, variables: Mapping[str, Any]) -> str:
    """Interpolate a message; an expression that cannot be evaluated renders as `<?expr: why>`
    so a blocker message is never lost because one of its values is missing."""
    parts: list[str] = []
    for seg in split_template(template):
        if not seg.is_expr:
            parts.append(seg.text)
            continue
        try:
            outcome = evaluate(compile_expr(seg.text.strip()), variables)
        except ExprError as exc:
            parts.append(f"<?{seg.text.strip()}: {exc.message}>")
            continue
        parts.append(render_value(outcome.value) if outcome.ok else f"<?{seg.text.strip()}: unavailable>")
    return "".join(parts)
