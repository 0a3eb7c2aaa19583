"""Text from facts is data, never terminal or page control: escape what could act on the reader.

Fact values come from repositories, logs and tools that policyrun does not trust. An ESC sequence
in a blocker could retitle a terminal, clear it or hide a line; a bidirectional override could make
a file name read backwards. Every human-facing surface (terminal, Markdown, HTML) shows these
characters as visible escapes (`\\x1b`, `\\u202e`); newline and tab stay as they are.
"""

from __future__ import annotations

import re

# C0 controls but tab and newline, DEL and C1, and the bidirectional formatting characters.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _json_escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def escape_controls(text: str) -> str:
    """`text` with control and bidi characters written as visible backslash escapes."""
    return _CONTROL.sub(_visible, text)


def json_controls(text: str) -> str:
    """JSON text with the control characters `json.dumps(ensure_ascii=False)` leaves raw (DEL, C1,
    bidi) written as `\\u` escapes: the same JSON value, but inert on a terminal."""
    return _CONTROL.sub(_json_escape, text)
