"""`tests.junit`: test results from JUnit XML (as pytest writes it) or pytest's report-log JSONL.

JUnit XML comes from test runners and CI artifacts, i.e. from outside, so parsing is defensive:
a document type declaration (the only place entities can be declared, hence the only way to a
"billion laughs" or external-entity attack) is refused the moment expat sees it, before any
of it is processed. The parse streams (expat fed 1 MiB at a time, no element tree is built), so
memory holds the fact value and one chunk, whatever the file's size.

Outcomes, one per testcase: a <failure> child → failed; else <error> → error; else <skipped>
→ skipped (pytest writes xfail as <skipped type="pytest.xfail">, counted in skipped and again in
`xfailed`); else passed. A test that failed and then errored in teardown is counted once, as
failed, so `tests == passed + failed + errors + skipped` always holds. pytest reports a module
that failed to import as a testcase with an empty classname and an <error>: it is an error and
is also listed in `collection_errors`. A module skipped at collection (`pytest.importorskip` at
module level) is such a testcase with <skipped message="collection skipped"> whose body is the
repr of `(path, line, "Skipped: reason")`: a skip, also listed in `collection_skips` with the
module, file, line and reason read from that tuple.

The commit a results file ran on is recorded where the run wrote it: a `policyrun.commit`
property of a <testsuites> or <testsuite> element, or a sidecar file beside it named `<file>.commit`
(`git rev-parse HEAD > unit.xml.commit`); both or several suites naming different commits is a
conflict, kept as such. A gate can then refuse results from another commit, or with none.

Text kept in the fact is capped at TEXT_CAP characters per message attribute or element body:
a log pasted into a failure must not become a 300 MB fact. Each cut is listed in `truncated`.
"""

from __future__ import annotations

import ast
import glob
import hashlib
import json
import re
from collections.abc import Iterator, Mapping
from math import isfinite
from pathlib import Path
from typing import Any
from xml.parsers import expat

from policyrun import limits
from policyrun.errors import PolicyrunError
from policyrun.jsonfile import parse_json
from policyrun.probes.base import ProbeContext, ProbeError, ProbeResult

OUTCOMES = ("passed", "failed", "error", "skipped")
_RANK = {"passed": 0, "skipped": 1, "error": 2, "failed": 3}  # which phase outcome names a test
_PYTEST_LOCATION = re.compile(r"^(\S+):(\d+): ")  # "path/test_x.py:12: " before a skip reason in the text
# The crash location pytest prints last in a failure body: "tests/unit/test_x.py:90: AssertionError".
_CRASH_LINE = re.compile(r"^([^\s:][^:\n]*):(\d+): ([A-Za-z_][\w.]*)[ \t]*$", re.MULTILINE)
_FEED = 1 << 20
COMMIT_PROPERTY = "policyrun.commit"
COMMIT_SIDECAR = ".commit"  # appended to the results file's name
_COMMIT_CAP = 200  # characters kept of a recorded commit (it is a SHA; anything longer is shown cut)
_HEX = re.compile(r"[0-9A-Fa-f]{7,64}")
TEXT_CAP = 64 * 1024  # characters kept of one message attribute or element body
# expat (before 2.6) re-scans an unfinished token from its start whenever more input arrives, and
# pyexpat hands it input 1 MiB at a time however large the Parse call: a 100 MB attribute, comment
# or processing instruction costs O(n^2) (18 s). Once a token has grown past this many bytes, the
# rest of it is skipped in the file (hashed, never fed) and the token is closed where it ends.
HUGE_TOKEN = 4 * _FEED
# Where an unfinished start tag stands when it is inside an attribute value: group 1 is the quote.
_OPEN_ATTRIBUTE = re.compile(rb"<[^\s/>]+(?:\s+[^\s=/>]+\s*=\s*(?:\"[^\"]*\"|'[^']*'))*"
                             rb"\s+[^\s=/>]+\s*=\s*(?:(\")[^\"]*|(')[^']*)\Z")

_PARAMS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "One results file (glob allowed)."},
        "paths": {"type": "array", "items": {"type": "string"}, "minItems": 1,
                  "description": "Several results files or globs (** allowed); merged into one fact."},
        "format": {"enum": ["auto", "junit", "reportlog"], "default": "auto",
                   "description": "auto: .jsonl files are pytest report-logs, everything else JUnit XML."},
        "per_test": {"type": "boolean", "default": True,
                     "description": "Include the per-test map `tests` (turn off for very large runs)."},
    },
    "oneOf": [{"required": ["path"]}, {"required": ["paths"]}],
    "additionalProperties": False,
}

