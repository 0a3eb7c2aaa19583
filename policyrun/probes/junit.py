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
is also listed in `collection_errors`.
"""

from __future__ import annotations

import glob
import hashlib
import json
import re
from collections.abc import Iterator, Mapping
from math import isfinite
from pathlib import Path
from typing import Any
from xml.parsers import expat

from policyrun.probes.base import ProbeContext, ProbeError, ProbeResult

OUTCOMES = ("passed", "failed", "error", "skipped")
_RANK = {"passed": 0, "skipped": 1, "error": 2, "failed": 3}  # which phase outcome names a test
_PYTEST_LOCATION = re.compile(r"^\S+:\d+: ")  # "path/test_x.py:12: " before a skip reason in the text
_FEED = 1 << 20

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
            "message": {"type": ["string", "null"]},
            "properties": {"type": ["object", "null"], "description": "null when the test recorded none"},
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
            properties: dict[str, Any] | None, file: str | None, line: int | None, *, xfail: bool = False,
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


class _Unsafe(Exception):
    pass


def _parse_junit(path: Path, shown: str, acc: _Results) -> tuple[str, int]:
    """One streaming expat pass; Python runs only for the elements a test report needs.

    expat calls `start` for every element; a testcase becomes its fact entry right there, and
    the children that change it (failure, error, skipped, property) update the entry of the
    open testcase. Character data is collected only while inside an element whose text is
    needed (a skip or failure without a message attribute, a collection error), by installing
    the handler for that element alone: most of the file never reaches Python.
    """
    ids: list[str] = []  # two lists rather than a list of pairs: no tuple per testcase for the GC
    entries: list[dict[str, Any]] = []
    seen = acc.seen
    suites = acc.suites
    cur: dict[str, Any] | None = None  # the open testcase's entry
    cur_collection = False
    text: list[str] = []
    text_tag: str | None = None
    text_target: tuple[dict[str, Any], str] | None = None
    p = expat.ParserCreate()

    def refuse_doctype(*_: Any) -> None:
        raise _Unsafe("a DOCTYPE declaration")

    def refuse_entity(*_: Any) -> None:
        raise _Unsafe("an ENTITY declaration")

    def chardata(data: str) -> None:
        text.append(data)

    def capture(tag: str, entry: dict[str, Any], key: str) -> None:
        nonlocal text_tag, text_target
        text.clear()
        text_tag, text_target = tag, (entry, key)
        p.CharacterDataHandler = chardata

    def start(name: str, a: dict[str, str]) -> None:
        nonlocal cur, cur_collection
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
            # pytest reports a module it could not import as classname="" name="pkg.test_mod";
            # such a testcase with an <error> is a collection error.
            cur_collection = not classname or not tname
            test_id = f"{classname}::{tname}" if classname else f"{file}::{tname}" if file else tname
            ids.append(test_id)
            entries.append(cur)
            if test_id in seen:
                acc.duplicates.append(test_id)
            else:
                seen.add(test_id)
        elif cur is None:
            if name == "testsuite":
                suites.append(a.get("name", ""))
        elif name == "failure":
            if cur["outcome"] != "failed":
                cur["outcome"] = "failed"
                cur["_type"] = a.get("type")
                cur["message"] = _first_line(a.get("message"))
                if cur["message"] is None:
                    capture(name, cur, "message")
        elif name == "error":
            if cur["outcome"] in ("passed", "skipped"):
                cur["outcome"] = "error"
                cur["_type"] = a.get("type")
                if cur_collection:
                    cur["_collection"] = a.get("message") or ""
                    capture(name, cur, "_collection_text")
                else:
                    cur["message"] = _first_line(a.get("message"))
                    if cur["message"] is None:
                        capture(name, cur, "message")
        elif name == "skipped":
            if cur["outcome"] == "passed":
                cur["outcome"] = "skipped"
                cur["_type"] = a.get("type")
                if "message" in a:
                    cur["message"] = a["message"]
                else:
                    capture(name, cur, "_skip_text")
        elif name == "property":
            props = cur["properties"]
            if props is None:
                props = cur["properties"] = {}
            if "value" in a:
                props[a.get("name", "")] = a["value"]
            else:
                props[a.get("name", "")] = None
                capture(name, props, a.get("name", ""))

    def end(name: str) -> None:
        nonlocal cur, text_tag, text_target
        if name == "testcase":
            cur = None
        elif name == text_tag and text_target is not None:
            entry, key = text_target
            joined = "".join(text)
            entry[key] = _first_line(joined) if key == "message" else joined
            text.clear()
            text_tag = text_target = None
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
            while chunk := f.read(_FEED):
                sha.update(chunk)
                p.Parse(chunk, False)
            p.Parse(b"", True)
    except _Unsafe as exc:
        raise ProbeError("junit.unsafe_xml", f"{shown}: refused: the file contains {exc}; test reports never "
                         "need one, and entities open the door to expansion bombs (billion laughs) and "
                         "external-entity reads. Regenerate the report or strip the DOCTYPE") from None
    except expat.ExpatError as exc:
        raise ProbeError("junit.parse_error", f"{shown}:{exc.lineno}:{exc.offset + 1}: not well-formed XML: "
                         f"{expat.ErrorString(exc.code)}") from None
    _tally(ids, entries, acc)
    return sha.hexdigest(), len(ids)


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
            continue
        mtype = d.pop("_type", None)
        collection_attr = d.pop("_collection", None)
        collection = collection_attr is not None
        collection_text = d.pop("_collection_text", None)
        skip_text = d.pop("_skip_text", None)
        if outcome == "failed":
            c["failed"] += 1
            acc.failures.append({"id": test_id, "message": d["message"], "type": mtype})
        elif outcome == "error":
            c["errors"] += 1
            if collection:
                d["message"] = _collection_message(collection_text, collection_attr)
                c["collection_errors"] += 1
                issue = {"id": test_id, "message": d["message"], "type": mtype}
                acc.collection_errors.append(issue)
                acc.errors.append(issue)
            else:
                acc.errors.append({"id": test_id, "message": d["message"], "type": mtype})
        else:
            c["skipped"] += 1
            if skip_text is not None:
                d["message"] = _PYTEST_LOCATION.sub("", _first_line(skip_text) or "", count=1)
            reason = d["message"] or ""
            xfail = mtype == "pytest.xfail"
            if xfail:
                c["xfailed"] += 1
            acc.skips.append({"id": test_id, "reason": reason, "kind": "xfail" if xfail else "skip", "type": mtype})
            acc.skip_reasons[reason] = acc.skip_reasons.get(reason, 0) + 1
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
                    t.update(outcome=phase, message=_longrepr_message(rec.get("longrepr")))
            elif outcome == "skipped":
                if _RANK["skipped"] > _RANK[t["outcome"]]:
                    xfail = "wasxfail" in rec
                    reason = rec.get("wasxfail") if xfail else _longrepr_message(rec.get("longrepr"))
                    t.update(outcome="skipped", message=reason or "", xfail=xfail,
                             type="pytest.xfail" if xfail else "pytest.skip")
    for nodeid in order:
        t = tests[nodeid]
        acc.add(nodeid, t["outcome"], round(t["duration"], 6), t["message"], t["type"], t["properties"] or None,
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
            kind = fmt if fmt != "auto" else ("reportlog" if path.suffix == ".jsonl" else "junit")
            try:
                parse = _parse_reportlog if kind == "reportlog" else _parse_junit
                sha, count = parse(path, shown, acc)
            except OSError as exc:
                raise ProbeError("file.unreadable", f"cannot read {shown}: {exc.strerror or exc}") from None
            acc.files.append({"path": shown, "sha256": sha, "format": kind, "tests": count})
            sources.append(shown)
        return ProbeResult(value=acc.value(), sources=sources)


PROBES = [JunitProbe()]
