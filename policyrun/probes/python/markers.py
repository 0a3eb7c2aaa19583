"""`markers`: paired region markers in source files, and the comments that document them.

A vLLM plugin that copies upstream functions marks each changed span with a start and an end
comment (`# ### PATCH START: label` / `# ### PATCH END: label`) and documents the patched
function in a comment block above it (`# Patch reason: ...`, `# Upstream: ...`). Every part of
that convention is a parameter, so another plugin adapts by overriding `vars`; the defaults
match the real afd-plugin.

Patterns come from rulebooks, so they are compiled with RE2 (linear time: a pathological user
pattern cannot hang a probe) and matched against each line with its leading whitespace removed.
Python files are parsed with `ast` (never imported) for the enclosing function or class of each
region, the module docstring, and the extent of string literals, whose lines are never read as
comments; a file that does not parse is still scanned, line by line.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from policyrun.probes.base import ProbeContext, ProbeResult
from policyrun.probes._kit.linescan import LineScan
from policyrun.probes._kit.revfiles import SKIPPED_SCHEMA, TREE_PARAMS, read_tree
from policyrun.probes._kit.userregex import Match, Regex, user_regex


DEFAULT_START = r"^#\s*###\s*PATCH START\b:?\s*(?P<label>.*?)\s*$"
DEFAULT_END = r"^#\s*###\s*PATCH END\b:?\s*(?P<label>.*?)\s*$"
DEFAULT_FIELDS = {
    "reason": r"^#\s*Patch reason:\s*(.*)",
    "functionality": r"^#\s*Patch functionality:\s*(.*)",
    "signature": r"^#\s*Signature:\s*(.*)",
    "upstream": r"^#\s*Upstream(?: source)?:\s*(.*)",
    "commit": r"^#\s*Commit:\s*(.*)",
}
# A comment line that starts another "Label:" ends the value above it, configured field or not
# ("# Expansion exception: ..." must not be read as more of the functionality).
DEFAULT_FIELD_BREAK = r"^#\s*[A-Z][A-Za-z0-9 /_-]{0,40}:(\s|$)"
DEFAULT_SYMBOLS = r"``([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+)``"
DEFAULT_SECTION = r"^([A-Z][A-Za-z ]{0,40}):\s*$"
DEFAULT_COMMENT = r"^#+\s?"

_S = {"type": "string"}
_NS = {"type": ["string", "null"]}
_I = {"type": "integer"}
_FIELDS_FACT = {"type": "object", "additionalProperties": {"type": "string"},
                "description": "Field name → text (continuation lines joined with spaces)."}
_REGION = {"type": "object", "properties": {
    "start_line": _I, "end_line": {"type": ["integer", "null"], "description": "null: never closed."},
    "label": {"type": ["string", "null"], "description": "The start marker's label (null when it has none)."},
    "end_label": _NS, "depth": {"type": "integer", "description": "1 for a region inside no other region."},
    "enclosing": {"type": ["string", "null"], "description": "Qualified name of the innermost def/class holding "
                  "the start marker (`Cls.method`, `outer.<locals>.inner`); null at module level or unparsed."},
    "doc_line": {"type": ["integer", "null"], "description": "First line of the comment block the fields came "
                 "from (above the enclosing def/class, or above the start marker)."},
    "fields": _FIELDS_FACT}}
_FILE = {"type": "object", "properties": {
    "file": _S, "starts": _I, "ends": _I, "balanced": {"type": "boolean"}, "max_depth": _I,
    "problems": {"type": "array", "items": {"type": "object", "properties": {"line": _I, "message": _S}}},
    "regions": {"type": "array", "items": _REGION},
    "fields": {"type": "object", "additionalProperties": {"type": "array", "items": _S},
               "description": "Field name → distinct values found in any comment block of the file."},
    "symbols": {"type": "array", "items": _S, "description": "symbol_pattern matches in the module docstring."},
    "docstring": _NS,
    "sections": {"type": "object", "additionalProperties": _S,
                 "description": "Docstring sections (`Why:`, `How:`, `Future plan:`) → their text."},
    "parsed": {"type": "boolean", "description": "The file parsed as Python (enclosing names are known)."},
    "field_sites": {"type": "array", "items": {"type": "object", "properties": {
        "line": _I, "block": _I, "form": {"enum": ["comment", "docstring"]}, "field": _S, "text": _S}},
        "description": "Every field value in a comment block or docstring, by line: `line` is the field's own "
                       "line, `block` the first line of its block."}}}

PARAMS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        **TREE_PARAMS,
        "include": TREE_PARAMS["include"] | {"default": ["*.py"]},
        "start": {"type": "string", "default": DEFAULT_START, "description": "RE2 pattern of a start marker "
                  "line; an optional group named `label` is the region's label."},
        "end": {"type": "string", "default": DEFAULT_END, "description": "RE2 pattern of an end marker line "
                "(optional group `label`)."},
        "fields": {"type": "object", "additionalProperties": {"type": "string"}, "default": DEFAULT_FIELDS,
                   "description": "Field name → RE2 pattern with one group, matched against comment lines."},
        "field_break": {"type": "string", "default": DEFAULT_FIELD_BREAK, "description": "A comment line "
                        "matching this ends the field value it would otherwise continue."},
        "comment": {"type": "string", "default": DEFAULT_COMMENT, "description": "Comment prefix, stripped "
                    "from continuation lines; lines it matches form comment blocks."},
        "symbol_pattern": {"type": "string", "default": DEFAULT_SYMBOLS, "description": "RE2 pattern whose "
                           "group 1 (or whole match) is a patched symbol named in the module docstring."},
        "section_pattern": {"type": "string", "default": DEFAULT_SECTION, "description": "A docstring line "
                            "matching this (group 1: the name) starts a section."},
        "include_unmarked": {"type": "boolean", "default": False,
                             "description": "Also list included files that have no marker."},
    },
    "additionalProperties": False,
}

FACT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "files": {"type": "array", "items": _FILE, "description": "Files with a marker (all included files "
                  "with include_unmarked), sorted by path."},
        "totals": {"type": "object", "properties": {
            "files": _I, "starts": _I, "ends": _I, "regions": _I, "unbalanced_files": _I,
            "files_scanned": _I}},
        "by_file": {"type": "object", "additionalProperties": {"type": "object", "properties": {
            "starts": _I, "ends": _I, "balanced": {"type": "boolean"},
            "has": {"type": "object", "additionalProperties": {"type": "boolean"},
                    "description": "Field name → found in some comment block of the file."}}}},
        "symbols": {"type": "array", "description": "Every (file, symbol) its module docstring names as patched, "
                    "flat, for joins.", "items": {"type": "object", "properties": {"file": _S, "symbol": _S}}},
        "field_rows": {"type": "array", "description": "Every field value of every file, flat, for joins: "
                       "`line` is the line the field's label is on (a value continued below keeps it), `block` "
                       "the first line of its comment block or docstring, `form` `comment` or `docstring`.",
                       "items": {"type": "object", "properties": {
                           "file": _S, "line": _I, "block": _I, "form": _S, "field": _S, "text": _S}}},
        "root": _S, "rev": _NS, "rev_sha": _NS, "skipped": SKIPPED_SCHEMA,
    },
}


def _flat_rows(files: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(symbol rows, field rows): the per-file lists flattened, so a rulebook joins them with the
    function library instead of nesting comprehensions."""
    symbols = [{"file": f["file"], "symbol": s} for f in files for s in f["symbols"]]
    rows = [{"file": f["file"], **site} for f in files for site in f["field_sites"]]
    return symbols, rows


