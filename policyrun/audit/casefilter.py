"""`policyrun test -k EXPR`: which cases run, by their names (pytest's -k, kept small).

A term is text a case's name contains, ignoring case; words written next to each other are one
term (`-k "lessons date"`), and quotes keep a term that holds a keyword or a parenthesis
(`-k "'not a tag'"`). Terms combine with `not`, `and`, `or` (in that order of precedence) and
parentheses: `-k "final and not lessons"`.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from policyrun.errors import UsageError

Predicate = Callable[[str], bool]
_KEYWORDS = ("and", "or", "not")
_TOKEN = re.compile(r"\s*(?:(\()|(\))|'([^']*)'|\"([^\"]*)\"|([^\s()'\"]+))")


def parse(expression: str) -> Predicate:
    """A predicate over case names; a malformed expression is a UsageError saying where."""
    tokens = _tokens(expression)
    if not tokens:
        raise _error(expression, "is empty; give text that the names of the cases to run contain")
    parser = _Parser(expression, tokens)
    predicate = parser.disjunction()
    if parser.pos < len(tokens):
        raise _error(expression, f"has an unexpected {tokens[parser.pos][1]!r}")
    return predicate


def _tokens(expression: str) -> list[tuple[str, str]]:
    """(kind, text) pairs: kind is '(' or ')', a keyword, or 'term' (adjacent words joined by a space)."""
    out: list[tuple[str, str]] = []
    pos = 0
    while pos < len(expression.rstrip()):
        m = _TOKEN.match(expression, pos)
        if m is None:  # only an unclosed quote is left
            column = len(expression) - len(expression[pos:].lstrip()) + 1
            raise _error(expression, f"has an unclosed quote at column {column}")
        pos = m.end()
        opened, closed, single, double, word = m.groups()
        if opened or closed:
            out.append((opened or closed, opened or closed))
        elif word is not None and word.lower() in _KEYWORDS:
            out.append((word.lower(), word))
        else:
            text = word if word is not None else (single if single is not None else double)
            if out and out[-1][0] == "term" and word is not None and single is None and double is None:
                out[-1] = ("term", f"{out[-1][1]} {text}")
            else:
                out.append(("term", text))
    return out


class _Parser:
    def __init__(self, expression: str, tokens: list[tuple[str, str]]) -> None:
        self.expression = expression
        self.tokens = tokens
        self.pos = 0

    def _peek(self) -> str | None:
        return self.tokens[self.pos][0] if self.pos < len(self.tokens) else None

    def disjunction(self) -> Predicate:
        parts = [self.conjunction()]
        while self._peek() == "or":
            self.pos += 1
            parts.append(self.conjunction())
        return parts[0] if len(parts) == 1 else (lambda name: any(p(name) for p in parts))

    def conjunction(self) -> Predicate:
        parts = [self.negation()]
        while self._peek() == "and":
            self.pos += 1
            parts.append(self.negation())
        return parts[0] if len(parts) == 1 else (lambda name: all(p(name) for p in parts))

    def negation(self) -> Predicate:
        kind = self._peek()
        if kind == "not":
            self.pos += 1
            inner = self.negation()
            return lambda name: not inner(name)
        if kind == "(":
            self.pos += 1
            inner = self.disjunction()
            if self._peek() != ")":
                raise _error(self.expression, "has a '(' without its closing ')'")
            self.pos += 1
            return inner
        if kind == "term":
            text = self.tokens[self.pos][1].casefold()
            self.pos += 1
            return lambda name: text in name.casefold()
        found = "its end" if kind is None else repr(self.tokens[self.pos][1])
        raise _error(self.expression, f"expects text, 'not' or '(' but finds {found}")


def _error(expression: str, why: str) -> UsageError:
    return UsageError(f"-k {expression!r} {why} (terms are text in case names, combined with not, and, or, "
                      "parentheses; quote a term that holds one of these)", code="U010")
