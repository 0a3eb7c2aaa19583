"""A small line-based Markdown block reader: the blocks of a document with the headings above each.

CommonMark's block structure as far as `docs.claims` needs it: ATX and setext headings, fenced code
(``` and ~~~), GFM tables, list items (with their continuation lines), block quotes, paragraphs,
YAML front matter. HTML comments are blanked; link destinations and HTML tags are blanked too
(same length, so columns stay true), so a URL's `v0.26.0` is not read as a claim.

Kept apart from the probe (repo/claims.py): reading a document's structure knows nothing of
versions, products or what a sentence claims, and is tested on its own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

_HTML_COMMENT = re.compile(r"<!--.*?-->", re.DOTALL)
_FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+|$)(.*?)(?:[ \t]+#+)?[ \t]*$")
_SETEXT = re.compile(r"^ {0,3}(?:=+|-+)[ \t]*$")
_HR = re.compile(r"^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")
_DELIMITER = re.compile(r"^\s*\|?\s*:?-+:?\s*(?:\|\s*:?-+:?\s*)*\|?\s*$")
_QUOTE = re.compile(r"^(?: {0,3}>[ ]?)+")
_ITEM = re.compile(r"^(\s*)(?:[-*+]|\d{1,9}[.)])(?:[ \t]+|$)")
_LINK_DEST = re.compile(r"(?<=\])\((?:[^()\s]|\([^()\s]*\))*(?:\s+\"[^\"]*\")?\)")
_TAG = re.compile(r"</?[A-Za-z][^<>]*>|<https?://[^<>\s]*>")


def _blank_spans(text: str, pattern: re.Pattern[str]) -> str:
    return pattern.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def _mask(line: str) -> str:
    return _blank_spans(_blank_spans(line, _LINK_DEST), _TAG)


def _cells(text: str) -> list[tuple[int, int]]:
    """Spans of a table row's cells (unescaped `|` separates; outer pipes are optional)."""
    bars = [i for i, c in enumerate(text) if c == "|" and (i == 0 or text[i - 1] != "\\")]
    edges = [-1, *bars, len(text)]
    spans = [(edges[k] + 1, edges[k + 1]) for k in range(len(edges) - 1)]
    if spans and not text[spans[0][0]:spans[0][1]].strip():
        spans = spans[1:]
    if spans and not text[spans[-1][0]:spans[-1][1]].strip():
        spans = spans[:-1]
    return spans


@dataclass
class Block:
    kind: str  # heading, paragraph, list, table, code, quote, frontmatter
    headings: tuple[str, ...]
    lead: str | None = None  # the paragraph ending in ":" that introduces a list, table or code block
    header: list[str] | None = None  # a table's column headers
    text: str = ""  # the block's lines joined with spaces (masked)
    lines: list[tuple[int, int, int]] = field(default_factory=list)  # (line, offset in text, column in line)

    def add(self, line: int, column: int, content: str) -> None:
        if self.lines:
            self.text += " "
        self.lines.append((line, len(self.text), column))
        self.text += _mask(content)

    @property
    def segments(self) -> list[tuple[int, int]]:
        """Where sentences are looked for: each cell of a table row, else the whole block."""
        return _cells(self.text) if self.kind == "table" else [(0, len(self.text))]

    def position(self, offset: int) -> tuple[int, int]:
        line, start, column = next(entry for entry in reversed(self.lines) if entry[1] <= offset)
        return line, column + offset - start + 1

    def column_header(self, offset: int) -> str | None:
        if self.kind != "table" or not self.header:
            return None
        index = next((k for k, (a, b) in enumerate(_cells(self.text)) if a <= offset < b), None)
        return self.header[index] if index is not None and index < len(self.header) else None

    def row_header(self) -> str | None:
        cells = _cells(self.text) if self.kind == "table" else []
        return self.text[cells[0][0]:cells[0][1]].strip() if cells else None

    def scope_text(self) -> str:
        return " ".join([self.text, *(self.header or [])])


def _indent(raw: str) -> int:
    return len(raw) - len(raw.lstrip())