def _docstring_line(raw: str, first: bool, last: bool) -> str:
    """A docstring's source line without its quotes (and string prefix on the first line)."""
    text = raw.strip()
    if first:
        text = text.lstrip("rRbBuUfF")
        for quote in ('"""', "'''", '"', "'"):
            if text.startswith(quote):
                text = text[len(quote):]
                break
    if last:
        for quote in ('"""', "'''", '"', "'"):
            if text.endswith(quote):
                text = text[:-len(quote)]
                break
    return text.strip()


@dataclass
class _Patterns:
    start: Regex
    end: Regex
    fields: dict[str, Regex]
    field_break: Regex
    comment: Regex
    symbols: Regex
    section: Regex
    # The same patterns scanning a file's lines at once (see linescan).
    scans: dict[str, LineScan] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.scans = {"comment": LineScan(self.comment), "start": LineScan(self.start), "end": LineScan(self.end),
                      "field_break": LineScan(self.field_break),
                      **{f"field:{name}": LineScan(regex) for name, regex in self.fields.items()}}

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> _Patterns:
        def rx(name: str, default: str, groups: int = 0) -> Regex:
            return user_regex(params.get(name, default), f"parameter `{name}`", code="markers.invalid_pattern",
                              groups=groups)

        fields = params.get("fields", DEFAULT_FIELDS)
        return cls(
            start=rx("start", DEFAULT_START), end=rx("end", DEFAULT_END),
            fields={name: user_regex(p, f"parameter `fields.{name}`", code="markers.invalid_pattern", groups=1)
                    for name, p in fields.items()},
            field_break=rx("field_break", DEFAULT_FIELD_BREAK), comment=rx("comment", DEFAULT_COMMENT),
            symbols=rx("symbol_pattern", DEFAULT_SYMBOLS), section=rx("section_pattern", DEFAULT_SECTION, 1))


