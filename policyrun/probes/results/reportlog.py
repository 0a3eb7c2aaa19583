"""pytest's report-log JSONL, read into the test results (results/testresults.py).

One JSON object per line; a test's setup, call and teardown reports fold into one outcome. Kept
apart from the probe (policyrun.probes.results.junit) and from the JUnit XML parser (.junitxml):
another format, another parser, the same results.
"""

from __future__ import annotations

import hashlib
import json
from math import isfinite
from pathlib import Path
from typing import Any

from policyrun import limits
from policyrun.errors import PolicyrunError
from policyrun.jsonfile import parse_json
from policyrun.probes.base import ProbeError
from policyrun.probes.results.testresults import Results, collection_message, first_line, strip_skipped

_RANK = {"passed": 0, "skipped": 1, "error": 2, "failed": 3}  # which phase outcome names a test


def _longrepr_message(longrepr: Any) -> str | None:
    if isinstance(longrepr, dict):
        crash = longrepr.get("reprcrash") or {}
        return first_line(crash.get("message")) or first_line(str(longrepr.get("longrepr") or ""))
    if isinstance(longrepr, (list, tuple)) and len(longrepr) == 3:  # (path, lineno, "Skipped: reason")
        return strip_skipped(str(longrepr[2]))
    return first_line(longrepr) if isinstance(longrepr, str) else None


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


def parse_reportlog(path: Path, shown: str, acc: Results) -> tuple[str, int]:
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
                        t.update(outcome="error", message=collection_message(text, None), collection=True)
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