_STR = {"type": "string"}
_NSTR = {"type": ["string", "null"]}
_NINT = {"type": ["integer", "null"]}
_ISSUE = {"type": "object", "properties": {
    "id": {"type": "string", "description": "classname::name (file::name without a classname)."},
    "message": _NSTR, "type": _NSTR, "classname": _NSTR, "name": _STR,
    "file": {"type": ["string", "null"], "description": "Where it failed: the last `path:line: Error` line of the "
             "body (pytest's crash location), else null."},
    "line": {"type": ["integer", "null"], "description": "1-based line of that location."},
    "truncated": {"type": "boolean", "description": f"The message or body was cut at {TEXT_CAP} characters."}}}
_FACT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "totals": {"type": "object", "properties": {k: {"type": "integer"} for k in (
            "tests", "passed", "failed", "errors", "skipped", "xfailed", "collection_errors",
            "collection_skipped")}},
        "duration": {"type": "number", "description": "Sum of test durations, seconds."},
        "tests": {"type": ["object", "null"], "additionalProperties": {"type": "object", "properties": {
            "outcome": {"enum": list(OUTCOMES)}, "duration": {"type": "number"},
            "message": {"type": ["string", "null"]},
            "properties": {"type": ["object", "null"], "description": "null when the test recorded none"},
            "file": {"type": ["string", "null"]}, "line": {"type": ["integer", "null"]}}}},
        "skips": {"type": "array", "items": {"type": "object", "properties": {
            "id": _STR, "reason": _STR, "kind": {"enum": ["skip", "xfail"]}, "type": _NSTR,
            "collection": {"type": "boolean", "description": "A whole module skipped at collection."},
            "file": {"type": ["string", "null"], "description": "Where the skip was raised, when the report says."},
            "line": {"type": ["integer", "null"], "description": "1-based line of that place."}}}},
        "collection_skips": {"type": "array", "description": "Test modules skipped whole at collection.",
                             "items": {"type": "object", "properties": {
                                 "id": _STR, "module": _STR, "file": _NSTR, "line": _NINT, "reason": _STR}}},
        "skip_reasons": {"type": "object", "additionalProperties": {"type": "integer"}},
        "failures": {"type": "array", "items": _ISSUE},
        "errors": {"type": "array", "items": _ISSUE},
        "collection_errors": {"type": "array", "items": _ISSUE},
        "failed_ids": {"type": "array", "items": _STR, "description": "Ids of failed tests, in report order."},
        "error_ids": {"type": "array", "items": _STR, "description": "Ids of erroring tests, in report order."},
        "truncated": {"type": "array", "description": f"Texts cut at {TEXT_CAP} characters.",
                      "items": {"type": "object", "properties": {
                          "id": _STR, "what": {"enum": ["message", "body", "property", "attribute"]},
                          "size": {"type": "integer", "description": "Characters before the cut."}}}},
        "duplicates": {"type": "array", "items": {"type": "string"}},
        "suites": {"type": "array", "items": {"type": "string"}},
        "files": {"type": "array", "items": {"type": "object", "properties": {
            "path": {"type": "string"}, "sha256": {"type": "string"}, "format": {"type": "string"},
            "tests": {"type": "integer"},
            "commit": {"type": ["string", "null"], "description": f"The commit the run recorded (`{COMMIT_PROPERTY}` "
                       f"suite property or `<file>{COMMIT_SIDECAR}` sidecar); null when none or when they conflict."},
            "commit_source": {"type": ["string", "null"], "description": "`property`, `sidecar`, or null."},
            "commit_conflict": {"type": "array", "items": {"type": "string"},
                                "description": "The different commits the file and its sidecar name (empty "
                                               "when they agree)."}}}},
    },
}


def _first_line(text: str | None) -> str | None:
    if not text:
        return None
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return None


def _collection_message(text: str | None, attr: str | None) -> str | None:
    """The line that says why collection failed: pytest marks it with `E   `."""
    for line in (text or "").splitlines():
        if line.startswith("E "):
            return line[1:].strip()
    return _first_line(text) or _first_line(attr)


def _crash_location(body: str | None) -> tuple[str | None, int | None]:
    """pytest ends a failure body with `path:line: ErrorType`; the last such line is where it failed."""
    last = None
    for last in _CRASH_LINE.finditer(body or ""):
        pass
    return (last.group(1), int(last.group(2))) if last else (None, None)


