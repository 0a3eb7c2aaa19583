"""`tests.junit`: test results from JUnit XML (as pytest writes it) or pytest's report-log JSONL.

JUnit XML comes from test runners and CI artifacts, i.e. from outside, so parsing is defensive:
a document type declaration (the only place entities can be declared, hence the only way to a
"billion laughs" or external-entity attack) is refused before the real parse starts, using
expat on the prolog alone. The real parse streams with `iterparse` and clears every testcase
once read, so memory stays flat for a 100,000-test file.

Outcomes, one per testcase: a <failure> child → failed; else <error> → error; else <skipped>
→ skipped (pytest writes xfail as <skipped type="pytest.xfail">, counted in skipped and again in
`xfailed`); else passed. A test that failed and then errored in teardown is counted once, as
failed, so `tests == passed + failed + errors + skipped` always holds. pytest reports a module
that failed to import as a testcase with an empty classname and an <error>: it is an error and
is also listed in `collection_errors`.
"""

from __future__ import annotations

import gc
import glob
import hashlib
import json
import re
import threading
import xml.etree.ElementTree as ET
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from xml.parsers import expat

from policyrun.probes.base import ProbeContext, ProbeError, ProbeResult

OUTCOMES = ("passed", "failed", "error", "skipped")
_RANK = {"passed": 0, "skipped": 1, "error": 2, "failed": 3}  # which phase outcome names a test
_PYTEST_LOCATION = re.compile(r"^\S+:\d+: ")  # "path/test_x.py:12: " before a skip reason in the text
_CHUNK = 1 << 16
_FEED = 1 << 20

_PARAMS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "path": {"type": "string", "description": "One results file (glob allowed)."},
        "paths": {"type": "array", "items": {"type": "string"}, "minItems": 1,
                  "description": "Several results files or globs (** allowed); merged into one fact."},
        "format": {"enum": ["auto", "junit", "reportlog"], "default": "auto",
                   "description": "auto: .jsonl/.json files are pytest report-logs, everything else JUnit XML."},
        "per_test": {"type": "boolean", "default": True,
                     "description": "Include the per-test map `tests` (turn off for very large runs)."},
    },
    "oneOf": [{"required": ["path"]}, {"required": ["paths"]}],
    "additionalProperties": False,
}

_ISSUE = {"type": "object", "properties": {"id": {"type": "string"}, "message": {"type": ["string", "null"]},
                                           "type": {"type": ["string", "null"]}}}
_FACT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "totals": {"type": "object", "properties": {k: {"type": "integer"} for k in (
            "tests", "passed", "failed", "errors", "skipped", "xfailed", "collection_errors")}},
        "duration": {"type": "number", "description": "Sum of test durations, seconds."},
        "tests": {"type": ["object", "null"], "additionalProperties": {"type": "object", "properties": {
            "outcome": {"enum": list(OUTCOMES)}, "duration": {"type": "number"},
            "message": {"type": ["string", "null"]}, "properties": {"type": "object"},
            "file": {"type": ["string", "null"]}, "line": {"type": ["integer", "null"]}}}},
        "skips": {"type": "array", "items": {"type": "object", "properties": {
            "id": {"type": "string"}, "reason": {"type": "string"}, "kind": {"enum": ["skip", "xfail"]},
            "type": {"type": ["string", "null"]}}}},
        "skip_reasons": {"type": "object", "additionalProperties": {"type": "integer"}},
        "failures": {"type": "array", "items": _ISSUE},
        "errors": {"type": "array", "items": _ISSUE},
        "collection_errors": {"type": "array", "items": _ISSUE},
        "duplicates": {"type": "array", "items": {"type": "string"}},
        "suites": {"type": "array", "items": {"type": "string"}},
        "files": {"type": "array", "items": {"type": "object", "properties": {
            "path": {"type": "string"}, "sha256": {"type": "string"}, "format": {"type": "string"},
            "tests": {"type": "integer"}}}},
    },
}


