"""tests.junit on the plugin's real unit-suite JUnit file: 202 tests, 1 failure, 45 skips of which
15 are whole modules skipped at collection (reason in the element body). Ground truth comes from
`xml.etree.ElementTree` and `ast.literal_eval` here, never from the probe."""

from __future__ import annotations

import ast
import re
import xml.etree.ElementTree as ET
from pathlib import Path

from policyrun.probes.base import ProbeContext
from policyrun.probes.results.junit import JunitProbe


def _truth(path: Path) -> dict[str, object]:
    cases = list(ET.parse(path).getroot().iter("testcase"))
    failures, skips, collection = [], [], []
    for case in cases:
        cid = f"{case.get('classname')}::{case.get('name')}" if case.get("classname") else case.get("name")
        for child in case:
            if child.tag == "failure":
                where = re.findall(r"^(\S+):(\d+): \w+$", child.text or "", re.MULTILINE)[-1]
                failures.append((cid, where[0], int(where[1])))
            elif child.tag == "skipped":
                skips.append(cid)
                if not case.get("classname"):
                    file, line, text = ast.literal_eval((child.text or "").strip())
                    collection.append((cid, case.get("name"), file, line, text.removeprefix("Skipped: ")))
    return {"tests": len(cases), "failures": failures, "skips": skips, "collection": collection}


def test_real_unit_junit(afd_unit_junit: Path) -> None:
    truth = _truth(afd_unit_junit)
    v = JunitProbe().run({"path": str(afd_unit_junit)}, ProbeContext(base_dir=Path.cwd(), timeout_s=30)).value
    t = v["totals"]
    assert t["tests"] == truth["tests"] == 202
    assert t["failed"] == len(truth["failures"]) == 1 and t["errors"] == 0
    assert t["skipped"] == len(truth["skips"]) == 45
    assert t["collection_skipped"] == len(truth["collection"]) == 15

    (fid, ffile, fline), = truth["failures"]
    assert fid == "tests.unit.package.test_package::test_entry_point_is_registered"
    assert v["failed_ids"] == [fid] and v["error_ids"] == []
    (failure,) = v["failures"]
    assert (failure["id"], failure["classname"], failure["name"]) == (
        fid, "tests.unit.package.test_package", "test_entry_point_is_registered")
    assert (failure["file"], failure["line"]) == (ffile, fline) == ("tests/unit/package/test_package.py", 90)
    assert failure["message"] == "assert []"

    assert [(c["id"], c["module"], c["file"], c["line"], c["reason"]) for c in v["collection_skips"]] == \
        truth["collection"]
    assert all("No module named 'torch'" in c["reason"] for c in v["collection_skips"])
    assert [s["id"] for s in v["skips"]] == truth["skips"]
    assert "collection skipped" not in v["skip_reasons"]
    assert v["skip_reasons"]["could not import 'torch': No module named 'torch'"] >= 15
    assert v["truncated"] == []