def _skip_tuple(body: str | None) -> tuple[str, int, str] | None:
    """pytest's body for a skip at collection: the repr of `(path, line, "Skipped: reason")`."""
    text = (body or "").strip()
    if not (text.startswith("(") and text.endswith(")")):
        return None
    try:
        value = ast.literal_eval(text)  # literals only: nothing in the report is ever run
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None
    if (isinstance(value, tuple) and len(value) == 3 and isinstance(value[0], str) and isinstance(value[1], int)
            and isinstance(value[2], str)):
        return value[0], value[1], _strip_skipped(value[2])
    return None


def _skip_reason(message: str | None, body: str | None) -> tuple[str, str | None, int | None]:
    """A skip's reason, file and line: the collection tuple in the body, else the message
    attribute (pytest writes the clean reason there), else the body without its `path:line: `."""
    found = _skip_tuple(body)
    if found:
        return found[2], found[0], found[1]
    first = _first_line(body) or ""
    where = _PYTEST_LOCATION.match(first)
    file, line = (where.group(1), int(where.group(2))) if where else (None, None)
    if message is not None:
        return message, file, line
    return (first[where.end():] if where else first), file, line


class _Results:
    """Accumulates testcases from any number of files into the fact value."""

    def __init__(self, per_test: bool) -> None:
        self.per_test = per_test
        self.tests: dict[str, dict[str, Any]] = {}
        self.counts = dict.fromkeys(("tests", "passed", "failed", "errors", "skipped", "xfailed",
                                     "collection_errors", "collection_skipped"), 0)
        self.duration = 0.0
        self.skips: list[dict[str, Any]] = []
        self.skip_reasons: dict[str, int] = {}
        self.failures: list[dict[str, Any]] = []
        self.errors: list[dict[str, Any]] = []
        self.collection_errors: list[dict[str, Any]] = []
        self.collection_skips: list[dict[str, Any]] = []
        self.truncated: list[dict[str, Any]] = []
        self.duplicates: list[str] = []
        self.suites: list[str] = []
        self.files: list[dict[str, Any]] = []
        self.seen: set[str] = set()
        self.file_commits: list[str] = []  # the file being parsed: its suites' recorded commits

    def failure(self, issue: dict[str, Any]) -> None:
        self.counts["failed"] += 1
        self.failures.append(issue)

    def error(self, issue: dict[str, Any], *, collection: bool) -> None:
        self.counts["errors"] += 1
        self.errors.append(issue)
        if collection:
            self.counts["collection_errors"] += 1
            self.collection_errors.append(issue)

    def skip(self, test_id: str, reason: str, mtype: str | None, *, xfail: bool, file: str | None,
             line: int | None, module: str | None) -> None:
        c = self.counts
        c["skipped"] += 1
        if xfail:
            c["xfailed"] += 1
        collection = module is not None
        self.skips.append({"id": test_id, "reason": reason, "kind": "xfail" if xfail else "skip", "type": mtype,
                           "collection": collection, "file": file, "line": line})
        self.skip_reasons[reason] = self.skip_reasons.get(reason, 0) + 1
        if module is not None:
            c["collection_skipped"] += 1
            self.collection_skips.append({"id": test_id, "module": module, "file": file, "line": line,
                                          "reason": reason})

    def add(self, test_id: str, outcome: str, duration: float, message: str | None, mtype: str | None,
            properties: dict[str, Any] | None, file: str | None, line: int | None, *, xfail: bool = False,
            collection: bool = False, where: tuple[str | None, int | None] = (None, None)) -> None:
        """One report-log test. `where` is the failure's crash location or the skip's place."""
        cut = message is not None and len(message) > TEXT_CAP
        if message is not None and cut:
            self.truncated.append({"id": test_id, "what": "message", "size": len(message)})
            message = message[:TEXT_CAP]
        self.counts["tests"] += 1
        self.duration += duration
        classname, _, name = test_id.rpartition("::")
        issue = {"id": test_id, "message": message, "type": mtype, "classname": classname or None, "name": name,
                 "file": where[0], "line": where[1], "truncated": cut}
        if outcome == "passed":
            self.counts["passed"] += 1
        elif outcome == "failed":
            self.failure(issue)
        elif outcome == "error":
            self.error(issue, collection=collection)
        else:
            self.skip(test_id, message or "", mtype, xfail=xfail, file=where[0], line=where[1],
                      module=test_id if collection else None)
        if test_id in self.seen:
            self.duplicates.append(test_id)
        else:
            self.seen.add(test_id)
        if self.per_test:
            self.tests[test_id] = {"outcome": outcome, "duration": duration, "message": message,
                                   "properties": properties, "file": file, "line": line}

    def value(self) -> dict[str, Any]:
        return {
            "totals": dict(self.counts),
            "duration": round(self.duration, 6),
            "tests": self.tests if self.per_test else None,
            "skips": self.skips,
            "skip_reasons": dict(sorted(self.skip_reasons.items())),
            "collection_skips": self.collection_skips,
            "failures": self.failures,
            "errors": self.errors,
            "collection_errors": self.collection_errors,
            "failed_ids": [f["id"] for f in self.failures],
            "error_ids": [e["id"] for e in self.errors],
            "truncated": self.truncated,
            "duplicates": sorted(set(self.duplicates)),
            "suites": self.suites,
            "files": self.files,
        }


