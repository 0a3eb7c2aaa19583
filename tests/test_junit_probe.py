"""tests.junit on real pytest output (made inside the test and committed samples), the common
JUnit variants, hostile XML, report-log JSONL; and the generic `results` probe."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from policyrun.language import expr
from policyrun.probes import registry
from policyrun.probes.base import ProbeContext, ProbeError
from policyrun.probes.results.junit import JunitProbe
from policyrun.probes.results.testresults import TEXT_CAP
from policyrun.probes.results.resultsfile import ResultsProbe

DATA = Path(__file__).parent / "data" / "junit"

SAMPLE_TESTS = '''
import pytest

def test_pass(record_property):
    record_property("gpu_count", 4)

def test_fail():
    assert 1 == 2, "one is not two"

@pytest.mark.skip(reason="requires 4 GPUs")
def test_skip():
    pass

def test_skip_inside():
    pytest.skip("DBO unsupported on NPU")

@pytest.mark.xfail(reason="known bug #12")
def test_xfail():
    assert False

@pytest.fixture
def broken():
    raise RuntimeError("fixture exploded")

def test_error(broken):
    pass

@pytest.mark.parametrize("n", [1, 2])
def test_param(n):
    assert n

class TestGroup:
    def test_method(self):
        pass
'''


def _run(tmp_path: Path, **params: Any) -> dict[str, Any]:
    return JunitProbe().run(params, ProbeContext(base_dir=tmp_path, timeout_s=30)).value


def _error(tmp_path: Path, **params: Any) -> ProbeError:
    with pytest.raises(ProbeError) as info:
        JunitProbe().run(params, ProbeContext(base_dir=tmp_path, timeout_s=30))
    return info.value


def _check_pytest_sample(v: dict[str, Any], prefix: str, broken_id: str, crash_file: str = "test_sample.py",
                         broken_classname: str | None = None) -> None:
    assert v["totals"] == {"tests": 10, "passed": 4, "failed": 1, "errors": 2, "skipped": 3, "xfailed": 1,
                           "collection_errors": 1, "collection_skipped": 0}
    t = v["totals"]
    assert t["tests"] == t["passed"] + t["failed"] + t["errors"] + t["skipped"]
    assert v["skip_reasons"] == {"DBO unsupported on NPU": 1, "known bug #12": 1, "requires 4 GPUs": 1}
    assert [(s["id"], s["reason"], s["kind"]) for s in v["skips"]] == [
        (f"{prefix}::test_skip", "requires 4 GPUs", "skip"),
        (f"{prefix}::test_skip_inside", "DBO unsupported on NPU", "skip"),
        (f"{prefix}::test_xfail", "known bug #12", "xfail")]
    assert v["failures"] == [{"id": f"{prefix}::test_fail", "message": "AssertionError: one is not two", "type": None,
                              "classname": prefix, "name": "test_fail", "file": crash_file, "line": 8,
                              "truncated": False}]
    assert v["failed_ids"] == [f"{prefix}::test_fail"]
    assert v["error_ids"] == [broken_id, f"{prefix}::test_error"]
    assert v["collection_errors"] == [{
        "id": broken_id, "type": None, "message": "ModuleNotFoundError: No module named 'does_not_exist_module'",
        "classname": broken_classname, "name": broken_id.rpartition("::")[2], "file": None, "line": None,
        "truncated": False}]
    assert v["collection_skips"] == [] and v["truncated"] == []
    # the setup error is located where the fixture raised (1-based, as pytest prints it)
    assert [(e["file"], e["line"]) for e in v["errors"]] == [(None, None), (crash_file, 23)]
    # a skip's place comes from the body's "path:line: " prefix; an xfail has none
    assert [(Path(s["file"]).name if s["file"] else None, s["line"], s["collection"]) for s in v["skips"]] == [
        ("test_sample.py", 10, False), ("test_sample.py", 15, False), (None, None, False)]
    assert {e["id"] for e in v["errors"]} == {broken_id, f"{prefix}::test_error"}
    assert "RuntimeError: fixture exploded" in next(e["message"] for e in v["errors"] if e["id"] != broken_id)
    tests = v["tests"]
    assert tests[f"{prefix}::test_pass"]["outcome"] == "passed"
    assert tests[f"{prefix}::test_pass"]["properties"] == {"gpu_count": "4"} or \
        tests[f"{prefix}::test_pass"]["properties"] == {"gpu_count": 4}
    assert tests[f"{prefix}::test_param[2]"]["properties"] is None
    assert all(isinstance(x["duration"], float) for x in tests.values())


def test_registered() -> None:
    assert isinstance(registry.get("tests.junit"), JunitProbe)
    assert isinstance(registry.get("results"), ResultsProbe)


def test_junit_from_a_real_pytest_run(tmp_path: Path) -> None:
    work = tmp_path / "suite"
    work.mkdir()
    (work / "test_sample.py").write_text(SAMPLE_TESTS)
    (work / "test_broken.py").write_text("import does_not_exist_module\n\ndef test_x():\n    pass\n")
    report = tmp_path / "report.xml"
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "--continue-on-collection-errors", "-o", "junit_family=xunit1",
                           f"--junitxml={report}", str(work)],
                          capture_output=True, text=True, cwd=work, timeout=600)
    assert proc.returncode == 1, proc.stdout + proc.stderr  # failures present, as intended
    v = _run(tmp_path, path="report.xml")
    _check_pytest_sample(v, "test_sample", "test_broken.py::test_broken")
    assert v["tests"]["test_sample.TestGroup::test_method"]["file"] == "test_sample.py"
    assert v["files"][0]["format"] == "junit" and len(v["files"][0]["sha256"]) == 64


@pytest.mark.parametrize(("name", "broken_id"), [("pytest-xunit2.xml", "test_broken"),
                                                 ("pytest-xunit1.xml", "test_broken.py::test_broken")])
def test_committed_pytest_samples(name: str, broken_id: str) -> None:
    v = _run(DATA, path=name)
    _check_pytest_sample(v, "test_sample", broken_id)
    assert v["suites"] == ["pytest"]


def test_reportlog_of_the_same_session() -> None:
    """pytest-reportlog output of the session that wrote pytest-xunit2.xml: the same facts."""
    v = _run(DATA, path="pytest-reportlog.jsonl")
    _check_pytest_sample(v, "test_sample.py", "test_broken.py", crash_file="/tmp/jt/test_sample.py")
    assert v["files"][0]["format"] == "reportlog"
    assert v["tests"]["test_sample.py::TestGroup::test_method"] == {
        "outcome": "passed", "duration": pytest.approx(0.000269, abs=1e-5), "message": None,
        "properties": None, "file": "test_sample.py", "line": 32}
    # explicit format wins over the extension
    copy = DATA / "pytest-reportlog.jsonl"
    assert _run(DATA, path=str(copy), format="reportlog")["totals"] == v["totals"]


def test_nested_testsuites_variant() -> None:
    v = _run(DATA, path="nested-testsuites.xml")
    assert v["totals"] == {"tests": 6, "passed": 2, "failed": 1, "errors": 1, "skipped": 2, "xfailed": 0,
                           "collection_errors": 0, "collection_skipped": 0}
    assert v["suites"] == ["kernels", "kernels.attention", "kernels.moe"]
    paged = v["tests"]["tests/kernels/test_attention.py::test_paged"]  # no classname: file::name
    assert paged["properties"] == {"seed": "1234", "backend": "FLASHINFER"} and paged["line"] == 88
    assert v["tests"]["tests.kernels.test_attention::test_flash[fp8]"]["message"] == "requires 4 GPUs"
    assert v["failures"] == [{"id": "tests.kernels.test_moe::test_fused_moe", "message": "Tensor-likes are not close!",
                              "type": "AssertionError", "classname": "tests.kernels.test_moe",
                              "name": "test_fused_moe", "file": None, "line": None, "truncated": False}]
    assert v["errors"][0]["message"] == 'failed on setup with "RuntimeError: NCCL error"'
    assert v["collection_errors"] == []  # suite-level properties did not leak into a testcase


def test_testsuite_root_variant() -> None:
    v = _run(DATA, path="testsuite-root.xml")
    assert v["totals"]["tests"] == 4 and v["suites"] == ["com.example.CalcTest"]
    assert v["failures"][0]["message"] == "expected: <2> but was: <3>"
    assert v["errors"][0] == {"id": "com.example.CalcTest::overflows", "type": "java.lang.ArithmeticException",
                              "message": "java.lang.ArithmeticException: integer overflow",
                              "classname": "com.example.CalcTest", "name": "overflows", "file": None, "line": None,
                              "truncated": False}
    assert v["skips"] == [{"id": "com.example.CalcTest::pending", "reason": "", "kind": "skip", "type": None,
                           "collection": False, "file": None, "line": None}]


@pytest.mark.parametrize("name", ["billion-laughs.xml", "external-entity.xml"])
def test_doctype_and_entities_are_refused(name: str) -> None:
    err = _error(DATA, path=name)
    assert err.code == "junit.unsafe_xml"
    assert name in err.message and "DOCTYPE" in err.message and "billion laughs" in err.message


def test_malformed_and_foreign_xml(tmp_path: Path) -> None:
    (tmp_path / "broken.xml").write_text('<testsuites>\n  <testsuite name="x">\n    <testcase name="a">\n</testsuites>\n')
    err = _error(tmp_path, path="broken.xml")
    assert err.code == "junit.parse_error" and "broken.xml:4:" in err.message and "mismatched tag" in err.message
    (tmp_path / "pom.xml").write_text("<project><modelVersion>4.0.0</modelVersion></project>")
    err = _error(tmp_path, path="pom.xml")
    assert err.code == "junit.not_junit" and "<project>" in err.message
    (tmp_path / "undefined.xml").write_text('<testsuite><testcase classname="a" name="b">&nbsp;</testcase></testsuite>')
    assert _error(tmp_path, path="undefined.xml").code == "junit.parse_error"


def test_globs_merge_and_duplicates(tmp_path: Path) -> None:
    shards = tmp_path / "reports"
    shards.mkdir()
    for name in ("pytest-xunit2.xml", "nested-testsuites.xml"):
        shutil.copy(DATA / name, shards / name)
    shutil.copy(DATA / "pytest-xunit2.xml", shards / "rerun.xml")
    v = _run(tmp_path, paths=["reports/*.xml"])
    assert [Path(f["path"]).name for f in v["files"]] == ["nested-testsuites.xml", "pytest-xunit2.xml", "rerun.xml"]
    assert v["totals"]["tests"] == 26 and v["totals"]["skipped"] == 8
    assert "test_sample::test_fail" in v["duplicates"] and len(v["duplicates"]) == 10
    assert len(v["tests"]) == 16
    lean = _run(tmp_path, paths=["reports/*.xml"], per_test=False)
    assert lean["tests"] is None and lean["totals"] == v["totals"]
    recursive = _run(tmp_path, path="**/nested-*.xml")
    assert recursive["totals"]["tests"] == 6


def test_missing_files(tmp_path: Path) -> None:
    err = _error(tmp_path, path="nope.xml")
    assert err.code == "file.not_found" and "--junitxml" in err.message
    assert _error(tmp_path, paths=["out/*.xml"]).code == "file.not_found"


def test_bad_reportlog_line(tmp_path: Path) -> None:
    (tmp_path / "log.jsonl").write_text('{"$report_type": "SessionStart"}\n{not json\n')
    err = _error(tmp_path, path="log.jsonl")
    assert err.code == "junit.bad_reportlog" and "log.jsonl:2:" in err.message


def test_large_file_streams(tmp_path: Path) -> None:
    spec = importlib.util.spec_from_file_location("bench_junit", Path(__file__).parents[1] / "bench" / "bench_junit.py")
    assert spec and spec.loader
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    bench.generate(tmp_path / "big.xml", 20_000)
    v = _run(tmp_path, path="big.xml")
    t = v["totals"]
    assert t["tests"] == 20_000 == len(v["tests"])
    assert t["tests"] == t["passed"] + t["failed"] + t["errors"] + t["skipped"]
    assert set(v["skip_reasons"]) <= set(bench.SKIP_REASONS) | {f"known issue #{i}" for i in range(13)}
    assert all(f["message"].startswith("AssertionError: mismatch") for f in v["failures"])


def test_facts_read_from_cel() -> None:
    facts = {"junit": _run(DATA, path="pytest-xunit2.xml")}
    variables = {"facts": facts, "vars": {"documented": ["requires 4 GPUs", "DBO unsupported on NPU"]}}
    undocumented = expr.compile_expr("facts.junit.skips.filter(s, s.kind == 'skip' && "
                                     "!(s.reason in vars.documented)).size()")
    assert expr.evaluate(undocumented, variables).value == 0
    clean = expr.compile_expr("facts.junit.totals.failed == 0 && size(facts.junit.collection_errors) == 0")
    assert expr.evaluate(clean, variables).value is False


# --- results ----------------------------------------------------------------------------------------
LM_EVAL = {
    "results": {"gsm8k": {"alias": "gsm8k", "exact_match,strict-match": 0.8544, "exact_match_stderr,strict-match": 0.0097,
                          "exact_match,flexible-extract": 0.8552}},
    "versions": {"gsm8k": 3.0}, "n-shot": {"gsm8k": 5},
    "config": {"model": "vllm", "model_args": "pretrained=meta-llama/Llama-3.1-8B-Instruct,tensor_parallel_size=2",
               "batch_size": "auto"},
    "git_hash": "8138fd52", "date": 1735689600.0,
}


def _results(tmp_path: Path, **params: Any) -> dict[str, Any]:
    return ResultsProbe().run(params, ProbeContext(base_dir=tmp_path, timeout_s=5)).value


def test_results_json_lm_eval(tmp_path: Path) -> None:
    path = tmp_path / "results.json"
    path.write_text(json.dumps(LM_EVAL, indent=2))
    v = _results(tmp_path, path="results.json")
    assert v["results"]["gsm8k"]["exact_match,strict-match"] == 0.8544
    assert v["_file"]["path"] == str(path) and v["_file"]["format"] == "json" and len(v["_file"]["sha256"]) == 64
    check = expr.compile_expr("facts.lm.results.gsm8k['exact_match,strict-match'] >= 0.85")
    assert expr.evaluate(check, {"facts": {"lm": v}}).value is True


def test_results_yaml_dates_and_nan(tmp_path: Path) -> None:
    (tmp_path / "bench.yaml").write_text(textwrap.dedent("""\
        run: 2025-02-01
        throughput: {tokens_per_s: 12034.5, p99_ms: .nan}
        tags: [nightly, h200]
    """))
    v = _results(tmp_path, path="bench.yaml")
    assert v["run"] == "2025-02-01" and v["throughput"] == {"tokens_per_s": 12034.5, "p99_ms": None}
    assert v["_file"]["nonfinite"] == 1 and v["_file"]["format"] == "yaml"
    (tmp_path / "nan.json").write_text('{"score": NaN, "n": [Infinity, 1]}')
    v = _results(tmp_path, path="nan.json")
    assert v["score"] is None and v["n"] == [None, 1] and v["_file"]["nonfinite"] == 2


def test_results_shapes_and_errors(tmp_path: Path) -> None:
    (tmp_path / "list.json").write_text('[{"task": "a", "score": 1}]')
    assert _results(tmp_path, path="list.json")["items"] == [{"task": "a", "score": 1}]
    (tmp_path / "scalar.json").write_text("3")
    (tmp_path / "reserved.json").write_text('{"_file": 1}')
    (tmp_path / "bad.json").write_text('{"a": 1,\n "b": }')
    (tmp_path / "bad.yaml").write_text("a: [1, 2\nb: 3\n")
    cases = {"missing.json": "file.not_found", "scalar.json": "results.not_a_mapping",
             "reserved.json": "results.reserved_key", "bad.json": "results.parse_error",
             "bad.yaml": "results.parse_error"}
    for name, code in cases.items():
        with pytest.raises(ProbeError) as info:
            ResultsProbe().run({"path": name}, ProbeContext(base_dir=tmp_path, timeout_s=5))
        assert info.value.code == code, name
        assert name in info.value.message
    with pytest.raises(ProbeError) as info:
        ResultsProbe().run({"path": "bad.json"}, ProbeContext(base_dir=tmp_path, timeout_s=5))
    assert "bad.json:2:7" in info.value.message


# --- collection skips, located failures, text caps ---------------------------------------------------

MODULE_SKIP = '''import pytest

mod = pytest.importorskip("does_not_exist_module")


def test_never_collected():
    pass
'''


def test_collection_skip_from_a_real_pytest_run(tmp_path: Path) -> None:
    work = tmp_path / "suite"
    work.mkdir()
    (work / "test_needs_module.py").write_text(MODULE_SKIP)
    (work / "test_ok.py").write_text("def test_ok():\n    assert False, 'boom'\n")
    report = tmp_path / "report.xml"
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={report}",
                    str(work)], capture_output=True, text=True, cwd=work, timeout=600)
    v = _run(tmp_path, path="report.xml")
    reason = "could not import 'does_not_exist_module': No module named 'does_not_exist_module'"
    assert v["totals"]["skipped"] == 1 and v["totals"]["collection_skipped"] == 1
    (skip,) = v["collection_skips"]
    assert skip["module"] == "test_needs_module" and skip["reason"] == reason
    assert Path(skip["file"]).name == "test_needs_module.py" and skip["line"] == 3  # the importorskip line
    assert v["skips"] == [{"id": skip["id"], "reason": reason, "kind": "skip", "type": None, "collection": True,
                           "file": skip["file"], "line": 3}]
    assert v["skip_reasons"] == {reason: 1}  # not pytest's generic "collection skipped"
    (failure,) = v["failures"]
    assert failure["id"] == "test_ok::test_ok" and failure["message"] == "AssertionError: boom"
    assert (failure["file"], failure["line"]) == ("test_ok.py", 2)


def _xml(tmp_path: Path, body: str, name: str = "r.xml") -> Path:
    path = tmp_path / name
    path.write_text(f'<?xml version="1.0" encoding="utf-8"?><testsuite name="s">{body}</testsuite>', encoding="utf-8")
    return path


def test_skip_reason_sources(tmp_path: Path) -> None:
    _xml(tmp_path, """
      <testcase classname="m" name="attr"><skipped type="pytest.skip" message="needs 8 GPUs">/x/t.py:12: needs 8 GPUs</skipped></testcase>
      <testcase classname="m" name="text_only"><skipped>/x/t.py:40: no NCCL</skipped></testcase>
      <testcase classname="" name="pkg.test_mod"><skipped message="collection skipped">('/x/pkg/test_mod.py', 7, "Skipped: can't load \\"x\\": it's gone")</skipped></testcase>
      <testcase classname="" name="pkg.test_other"><skipped message="collection skipped">(not a tuple</skipped></testcase>
      <testcase classname="m" name="not_collection"><skipped message="m">('/x/t.py', 1, 'Skipped: from the tuple')</skipped></testcase>
    """)
    v = _run(tmp_path, path="r.xml")
    got = [(s["id"], s["reason"], s["collection"], s["file"], s["line"]) for s in v["skips"]]
    assert got == [
        ("m::attr", "needs 8 GPUs", False, "/x/t.py", 12),
        ("m::text_only", "no NCCL", False, "/x/t.py", 40),
        ("pkg.test_mod", "can't load \"x\": it's gone", True, "/x/pkg/test_mod.py", 7),
        ("pkg.test_other", "collection skipped", True, None, None),  # unreadable body: the attribute stays
        ("m::not_collection", "from the tuple", False, "/x/t.py", 1),
    ]
    assert v["totals"]["collection_skipped"] == 2
    assert [(c["module"], c["reason"]) for c in v["collection_skips"]] == [
        ("pkg.test_mod", "can't load \"x\": it's gone"), ("pkg.test_other", "collection skipped")]
    assert v["tests"]["pkg.test_mod"]["message"] == "can't load \"x\": it's gone"
    assert all(not k.startswith("_") for t in v["tests"].values() for k in t)


def test_failures_and_errors_are_named_and_located(tmp_path: Path) -> None:
    _xml(tmp_path, """
      <testcase classname="tests.unit.test_a" name="test_x" file="tests/unit/test_a.py" line="4"><failure message="assert 1 == 2">def test_x():
&gt;       assert 1 == 2
E       assert 1 == 2

tests/unit/test_a.py:6: AssertionError</failure></testcase>
      <testcase classname="tests.unit.test_a" name="test_y"><failure>RuntimeError: first line
more</failure><error message="teardown">x.py:1: ValueError</error></testcase>
      <testcase classname="tests.unit.test_b" name="test_z"><skipped message="s"/><error message="fixture died">conftest.py:9: OSError</error></testcase>
    """)
    v = _run(tmp_path, path="r.xml")
    assert v["failed_ids"] == ["tests.unit.test_a::test_x", "tests.unit.test_a::test_y"]
    assert v["error_ids"] == ["tests.unit.test_b::test_z"]
    assert [(f["classname"], f["name"], f["message"], f["file"], f["line"]) for f in v["failures"]] == [
        ("tests.unit.test_a", "test_x", "assert 1 == 2", "tests/unit/test_a.py", 6),
        ("tests.unit.test_a", "test_y", "RuntimeError: first line", None, None)]  # failed, then errored: failed
    assert v["errors"] == [{"id": "tests.unit.test_b::test_z", "message": "fixture died", "type": None,
                            "classname": "tests.unit.test_b", "name": "test_z", "file": "conftest.py", "line": 9,
                            "truncated": False}]
    assert v["tests"]["tests.unit.test_b::test_z"] == {"outcome": "error", "duration": 0.0, "message": "fixture died",
                                                       "properties": None, "file": None, "line": None}
    check = expr.compile_expr("'tests.unit.test_a::test_x' in facts.u.failed_ids && size(facts.u.error_ids) == 1")
    assert expr.evaluate(check, {"facts": {"u": v}}).value is True


def _huge(tmp_path: Path, before: str, size: int, piece: str, after: str) -> Path:
    path = tmp_path / "huge.xml"
    with path.open("w", encoding="utf-8") as f:
        f.write('<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="s">' + before)
        chunk = piece * ((1 << 20) // len(piece.encode()))
        for _ in range(size // len(chunk.encode())):
            f.write(chunk)
        f.write(after + "</testsuite></testsuites>")
    return path


def test_a_huge_attribute_costs_linear_time_and_is_truncated(tmp_path: Path) -> None:
    # 128 MB in one attribute: expat re-scanned it from its start every 1 MiB, 7-30 s here before
    # the fix (quadratic); now well under a second. The bound is generous for slow machines.
    path = _huge(tmp_path, '<testcase classname="m" name="t"><failure message="', 128 << 20, "x&amp;é",
                 '">tests/t.py:3: E</failure></testcase><testcase classname="m" name="ok"/>')
    v = _run(tmp_path, path=path.name)  # the time it takes is measured in bench/bench_junit_huge.py
    (failure,) = v["failures"]
    assert failure["truncated"] is True and failure["message"] == ("x&é" * TEXT_CAP)[:TEXT_CAP]
    (cut,) = v["truncated"]
    assert cut["id"] == "m::t" and cut["what"] == "message" and cut["size"] > 100 * 2**20
    assert (failure["file"], failure["line"]) == ("tests/t.py", 3)
    assert v["totals"]["tests"] == 2 and v["totals"]["passed"] == 1  # the rest of the file is read normally
    assert v["files"][0]["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()  # skipped bytes hashed too


@pytest.mark.parametrize(("before", "piece", "after", "what"), [
    ('<testcase classname="m" name="t"><skipped>', "é body ", "</skipped></testcase>", "body"),
    ("<!--", "-x", '--><testcase classname="m" name="t"><skipped message="r"/></testcase>', None),
    ("<?pi ", "x?", '?><testcase classname="m" name="t"><skipped message="r"/></testcase>', None),
    ("<testcase classname='m' name='t'><skipped message='", 'say "x" ', "'/></testcase>", "message"),
    ('<testcase classname="m" name="t"><properties><property name="log" value="', "vv", '"/></properties>'
     '<skipped message="r"/></testcase>', "property"),
])
def test_every_huge_token_is_bounded(tmp_path: Path, before: str, piece: str, after: str, what: str | None) -> None:
    path = _huge(tmp_path, before, 24 << 20, piece, after)
    v = _run(tmp_path, path=path.name)
    (skip,) = v["skips"]
    assert skip["id"] == "m::t" and len(skip["reason"]) <= TEXT_CAP
    assert [c["what"] for c in v["truncated"]] == ([what] if what else [])
    if what == "property":
        assert len(v["tests"]["m::t"]["properties"]["log"]) == TEXT_CAP
    assert v["files"][0]["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()


def test_reportlog_collection_skip(tmp_path: Path) -> None:
    lines = [
        {"$report_type": "CollectReport", "nodeid": "tests/test_m.py", "outcome": "skipped", "result": [],
         "longrepr": ["/x/tests/test_m.py", 4, "Skipped: could not import 'torch': No module named 'torch'"]},
        {"$report_type": "TestReport", "nodeid": "tests/test_n.py::test_f", "when": "call", "outcome": "failed",
         "location": ["tests/test_n.py", 0, "test_f"], "duration": 0.1, "keywords": {},
         "longrepr": {"reprcrash": {"path": "/x/tests/test_n.py", "lineno": 2, "message": "assert 0"}}},
    ]
    (tmp_path / "log.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    v = _run(tmp_path, path="log.jsonl")
    assert v["collection_skips"] == [{"id": "tests/test_m.py", "module": "tests/test_m.py", "file": "/x/tests/test_m.py",
                                      "line": 4, "reason": "could not import 'torch': No module named 'torch'"}]
    assert v["failures"][0] | {} == {"id": "tests/test_n.py::test_f", "message": "assert 0", "type": None,
                                     "classname": "tests/test_n.py", "name": "test_f", "file": "/x/tests/test_n.py",
                                     "line": 2, "truncated": False}


# --- the commit a results file ran on (issue 18 item 8) ---------------------------------------------

_ONE_TEST = ('<testsuites>{outer}<testsuite name="pytest" tests="1">{inner}'
             '<testcase classname="tests.unit.test_a" name="test_x" time="0.1"/></testsuite></testsuites>')
_SHA = "1a283b387ed0d5aaf19e06c12cb3b3603925c3d3"
_OTHER = "9ff485d90296bd50122a900407707a8571e3cdd7"


def _prop(sha: str) -> str:
    return f'<properties><property name="policyrun.commit" value="{sha}"/></properties>'


@pytest.mark.parametrize(("outer", "inner"), [("", _prop(_SHA)), (_prop(_SHA), "")],
                         ids=["testsuite", "testsuites"])
def test_commit_from_a_suite_property(tmp_path: Path, outer: str, inner: str) -> None:
    (tmp_path / "unit.xml").write_text(_ONE_TEST.format(outer=outer, inner=inner))
    f = _run(tmp_path, path="unit.xml")["files"][0]
    assert (f["commit"], f["commit_source"], f["commit_conflict"]) == (_SHA, "property", [])


def test_a_test_property_is_not_the_runs_commit(tmp_path: Path) -> None:
    """A test's own `policyrun.commit` property (record_property) says nothing about the run."""
    (tmp_path / "unit.xml").write_text(
        '<testsuite name="pytest" tests="1"><testcase classname="m" name="t">'
        f'{_prop(_SHA)}</testcase></testsuite>')
    f = _run(tmp_path, path="unit.xml")["files"][0]
    assert (f["commit"], f["commit_source"]) == (None, None)


def test_commit_from_a_sidecar_file(tmp_path: Path) -> None:
    (tmp_path / "unit.xml").write_text(_ONE_TEST.format(outer="", inner=""))
    (tmp_path / "unit.xml.commit").write_text(f"\n{_SHA}\n")
    result = JunitProbe().run({"path": "unit.xml"}, ProbeContext(base_dir=tmp_path, timeout_s=30))
    f = result.value["files"][0]
    assert (f["commit"], f["commit_source"]) == (_SHA, "sidecar")
    assert any(s.endswith("unit.xml.commit") for s in result.sources)


def test_commit_of_a_reportlog_from_its_sidecar(tmp_path: Path) -> None:
    (tmp_path / "unit.jsonl").write_text(json.dumps({"$report_type": "TestReport", "nodeid": "t.py::a",
                                                     "when": "call", "outcome": "passed"}) + "\n")
    (tmp_path / "unit.jsonl.commit").write_text(_SHA)
    assert _run(tmp_path, path="unit.jsonl")["files"][0]["commit"] == _SHA


def test_no_commit_recorded(tmp_path: Path) -> None:
    (tmp_path / "unit.xml").write_text(_ONE_TEST.format(outer="", inner=""))
    f = _run(tmp_path, path="unit.xml")["files"][0]
    assert (f["commit"], f["commit_source"], f["commit_conflict"]) == (None, None, [])


@pytest.mark.parametrize("sidecar", [True, False], ids=["property-vs-sidecar", "two-suites"])
def test_commits_that_disagree_are_a_conflict_not_a_choice(tmp_path: Path, sidecar: bool) -> None:
    inner = _prop(_SHA)
    if sidecar:
        (tmp_path / "unit.xml.commit").write_text(_OTHER + "\n")
        text = _ONE_TEST.format(outer="", inner=inner)
    else:
        text = ('<testsuites>' + f'<testsuite name="a">{_prop(_SHA)}</testsuite>'
                + f'<testsuite name="b">{_prop(_OTHER)}</testsuite></testsuites>')
    (tmp_path / "unit.xml").write_text(text)
    f = _run(tmp_path, path="unit.xml")["files"][0]
    assert (f["commit"], f["commit_source"], f["commit_conflict"]) == (None, None, sorted([_SHA, _OTHER]))


def test_each_merged_file_keeps_its_own_commit(tmp_path: Path) -> None:
    (tmp_path / "a.xml").write_text(_ONE_TEST.format(outer="", inner=_prop(_SHA)))
    (tmp_path / "b.xml").write_text(_ONE_TEST.format(outer="", inner="").replace("test_x", "test_y"))
    files = _run(tmp_path, paths=["a.xml", "b.xml"])["files"]
    assert [f["commit"] for f in files] == [_SHA, None]


def test_a_huge_sidecar_is_read_only_in_part(tmp_path: Path) -> None:
    (tmp_path / "unit.xml").write_text(_ONE_TEST.format(outer="", inner=""))
    (tmp_path / "unit.xml.commit").write_text("x" * 10_000_000)
    assert len(_run(tmp_path, path="unit.xml")["files"][0]["commit"]) == 200


def test_the_documented_conftest_records_the_commit(tmp_path: Path) -> None:
    """docs/probes-machine.md's conftest.py, run by pytest in a git checkout: the report names HEAD."""
    from gitfixtures import init_repo

    docs = (Path(__file__).resolve().parent.parent / "docs" / "probes-machine.md").read_text()
    block = docs.split("  ```python\n  # conftest.py\n", 1)[1].split("  ```\n", 1)[0]
    repo = init_repo(tmp_path / "plugin")
    repo.write("conftest.py", textwrap.dedent(block))
    repo.write("tests/test_a.py", "def test_a():\n    assert True\n")
    head = repo.commit("plugin")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--junitxml=unit.xml",
                           "tests"], cwd=repo.path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    f = _run(repo.path, path="unit.xml")["files"][0]
    assert (f["commit"], f["commit_source"]) == (head, "property")


def test_an_uppercase_sha_is_the_same_commit(tmp_path: Path) -> None:
    (tmp_path / "unit.xml").write_text(_ONE_TEST.format(outer="", inner=_prop(_SHA.upper())))
    (tmp_path / "unit.xml.commit").write_text(_SHA)
    f = _run(tmp_path, path="unit.xml")["files"][0]
    assert (f["commit"], f["commit_conflict"]) == (_SHA, [])
