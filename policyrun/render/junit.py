"""JUnit XML: one testcase per phase of the mode, so any CI test view shows the phase pipeline.

Shape: the Jenkins/Surefire JUnit schema (tests/schemas/junit.xsd). Phases the mode does not list
are not testcases (a CI test view would count them as skipped tests on every run; the suite's
`outside_mode` property names them), unless asked for. PASS is a plain testcase, SKIPPED carries
`<skipped message=reason>`, WARN passes with a `status=WARN` property and its
warnings in system-out, FAIL/BLOCKED/STOPPED carry
`<failure message=blocker type=STATUS>` whose body lists the checks that decided the phase.
Every testcase's `<system-out>` holds the workflow's phase record.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

from policyrun.checkid import check_label
from policyrun.safetext import escape_ci_commands
from policyrun.render.records import outside_mode
from policyrun.render.view import FAILING, format_read, is_decisive, record_text
from policyrun.trace.model import PhaseRecord, Trace

# Characters XML 1.0 cannot carry at all; fact values may contain them (binary output, ANSI). DEL,
# C1 and bidi overrides are legal XML but act on terminals and CI pages: replaced as well.
_INVALID_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e"
                          "\u2066-\u2069\ufffe\uffff]")


def _x(text: object) -> str:
    # A JUnit file is often printed into a CI log: break the log commands it would carry too.
    return escape_ci_commands(_INVALID_XML.sub("\ufffd", str(text)))


def _failure_body(phase: PhaseRecord) -> str:
    lines = [f"{phase.phase} is {phase.status}: {phase.reason}"]
    if phase.blocker:
        lines.append(f"blocker: {phase.blocker}")
    for check in phase.checks():
        if not is_decisive(check):
            continue
        outcome = f" -> {check.outcome}" if check.outcome else ""
        where = f" ({check.location})" if check.location else ""
        lines.append(f"{check_label(check.kind, check.id)}: {check.result}{outcome}{where}")
        lines.append(f"  check: {check.expression}")
        if check.message:
            lines.append(f"  why: {check.message}")
        lines.extend(f"  read: {format_read(r, None)}" for r in check.reads)
    lines.append(f"next_allowed_action: {phase.next_allowed_action}")
    return "\n".join(lines)


def _record(phase: PhaseRecord) -> str:
    text = record_text(phase)
    return text + (f"\ndefined at: {phase.location}" if phase.location else "")


def render_junit(trace: Trace, *, include_outside_mode: bool = False) -> str:
    """The suite; `include_outside_mode` also lists the phases outside the mode, as skipped testcases."""
    omitted = [p.phase for p in trace.phases if not include_outside_mode and outside_mode(p, trace.mode)]
    phases = [p for p in trace.phases if p.phase not in omitted]
    failures = sum(1 for p in phases if p.status in FAILING)
    skipped = sum(1 for p in phases if p.status == "SKIPPED")
    suites = ET.Element("testsuites", name=_x(f"policyrun {trace.rulebook.name}"), tests=str(len(phases)),
                        failures=str(failures), errors="0", time="0")
    suite = ET.SubElement(suites, "testsuite", name=_x(f"{trace.rulebook.name} ({trace.mode})"),
                          tests=str(len(phases)), failures=str(failures), errors="0",
                          skipped=str(skipped), time="0")
    if trace.generated_at:
        suite.set("timestamp", _x(trace.generated_at))
    if trace.rulebook.path:
        suite.set("file", _x(trace.rulebook.path))
    props = ET.SubElement(suite, "properties")
    for name, value in (("rulebook", trace.rulebook.name), ("rulebook.version", trace.rulebook.version),
                        ("rulebook.sha256", trace.rulebook.sha256), ("rulebook.path", trace.rulebook.path or ""),
                        ("mode", trace.mode), ("facts.sha256", trace.facts_sha256), ("verdict", trace.verdict.id),
                        ("exit_code", str(trace.exit_code))):
        ET.SubElement(props, "property", name=name, value=_x(value))
    if omitted:
        ET.SubElement(props, "property", name="outside_mode", value=_x(", ".join(omitted)))
    classname = f"policyrun.{trace.rulebook.name}.{trace.mode}"
    for phase in phases:
        case = ET.SubElement(suite, "testcase", name=_x(phase.phase), classname=_x(classname), time="0")
        if phase.status == "SKIPPED":
            ET.SubElement(case, "skipped", message=_x(phase.reason))
        elif phase.status in FAILING:
            failure = ET.SubElement(case, "failure", message=_x(phase.blocker or phase.reason), type=phase.status)
            failure.text = _x(_failure_body(phase))
        elif phase.status == "WARN":  # JUnit has no warning: a passing test case that says so
            ET.SubElement(case, "properties").append(ET.Element("property", name="status", value="WARN"))
        ET.SubElement(case, "system-out").text = _x(_record(phase))
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"
