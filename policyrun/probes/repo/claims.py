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

The Markdown block reader (repo/markdownblocks.py) and the grammar of bounds (repo/versionbounds.py)
are modules of their own; this one attributes, classifies and scopes each mention.
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
from policyrun.probes.repo.markdownblocks import Block, parse_blocks
from policyrun.probes.repo.versionbounds import bounds as version_bounds

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
            bounds = version_bounds(text, s.versions, s.start, s.end)
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
