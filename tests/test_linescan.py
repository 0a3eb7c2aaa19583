"""LineScan finds exactly the lines that matching each line alone finds: a differential test
over generated patterns and lines, plus the constructs that must fall back to line by line."""

from __future__ import annotations

import random

import pytest
import re2

from policyrun.probes._kit.linescan import LineScan

PIECES = ["^", "$", "#", "a", "b", "é", r"\s*", r"\s", ".", ".*", "[^a]", "[^a]*", r"\b", r"\B", r"\w+", r"\W",
          "(?i)A", "x?", "(a|b)+", "(?:#+)", r"\d", "[[:space:]]", r"\pL", "(?s:.)", "", r"\t", "(?U)a+"]
ALPHABET = ["a", "b", "#", " ", "x", "A", "\t", "é", "1", "\r", "-"]


def _pattern(rng: random.Random) -> str:
    return "".join(rng.choice(PIECES) for _ in range(rng.randint(1, 4)))


def _lines(rng: random.Random) -> list[str]:
    return ["".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 6))) for _ in range(rng.randint(0, 12))]


@pytest.mark.parametrize("anchored", [False, True])
def test_joined_scan_agrees_with_each_line_alone(anchored: bool) -> None:
    rng = random.Random(20261202 + anchored)
    checked = 0
    for _ in range(3000):
        try:
            regex = re2.compile(_pattern(rng))
        except re2.error:
            continue
        scan = LineScan(regex, anchored=anchored)
        assert scan._joined is not None  # none of the pieces needs the line-by-line path
        for _ in range(3):
            lines = _lines(rng)
            alone = [i for i, s in enumerate(lines)
                     if (regex.fullmatch(s) if anchored else regex.search(s)) is not None]
            assert scan.matching(lines) == alone, (regex.pattern, lines)
            checked += 1
    assert checked > 5000


@pytest.mark.parametrize("pattern, lines, expected", [
    (r"\Ab", ["b", "ab", "b"], [0, 2]),  # \A is each line's start when matched alone
    (r"a\z", ["a", "ab", "ba"], [0, 2]),
    (r"a(?-m:$)", ["a", "ab"], [0]),
    (r"(?i-m)^B", ["b", "ab", "B"], [0, 2]),
    (r"a\Cb", ["a", "b", "axb"], [2]),  # \C would match the line break between "a" and "b"
    (r"\Qa.b", ["a.b", "axb", "xa.b)"], [0, 2]),  # quoted to the end: the wrapper's `)` would be quoted too
])
def test_line_bound_constructs_are_matched_line_by_line(pattern: str, lines: list[str], expected: list[int]) -> None:
    scan = LineScan(re2.compile(pattern))
    assert scan._joined is None
    assert scan.matching(lines) == expected


def test_a_line_holding_a_line_break_is_matched_alone() -> None:
    # `^#` alone matches only at the start of the text, so "x\n#" does not match; joined, it would.
    scan = LineScan(re2.compile("^#"))
    assert scan.matching(["#a", "x\n#", "#\nx", "b"]) == [0, 2]
    paths = LineScan(re2.compile(r"[^/]*\.py"), anchored=True)
    assert paths.matching(["a.py", "b\n.py", "c.txt", "d.py"]) == [0, 1, 3]


def test_case_insensitive_option_is_kept() -> None:
    options = re2.Options()
    options.case_sensitive = False
    assert LineScan(re2.compile("^abc", options)).matching(["ABC", "xabc", "aBc"]) == [0, 2]


def test_one_re2_call_per_matching_line() -> None:
    """The reason LineScan exists: google-re2 gives up the interpreter lock on every call, and
    while another thread computes, each call waits up to 5 ms to get it back. 20,000 lines with
    20 matches must cost 21 calls, not 20,000."""
    lines = [f"line {i}" if i % 1000 else f"# marker {i}" for i in range(20000)]
    scan = LineScan(re2.compile(r"^#\s*marker"))
    calls = 0
    joined = scan._joined
    assert joined is not None

    def counted(data: bytes, pos: int, end: int) -> list[tuple[int, int]]:
        nonlocal calls
        calls += 1
        return joined(data, pos, end)

    scan._joined = counted
    assert scan.matching(lines) == list(range(0, 20000, 1000))
    assert calls == 21
