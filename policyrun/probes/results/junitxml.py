"""JUnit XML, read by one streaming expat pass into the test results (results/testresults.py).

The XML comes from test runners and CI artifacts, i.e. from outside, so parsing is defensive: a
document type declaration (the only place entities can be declared, hence the only way to a
"billion laughs" or external-entity attack) is refused the moment expat sees it, before any of it
is processed. expat is fed 1 MiB at a time and no element tree is built, so memory holds the fact
value and one chunk, whatever the file's size; a token too large for expat to re-scan cheaply is
skipped in the file (`_feed`).

Kept apart from the probe (policyrun.probes.results.junit): this is the parsing machinery, and
the probe only chooses a parser per file and records where its commit came from.
"""

from __future__ import annotations

import hashlib
import re
from math import isfinite
from pathlib import Path
from typing import Any
from xml.parsers import expat

from policyrun.probes.base import ProbeError
from policyrun.probes.results.testresults import (COMMIT_CAP, COMMIT_PROPERTY, TEXT_CAP, Results,
                                                  collection_message, crash_location, first_line, skip_reason)

_FEED = 1 << 20
# expat (before 2.6) re-scans an unfinished token from its start whenever more input arrives, and
# pyexpat hands it input 1 MiB at a time however large the Parse call: a 100 MB attribute, comment
# or processing instruction costs O(n^2) (18 s). Once a token has grown past this many bytes, the
# rest of it is skipped in the file (hashed, never fed) and the token is closed where it ends.
HUGE_TOKEN = 4 * _FEED
# Where an unfinished start tag stands when it is inside an attribute value: group 1 is the quote.
_OPEN_ATTRIBUTE = re.compile(rb"<[^\s/>]+(?:\s+[^\s=/>]+\s*=\s*(?:\"[^\"]*\"|'[^']*'))*"
                             rb"\s+[^\s=/>]+\s*=\s*(?:(\")[^\"]*|(')[^']*)\Z")


class _Unsafe(Exception):
    pass


def parse_junit(path: Path, shown: str, acc: Results) -> tuple[str, int]:
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
                commits.append(a["value"].strip()[:COMMIT_CAP])
        elif name == "failure":
            if cur["outcome"] != "failed":
                cur["outcome"] = "failed"
                cur["_type"] = a.get("type")
                cur["_names"] = cur_names
                cur["message"] = cut(first_line(a.get("message")), "message")
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
                    cur["message"] = cut(first_line(a.get("message")), "message")
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


def _tally(ids: list[str], entries: list[dict[str, Any]], acc: Results) -> None:
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
            reason, file, line = skip_reason(d.pop("_skip_attr", None), d.pop("_skip_text", None))
            d["message"] = reason
            acc.skip(test_id, reason, mtype, xfail=mtype == "pytest.xfail", file=file, line=line,
                     module=d.pop("_module", None))
            continue
        classname, name = d.pop("_names")
        collection_attr = d.pop("_collection", None)
        if collection_attr is not None:
            d["message"] = collection_message(d.pop("_collection_text", None), collection_attr)
            body = None
        else:
            body = d.pop("_body", None)
            if d["message"] is None:
                d["message"] = first_line(body)
        file, line = crash_location(body)
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
