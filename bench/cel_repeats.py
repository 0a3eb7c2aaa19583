"""Sub-expressions a rulebook writes out more than once (issue 23, item 3: state each predicate once).

    python bench/cel_repeats.py [--min-chars N] [--top N] [RULEBOOK ...]   (default: every shipped rulebook)

For each rulebook, as loaded (an overlay resolved onto its base), every CEL expression lint lists
(policyrun.language.checks.expression_sites) is split into tokens and whitespace-normalised. A
candidate sub-expression is a bracket-balanced run of tokens that starts and ends with an operand
(not an operator, a comma, a dot or `?`/`:`; not a field or a method name, not a function's name
without its call). Those written at least twice (across sites or within
one) and at least --min-chars long are listed, longest first, with their sites; a repeat that only
ever occurs inside one longer repeat (as often as it) is left out, as that longer one names it.
Text, not the checked tree: `a+b` and `a + b` are one repeat, `x.filter(v, p)` and
`x.filter(w, p')` (a renamed variable) are two. Deterministic: run it before and after a rewrite.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import defaultdict
from pathlib import Path

from policyrun.language.checks import expression_sites
from policyrun.language.locate import shipped_rulebooks
from policyrun.language.rulebook import load_rulebook

_TOKEN = re.compile(r"""
    (?P<str>[rRbB]?(?:'(?:[^'\\]|\\.)*'|"(?:[^"\\]|\\.)*"))
  | (?P<num>\d+(?:\.\d+)?[uU]?)
  | (?P<name>[A-Za-z_][A-Za-z0-9_]*)
  | (?P<op>\.\?|\[\?|==|!=|<=|>=|&&|\|\||[-+*/%<>!?:.,()\[\]{}])
  | (?P<ws>\s+)
""", re.VERBOSE)
_OPEN, _CLOSE = "([{", ")]}"
_BAD_START = {"+", "-", "*", "/", "%", "==", "!=", "<", ">", "<=", ">=", "&&", "||", "?", ":", ",", ".", ".?",
              ")", "]", "}", "in"}
_BAD_END = {"+", "-", "*", "/", "%", "==", "!=", "<", ">", "<=", ">=", "&&", "||", "?", ":", ",", ".", ".?",
            "(", "[", "[?", "{", "!", "in"}
_MAX_TOKENS = 400  # no repeat in a shipped rulebook comes near; bounds the quadratic scan


def tokens(source: str) -> list[str]:
    out: list[str] = []
    pos = 0
    while pos < len(source):
        m = _TOKEN.match(source, pos)
        if m is None:  # a character no CEL token starts with: keep it, one token
            out.append(source[pos])
            pos += 1
            continue
        if m.lastgroup != "ws":
            out.append(m.group())
        pos = m.end()
    return out


def _join(toks: list[str]) -> str:
    text = ""
    for t in toks:
        if text and (t in ",)]}:?" or t in (".", ".?", "[?") or text[-1] in "([{." or text.endswith(".?")
                     or (t in "([" and (text[-1].isalnum() or text[-1] in "_)]'\""))):
            text += t if t not in ":?" else " " + t
        else:
            text += (" " if text else "") + t
    return text.replace(" ,", ",")


def repeats(sources: list[tuple[str, str]], min_chars: int) -> list[tuple[str, list[str]]]:
    """(normalised text, sites) of each maximal repeated sub-expression, longest first."""
    occurrences: dict[str, list[tuple[int, int, int]]] = defaultdict(list)  # text -> (site, start, end)
    site_names = [name for name, _ in sources]
    for si, (_, source) in enumerate(sources):
        toks = tokens(source)
        for i, first in enumerate(toks):
            if first in _BAD_START or (i > 0 and toks[i - 1] in (".", ".?")):
                continue  # an operator, or a field or method name: no operand starts here
            depth = 0
            for j in range(i, min(len(toks), i + _MAX_TOKENS)):
                t = toks[j]
                if t in _OPEN or t == "[?":
                    depth += 1
                elif t in _CLOSE:
                    depth -= 1
                    if depth < 0:
                        break
                if depth == 0 and t not in _BAD_END and j > i \
                        and not (j + 1 < len(toks) and toks[j + 1] == "(" and t[0].isalpha()):
                    text = _join(toks[i:j + 1])
                    if len(text) >= min_chars:
                        occurrences[text].append((si, i, j))
    repeated = {text: occ for text, occ in occurrences.items() if len(occ) >= 2}
    # Maximal: drop a repeat whose every occurrence lies inside an occurrence of a longer repeat
    # written as often (the longer one is the thing to factor out).
    kept: list[tuple[str, list[tuple[int, int, int]]]] = []
    for text, occ in sorted(repeated.items(), key=lambda kv: (-len(kv[0]), kv[0])):
        inside = any(len(bigger) == len(occ) and all(any(s == bs and bi <= i and j <= bj and (bi, bj) != (i, j)
                                                         for bs, bi, bj in bigger) for s, i, j in occ)
                     for _, bigger in kept)
        if not inside:
            kept.append((text, occ))
    return [(text, [site_names[s] for s, _, _ in occ]) for text, occ in kept]


def _site_name(site: object) -> str:
    path = getattr(site, "path")
    return ".".join(str(p) for p in path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rulebooks", nargs="*")
    parser.add_argument("--min-chars", type=int, default=40)
    parser.add_argument("--top", type=int, default=0, help="list only the N longest repeats of each rulebook")
    args = parser.parse_args(argv)
    refs: list[str | Path] = list(args.rulebooks) or list(sorted(shipped_rulebooks()))
    for ref in refs:
        rb = load_rulebook(ref)
        sources = [(_site_name(s), s.source) for s in expression_sites(rb)]
        found = repeats(sources, args.min_chars)
        print(f"== {ref}: {len(found)} repeated sub-expression(s) of >= {args.min_chars} chars, "
              f"{sum(len(t) * (len(s) - 1) for t, s in found)} chars written more than once")
        for text, sites in found[:args.top or None]:
            counts: dict[str, int] = defaultdict(int)
            for s in sites:
                counts[s] += 1
            where = ", ".join(f"{s}" + (f" (x{n})" if n > 1 else "") for s, n in sorted(counts.items()))
            print(f"  {len(sites)}x {len(text)} chars: {text}\n      at {where}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
