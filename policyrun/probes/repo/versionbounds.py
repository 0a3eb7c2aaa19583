"""Which version mentions of a sentence state a bound, and the PEP 440 specifier set they state.

"0.24.0 or newer", "at least 0.24", ">= 0.24.0", "0.24+", "supports 0.24 through 0.27" each state
a range; any other mention is the version the project is on.

Kept apart from the probe (repo/claims.py): the words and operators of a bound are a small
grammar of their own, read from the text around each version and nothing else.
"""

from __future__ import annotations

import re

# Words and operators that make a version a bound, not the version in use. Looked for in the text
# between the version and its neighbours in the sentence (product names, backticks and a `v` may
# sit between): an operator or phrase right before it, a phrase right after it, a joiner between
# two versions. "from X to Y" is not a range: upgrade notes say it of a migration.
_DECOR = r"[\s`*_\"'(]*"
_TAIL = _DECOR + r"v?$"
_WORDS = r"(?:[A-Za-z][\w.-]*:?\s+){0,3}"  # "at least vLLM 0.24", "minimum supported version: 0.24"
_BEFORE: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"(?:>=|≥|=>)" + _TAIL), ">="), (re.compile(r"(?:<=|≤|=<)" + _TAIL), "<="),
    (re.compile(r"~=" + _TAIL), "~="), (re.compile(r"!=" + _TAIL), "!="),
    (re.compile(r"(?<![<>=!~-])>" + _TAIL), ">"), (re.compile(r"(?<![<>=!~])<" + _TAIL), "<"),
    (re.compile(r"(?i)\b(?:at\s+least|minimum(?:\s+(?:supported\s+)?(?:version|release))?(?:\s+(?:of|is))?"
                r"|min\.?)\s*:?\s*" + _WORDS + r":?" + _TAIL), ">="),
    (re.compile(r"(?i)\b(?:up\s+to|at\s+most|maximum(?:\s+(?:supported\s+)?(?:version|release))?(?:\s+(?:of|is))?)"
                r"\s*:?\s*" + _WORDS + r":?" + _TAIL), "<="),
]
_AFTER: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"(?i)^" + _DECOR + r"(?:\+(?![A-Za-z0-9])"  # 0.24+, but not the local label of 0.26.0+cu128
                r"|\s*(?:or|and)\s+(?:newer|later|above|higher|greater|up|beyond)\b|\s*onwards?\b)"), ">="),
    (re.compile(r"(?i)^" + _DECOR + r"\s*(?:or|and)\s+(?:older|earlier|below|lower)\b"), "<="),
]
_THROUGH = re.compile(r"(?i)^" + _DECOR + r"\s*(?:-|–|—|\.\.\.?|through|thru)\s*" + _TAIL)
_BETWEEN = re.compile(r"(?i)\bbetween\s+" + _WORDS + _TAIL)
_AND = re.compile(r"(?i)^" + _DECOR + r"\s*and\s*" + _TAIL)
_CHAIN = re.compile(r"^" + _DECOR + r",\s*(?:[<>!~]?=|[<>])" + _TAIL)  # vllm>=0.24,<0.27
# Clauses of the same specifier set whose version the scan does not take as one (`vllm>=0.14.0,<0.15`:
# `0.15` is no x.y.z): read with the version's own, never dropped (dropping `<0.15` widens the claim).
_CLAUSE = r"(?:===?|[<>!~]?=|[<>])\s*\d+(?:\.\d+)*(?:\.\*)?"
_TRAILING = re.compile(r"^((?:\s*,\s*" + _CLAUSE + r"(?![\w.]))+)")
_LEADING = re.compile(r"((?:" + _CLAUSE + r"\s*,\s*)+)(?:[<>!~]?=|[<>])" + _TAIL)


def bounds(text: str, vs: list[tuple[int, int, str]], start: int, end: int) -> dict[tuple[int, int, str], str]:
    """The versions `vs` (start, end, version) of the sentence text[start:end] that a bound names,
    each with its PEP 440 specifier set (a pair joined by `through`, `-` or `between ... and`
    shares one: `>=0.24,<=0.27`)."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    before = [text[(vs[i - 1][1] if i else start):v[0]] for i, v in enumerate(vs)]
    after = [text[v[1]:(vs[i + 1][0] if i + 1 < len(vs) else end)] for i, v in enumerate(vs)]
    clauses: list[list[str]] = []
    for i, v in enumerate(vs):
        op = next((o for rx, o in _BEFORE if rx.search(before[i])), None) or \
            next((o for rx, o in _AFTER if rx.search(after[i])), None)
        clauses.append([f"{op}{v[2]}"] if op else [])
        if op and (m := _TRAILING.match(after[i])):
            clauses[i] += [c.strip().replace(" ", "") for c in m.group(1).split(",") if c.strip()]
        if op and (m := _LEADING.search(before[i])):
            clauses[i] += [c.strip().replace(" ", "") for c in m.group(1).split(",") if c.strip()]
    group = list(range(len(vs)))  # versions sharing one specifier share a group number
    for i in range(len(vs) - 1):
        span = after[i]
        if _THROUGH.search(span) or (_AND.search(span) and _BETWEEN.search(before[i])):
            clauses[i], clauses[i + 1] = [f">={vs[i][2]}"], [f"<={vs[i + 1][2]}"]
        elif not (clauses[i] and clauses[i + 1] and _CHAIN.search(span)):
            continue
        group[i + 1] = group[i]
    out: dict[tuple[int, int, str], str] = {}
    for i, v in enumerate(vs):
        joined = [c for k in range(len(vs)) if group[k] == group[i] for c in clauses[k]]
        if not joined:
            continue
        try:
            out[v] = ",".join(sorted(str(c) for c in SpecifierSet(",".join(joined))))
        except InvalidSpecifier:  # a version no specifier takes (`0.24.x`): stays an exact mention
            continue
    return out