def _label(m: Match, regex: Regex) -> str | None:
    if "label" in regex.groupindex:
        value = m.group("label")
    elif regex.groups:
        value = m.group(1)
    else:
        return None
    return value.strip() or None if value is not None else None


@dataclass
class _Scope:
    first: int  # first line of the definition, decorators included
    line: int  # the `def`/`class` line
    last: int
    qualname: str


@dataclass
class _Python:
    scopes: list[_Scope] = field(default_factory=list)
    in_strings: set[int] = field(default_factory=set)  # lines inside (not starting) a string literal
    docstring: str | None = None
    # (first, last) source lines of every docstring, by the `def`/`class` line it documents (0: the
    # module's): the plugin writes the same fields there as in comments ("Upstream source: ...").
    docstrings: dict[int, tuple[int, int]] = field(default_factory=dict)


def _python(text: str, path: str) -> _Python | None:
    """Scopes, string-literal lines and docstring of a Python file; None when it does not parse.
    Remembered per content, so the probes reading the same file at HEAD and in the working tree
    walk it once."""
    from policyrun.probes.python.source import memo, parse_source

    data = text.encode("utf-8", "surrogateescape")

    def compute() -> _Python | None:
        tree = parse_source(data, path)
        return _walk_python(tree) if isinstance(tree, ast.Module) else None
    return memo("markers.python", data, path, compute)


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _docstring_lines(node: ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef
                     ) -> tuple[int, int] | None:
    body = node.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        return body[0].lineno, body[0].end_lineno or body[0].lineno
    return None


def _walk_python(tree: ast.Module) -> _Python:
    out = _Python(docstring=ast.get_docstring(tree, clean=True))
    if (span := _docstring_lines(tree)) is not None:
        out.docstrings[0] = span

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, _SCOPES):
                qual = f"{prefix}{child.name}"
                first = min([child.lineno] + [d.lineno for d in child.decorator_list])
                out.scopes.append(_Scope(first, child.lineno, child.end_lineno or child.lineno, qual))
                if (span := _docstring_lines(child)) is not None:
                    out.docstrings[child.lineno] = span
                visit(child, qual + (".<locals>." if not isinstance(child, ast.ClassDef) else "."))
                continue
            end = getattr(child, "end_lineno", None)
            if end is not None and end == getattr(child, "lineno", None):
                # One line holds no multi-line string and no def or class (a compound statement
                # cannot follow another on its line): nothing below it matters. Most nodes are
                # such, and walking them was most of this probe's time.
                continue
            if isinstance(child, (ast.Constant, ast.JoinedStr)) and end and end > child.lineno and \
                    (isinstance(child, ast.JoinedStr) or isinstance(child.value, (str, bytes))):
                out.in_strings.update(range(child.lineno + 1, end + 1))
            visit(child, prefix)

    visit(tree, "")
    return out


