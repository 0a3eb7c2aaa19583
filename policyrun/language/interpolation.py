"""`${ <cel> }` interpolation: templates split into text and expressions, values rendered as text.

Probe parameters (`with:`), messages, next actions and verdict summaries are templates; a string
that is exactly one `${...}` keeps the expression's type. Kept apart from compiling and
evaluating CEL (policyrun.language.expr), which this calls for each expression: finding the
expressions of a template and rendering a value are text work that lint, the derive graph and the
interpreter's messages need without evaluating anything.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from policyrun.language.expr import ExprError, compile_expr, evaluate


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
        parts.append(bounded_text(render_value(outcome.value)) if outcome.ok
                     else f"<?{seg.text.strip()}: unavailable>")
    return "".join(parts)


def bounded_text(text: str) -> str:
    """Text for a message, cut at limits.MESSAGE_VALUE_CHARS: a message quoting a huge value must
    not make the trace too large for the commands that read it."""
    from policyrun.limits import MESSAGE_VALUE_CHARS

    if len(text) <= MESSAGE_VALUE_CHARS:
        return text
    return f"{text[:MESSAGE_VALUE_CHARS]}… ({len(text)} characters; cut at {MESSAGE_VALUE_CHARS})"
