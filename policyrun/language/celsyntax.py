"""CEL syntax errors in words.

The CEL parser (ANTLR, inside cel-expr-python) reports what its grammar wanted: "mismatched input
')' expecting {'[', '{', '(', '.', '-', '!', 'true', ..., IDENTIFIER}". A policy author needs what
is wrong with the expression: "unexpected ')' — an operand is missing before it". `explain` turns
the parser's five message shapes into such sentences; a message of another shape is passed on.
"""

from __future__ import annotations

import re

# Tokens that can start an operand: when the parser expects one of these, a value is missing.
_OPERAND = frozenset({"'['", "'{'", "'('", "'.'", "'-'", "'!'", "'true'", "'false'", "'null'", "NUM_FLOAT",
                      "NUM_INT", "NUM_UINT", "STRING", "BYTES", "IDENTIFIER"})
_CLOSERS = {")": "(", "]": "[", "}": "{"}
_WORD_OPERATORS = {"and": "&&", "or": "||", "not": "!"}
# Characters some other language has as operators, and what CEL writes instead.
_STRAY = {"=": "'=' alone is not an operator: write == to compare (CEL has no assignment, === or !==)",
          "&": "'&' is not an operator: write && for 'and'",
          "|": "'|' is not an operator: write || for 'or'",
          "^": "'^' is not an operator (CEL has no bitwise or power operators)",
          "#": "'#' is not part of CEL (an expression has no comments)",
          "`": "'`' is not a quote in CEL: write strings in '...' or \"...\""}
_RESERVED = frozenset({"as", "break", "const", "continue", "else", "for", "function", "if", "import", "let",
                       "loop", "package", "namespace", "return", "var", "void", "while", "in", "true", "false",
                       "null"})

_MISMATCH = re.compile(r"(?:mismatched|extraneous) input '(?P<tok>.*)' expecting (?P<expected>.*)", re.S)
_MISSING = re.compile(r"missing (?P<what>.*?) at '(?P<tok>.*)'", re.S)
_TOKEN = re.compile(r"token recognition error at: '(?P<text>.*)'", re.S)
_NO_ALT = re.compile(r"no viable alternative at input '(?P<text>.*)'", re.S)


def explain(message: str) -> str:
    """The parser's `message` (without its "Syntax error:" prefix) as a sentence."""
    message = message.strip()
    for pattern, words in ((_MISMATCH, _mismatch), (_MISSING, _missing), (_TOKEN, _token), (_NO_ALT, _no_alt)):
        m = pattern.fullmatch(message)
        if m is not None:
            return words(m)
    return message[:1].lower() + message[1:]


def _expected(text: str) -> set[str]:
    text = text.strip()
    if text.startswith("{") and text.endswith("}"):
        return {item.strip() for item in text[1:-1].split(", ")}
    return {text}


def _closer_words(expected: set[str]) -> str:
    names = sorted(e for e in expected if e.strip("'") in (*_CLOSERS, ":", ","))
    return " or ".join(names)


def _mismatch(m: re.Match[str]) -> str:
    tok, expected = m.group("tok"), _expected(m.group("expected"))
    shown = repr(tok) if not tok.startswith("'") else tok
    if tok == "<EOF>":
        if expected & _OPERAND:
            return "the expression ends where an operand should follow — finish it or remove the last operator"
        return f"the expression ends too early — {_closer_words(expected) or ' or '.join(sorted(expected))} is missing"
    if expected == {"<EOF>"}:
        if tok in _CLOSERS:
            return f"unexpected {shown} — there is no '{_CLOSERS[tok]}' before it to close"
        if tok in _WORD_OPERATORS:
            return f"'{tok}' is not a CEL operator: write {_WORD_OPERATORS[tok]}"
        if tok[:1] in "'\"":
            return (f"unexpected string {tok} right after a value — an operator such as + is missing before it, "
                    "or a quote inside the string before it needs a backslash")
        return f"unexpected {shown} after a complete expression — an operator (&&, ||, ==, + ...) is missing before it"
    if expected & _OPERAND:
        return f"unexpected {shown} — an operand is missing before it"
    return f"unexpected {shown} — {' or '.join(sorted(expected))} should come here"


def _missing(m: re.Match[str]) -> str:
    what, tok = m.group("what"), m.group("tok")
    opened = _CLOSERS.get(what.strip("'"))
    if tok == "<EOF>":
        unclosed = f" (a '{opened}' is not closed)" if opened else ""
        return f"{what} is missing at the end{unclosed}"
    return f"{what} is missing before '{tok}'"


def _token(m: re.Match[str]) -> str:
    text = m.group("text")
    first = text[:1]
    if first in "'\"":
        return f"a string is not closed: its closing {first} is missing"
    if text.startswith("=>"):
        return "'=>' is not an operator: write >= to compare"
    if first in _STRAY:
        return _STRAY[first]
    return f"{text.strip()!r} is not part of CEL's syntax"


def _no_alt(m: re.Match[str]) -> str:
    text = m.group("text")
    if text.startswith("."):
        name = text[1:].strip()
        if name in _RESERVED:
            return f"'{name}' is a reserved word in CEL and cannot follow '.': write ['{name}'] instead"
        return "'.' must be followed by a field or function name"
    return f"the expression cannot be read at {text!r}"