class _Unsafe(Exception):
    pass


def _parse_junit(path: Path, shown: str, acc: _Results) -> tuple[str, int]:
    """One streaming expat pass; Python runs only for the elements a test report needs.

    expat calls `start` for every element; a testcase becomes its fact entry right there, and
    the children that change it (failure, error, skipped, property) update the entry of the
    open testcase. Character data is collected only while inside an element whose text is
    needed (the body of a failure, error or skip; a property written as text), by installing
    the handler for that element alone: most of the file never reaches Python.
    """
    ids: list[str] = []  # two lists rather than a list of pairs: no tuple per testcase for the GC
    entries: list[dict[str, Any]] = []
    commits = acc.file_commits  # suite-level `policyrun.commit` values of this file
    seen = acc.seen
    suites = acc.suites
    cur: dict[str, Any] | None = None  # the open testcase's entry
    cur_collection = False
    cur_names: tuple[str | None, str] = (None, "")
    skipped: list[int] = []  # bytes _feed left out of the start tag being parsed
    text: list[str] = []
    text_len = 0
    text_tag: str | None = None
    text_target: tuple[dict[str, Any], str] | None = None
    text_owner: dict[str, Any] | None = None
    p = expat.ParserCreate()

    def refuse_doctype(*_: Any) -> None:
        raise _Unsafe("a DOCTYPE declaration")

    def refuse_entity(*_: Any) -> None:
        raise _Unsafe("an ENTITY declaration")

    def chardata(data: str) -> None:
        nonlocal text_len
        if text_len < TEXT_CAP:  # beyond the cap only the length is kept: memory stays bounded
            text.append(data)
        text_len += len(data)

    def capture(tag: str, entry: dict[str, Any], key: str) -> None:
        nonlocal text_tag, text_target, text_owner, text_len
        text.clear()
        text_len = 0
        text_tag, text_target, text_owner = tag, (entry, key), cur
        p.CharacterDataHandler = chardata

    def cut(value: str | None, what: str) -> str | None:
        if value is not None and len(value) > TEXT_CAP:
            assert cur is not None
            cur.setdefault("_cut", []).append((what, len(value)))
            return value[:TEXT_CAP]
        return value

    def start(name: str, a: dict[str, str]) -> None:
        nonlocal cur, cur_collection, cur_names
        dropped: list[tuple[str, int]] = []
        if skipped and a:  # _feed left out the middle of this tag's long attributes: note their sizes
            extra = sum(skipped)
            for key in sorted(a, key=lambda k: -len(a[k])):
                if len(a[key]) > TEXT_CAP:
                    what = "message" if key == "message" else "property" if name == "property" else "attribute"
                    dropped.append((what, len(a[key]) + extra))
                    a[key], extra = a[key][:TEXT_CAP], 0
            skipped.clear()
        if dropped and cur is not None and name != "testcase":
            cur.setdefault("_cut", []).extend(dropped)
        if name == "testcase":
            tname = a.get("name", "")
            classname = a.get("classname")
            file = a.get("file")
            try:
                duration = float(a.get("time") or 0.0)
            except ValueError:
                duration = 0.0
            if not isfinite(duration):  # "nan"/"inf" parse as floats; facts are strict JSON
                duration = 0.0
            line = a.get("line")
            # No container values (properties stay None until one appears): an entry made only
            # of strings and numbers is never tracked by the cyclic GC, which keeps 100,000 of
            # them cheap to hold.
            cur = {"outcome": "passed", "duration": duration, "message": None, "properties": None,
                   "file": file, "line": int(line) if line and line.isdigit() else None}
            # pytest reports a module it could not import (or skipped at collection) as
            # classname="" name="pkg.test_mod": a collection error or a collection skip.
            cur_collection = not classname or not tname
            cur_names = (classname or None, tname)
            test_id = f"{classname}::{tname}" if classname else f"{file}::{tname}" if file else tname
            ids.append(test_id)
            entries.append(cur)
            if test_id in seen:
                acc.duplicates.append(test_id)
            else:
                seen.add(test_id)
            if dropped:
                cur["_cut"] = dropped
        elif cur is None:
            acc.truncated.extend({"id": "", "what": w, "size": n} for w, n in dropped)
            if name == "testsuite":
                suites.append(a.get("name", ""))
            elif name == "property" and a.get("name") == COMMIT_PROPERTY and a.get("value") is not None:
                commits.append(a["value"].strip()[:_COMMIT_CAP])
        elif name == "failure":
            if cur["outcome"] != "failed":
                cur["outcome"] = "failed"
                cur["_type"] = a.get("type")
                cur["_names"] = cur_names
                cur["message"] = cut(_first_line(a.get("message")), "message")
                capture(name, cur, "_body")
        elif name == "error":
            if cur["outcome"] in ("passed", "skipped"):
                cur["outcome"] = "error"
                cur["_type"] = a.get("type")
                cur["_names"] = cur_names
                if cur_collection:
                    cur["_collection"] = cut(a.get("message"), "message") or ""
                    capture(name, cur, "_collection_text")
                else:
                    cur["message"] = cut(_first_line(a.get("message")), "message")
                    capture(name, cur, "_body")
        elif name == "skipped":
            if cur["outcome"] == "passed":
                cur["outcome"] = "skipped"
                cur["_type"] = a.get("type")
                cur["_skip_attr"] = cut(a.get("message"), "message")
                if cur_collection:
                    cur["_module"] = cur_names[1] or cur_names[0] or ""  # pytest: the dotted module
                capture(name, cur, "_skip_text")
        elif name == "property":
            props = cur["properties"]
            if props is None:
                props = cur["properties"] = {}
            if "value" in a:
                props[a.get("name", "")] = cut(a["value"], "property")
            else:
                props[a.get("name", "")] = None
                capture(name, props, a.get("name", ""))

    def end(name: str) -> None:
        nonlocal cur, text_tag, text_target, text_owner
        if name == "testcase":
            cur = None
        elif name == text_tag and text_target is not None:
            entry, key = text_target
            joined = "".join(text)
            if text_len > TEXT_CAP and text_owner is not None:
                text_owner.setdefault("_cut", []).append(("property" if name == "property" else "body", text_len))
                joined = joined[:TEXT_CAP]
            entry[key] = joined
            text.clear()
            text_tag = text_target = text_owner = None
            p.CharacterDataHandler = None

    def root(name: str, a: dict[str, str]) -> None:
        if name not in ("testsuites", "testsuite"):
            raise ProbeError("junit.not_junit", f"{shown}: root element is <{name}>, expected <testsuites> or "
                             "<testsuite>; is this a JUnit report?")
        p.StartElementHandler = start
        start(name, a)

    p.StartDoctypeDeclHandler = refuse_doctype
    p.EntityDeclHandler = refuse_entity
    p.StartElementHandler = root
    p.EndElementHandler = end
    p.buffer_text = True
    sha = hashlib.sha256()
    try:
        with path.open("rb") as f:
            _feed(p, f, sha, skipped)
    except _Unsafe as exc:
        raise ProbeError("junit.unsafe_xml", f"{shown}: refused: the file contains {exc}; test reports never "
                         "need one, and entities open the door to expansion bombs (billion laughs) and "
                         "external-entity reads. Regenerate the report or strip the DOCTYPE") from None
    except expat.ExpatError as exc:
        raise ProbeError("junit.parse_error", f"{shown}:{exc.lineno}:{exc.offset + 1}: not well-formed XML: "
                         f"{expat.ErrorString(exc.code)}") from None
    _tally(ids, entries, acc)
    return sha.hexdigest(), len(ids)


