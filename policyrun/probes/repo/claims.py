"""`docs.claims`: where Markdown documentation names a version of the product, and what it claims.

Each version mention is placed in its Markdown structure (heading path, paragraph, list item with
the sentence that introduces the list, table row with its column header, fenced code, block quote,
YAML front matter), attributed to a product, classified (`support`: the version the project
targets, pins, requires, supports or was validated on now, including what is or is not supported
on it; `history`: a former version, a past verification, a changelog entry; `other`), and scoped
(`gpu`, `npu`, ... from the words around it), and read for its bound: "0.24.0 or newer", "at
least 0.24", ">= 0.24.0", "0.24+", "0.24 and later", "supports 0.24 through 0.27" state a range
(kind `range`, with its PEP 440 specifier), not the version the project is on; any other mention
is `exact`. Every convention is a parameter, and the defaults
know no product: `subject` is required, and a rulebook's vars say which other products its docs
name, its versions' shape and its backends' words (the flagship's `claim_*` vars hold the real
afd-plugin's: vLLM, whose docs also name vLLM-Ascend, a different product).

Classification looks at the narrowest text that decides: the sentence (a class word binds to the
nearest version in its sentence, so "deployments from v0.19 are not supported on v0.26" gives one
history and one support mention), then the table column header and row header, then the sentence
introducing a list, table or code block, then the headings, nearest first. Scopes are found the
same way: sentence, whole block, headings, then the file path. Patterns are RE2 (rulebook input).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from policyrun.probes.base import ProbeContext, ProbeResult
from policyrun.probes._kit.linescan import LineScan
from policyrun.probes._kit.userregex import Regex, user_regex
from policyrun.probes._kit.revfiles import SKIPPED_SCHEMA, TREE_PARAMS, read_tree

DEFAULT_INCLUDE = ["/README*.md", "docs/**/*.md"]
# The defaults know no product: which product (`subject`), which other products its docs name,
# its version shape, and the words of its backends are the rulebook's conventions (the flagship's
# `claim_*` vars hold the afd-plugin's). A version is `v1.2`, `v1.2.3` or `1.2.3`, with an `rcN`,
# `aN`, `bN`, `.postN` or `.devN` part; a bare `1.2` is too easily a number to be a version.
DEFAULT_OTHER_PRODUCTS: list[str] = []
DEFAULT_VERSION = (r"(?:^|[^\w.])(?:v(\d+\.\d+(?:\.\d+)?(?:(?:rc|a|b)\d+)?(?:\.post\d+)?(?:\.dev\d+)?)"
                   r"|(\d+\.\d+\.\d+(?:(?:rc|a|b)\d+)?(?:\.post\d+)?(?:\.dev\d+)?))"
                   r"(?:$|[^\w.]|\.(?:$|\s))")
DEFAULT_CLASSES: dict[str, list[str]] = {
    "support": [
        r"(?i)\btarget(?:s|ed|ing)?\b", r"(?i)\bsupport(?:s|ed)?\b", r"(?i)\bpin(?:s|ned)?\b",
        r"(?i)\bvalidated\b", r"(?i)\brequire[sd]?\b", r"(?i)\bprerequisites?\b", r"(?i)\bbaseline\b",
        r"(?i)\b(?:in)?compatib(?:le|ility)\b",
    ],
    "history": [
        r"(?i)\b(?:former(?:ly)?|earlier|previous(?:ly)?|prior|older|legacy|historical|deprecated|obsolete)\b",
        r"(?i)\bno longer\b", r"(?i)\b(?:was|were) (?:verified|validated|tested|produced)\b",
        r"(?i)\bfrom\s+[`*]*v?\d",  # deployments from v1.2
        r"^\W*\d{4}-\d{2}(?:-\d{2})?\b.*",  # a dated record: the whole sentence
        r"(?i)\b(?:changelog|change log|release notes|history)\b",
    ],
}
# No backend words by default: every mention is `general` until the rulebook names its scopes.
DEFAULT_SCOPES: dict[str, list[str]] = {}
FALLBACK_CLASS = "other"
FALLBACK_SCOPE = "general"
_PRODUCT_WORDS = 3  # a product name this many words before a version or closer names its product
_JOINER = re.compile(r"^\s*(?:/|,|&|\+|and|or)\s*$", re.IGNORECASE)
_WORD = re.compile(r"[A-Za-z0-9_]+")
_SENTENCE_END = re.compile(r"(?<=[.!?;])\s+")
_RELEASE = re.compile(r"\d+\.\d+(?:\.\d+)?")

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

_S = {"type": "string"}
_NS = {"type": ["string", "null"]}
_PATTERNS = {"type": "array", "items": _S}
_MENTION = {"type": "object", "properties": {
    "site": {"type": "string", "description": "path:line"}, "file": _S, "line": {"type": "integer"},
    "column": {"type": "integer", "description": "1-based character column of the version."},
    "version": {"type": "string", "description": "As written, without a leading v."},
    "release": {"type": "string", "description": "x.y.z or x.y (pre-release and dev parts dropped)."},
    "text": {"type": "string", "description": "The line, stripped."},
    "sentence": {"type": "string", "description": "The sentence (or table cell sentence) holding the version."},
    "context": {"enum": ["heading", "paragraph", "list", "table", "code", "quote", "frontmatter"]},
    "heading": {"type": ["string", "null"], "description": "Heading path, `A > B`."},
    "row": {"type": ["string", "null"], "description": "The table row, stripped (tables only)."},
    "column_header": _NS,
    "class": _S, "scope": _S,
    "kind": {"enum": ["exact", "range"], "description": "range: the sentence bounds the version (`0.24.0 or "
             "newer`, `>=0.24`, `0.24 through 0.27`) rather than naming the one in use."},
    "specifier": {"type": ["string", "null"], "description": "A range's PEP 440 specifier set, clauses sorted "
                  "(`>=0.24.0`, `<=0.27,>=0.24`); null for an exact mention."},
    "scopes": {"type": "array", "items": _S, "description": "Every scope found at the deciding level."}}}

PARAMS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        **TREE_PARAMS,
        "include": TREE_PARAMS["include"] | {"default": DEFAULT_INCLUDE},
        "subject": {"type": "string", "minLength": 1, "description": "RE2 pattern naming the product whose "
                    "versions are wanted (required: the probe knows no product)."},
        "other_products": {"type": "array", "items": _S, "default": DEFAULT_OTHER_PRODUCTS, "description":
                           "RE2 patterns naming other products: a version right after one is theirs."},
        "version": {"type": "string", "default": DEFAULT_VERSION, "description": "RE2 pattern of a version "
                    "mention; its first group that matched (or the group named `version`) is the version."},
        "bare_versions": {"type": "boolean", "default": False, "description": "A version with no product "
                          "name right before it belongs to the subject (docs of a plugin name its host's versions)."},
        "classes": {"type": "object", "additionalProperties": _PATTERNS, "default": DEFAULT_CLASSES,
                    "description": "Ordered: class → RE2 patterns; earlier classes win ties; else `other`."},
        "scopes": {"type": "object", "additionalProperties": _PATTERNS, "default": DEFAULT_SCOPES,
                   "description": "Scope → RE2 patterns; a mention matching none is `general`."},
    },
    "required": ["subject"],
    "additionalProperties": False,
}

FACT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "mentions": {"type": "array", "items": _MENTION, "description": "Every version of the subject, in "
                     "file and line order."},
        "claims": {"type": "array", "items": _MENTION, "description": "The mentions of class `support`."},
        "by_scope": {"type": "object", "additionalProperties": {"type": "array", "items": _S},
                     "description": "Scope → distinct versions claimed as support (every scope is a key)."},
        "by_class": {"type": "object", "additionalProperties": {"type": "array", "items": _S},
                     "description": "Class → distinct versions mentioned (every class is a key)."},
        "files_scanned": {"type": "integer"},
        "files": {"type": "array", "items": _S, "description": "Files read."},
        "root": _S, "rev": _NS, "rev_sha": _NS, "skipped": SKIPPED_SCHEMA,
    },
}


def _all(regex: Regex, text: str) -> list[tuple[int, int]]:
    spans = []
    pos = 0
    while pos <= len(text) and (m := regex.search(text, pos)) is not None:
        spans.append((m.start(), m.end()))
        pos = m.end() if m.end() > pos else pos + 1
    return spans


@dataclass
class _Config:
    subject: Regex
    others: list[Regex]
    version: Regex
    bare: bool
    classes: dict[str, list[Regex]]
    scopes: dict[str, list[Regex]]
    # Which blocks mention a version at all, in one scan of a document (see linescan): most blocks
    # do not, and one RE2 call per block waited for the interpreter lock each time.
    version_scan: LineScan = field(init=False)

    def __post_init__(self) -> None:
        self.version_scan = LineScan(self.version)

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> _Config:
        def rx(pattern: str, where: str, groups: int = 0) -> Regex:
            return user_regex(pattern, f"parameter `{where}`", code="claims.invalid_pattern", groups=groups)

        return cls(
            subject=rx(params["subject"], "subject"),
            others=[rx(p, f"other_products[{i}]")
                    for i, p in enumerate(params.get("other_products", DEFAULT_OTHER_PRODUCTS))],
            version=rx(params.get("version", DEFAULT_VERSION), "version", groups=1),
            bare=bool(params.get("bare_versions", False)),
            classes={name: [rx(p, f"classes.{name}[{i}]") for i, p in enumerate(pats)]
                     for name, pats in params.get("classes", DEFAULT_CLASSES).items()},
            scopes={name: [rx(p, f"scopes.{name}[{i}]") for i, p in enumerate(pats)]
                    for name, pats in params.get("scopes", DEFAULT_SCOPES).items()})

    def versions(self, text: str) -> list[tuple[int, int, str]]:
        """(start, end, version) of every version in `text`, the group's span."""
        out = []
        pos = 0
        named = self.version.groupindex.get("version")
        while (m := self.version.search(text, pos)) is not None:
            groups = [named] if named else range(1, self.version.groups + 1)
            g = next((i for i in groups if m.group(i) is not None), None)
            if g is None:
                pos = max(m.end(), pos + 1)
                continue
            out.append((m.start(g), m.end(g), m.group(g) or ""))
            pos = m.end(g)  # the next match may need the character that ended this one
        return out

    def products(self, text: str) -> list[tuple[int, int, bool]]:
        """(start, end, is_subject) of product names; the subject inside another product's name
        (vLLM in vLLM-Ascend) does not count."""
        foreign = sorted({span for regex in self.others for span in _all(regex, text)})
        subject = [s for s in _all(self.subject, text) if not any(a <= s[0] < b for a, b in foreign)]
        return sorted([(a, b, False) for a, b in foreign] + [(a, b, True) for a, b in subject])

    def first_class(self, texts: list[str]) -> str | None:
        for name, regexes in self.classes.items():
            if any(r.search(t) is not None for t in texts for r in regexes):
                return name
        return None

    def scopes_in(self, text: str) -> list[str]:
        return [name for name, regexes in self.scopes.items() if any(r.search(text) is not None for r in regexes)]


