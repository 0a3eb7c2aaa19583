"""JUnit report: one testcase per phase of the mode, valid against tests/schemas/junit.xsd.

Validation choice: lxml/xmlschema are not dependencies, so `XsdSubset` below reads the XSD
itself with the standard library and enforces the parts of XML Schema that file uses: global
and local element declarations, `ref`, sequence/choice content models with min/maxOccurs
(compiled to a regular expression over child names), mixed content, required and undeclared
attributes, and `xs:pattern` restrictions on attribute types. Anything else in an XSD is an error
here, so the validator cannot silently ignore a rule.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import tracefactory as tf

from policyrun.render.junit import render_junit

XSD = Path(__file__).parent / "schemas" / "junit.xsd"
XS = "{http://www.w3.org/2001/XMLSchema}"


class XsdSubset:
    def __init__(self, path: Path) -> None:
        root = ET.parse(path).getroot()
        known = {f"{XS}element", f"{XS}complexType", f"{XS}simpleType"}
        assert {c.tag for c in root} <= known, "unsupported top-level XSD construct"
        self.elements = {e.get("name"): e for e in root.findall(f"{XS}element")}
        self.types = {t.get("name"): t for t in root.findall(f"{XS}complexType")}
        self.patterns: dict[str, re.Pattern[str]] = {}
        for simple in root.findall(f"{XS}simpleType"):
            restriction = simple.find(f"{XS}restriction")
            assert restriction is not None and restriction.get("base") == "xs:string"
            facets = list(restriction)
            assert all(f.tag == f"{XS}pattern" for f in facets)
            self.patterns[simple.get("name") or ""] = re.compile("|".join(f"(?:{f.get('value')})" for f in facets))

    def validate(self, elem: ET.Element) -> list[str]:
        decl = self.elements.get(elem.tag)
        if decl is None:
            return [f"root element <{elem.tag}> is not declared"]
        errors: list[str] = []
        self._element(elem, decl, elem.tag, errors)
        return errors

    def _complex_type(self, decl: ET.Element) -> ET.Element | None:
        inline = decl.find(f"{XS}complexType")
        if inline is not None:
            return inline
        named = decl.get("type")
        if named in self.types:
            return self.types[named]
        assert named in (None, "xs:string"), f"unsupported element type {named}"
        return None

    def _element(self, elem: ET.Element, decl: ET.Element, path: str, errors: list[str]) -> None:
        ctype = self._complex_type(decl)
        if ctype is None:  # simple content: text only
            if len(elem) or elem.attrib:
                errors.append(f"{path}: simple-content element has children or attributes")
            return
        self._attributes(elem, ctype, path, errors)
        if ctype.get("mixed") != "true" and (elem.text or "").strip():
            errors.append(f"{path}: text is not allowed")
        model = next((c for c in ctype if c.tag in (f"{XS}sequence", f"{XS}choice")), None)
        decls: dict[str, ET.Element] = {}
        pattern = self._particle(model, decls) if model is not None else ""
        names = "".join(f"<{c.tag}>" for c in elem)
        if not re.fullmatch(pattern, names):
            errors.append(f"{path}: children {[c.tag for c in elem]} do not match the content model")
        for i, child in enumerate(elem):
            if child.tag in decls:
                self._element(child, decls[child.tag], f"{path}/{child.tag}[{i}]", errors)
            else:
                errors.append(f"{path}: element <{child.tag}> is not allowed here")

    def _attributes(self, elem: ET.Element, ctype: ET.Element, path: str, errors: list[str]) -> None:
        declared = {a.get("name"): a for a in ctype.findall(f"{XS}attribute")}
        for name, attr in declared.items():
            if attr.get("use") == "required" and name not in elem.attrib:
                errors.append(f"{path}: required attribute {name!r} is missing")
        for name, value in elem.attrib.items():
            attr = declared.get(name)
            if attr is None:
                errors.append(f"{path}: attribute {name!r} is not declared")
                continue
            kind = attr.get("type", "xs:string")
            if kind in self.patterns and not self.patterns[kind].fullmatch(value):
                errors.append(f"{path}: attribute {name}={value!r} does not match type {kind}")

    def _particle(self, node: ET.Element, decls: dict[str, ET.Element]) -> str:
        if node.tag == f"{XS}element":
            name = node.get("ref") or node.get("name") or ""
            decls[name] = self.elements[name] if node.get("ref") else node
            body = re.escape(f"<{name}>")
        elif node.tag in (f"{XS}sequence", f"{XS}choice"):
            parts = [self._particle(c, decls) for c in node]
            joiner = "" if node.tag == f"{XS}sequence" else "|"
            body = "(?:" + joiner.join(parts) + ")"
        else:
            raise AssertionError(f"unsupported XSD particle {node.tag}")
        lo = node.get("minOccurs", "1")
        hi = node.get("maxOccurs", "1")
        return f"(?:{body}){{{lo},{'' if hi == 'unbounded' else hi}}}"


@pytest.fixture(scope="module")
def xsd() -> XsdSubset:
    return XsdSubset(XSD)


def test_junit_golden() -> None:
    tf.golden("junit.xml", render_junit(tf.flagship()))


@pytest.mark.parametrize("include", [False, True])
@pytest.mark.parametrize("make", [tf.flagship, tf.generic, tf.all_pass])
def test_junit_is_valid_against_xsd(xsd: XsdSubset, make, include: bool) -> None:  # type: ignore[no-untyped-def]
    root = ET.fromstring(render_junit(make(), include_outside_mode=include))
    assert xsd.validate(root) == []


def test_validator_rejects_what_the_xsd_forbids(xsd: XsdSubset) -> None:
    bad = ET.fromstring('<testsuites><testsuite name="s" tests="1" errors="0" time="1.5s">'
                        '<testcase><bogus/></testcase></testsuite></testsuites>')
    errors = xsd.validate(bad)
    assert any("'failures' is missing" in e for e in errors)
    assert any("time='1.5s'" in e for e in errors)
    assert any("'name' is missing" in e for e in errors)
    assert any("<bogus>" in e for e in errors)
    assert xsd.validate(ET.fromstring("<testsuite/>"))  # required attributes


def test_one_testcase_per_phase_of_the_mode_with_status_mapping() -> None:
    trace = tf.flagship()
    outside = ["IMPLEMENT_ATOMIC_ADAPTATIONS", "CAPTURE_LESSONS_AND_REPORT"]
    assert [p.phase for p in trace.phases if p.reason == "outside mode"] == outside
    for include in (False, True):
        suite = ET.fromstring(render_junit(trace, include_outside_mode=include)).find("testsuite")
        assert suite is not None
        phases = [p for p in trace.phases if include or p.phase not in outside]
        counts = tuple(suite.get(k) for k in ("tests", "failures", "skipped", "errors"))
        # Phases the mode does not list are not skipped tests unless asked for: a CI test view
        # would otherwise report them skipped on every run.
        assert counts == (("13", "3", "6", "0") if include else ("11", "3", "4", "0"))
        cases = suite.findall("testcase")
        assert [c.get("name") for c in cases] == [p.phase for p in phases]
        for case, phase in zip(cases, phases, strict=True):
            failure, skipped = case.find("failure"), case.find("skipped")
            if phase.status == "PASS":
                assert failure is None and skipped is None
            elif phase.status == "SKIPPED":
                assert skipped is not None and skipped.get("message") == phase.reason and failure is None
            else:
                assert failure is not None and failure.get("type") == phase.status
                assert failure.get("message") == phase.blocker
            out = case.find("system-out")
            assert out is not None and (out.text or "").startswith(f"phase: {phase.phase}\nstatus: {phase.status}\n")
        props = {p.get("name"): p.get("value") for p in suite.iter("property")}
        assert props.get("outside_mode") == (None if include else ", ".join(outside))


def test_a_phase_the_mode_lists_under_a_false_when_stays_a_skipped_testcase(xsd: XsdSubset) -> None:
    """"outside mode M: <when> is false" is a phase of the mode that this run's inputs skipped: a
    skipped test. Only phases the mode does not list ("outside mode M") are left out."""
    trace = tf.flagship()
    when = "outside mode final-validation: inputs.gpu_validation is false"
    phases = [p.model_copy(update={"reason": when}) if p.phase == "CAPTURE_LESSONS_AND_REPORT" else
              p.model_copy(update={"reason": "outside mode final-validation"}) if p.reason == "outside mode" else p
              for p in trace.phases]
    root = ET.fromstring(render_junit(trace.model_copy(update={"phases": phases})))
    assert xsd.validate(root) == []
    cases = {c.get("name"): c for c in root.iter("testcase")}
    assert "IMPLEMENT_ATOMIC_ADAPTATIONS" not in cases
    skipped = cases["CAPTURE_LESSONS_AND_REPORT"].find("skipped")
    assert skipped is not None and skipped.get("message") == when


def test_failure_body_lists_deciding_checks_and_values() -> None:
    suite = ET.fromstring(render_junit(tf.flagship())).find("testsuite")
    assert suite is not None
    body = {c.get("name"): c.find("failure") for c in suite.findall("testcase")}
    unit = body["STATIC_AND_UNIT_GATE"]
    assert unit is not None and unit.text is not None
    assert "evidence unit_tests_pass: UNSATISFIED -> FAIL" in unit.text
    assert "read: facts.unit_junit.failed = 3" in unit.text
    assert "no_unexplained_skips" not in unit.text  # SATISFIED checks are not why it failed
    e2e = body["GPU_BASIC_E2E_GATE"]
    assert e2e is not None and "is missing: file.not_found" in (e2e.text or "")


def test_properties_record_identity() -> None:
    suite = ET.fromstring(render_junit(tf.flagship())).find("testsuite")
    assert suite is not None
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props["mode"] == "final-validation" and props["verdict"] == "not_ready" and props["exit_code"] == "2"
    assert props["rulebook.sha256"] == "ab" * 32


def test_control_characters_are_replaced(xsd: XsdSubset) -> None:
    trace = tf.generic()
    phases = [trace.phases[0], trace.phases[1].model_copy(update={"blocker": "bad\x1b[31m byte\x00"})]
    text = render_junit(trace.model_copy(update={"phases": phases}))
    root = ET.fromstring(text)  # would raise on an invalid XML character
    assert xsd.validate(root) == []
    failure = root.find("testsuite/testcase/failure")
    assert failure is not None and failure.get("message") == "bad\ufffd[31m byte\ufffd"
