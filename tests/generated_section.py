"""A section of a docs page that a script generates, kept between two marker lines.

`tests/architecture_doc.py` (the module map) and `tests/errors_doc.py` (the code table) each say
what goes between their markers; this is the part they share: splice it in, and the command line
that reports a stale page or rewrites it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path


def spliced(text: str, start: str, end: str, body: str) -> str:
    """`text` with everything from the `start` marker to the `end` marker replaced by `body`
    (which carries both markers)."""
    first, last = text.index(start), text.index(end) + len(end)
    return text[:first] + body + text[last:]


def check_or_update(page: Path, current: Callable[[str], str], what: str, command: str, argv: list[str]) -> int:
    """0 when `page` holds what `current` makes of it (or, with --update, after rewriting it); else 1."""
    name = page.relative_to(page.parent.parent).as_posix()
    text = page.read_text(encoding="utf-8")
    want = current(text)
    if want == text:
        print(f"{name}: {what} current")
        return 0
    if "--update" in argv:
        page.write_text(want, encoding="utf-8")
        print(f"updated {name}")
        return 0
    print(f"{name}: {what} out of date; run python -m {command} --update")
    return 1