def _feed(p: Any, f: Any, sha: Any, skipped: list[int]) -> None:
    """Feed the file to expat, leaving out the middle of any token longer than HUGE_TOKEN.

    After each chunk, `CurrentByteIndex` is where the unfinished token began, so the bytes since
    then are that token's start. A comment or processing instruction is closed with its own
    terminator; a start tag stuck inside an attribute value with the value's quote (the tag's
    other attributes follow unchanged). The bytes left out are counted into `skipped`, which the
    start handler reads when the tag completes. Other tokens (a 5 MB tag name) are fed whole.
    """
    fed = 0
    pending = b""  # the unfinished token's bytes fed so far
    buf = b""
    while True:
        if not buf:
            buf = f.read(_FEED)
            if not buf:
                break
            sha.update(buf)
        chunk, buf = buf[:_FEED], buf[_FEED:]
        p.Parse(chunk, False)
        fed += len(chunk)
        waiting = fed - max(p.CurrentByteIndex, 0)
        pending = chunk[-waiting:] if 0 < waiting <= len(chunk) else pending + chunk if waiting > 0 else b""
        if len(pending) <= HUGE_TOKEN:
            continue
        if pending.startswith(b"<!--"):
            close, bridge = b"-->", b" "  # a space: the kept part may end with "-", and "--->" is not XML
        elif pending.startswith(b"<?"):
            close, bridge = b"?>", b""
        elif (m := _OPEN_ATTRIBUTE.match(pending)) is not None:
            close, bridge = m.group(1) or m.group(2), b""
        else:
            continue
        head, buf, dropped = _skip_until(f, sha, buf, close, pending)
        p.Parse(head + bridge, False)
        fed += len(head) + len(bridge)
        pending += head + bridge
        if close in (b'"', b"'"):
            skipped.append(dropped)
    p.Parse(b"", True)