# --- a small line-based Markdown block reader ----------------------------------------------------
# CommonMark's block structure as far as claims need it: ATX and setext headings, fenced code
# (``` and ~~~), GFM tables, list items (with their continuation lines), block quotes, paragraphs,
# YAML front matter. HTML comments are blanked; link destinations and HTML tags are blanked too
# (same length, so columns stay true), so a URL's `v0.26.0` is not read as a claim.

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


@dataclass
class _Sentence:
    start: int
    end: int
    versions: list[tuple[int, int, str]] = field(default_factory=list)


def _sentences(text: str, segments: list[tuple[int, int]]) -> list[_Sentence]:
    out = []
    for a, b in segments:
        pos = a
        for m in _SENTENCE_END.finditer(text, a, b):
            out.append(_Sentence(pos, m.start()))
            pos = m.end()
        out.append(_Sentence(pos, b))
    return out


def _bounds(text: str, s: _Sentence) -> dict[tuple[int, int, str], str]:
    """The versions of a sentence that a bound names, each with its PEP 440 specifier set (a pair
    joined by `through`, `-` or `between ... and` shares one: `>=0.24,<=0.27`)."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    vs = s.versions
    before = [text[(vs[i - 1][1] if i else s.start):v[0]] for i, v in enumerate(vs)]
    after = [text[v[1]:(vs[i + 1][0] if i + 1 < len(vs) else s.end)] for i, v in enumerate(vs)]
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


def _distance(a: tuple[int, int], b: tuple[int, int]) -> int:
    if a[0] < b[1] and b[0] < a[1]:
        return 0
    return b[0] - a[1] if a[1] <= b[0] else a[0] - b[1]


class _Document:
    def __init__(self, path: str, text: str, cfg: _Config) -> None:
        self.path = path
        self.cfg = cfg
        self.raw = text.split("\n")
        self.blocks = parse_blocks(text)

    def mentions(self) -> list[dict[str, Any]]:
        out = []
        # A block's text is its lines joined with spaces: one line, as LineScan wants.
        for i in self.cfg.version_scan.matching([block.text for block in self.blocks]):
            out.extend(self._block(self.blocks[i]))
        return out

    def _block(self, block: Block) -> list[dict[str, Any]]:
        cfg, text = self.cfg, block.text
        found = cfg.versions(text)
        if not found:
            return []
        products = cfg.products(text)
        sentences = _sentences(text, block.segments)
        for s in sentences:
            s.versions = [v for v in found if s.start <= v[0] < s.end]
        out = []
        for s in sentences:
            if not s.versions:
                continue
            sentence = " ".join(text[s.start:s.end].split())  # link destinations were blanked
            kept = [v for i, v in enumerate(s.versions) if self._is_subject(text, v, s, i, products)]
            classes = self._sentence_classes(text, s, kept)
            bounds = _bounds(text, s)
            for v in kept:
                line, column = block.position(v[0])
                cls = classes.get(v) or self._outer_class(block, v[0]) or FALLBACK_CLASS
                scopes = self._scopes(block, sentence)
                out.append({
                    "site": f"{self.path}:{line}", "file": self.path, "line": line, "column": column,
                    "version": v[2], "release": (m.group(0) if (m := _RELEASE.match(v[2])) else v[2]),
                    "text": self.raw[line - 1].strip(), "sentence": sentence, "context": block.kind,
                    "heading": " > ".join(block.headings) or None,
                    "row": self.raw[line - 1].strip() if block.kind == "table" else None,
                    "column_header": block.column_header(v[0]),
                    "class": cls, "scope": scopes[0], "scopes": scopes,
                    "kind": "range" if v in bounds else "exact", "specifier": bounds.get(v),
                })
        return out

    def _is_subject(self, text: str, v: tuple[int, int, str], s: _Sentence, index: int,
                    products: list[tuple[int, int, bool]]) -> bool:
        """Whose version: the product named at most a few words before it (with the names joined
        to it by `/`, `,`, `and`: "vLLM/vLLM-Ascend 0.19.1" names both), else the subject."""
        floor = s.versions[index - 1][1] if index else s.start
        before = [p for p in products if floor <= p[0] and p[1] <= v[0]]
        if not before:
            return self.cfg.bare
        last = before[-1]
        if len(_WORD.findall(text[last[1]:v[0]])) > _PRODUCT_WORDS:
            return self.cfg.bare
        group = [last]
        for p in reversed(before[:-1]):
            if _JOINER.match(text[p[1]:group[-1][0]]):
                group.append(p)
            else:
                break
        return any(is_subject for _, _, is_subject in group)

    def _sentence_classes(self, text: str, s: _Sentence,
                          kept: list[tuple[int, int, str]]) -> dict[tuple[int, int, str], str]:
        """Each class word binds to the nearest version of its sentence; a version takes the class
        of its nearest word (earlier classes win ties), else that of the same version elsewhere in
        the sentence."""
        best: dict[tuple[int, int, str], tuple[int, int, str]] = {}  # version → (distance, class order, class)
        for order, (name, regexes) in enumerate(self.cfg.classes.items()):
            for regex in regexes:
                sentence = text[s.start:s.end]
                for a, b in _all(regex, sentence):
                    span = (s.start + a, s.start + b)
                    target = min(s.versions, key=lambda v: (_distance(span, (v[0], v[1])), v[0]))
                    rank = (_distance(span, (target[0], target[1])), order, name)
                    if target not in best or rank < best[target]:
                        best[target] = rank
        classes = {v: best[v][2] for v in kept if v in best}
        for v in kept:
            if v not in classes:
                same = [classes[w] for w in kept if w[2] == v[2] and w in classes]
                if same:
                    classes[v] = same[0]
        return classes

    def _outer_class(self, block: Block, offset: int) -> str | None:
        cell = [t for t in (block.column_header(offset), block.row_header()) if t]
        for texts in (cell, [block.lead] if block.lead else [], *([h] for h in reversed(block.headings))):
            if texts and (name := self.cfg.first_class(texts)):
                return name
        return None

    def _scopes(self, block: Block, sentence: str) -> list[str]:
        levels = [sentence, block.scope_text(), *reversed(block.headings), self.path]
        for text in levels:
            if found := self.cfg.scopes_in(text):
                return found
        return [FALLBACK_SCOPE]


class ClaimsProbe:
    kind = "docs.claims"
    summary = ("Version mentions in Markdown docs, understood: heading path, paragraph/list/table/code context, "
               "product attribution, class (support/history/other) and scope (gpu/npu/general).")
    params_schema: Mapping[str, Any] = PARAMS_SCHEMA
    fact_schema: Mapping[str, Any] = FACT_SCHEMA

    def side_effects(self, params: Mapping[str, Any]) -> frozenset[str]:
        return frozenset()

    def run(self, params: Mapping[str, Any], ctx: ProbeContext) -> ProbeResult:
        cfg = _Config.from_params(params)  # bad patterns fail before any file is read
        tree = read_tree(params, ctx, default_include=DEFAULT_INCLUDE)
        mentions: list[dict[str, Any]] = []
        for path, text in tree.files:
            mentions.extend(_Document(path, text, cfg).mentions())
        claims = [m for m in mentions if m["class"] == "support"]
        scopes = [*cfg.scopes, FALLBACK_SCOPE]
        value = {
            "mentions": mentions,
            "claims": claims,
            "by_scope": {s: sorted({m["version"] for m in claims if s in m["scopes"]}) for s in scopes},
            "by_class": {c: sorted({m["version"] for m in mentions if m["class"] == c})
                         for c in [*cfg.classes, FALLBACK_CLASS]},
            "files_scanned": len(tree.files),
            "files": [path for path, _ in tree.files],
            "root": str(tree.root), "rev": tree.rev, "rev_sha": tree.rev_sha, "skipped": tree.skipped,
        }
        return ProbeResult(value=value, commands=tree.commands, repo_path=tree.repo_path,
                           repo_head=tree.repo_head, sources=[str(tree.root)])


PROBES: list[Any] = [ClaimsProbe()]
