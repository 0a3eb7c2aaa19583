"""Text from facts is data, never terminal or page control: escape what could act on the reader.

Fact values come from repositories, logs and tools that policyrun does not trust. An ESC sequence
in a blocker could retitle a terminal, clear it or hide a line; a bidirectional override could make
a file name read backwards. Every human-facing surface (terminal, Markdown, HTML) shows these
characters as visible escapes (`\\x1b`, `\\u202e`); newline and tab stay as they are.

What policyrun prints in a CI job becomes the job's log, and CI systems read commands from their
logs: a fact value holding a newline and `::error ...::` would add an annotation to a GitHub run,
`##vso[task.setvariable ...]` would set a variable in Azure Pipelines. Such text is broken with a
backslash (`\\::error`, `#\\#vso[`), which Markdown renders away and no CI system reads.
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


# Commands CI systems read from a log line: GitHub Actions `::name ...::` at the start of a line
# (the runner trims leading whitespace); `##[name]` (GitHub Actions and Azure Pipelines),
# `##vso[` (Azure Pipelines) and `##teamcity[` (TeamCity service messages) anywhere in a line.
_CI_LINE_START = re.compile(r"^([ \t]*)::", re.MULTILINE)
_CI_ANYWHERE = re.compile(r"##(?=(?:vso|teamcity)?\[)", re.IGNORECASE)


def escape_ci_commands(text: str) -> str:
    """`text` with every CI log command broken by a backslash: `\\::error`, `#\\#vso[`."""
    if "::" in text:
        text = _CI_LINE_START.sub(r"\1\\::", text)
    if "#" in text:
        text = _CI_ANYWHERE.sub(r"#\\#", text)
    return text


def visible_controls(text: str) -> str:
    """Control and bidi characters as visible escapes, nothing else: for text whose newlines the
    caller encodes itself (a GitHub workflow command's `%0A`), so no line of it can start a command."""
    return _CONTROL.sub(_visible, text)


def escape_controls(text: str) -> str:
    """`text` with control and bidi characters written as visible backslash escapes, and the CI
    log commands it holds broken (escape_ci_commands)."""
    return escape_ci_commands(visible_controls(text))


def json_controls(text: str) -> str:
    """JSON text with the control characters `json.dumps(ensure_ascii=False)` leaves raw (DEL, C1,
    bidi) written as `\\u` escapes, and a CI log command inside a string broken (`#\\u0023vso[`):
    the same JSON value, but inert on a terminal and in a CI log. (JSON text never starts a line
    with `::`: json.dumps escapes newlines inside strings.)"""
    text = _CONTROL.sub(_json_escape, text)
    return _CI_ANYWHERE.sub(r"#\\u0023", text) if "#" in text else text