def parse_blocks(text: str) -> list[Block]:
    lines = _blank_spans(text, _HTML_COMMENT).split("\n")
    blocks: list[Block] = []
    headings: list[tuple[int, str]] = []
    cur: Block | None = None  # the open paragraph, list item or quote
    lead: str | None = None  # text of the paragraph just closed, when it ends with ":"
    list_lead: str | None = None
    in_list = blank = False
    fence: tuple[str, int] | None = None
    fence_lead: str | None = None
    table: tuple[list[str], str | None] | None = None  # header cells, lead

    def path() -> tuple[str, ...]:
        return tuple(title for _, title in headings)

    def single(kind: str, n: int, column: int, content: str, **extra: Any) -> None:
        block = Block(kind, path() if kind != "frontmatter" else (), **extra)
        block.add(n, column, content)
        blocks.append(block)

    def close() -> None:
        nonlocal cur, lead
        if cur is not None and cur.kind == "paragraph":
            lead = cur.text.strip() if cur.text.rstrip().endswith(":") else None
        cur = None

    i = 0
    if lines and lines[0].strip() == "---":
        end = next((k for k in range(1, len(lines)) if lines[k].strip() in ("---", "...")), None)
        if end is not None:
            for k in range(1, end):
                if lines[k].strip():
                    single("frontmatter", k + 1, _indent(lines[k]), lines[k].strip())
            i = end + 1
    while i < len(lines):
        raw, n = lines[i], i + 1
        i += 1
        stripped = raw.strip()
        if fence is not None:
            if re.match(rf"^\s*{re.escape(fence[0])}{{{fence[1]},}}\s*$", raw):
                fence = None
            elif stripped:
                single("code", n, _indent(raw), stripped, lead=fence_lead)
            continue
        if not stripped:
            close()
            blank, table = True, None
            continue
        if (m := _FENCE.match(raw)) is not None:
            close()
            fence, fence_lead, lead, blank = (m.group(1)[0], len(m.group(1))), lead or (list_lead if in_list else None), None, False
            continue
        if (m := _ATX.match(raw)) is not None:
            close()
            level, title = len(m.group(1)), m.group(2).strip()
            headings = [h for h in headings if h[0] < level] + [(level, title)]
            single("heading", n, m.start(2), title)
            in_list, lead, table, blank = False, None, None, False
            continue
        if cur is not None and cur.kind == "paragraph" and not blank and _SETEXT.match(raw):
            level = 1 if "=" in stripped else 2
            headings = [h for h in headings if h[0] < level] + [(level, cur.text.strip())]
            cur.kind, cur.headings, cur, lead = "heading", path(), None, None
            continue
        if _HR.match(raw):
            close()
            in_list, lead, table = False, None, None
            continue
        if table is not None and "|" in stripped:
            single("table", n, _indent(raw), stripped, header=table[0], lead=table[1])
            continue
        if "|" in stripped and i < len(lines) and _DELIMITER.match(lines[i]) and "-" in lines[i]:
            close()
            header = [stripped[a:b].strip() for a, b in _cells(stripped)]
            table = (header, lead)
            single("table", n, _indent(raw), stripped, header=header, lead=lead)
            i += 1  # the delimiter row
            in_list, lead, blank = False, None, False
            continue
        if (m := _QUOTE.match(raw)) is not None:
            content = raw[m.end():]
            if not content.strip() or (cur is not None and cur.kind != "quote"):
                close()
            if content.strip():
                if cur is None:
                    cur = Block("quote", path())
                    blocks.append(cur)
                cur.add(n, m.end() + _indent(content), content.strip())
            in_list, blank = False, False
            continue
        if (m := _ITEM.match(raw)) is not None:
            close()
            if not in_list:
                list_lead, in_list = lead, True
            lead, blank = None, False
            cur = Block("list", path(), lead=list_lead)
            blocks.append(cur)
            cur.add(n, m.end(), raw[m.end():].strip())
            continue
        continues = cur is not None and cur.kind in ("paragraph", "list", "quote") and \
            (not blank or (cur.kind == "list" and raw[:1] in (" ", "\t")))
        if cur is not None and continues:
            cur.add(n, _indent(raw), stripped)
            blank = False
            continue
        close()
        if in_list and raw[:1] in (" ", "\t"):  # a later paragraph of the same list item
            cur = Block("list", path(), lead=list_lead)
        else:
            in_list = False
            cur = Block("paragraph", path())
        blocks.append(cur)
        cur.add(n, _indent(raw), stripped)
        lead, blank = None, False
    return blocks