def _skip_until(f: Any, sha: Any, buf: bytes, close: bytes, kept: bytes) -> tuple[bytes, bytes, int]:
    """Read past a huge token's middle up to `close`. Returns the bytes to feed before `close`
    (the rest of the UTF-8 character, or of the `&...;` reference, the kept part ends inside),
    the input from `close` on, and how many bytes were left out."""

    def more() -> bytes:
        data: bytes = f.read(_FEED)
        sha.update(data)
        return data

    while len(buf) < 64 and (extra := more()):
        buf += extra
    i = 0
    while i < len(buf) and 0x80 <= buf[i] < 0xC0:  # UTF-8 continuation bytes
        i += 1
    if close in (b'"', b"'") and kept.rfind(b"&") > kept.rfind(b";"):  # inside a reference
        end = buf.find(b";", i, i + 32)
        i = end + 1 if end >= 0 else i
    head, buf = buf[:i], buf[i:]
    dropped = 0
    keep = len(close) - 1  # a terminator may straddle two reads
    while (at := buf.find(close)) < 0:
        data = more()
        if not data:
            return head, buf, dropped  # unterminated: expat reports the file as malformed
        dropped += len(buf) - keep
        buf = buf[len(buf) - keep:] + data if keep else data
    return head, buf[at:], dropped + at


def _tally(ids: list[str], entries: list[dict[str, Any]], acc: _Results) -> None:
    """Totals and issue lists from the parsed entries; the private `_` keys are removed here."""
    c = acc.counts
    per_test = acc.per_test
    tests = acc.tests
    passed = 0
    duration = 0.0
    for test_id, d in zip(ids, entries):
        duration += d["duration"]
        if per_test:
            tests[test_id] = d
        outcome = d["outcome"]
        if outcome == "passed":
            passed += 1
            if "_cut" in d:  # a property value
                acc.truncated.extend({"id": test_id, "what": w, "size": n} for w, n in d.pop("_cut"))
            continue
        cuts = d.pop("_cut", ())
        acc.truncated.extend({"id": test_id, "what": w, "size": n} for w, n in cuts)
        mtype = d.pop("_type", None)
        if outcome == "skipped":
            reason, file, line = _skip_reason(d.pop("_skip_attr", None), d.pop("_skip_text", None))
            d["message"] = reason
            acc.skip(test_id, reason, mtype, xfail=mtype == "pytest.xfail", file=file, line=line,
                     module=d.pop("_module", None))
            continue
        classname, name = d.pop("_names")
        collection_attr = d.pop("_collection", None)
        if collection_attr is not None:
            d["message"] = _collection_message(d.pop("_collection_text", None), collection_attr)
            body = None
        else:
            body = d.pop("_body", None)
            if d["message"] is None:
                d["message"] = _first_line(body)
        file, line = _crash_location(body)
        issue = {"id": test_id, "message": d["message"], "type": mtype, "classname": classname or None,
                 "name": name, "file": file, "line": line, "truncated": any(w != "property" for w, _ in cuts)}
        if outcome == "failed":
            acc.failure(issue)
        else:
            acc.error(issue, collection=collection_attr is not None)
        for key in [k for k in d if k.startswith("_")]:  # left by an earlier child (a skip, then an error)
            del d[key]
    c["tests"] += len(ids)
    c["passed"] += passed
    acc.duration += duration


def _longrepr_message(longrepr: Any) -> str | None:
    if isinstance(longrepr, dict):
        crash = longrepr.get("reprcrash") or {}
        return _first_line(crash.get("message")) or _first_line(str(longrepr.get("longrepr") or ""))
    if isinstance(longrepr, (list, tuple)) and len(longrepr) == 3:  # (path, lineno, "Skipped: reason")
        return _strip_skipped(str(longrepr[2]))
    return _first_line(longrepr) if isinstance(longrepr, str) else None