def _enclosing(scopes: list[_Scope], line: int) -> list[_Scope]:
    """Scopes holding `line`, innermost first."""
    return sorted((s for s in scopes if s.line <= line <= s.last), key=lambda s: -s.line)


class _File:
    """One file's comment lines, markers and field values."""

    def __init__(self, path: str, text: str, pats: _Patterns, *, always: bool = False) -> None:
        self.path = path
        self.pats = pats
        self.lines = text.split("\n")
        self.stripped = {n: ln.strip() for n, ln in enumerate(self.lines, 1)}
        filled = [n for n, s in self.stripped.items() if s]
        self.comments = {filled[i] for i in pats.scans["comment"].matching([self.stripped[n] for n in filled])}
        self.markers: dict[int, tuple[str, str | None]] = {}  # line → (start|end, label)
        self._field_lines: dict[str, set[int]] | None = None  # scan name → comment lines it matches
        self._find_markers()
        # Parsing tells string literals from comments and names the enclosing functions, and it is
        # most of the cost: a file with no marker candidate (strings can only remove markers) is
        # parsed only when it is listed anyway.
        self.py = _python(text, path) if path.endswith((".py", ".pyi")) and (self.markers or always) else None
        if self.py is not None and self.py.in_strings:
            for n in self.py.in_strings:
                self.stripped.pop(n, None)
            self.comments -= self.py.in_strings
            self._find_markers()
        # Docstring lines read as comment lines ("# " + the line), so one field pattern serves
        # `# Upstream source: ...` above a def and `Upstream source: ...` in its docstring.
        self.doc_text: dict[int, str] = {}
        self.doc_blocks: dict[int, list[int]] = {}
        for owner, (first, last) in (self.py.docstrings.items() if self.py else ()):
            block = list(range(first, last + 1))
            for n in block:
                self.doc_text[n] = "# " + _docstring_line(self.lines[n - 1], n == first, n == last)
            self.doc_blocks[owner] = block

    def _find_markers(self) -> None:
        pats = self.pats
        self.markers = {}
        lines = sorted(self.comments)
        texts = [self.stripped[n] for n in lines]
        starts = pats.scans["start"].matching(texts)
        ends = pats.scans["end"].matching(texts)
        for i in sorted(set(starts) | set(ends)):
            s = texts[i]
            if (m := pats.start.search(s)) is not None:
                self.markers[lines[i]] = ("start", _label(m, pats.start))
            elif (m := pats.end.search(s)) is not None:
                self.markers[lines[i]] = ("end", _label(m, pats.end))

    def _matches(self, scan: str) -> set[int]:
        """The comment lines a field or field_break pattern matches (scanned once per file)."""
        if self._field_lines is None:
            lines = sorted(self.comments | self.doc_text.keys())
            texts = [self._text(n) for n in lines]
            self._field_lines = {name: {lines[i] for i in sc.matching(texts)}
                                 for name, sc in self.pats.scans.items() if name.startswith("field")}
        return self._field_lines[scan]

    def block_above(self, line: int) -> list[int]:
        """The contiguous comment lines ending right above `line` (marker lines end it)."""
        out: list[int] = []
        n = line - 1
        while n in self.comments and n not in self.markers:
            out.append(n)
            n -= 1
        return out[::-1]

    def _text(self, n: int) -> str:
        return self.doc_text.get(n) or self.stripped.get(n, "")

    def field_sites(self, block: list[int]) -> dict[str, list[tuple[int, str]]]:
        """Configured fields in a comment block (or docstring), each value with the line its label
        is on; a value goes on over the next lines until a blank comment, another label
        (`field_break`) or the block's end. A field given twice keeps both values."""
        values: dict[str, list[tuple[int, list[str]]]] = {}
        current: list[str] | None = None
        for n in block:
            s = self._text(n)
            hit = next(((name, m) for name, regex in self.pats.fields.items()
                        if n in self._matches(f"field:{name}") and (m := regex.search(s)) is not None), None)
            if hit is not None:
                current = [(hit[1].group(1) or "").strip()]
                values.setdefault(hit[0], []).append((n, current))
            elif current is not None and (body := self._body(s)) and n not in self._matches("field_break"):
                current.append(body)
            else:
                current = None
        return {name: [(line, " ".join(p for p in parts if p)) for line, parts in texts]
                for name, texts in values.items()}

    def fields_of(self, block: list[int]) -> dict[str, str]:
        """Field name → its value(s), one per line when given twice."""
        return {name: "\n".join(text for _, text in sites) for name, sites in self.field_sites(block).items()}

    def _body(self, s: str) -> str:
        m = self.pats.comment.search(s)
        return s[m.end():].strip() if m is not None and m.start() == 0 else s

    def blocks(self) -> list[list[int]]:
        """Every comment block, then every docstring, each a list of lines."""
        out: list[list[int]] = []
        for n in sorted(self.comments):
            if n in self.markers:
                continue
            if out and out[-1][-1] == n - 1:
                out[-1].append(n)
            else:
                out.append([n])
        return out + [self.doc_blocks[k] for k in sorted(self.doc_blocks)]

    def sites(self) -> list[dict[str, Any]]:
        """Every field value of the file with its own line, the first line of its block and the
        form it is written in (a `comment` block or a `docstring`)."""
        out: list[dict[str, Any]] = []
        for block in self.blocks():
            form = "docstring" if block[0] in self.doc_text else "comment"
            for name, found in self.field_sites(block).items():
                out.extend({"line": line, "block": block[0], "form": form, "field": name, "text": text}
                           for line, text in found if text)
        return sorted(out, key=lambda r: (r["line"], r["field"]))

    def fact(self) -> dict[str, Any]:
        regions, problems, max_depth = self._regions()
        union: dict[str, list[str]] = {}
        for block in self.blocks():
            for name, value in self.fields_of(block).items():
                for v in value.split("\n"):
                    if v and v not in union.setdefault(name, []):
                        union[name].append(v)
        doc = self.py.docstring if self.py else None
        starts = sum(1 for kind, _ in self.markers.values() if kind == "start")
        ends = len(self.markers) - starts
        return {
            "file": self.path, "starts": starts, "ends": ends, "balanced": not problems and starts == ends,
            "max_depth": max_depth, "problems": problems, "regions": regions,
            "fields": {name: union.get(name, []) for name in self.pats.fields if name in union},
            "field_sites": self.sites(),
            "symbols": _symbols(doc, self.pats.symbols), "docstring": doc,
            "sections": _sections(doc, self.pats.section), "parsed": self.py is not None,
        }

    def _regions(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]], int]:
        stack: list[dict[str, Any]] = []
        regions: list[dict[str, Any]] = []
        problems: list[dict[str, Any]] = []
        max_depth = 0
        for n in sorted(self.markers):
            kind, label = self.markers[n]
            if kind == "start":
                region = {"start_line": n, "end_line": None, "label": label, "end_label": None,
                          "depth": len(stack) + 1, **self._documentation(n)}
                stack.append(region)
                regions.append(region)
                max_depth = max(max_depth, len(stack))
                continue
            if not stack:
                problems.append({"line": n, "message": f"end marker{_shown(label)} has no open start marker"})
                continue
            at = len(stack) - 1
            if label is not None and stack[at]["label"] is not None and stack[at]["label"] != label:
                named = [i for i, r in enumerate(stack) if r["label"] == label]
                if named:  # the regions opened after the matching one were never closed
                    at = named[-1]
                    for r in stack[at + 1:]:
                        problems.append({"line": r["start_line"], "message": f"start marker{_shown(r['label'])} "
                                         f"is not closed before the end marker at line {n}"})
                else:
                    problems.append({"line": n, "message": f"end marker{_shown(label)} closes start marker"
                                     f"{_shown(stack[at]['label'])} of line {stack[at]['start_line']}"})
            stack[at].update(end_line=n, end_label=label)
            del stack[at:]
        for r in stack:
            problems.append({"line": r["start_line"], "message": f"start marker{_shown(r['label'])} is never closed"})
        problems.sort(key=lambda p: p["line"])
        return regions, problems, max_depth

    def _documentation(self, line: int) -> dict[str, Any]:
        """Fields of the nearest enclosing def/class whose comment block has any (a region in a
        nested helper is documented where the patched function is), overlaid with the comments
        right above the start marker."""
        scopes = _enclosing(self.py.scopes, line) if self.py else []
        fields: dict[str, str] = {}
        doc_line = None
        for scope in scopes:
            # The comment block above the definition, else its docstring.
            for block in (self.block_above(scope.first), self.doc_blocks.get(scope.line, [])):
                if block and (found := self.fields_of(block)):
                    fields, doc_line = found, block[0]
                    break
            if doc_line is not None:
                break
        above = self.block_above(line)
        if above and (found := self.fields_of(above)):
            fields = {**fields, **found}
            doc_line = doc_line or above[0]
        return {"enclosing": scopes[0].qualname if scopes else None, "doc_line": doc_line, "fields": fields}


