"""Read a file that is meant to be a rulebook, without ever echoing one that is not.

A rulebook argument can name any file (an agent's MCP call, an overlay's `extends:`), and a
finding that quotes a key or a line would then print the content of `/etc/shadow` or a dotenv
file. So a file whose top level has no `policyrun:` key is "not a rulebook": one finding at
file:1:1 that quotes nothing. Only a file that says it is a rulebook gets detailed findings
(unknown keys, YAML syntax errors), which may quote what it holds.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from policyrun import limits
from policyrun.errors import Location, RulebookError
from policyrun.yamlsource import MAX_BYTES, SourceMap, load_yaml_text, read_text

# How a rulebook that fails to parse still shows it meant to be one: a top-level `policyrun:` key,
# block style or (JSON, flow style) as the first key of the document.
_MARK = re.compile(r"""^(?:\{\s*)?["']?policyrun["']?[ \t]*:""", re.M)


class NotARulebook(RulebookError):
    """A file that does not say it is a rulebook; the message quotes none of it."""


def not_a_rulebook(display: str, location: Location | None = None, *, code: str = "S001",
                   what: str | None = None) -> NotARulebook:
    return NotARulebook(f"{what or 'this file'} is not a rulebook: its top level has no `policyrun:` key (a rulebook "
                        "starts with `policyrun: 1`); its content is not shown", code=code,
                        location=location or Location(display, 1, 1))


def read_rulebook(path: Path, display: str) -> tuple[str, dict[str, Any], SourceMap]:
    """The file's text, its YAML mapping and positions; `RulebookError` when it cannot be read, is
    not a rulebook (quoting nothing), or is a rulebook with a YAML error (located)."""
    try:
        text = read_text(path, display)
    except RulebookError as exc:
        if exc.code == "Y004" and not _MARK.search(_lenient_text(path)):
            raise not_a_rulebook(display) from None  # invalid UTF-8 would quote a byte of it
        raise
    try:
        data, smap = load_yaml_text(text, display)
    except RulebookError:
        if not _MARK.search(text):
            raise not_a_rulebook(display) from None
        raise
    if not isinstance(data, dict) or "policyrun" not in data:
        raise not_a_rulebook(display)
    smap.text = text
    return text, data, smap


def _lenient_text(path: Path) -> str:
    try:
        return limits.read_limited(path, MAX_BYTES).decode("utf-8", "replace")
    except (limits.TooLarge, limits.Unreadable):
        return ""
