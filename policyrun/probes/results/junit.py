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

The probe chooses a parser per file and records where its commit came from; the parsers
(policyrun.probes.results.junitxml, .reportlog) and the results they fill (.testresults) are apart.
"""

from __future__ import annotations

import glob
import hashlib
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from policyrun.probes.base import ProbeContext, ProbeError, ProbeResult
from policyrun.probes.results.junitxml import parse_junit
from policyrun.probes.results.reportlog import parse_reportlog
from policyrun.probes.results.testresults import (COMMIT_CAP, COMMIT_PROPERTY, OUTCOMES, TEXT_CAP, Results,
                                                  first_line)

COMMIT_SIDECAR = ".commit"  # appended to the results file's name
_HEX = re.compile(r"[0-9A-Fa-f]{7,64}")

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
    line = first_line(head.decode("utf-8", "replace")) or ""
    return line[:COMMIT_CAP]


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
        acc = Results(bool(params.get("per_test", True)))
        sources: list[str] = []
        for path, shown in _expand(patterns, ctx):
            kind = fmt if fmt != "auto" else ("reportlog" if path.suffix == ".jsonl" else "junit")
            acc.file_commits = []
            try:
                parse = parse_reportlog if kind == "reportlog" else parse_junit
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
        acc = Results(bool(params.get("per_test", True)))
        acc.files.append({"path": "report.xml", "sha256": hashlib.sha256(b"<testsuites/>").hexdigest(),
                          "format": "junit", "tests": 0, "commit": None, "commit_source": None,
                          "commit_conflict": []})
        return acc.value()


PROBES = [JunitProbe()]