def _shown(label: str | None) -> str:
    return f" {label!r}" if label else ""


def _symbols(doc: str | None, regex: Regex) -> list[str]:
    out: list[str] = []
    pos = 0
    while doc and (m := regex.search(doc, pos)) is not None:
        value = m.group(1) if regex.groups else m.group(0)
        if value and value not in out:
            out.append(value)
        pos = m.end() if m.end() > pos else pos + 1
    return out


def _sections(doc: str | None, regex: Regex) -> dict[str, str]:
    out: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in (doc or "").split("\n"):
        if (m := regex.search(line.strip())) is not None and not line.startswith((" ", "\t")):
            current = out.setdefault(m.group(1) or "", [])
        elif current is not None and line.strip():
            current.append(line.strip())
    return {name: " ".join(parts) for name, parts in out.items()}


class MarkersProbe:
    kind = "markers"
    summary = ("Paired region markers (PATCH START/END) in source files: balance, nesting, the enclosing "
               "function, the documenting comment fields (reason, upstream, ...) and the module docstring's "
               "patched symbols.")
    params_schema: Mapping[str, Any] = PARAMS_SCHEMA
    fact_schema: Mapping[str, Any] = FACT_SCHEMA

    def side_effects(self, params: Mapping[str, Any]) -> frozenset[str]:
        return frozenset()

    def run(self, params: Mapping[str, Any], ctx: ProbeContext) -> ProbeResult:
        pats = _Patterns.from_params(params)  # bad patterns fail before any file is read
        tree = read_tree(params, ctx, default_include=["*.py"])
        files = []
        for path, text in tree.files:
            f = _File(path, text, pats, always=bool(params.get("include_unmarked")))
            if f.markers or params.get("include_unmarked"):
                files.append(f.fact())
        value = {
            "files": files,
            "totals": {"files": len(files), "starts": sum(f["starts"] for f in files),
                       "ends": sum(f["ends"] for f in files), "regions": sum(len(f["regions"]) for f in files),
                       "unbalanced_files": sum(1 for f in files if not f["balanced"]),
                       "files_scanned": len(tree.files)},
            "by_file": {f["file"]: {"starts": f["starts"], "ends": f["ends"], "balanced": f["balanced"],
                                    "has": {name: name in f["fields"] for name in pats.fields}} for f in files},
            "root": str(tree.root), "rev": tree.rev, "rev_sha": tree.rev_sha, "skipped": tree.skipped,
        }
        value["symbols"], value["field_rows"] = _flat_rows(files)
        return ProbeResult(value=value, commands=tree.commands, repo_path=tree.repo_path,
                           repo_head=tree.repo_head, sources=[str(tree.root)])


PROBES: list[Any] = [MarkersProbe()]