def _longrepr_where(longrepr: Any) -> tuple[str | None, int | None]:
    """The 1-based place a report-log longrepr points at: a skip tuple's, or the crash's."""
    if isinstance(longrepr, (list, tuple)) and len(longrepr) == 3 and isinstance(longrepr[1], int):
        return str(longrepr[0]), longrepr[1]
    if isinstance(longrepr, dict):
        crash = longrepr.get("reprcrash") or {}
        path, line = crash.get("path"), crash.get("lineno")
        if isinstance(path, str) and isinstance(line, int):
            return path, line
    return None, None


def _strip_skipped(text: str) -> str:
    return text[len("Skipped: "):] if text.startswith("Skipped: ") else text


def _parse_reportlog(path: Path, shown: str, acc: _Results) -> tuple[str, int]:
    """pytest-reportlog: one JSON object per line; a test has setup/call/teardown reports."""
    before = acc.counts["tests"]
    sha = hashlib.sha256()
    tests: dict[str, dict[str, Any]] = {}
    order: list[str] = []
    with path.open("rb") as f:
        for lineno, raw in enumerate(f, 1):
            sha.update(raw)
            if not raw.strip():
                continue
            try:  # pytest writes NaN for some durations; nesting and duplicate keys are refused
                rec = parse_json(raw.decode("utf-8", "replace"), f"{shown}:{lineno}", what="report-log line",
                                 code="junit.bad_reportlog", max_depth=limits.RESULTS_DEPTH, allow_nonfinite=True)
            except PolicyrunError as exc:
                raise ProbeError("junit.bad_reportlog", f"{shown}:{lineno}: not a JSON line: {exc.message}") from None
            rtype = rec.get("$report_type") if isinstance(rec, dict) else None
            if rtype == "CollectReport":
                outcome, longrepr = rec.get("outcome"), rec.get("longrepr")
                if outcome in ("failed", "skipped"):
                    nodeid = rec.get("nodeid") or "<collection>"
                    t = tests.setdefault(nodeid, _blank(order, nodeid))
                    if outcome == "failed":
                        text = longrepr if isinstance(longrepr, str) else json.dumps(longrepr)
                        t.update(outcome="error", message=_collection_message(text, None), collection=True)
                    else:
                        t.update(outcome="skipped", message=_longrepr_message(longrepr) or "", collection=True,
                                 type="pytest.skip", where=_longrepr_where(longrepr))
                continue
            if rtype != "TestReport":
                continue
            nodeid = rec.get("nodeid", "")
            t = tests.get(nodeid) or tests.setdefault(nodeid, _blank(order, nodeid))
            when, outcome = rec.get("when"), rec.get("outcome")
            d = rec.get("duration")
            if isinstance(d, (int, float)) and isfinite(d):
                t["duration"] += float(d)
            for pair in rec.get("user_properties") or []:
                if isinstance(pair, (list, tuple)) and len(pair) == 2:
                    t["properties"][str(pair[0])] = pair[1]
            loc = rec.get("location")
            if isinstance(loc, (list, tuple)) and len(loc) >= 2 and t["file"] is None:
                t["file"] = loc[0]
                t["line"] = loc[1] if isinstance(loc[1], int) else None  # 0-based, as pytest writes it
            if outcome == "failed":
                phase = "failed" if when == "call" else "error"
                if "wasxfail" in rec and when == "call":
                    phase = "failed"  # strict xpass
                if _RANK[phase] > _RANK[t["outcome"]]:
                    t.update(outcome=phase, message=_longrepr_message(rec.get("longrepr")),
                             where=_longrepr_where(rec.get("longrepr")))
            elif outcome == "skipped":
                if _RANK["skipped"] > _RANK[t["outcome"]]:
                    xfail = "wasxfail" in rec
                    reason = rec.get("wasxfail") if xfail else _longrepr_message(rec.get("longrepr"))
                    t.update(outcome="skipped", message=reason or "", xfail=xfail,
                             type="pytest.xfail" if xfail else "pytest.skip",
                             where=(None, None) if xfail else _longrepr_where(rec.get("longrepr")))
    for nodeid in order:
        t = tests[nodeid]
        acc.add(nodeid, t["outcome"], round(t["duration"], 6), t["message"], t["type"], t["properties"] or None,
                t["file"], t["line"], xfail=t["xfail"], collection=t["collection"], where=t["where"])
    return sha.hexdigest(), acc.counts["tests"] - before


