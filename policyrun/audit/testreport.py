"""`policyrun test --format json|junit`: the results of a rulebook's test cases for CI.

Both forms list every case that ran (file, name, status, the failure lines as its message) and the
expression coverage; JUnit puts each test file in a `<testsuite>` and, when `--min-coverage` is
given, the coverage requirement in a `coverage` suite of its own, so a CI test view shows why the
run failed when every case passed. No time is recorded: the output depends on the cases only.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from policyrun.safetext import escape_controls, json_controls
from policyrun.audit.ruletest import CaseResult, Coverage


def _x(text: str) -> str:
    return escape_controls(text)  # names and messages may quote fact values: no raw control characters


@dataclass(frozen=True)
class Outcome:
    """What one `policyrun test` run found."""

    results: Sequence[CaseResult]
    coverage: Coverage
    min_coverage: float
    deselected: int

    @property
    def failed(self) -> int:
        return sum(not r.ok for r in self.results)

    @property
    def coverage_ok(self) -> bool:
        return self.coverage.percent + 1e-9 >= self.min_coverage

    @property
    def exit_code(self) -> int:
        return 1 if self.failed or not self.coverage_ok else 0


def _uncovered(coverage: Coverage) -> list[str]:
    return sorted(k for k in coverage.seen if not coverage.covered(k))


def render_json(outcome: Outcome) -> str:
    cov = outcome.coverage
    doc: dict[str, Any] = {
        "policyrun_test": 1,
        "exit_code": outcome.exit_code,
        "summary": {"passed": len(outcome.results) - outcome.failed, "failed": outcome.failed,
                    "deselected": outcome.deselected},
        "cases": [{"file": str(r.suite), "name": r.case.name, "status": "passed" if r.ok else "failed",
                   "message": "\n".join(r.failures)} for r in outcome.results],
        "coverage": {"percent": round(cov.percent, 1), "covered": len(cov.seen) - len(_uncovered(cov)),
                     "total": len(cov.seen), "min_coverage": outcome.min_coverage,
                     "uncovered": _uncovered(cov),
                     "missing": {k: cov.missing(k) for k in _uncovered(cov)},
                     "conditions": {k: sorted(v) for k, v in sorted(cov.seen.items())}},
    }
    return json_controls(json.dumps(doc, indent=2, ensure_ascii=False)) + "\n"


def render_junit(outcome: Outcome) -> str:
    files: dict[str, list[CaseResult]] = {}
    for r in outcome.results:
        files.setdefault(str(r.suite), []).append(r)
    gate = outcome.min_coverage > 0
    total = len(outcome.results) + gate
    failures = outcome.failed + (gate and not outcome.coverage_ok)
    suites = ET.Element("testsuites", name="policyrun test", tests=str(total), failures=str(failures),
                        errors="0", time="0")
    for path, results in files.items():
        suite = ET.SubElement(suites, "testsuite", name=_x(path), tests=str(len(results)),
                              failures=str(sum(not r.ok for r in results)), errors="0", skipped="0", time="0",
                              file=_x(path))
        for r in results:
            case = ET.SubElement(suite, "testcase", name=_x(r.case.name), classname=_x(path), time="0")
            if not r.ok:
                failure = ET.SubElement(case, "failure", message=_x(r.failures[0]), type="FAIL")
                failure.text = _x("\n".join(r.failures))
    if gate:
        cov = outcome.coverage
        suite = ET.SubElement(suites, "testsuite", name="coverage", tests="1",
                              failures=str(int(not outcome.coverage_ok)), errors="0", skipped="0", time="0")
        case = ET.SubElement(suite, "testcase", name=f"expression coverage is at least {outcome.min_coverage:g}%",
                             classname="coverage", time="0")
        if not outcome.coverage_ok:
            why = f"coverage {cov.percent:.1f}% is below --min-coverage {outcome.min_coverage:g}%"
            failure = ET.SubElement(case, "failure", type="FAIL", message=why)
            failure.text = _x("uncovered:\n" + "\n".join(f"{k}: {cov.missing_text(k)}" for k in _uncovered(cov)))
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"