_gc_lock = threading.Lock()
_gc_pausers = 0
_gc_was_enabled = False


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a large report is read.

    Reading 100,000 testcases allocates a few hundred thousand containers that all stay alive
    (the fact value) and form no cycles; the collector would re-scan them again and again,
    which costs about as much as the parse itself. Reference counting still frees everything.
    Pauses nest across threads (probes run in parallel): the last one out restores the state.
    """
    global _gc_pausers, _gc_was_enabled
    with _gc_lock:
        if _gc_pausers == 0:
            _gc_was_enabled = gc.isenabled()
            gc.disable()
        _gc_pausers += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_pausers -= 1
            if _gc_pausers == 0 and _gc_was_enabled:
                gc.enable()


class _RootSeen(Exception):
    pass


class _Unsafe(Exception):
    pass


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


class _Results:
    """Accumulates testcases from any number of files into the fact value."""

    def __init__(self, per_test: bool) -> None:
        self.per_test = per_test
        self.tests: dict[str, dict[str, Any]] = {}
        self.counts = dict.fromkeys(("tests", "passed", "failed", "errors", "skipped", "xfailed",
                                     "collection_errors"), 0)
        self.duration = 0.0
        self.skips: list[dict[str, Any]] = []
        self.skip_reasons: dict[str, int] = {}
        self.failures: list[dict[str, Any]] = []
        self.errors: list[dict[str, Any]] = []
        self.collection_errors: list[dict[str, Any]] = []
        self.duplicates: list[str] = []
        self.suites: list[str] = []
        self.files: list[dict[str, Any]] = []
        self.seen: set[str] = set()

    def add(self, test_id: str, outcome: str, duration: float, message: str | None, mtype: str | None,
            properties: dict[str, Any], file: str | None, line: int | None, *, xfail: bool = False,
            collection: bool = False) -> None:
        c = self.counts
        c["tests"] += 1
        self.duration += duration
        if outcome == "passed":
            c["passed"] += 1
        elif outcome == "failed":
            c["failed"] += 1
            self.failures.append({"id": test_id, "message": message, "type": mtype})
        elif outcome == "error":
            c["errors"] += 1
            issue = {"id": test_id, "message": message, "type": mtype}
            self.errors.append(issue)
            if collection:
                c["collection_errors"] += 1
                self.collection_errors.append(issue)
        else:
            c["skipped"] += 1
            reason = message or ""
            if xfail:
                c["xfailed"] += 1
            self.skips.append({"id": test_id, "reason": reason, "kind": "xfail" if xfail else "skip", "type": mtype})
            self.skip_reasons[reason] = self.skip_reasons.get(reason, 0) + 1
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
            "failures": self.failures,
            "errors": self.errors,
            "collection_errors": self.collection_errors,
            "duplicates": sorted(set(self.duplicates)),
            "suites": self.suites,
            "files": self.files,
        }


def _root_tag(path: Path, shown: str) -> str:
    """The root element's name, after refusing a DOCTYPE (and so any ENTITY) in the prolog.

    Entities can only be declared in a DOCTYPE, which can only come before the root element,
    so stopping expat at the root's start tag checks everything that matters, cheaply.
    """

    def doctype(*_: Any) -> None:
        raise _Unsafe("a DOCTYPE declaration")

    def entity(*_: Any) -> None:
        raise _Unsafe("an ENTITY declaration")

    def root(name: str, _attrs: Any) -> None:
        raise _RootSeen(name)

    p = expat.ParserCreate()
    p.StartDoctypeDeclHandler = doctype
    p.EntityDeclHandler = entity
    p.StartElementHandler = root
    try:
        with path.open("rb") as f:
            while chunk := f.read(_CHUNK):
                p.Parse(chunk, False)
            p.Parse(b"", True)
    except _RootSeen as seen:
        return str(seen.args[0])
    except _Unsafe as exc:
        raise ProbeError("junit.unsafe_xml", f"{shown}: refused: the file contains {exc}; test reports never "
                         "need one, and entity expansion is a denial-of-service vector (billion laughs). "
                         "Regenerate the report or strip the DOCTYPE") from None
    except expat.ExpatError as exc:
        raise ProbeError("junit.parse_error", f"{shown}:{exc.lineno}:{exc.offset + 1}: not well-formed XML: "
                         f"{expat.ErrorString(exc.code)}") from None
    raise ProbeError("junit.not_junit", f"{shown}: no root element")  # unreachable: expat rejects that


def _parse_junit(path: Path, shown: str, acc: _Results) -> tuple[str, int]:
    root = _root_tag(path, shown)
    if root not in ("testsuites", "testsuite"):
        raise ProbeError("junit.not_junit", f"{shown}: root element is <{root}>, expected <testsuites> or "
                         "<testsuite>; is this a JUnit report?")
    before = acc.counts["tests"]
    add = acc.add
    tests = acc.tests if acc.per_test else None
    seen = acc.seen
    suites = acc.suites
    passed = 0
    duration = 0.0
    sha = hashlib.sha256()
    # A pull parser fed by hand: the C parser builds each element, Python sees only "end"
    # events, and every testcase is cleared as soon as it is read.
    parser = ET.XMLPullParser(events=("end",))
    read_events = parser.read_events
    try:
        with path.open("rb") as f:
            while True:
                chunk = f.read(_FEED)
                if chunk:
                    sha.update(chunk)
                    parser.feed(chunk)
                else:
                    parser.close()
                for _, elem in read_events():
                    tag = elem.tag
                    if tag == "testcase":
                        if len(elem):
                            _testcase(elem, add)
                        else:  # the common case, a plain pass: no call, no children to look at
                            a = elem.attrib
                            name = a.get("name", "")
                            classname = a.get("classname")
                            file = a.get("file")
                            test_id = f"{classname}::{name}" if classname else f"{file}::{name}" if file else name
                            try:
                                t = float(a.get("time") or 0.0)
                            except ValueError:
                                t = 0.0
                            passed += 1
                            duration += t
                            if test_id in seen:
                                acc.duplicates.append(test_id)
                            else:
                                seen.add(test_id)
                            if tests is not None:
                                line = a.get("line")
                                tests[test_id] = {"outcome": "passed", "duration": t, "message": None,
                                                  "properties": {}, "file": file,
                                                  "line": int(line) if line and line.isdigit() else None}
                        elem.clear()
                    elif tag == "testsuite":
                        suites.append(elem.get("name", ""))
                        elem.clear()
                if not chunk:
                    break
    except ET.ParseError as exc:
        line, col = exc.position
        raise ProbeError("junit.parse_error", f"{shown}:{line}:{col + 1}: not well-formed XML: "
                         f"{str(exc).split(':')[0]}") from None
    acc.counts["passed"] += passed
    acc.counts["tests"] += passed
    acc.duration += duration
    return sha.hexdigest(), acc.counts["tests"] - before


def _testcase(elem: ET.Element, add: Any) -> None:
    attrib = elem.attrib
    name = attrib.get("name", "")
    classname = attrib.get("classname", "")
    file = attrib.get("file")
    line_attr = attrib.get("line")
    try:
        duration = float(attrib.get("time") or 0.0)
    except ValueError:
        duration = 0.0
    failure = error = skipped = None
    properties: dict[str, Any] = {}
    for child in elem:
        tag = child.tag
        if tag == "failure":
            failure = failure if failure is not None else child
        elif tag == "error":
            error = error if error is not None else child
        elif tag == "skipped":
            skipped = child
        elif tag == "properties":
            for prop in child:
                if prop.tag == "property":
                    properties[prop.get("name", "")] = prop.get("value", prop.text)
    collection = False
    xfail = False
    mtype = message = None
    if failure is not None:
        outcome = "failed"
        message = _first_line(failure.get("message")) or _first_line(failure.text)
        mtype = failure.get("type")
    elif error is not None:
        outcome = "error"
        collection = not classname or not name
        mtype = error.get("type")
        message = _collection_message(error.text, error.get("message")) if collection else \
            (_first_line(error.get("message")) or _first_line(error.text))
    elif skipped is not None:
        outcome = "skipped"
        mtype = skipped.get("type")
        xfail = mtype == "pytest.xfail"
        reason = skipped.get("message")
        if reason is None:
            reason = _PYTEST_LOCATION.sub("", _first_line(skipped.text) or "", count=1)
        message = reason
    else:
        outcome = "passed"
    if collection:
        test_id = file or name or classname
    elif classname:
        test_id = f"{classname}::{name}"
    elif file:
        test_id = f"{file}::{name}"
    else:
        test_id = name
    line = int(line_attr) if line_attr and line_attr.isdigit() else None
    add(test_id, outcome, duration, message, mtype, properties, file, line, xfail=xfail, collection=collection)


def _longrepr_message(longrepr: Any) -> str | None:
    if isinstance(longrepr, dict):
        crash = longrepr.get("reprcrash") or {}
        return _first_line(crash.get("message")) or _first_line(str(longrepr.get("longrepr") or ""))
    if isinstance(longrepr, (list, tuple)) and len(longrepr) == 3:  # (path, lineno, "Skipped: reason")
        return _strip_skipped(str(longrepr[2]))
    return _first_line(longrepr) if isinstance(longrepr, str) else None


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
            try:
                rec = json.loads(raw)
            except ValueError as exc:
                raise ProbeError("junit.bad_reportlog", f"{shown}:{lineno}: not a JSON line: {exc}") from None
            rtype = rec.get("$report_type") if isinstance(rec, dict) else None
            if rtype == "CollectReport":
                if rec.get("outcome") == "failed":
                    text = rec.get("longrepr")
                    text = text if isinstance(text, str) else json.dumps(text)
                    t = tests.setdefault(rec.get("nodeid") or "<collection>", _blank(order, rec.get("nodeid") or "<collection>"))
                    t.update(outcome="error", message=_collection_message(text, None), collection=True)
                continue
            if rtype != "TestReport":
                continue
            nodeid = rec.get("nodeid", "")
            t = tests.get(nodeid) or tests.setdefault(nodeid, _blank(order, nodeid))
            when, outcome = rec.get("when"), rec.get("outcome")
            t["duration"] += float(rec.get("duration") or 0.0)
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
                    t.update(outcome=phase, message=_longrepr_message(rec.get("longrepr")))
            elif outcome == "skipped":
                if _RANK["skipped"] > _RANK[t["outcome"]]:
                    xfail = "wasxfail" in rec
                    reason = rec.get("wasxfail") if xfail else _longrepr_message(rec.get("longrepr"))
                    t.update(outcome="skipped", message=reason or "", xfail=xfail,
                             type="pytest.xfail" if xfail else "pytest.skip")
    for nodeid in order:
        t = tests[nodeid]
        acc.add(nodeid, t["outcome"], round(t["duration"], 6), t["message"], t["type"], t["properties"],
                t["file"], t["line"], xfail=t["xfail"], collection=t["collection"])
    return sha.hexdigest(), acc.counts["tests"] - before


def _blank(order: list[str], nodeid: str) -> dict[str, Any]:
    order.append(nodeid)
    return {"outcome": "passed", "duration": 0.0, "message": None, "type": None, "properties": {},
            "file": None, "line": None, "xfail": False, "collection": False}


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
            kind = fmt if fmt != "auto" else ("reportlog" if path.suffix in (".jsonl", ".json") else "junit")
            try:
                parse = _parse_reportlog if kind == "reportlog" else _parse_junit
                with _gc_paused():
                    sha, count = parse(path, shown, acc)
            except OSError as exc:
                raise ProbeError("file.unreadable", f"cannot read {shown}: {exc.strerror or exc}") from None
            acc.files.append({"path": shown, "sha256": sha, "format": kind, "tests": count})
            sources.append(shown)
        return ProbeResult(value=acc.value(), sources=sources)


PROBES = [JunitProbe()]