def _blank(order: list[str], nodeid: str) -> dict[str, Any]:
    order.append(nodeid)
    return {"outcome": "passed", "duration": 0.0, "message": None, "type": None, "properties": {},
            "file": None, "line": None, "xfail": False, "collection": False, "where": (None, None)}


def _expand(patterns: list[str], ctx: ProbeContext) -> Iterator[tuple[Path, str]]:
    seen: set[Path] = set()
    for pattern in patterns:
        full = ctx.resolve(pattern)
        if glob.has_magic(pattern):
            matches = sorted(Path(p) for p in glob.glob(str(full), recursive=True) if Path(p).is_file())
            if not matches:
                raise ProbeError("file.not_found", f"no file matches {pattern!r} (under {ctx.base_dir})")
        else:
            if not full.is_file():
                raise ProbeError("file.not_found", f"test report {str(full)!r} does not exist; run the tests "
                                 "with --junitxml first or fix the probe's path")
            matches = [full]
        for m in matches:
            if m not in seen:
                seen.add(m)
                yield m, str(m)


def _sidecar_commit(path: Path, shown: str) -> str | None:
    """The first non-empty line of `<file>.commit` beside the results file, or None without one."""
    sidecar = path.with_name(path.name + COMMIT_SIDECAR)
    if not sidecar.is_file():
        return None
    try:
        with sidecar.open("rb") as f:
            head = f.read(4096)  # a SHA and a newline; never read a huge file whole
    except OSError as exc:
        raise ProbeError("file.unreadable", f"cannot read {shown}{COMMIT_SIDECAR}: {exc.strerror or exc}") from None
    line = _first_line(head.decode("utf-8", "replace")) or ""
    return line[:_COMMIT_CAP]


def _commit_record(properties: list[str], sidecar: str | None) -> dict[str, Any]:
    """`commit`, `commit_source` and `commit_conflict` of one results file."""
    # A SHA is compared as git writes it (lowercase); anything else is kept as written, to be shown.
    named = [c.lower() if _HEX.fullmatch(c) else c for c in [*properties, sidecar or ""] if c]
    distinct = sorted(set(named))
    if len(distinct) > 1:
        return {"commit": None, "commit_source": None, "commit_conflict": distinct}
    if not distinct:
        return {"commit": None, "commit_source": None, "commit_conflict": []}
    source = "property" if any(properties) else "sidecar"
    return {"commit": distinct[0], "commit_source": source, "commit_conflict": []}


class JunitProbe:
    kind = "tests.junit"
    summary = ("Test results from JUnit XML (pytest and common variants) or pytest report-log JSONL: totals, "
               "per-test outcome and duration, every skip with its reason, failures, collection errors.")
    params_schema: Mapping[str, Any] = _PARAMS_SCHEMA
    fact_schema: Mapping[str, Any] = _FACT_SCHEMA

    def side_effects(self, params: Mapping[str, Any]) -> frozenset[str]:
        return frozenset()

    def run(self, params: Mapping[str, Any], ctx: ProbeContext) -> ProbeResult:
        patterns = list(params.get("paths") or []) + ([params["path"]] if params.get("path") else [])
        if not patterns:
            raise ProbeError("param.invalid", "tests.junit needs `path` or `paths`")
        fmt = params.get("format", "auto")
        acc = _Results(bool(params.get("per_test", True)))
        sources: list[str] = []
        for path, shown in _expand(patterns, ctx):
            kind = fmt if fmt != "auto" else ("reportlog" if path.suffix == ".jsonl" else "junit")
            acc.file_commits = []
            try:
                parse = _parse_reportlog if kind == "reportlog" else _parse_junit
                sha, count = parse(path, shown, acc)
            except OSError as exc:
                raise ProbeError("file.unreadable", f"cannot read {shown}: {exc.strerror or exc}") from None
            sidecar = _sidecar_commit(path, shown)
            acc.files.append({"path": shown, "sha256": sha, "format": kind, "tests": count,
                              **_commit_record(acc.file_commits, sidecar)})
            sources.append(shown)
            if sidecar is not None:
                sources.append(shown + COMMIT_SIDECAR)
        return ProbeResult(value=acc.value(), sources=sources)

    def empty_value(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """The fact for one report holding no test (`<testsuites/>`): what lint's L030 evaluates a
        phase's checks against."""
        acc = _Results(bool(params.get("per_test", True)))
        acc.files.append({"path": "report.xml", "sha256": hashlib.sha256(b"<testsuites/>").hexdigest(),
                          "format": "junit", "tests": 0, "commit": None, "commit_source": None,
                          "commit_conflict": []})
        return acc.value()


PROBES = [JunitProbe()]
