"""The application layer called directly (policyrun.app): typed requests in, typed results out, no
argparse and no MCP. The CLI and the MCP tools are thin over these; what users rely on is asserted
here once, at the layer both share."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from policyrun.app.binding import RulebookRequest
from policyrun.errors import PolicyrunError, UsageError

KEY = "k3y-value-123"
RULEBOOK = """\
policyrun: 1
name: ship-check
inputs:
  notes: {type: path, default: NOTES.md}
  reviewed: {type: bool, default: false}
  api_key: {type: string, secret: true, default: ""}
modes:
  audit: {phases: [NOTES, REVIEW]}
probes:
  notes: {uses: path, with: {paths: ["${inputs.notes}"]}}
  keyed: {uses: path, with: {paths: ["keys/${inputs.api_key}"]}}
phases:
  - id: NOTES
    evidence:
      - id: notes_exist
        check: size(facts.notes.missing) == 0
        on_fail: BLOCKED
        message: "no release notes at ${inputs.notes}"
    next:
      BLOCKED: "write the release notes at ${inputs.notes}"
      PASS: get the notes reviewed
  - id: REVIEW
    evidence:
      - {id: keyed, check: "size(facts.keyed.missing) >= 0"}
      - {id: reviewed, check: inputs.reviewed, message: the notes are not reviewed}
    next: {FAIL: "ask a reviewer, then evaluate with reviewed=true", PASS: release}
verdicts:
  - {id: releasable, when: "phases.REVIEW.status == 'PASS'", summary: ready to release}
"""


class Refuse:
    """A PathCheck that refuses every path under `refused` and records what it was asked."""

    def __init__(self, refused: Path) -> None:
        self.refused, self.asked = refused.resolve(), list[tuple[str, str, bool]]()

    def check(self, path: str | Path, what: str, *, write: bool = False) -> None:
        self.asked.append((str(path), what, write))
        if Path(path).resolve().is_relative_to(self.refused):
            raise UsageError(f"{what} {str(path)!r} is refused", code="U032")


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "ship.yaml").write_text(RULEBOOK, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def ship(**kw: object) -> RulebookRequest:
    return RulebookRequest("ship.yaml", **kw)  # type: ignore[arg-type]


# --- lint -----------------------------------------------------------------------------------------

def test_lint_finds_sorted_located_findings_in_a_folder(project: Path) -> None:
    from policyrun.app.lint import LintRequest, lint

    rules = project / "rules"
    rules.mkdir()
    (rules / "good.yaml").write_text(RULEBOOK, encoding="utf-8")
    (rules / "bad.yaml").write_text(RULEBOOK.replace("facts.notes.missing", "facts.notez.missing"), encoding="utf-8")
    (rules / "good.test.yaml").write_text("not a rulebook: a test suite\n", encoding="utf-8")
    result = lint(LintRequest(("rules",)))
    assert result.files == [Path("rules/bad.yaml"), Path("rules/good.yaml")]  # *.test.yaml: suites, not rulebooks
    assert result.exit_code == 1 and result.errors >= 1
    typo = next(f for f in result.findings if f.code == "L003")
    assert typo.location.file == "rules/bad.yaml" and "did you mean 'notes'" in typo.message
    assert result.findings == sorted(result.findings, key=type(typo).sort_key)

    assert lint(LintRequest((str(rules / "good.yaml"),))).exit_code == 0


def test_lint_asks_the_path_check_before_reading_anything(project: Path) -> None:
    from policyrun.app.lint import LintRequest, lint

    outside = project / "outside"
    outside.mkdir()
    (outside / "x.yaml").write_text("{{{ not yaml", encoding="utf-8")
    check = Refuse(outside)
    with pytest.raises(UsageError) as refused:
        lint(LintRequest((str(outside),)), check)
    assert refused.value.code == "U032" and check.asked == [(str(outside), "path", False)]


# --- collect and evaluate -------------------------------------------------------------------------

def test_evaluate_collects_writes_the_run_and_gates_the_phases(project: Path) -> None:
    from policyrun.app.evaluate import EvaluateRequest, evaluate

    result = evaluate(EvaluateRequest(ship(), out_dir=project / "out", formats=("md",), timestamp=False))
    assert result.collected and result.mode == "audit" and result.exit_code == 2
    assert [(p.phase, p.status) for p in result.trace.phases] == [("NOTES", "BLOCKED"), ("REVIEW", "SKIPPED")]
    assert result.trace.phases[0].next_allowed_action == "write the release notes at NOTES.md"
    assert {p.name for p in result.written} >= {"trace.json", "report.md"}
    assert (project / "out" / "manifest.json").is_file()
    written = json.loads((project / "out" / "trace.json").read_text())
    assert written["exit_code"] == 2 and written["generated_at"] is None and written["run"] is None

    (project / "NOTES.md").write_text("# 1.0\n", encoding="utf-8")
    passed = evaluate(EvaluateRequest(ship(values={"reviewed": True}), out_dir=project / "out"))
    assert passed.exit_code == 0 and passed.trace.verdict.id == "releasable"


def test_evaluate_refuses_bad_requests_before_any_probe_runs(project: Path) -> None:
    from policyrun.app.evaluate import EvaluateRequest, evaluate

    cases = [(EvaluateRequest(ship(), formats=("mdx",)), "R004"),
             (EvaluateRequest(ship(), sarif_located_only=True), "R009"),
             (EvaluateRequest(ship(), as_of="2026-01-01"), "U003"),
             (EvaluateRequest(ship(sets=("reviewd=true",))), "U006"),
             (EvaluateRequest(ship(mode="ship")), "U002")]
    for request, code in cases:
        with pytest.raises(PolicyrunError) as refused:
            evaluate(request)
        assert refused.value.code == code, (request, refused.value)
    assert not (project / ".policyrun").exists()  # nothing ran, nothing was written


def test_collect_masks_secret_inputs_and_replay_refuses_other_parameters(project: Path) -> None:
    from policyrun.app.collect import CollectRequest, collect
    from policyrun.app.evaluate import EvaluateRequest, evaluate

    snap = project / "facts" / "snap.json"
    result = collect(CollectRequest(ship(sets=(f"api_key={KEY}",)), output=snap))
    assert result.written == snap and result.exit_code == 0 and result.failed == []
    assert KEY not in snap.read_text() and KEY not in result.text
    assert json.loads(snap.read_text())["facts"]["notes"]["value"]["missing"] == ["NOTES.md"]

    with pytest.raises(UsageError) as stale:
        evaluate(EvaluateRequest(ship(sets=("notes=CHANGES.md",)), facts_files=(snap,)))
    assert stale.value.code == "F005" and "notes:" in stale.value.message
    allowed = evaluate(EvaluateRequest(ship(sets=("notes=CHANGES.md",)), facts_files=(snap,),
                                       allow_stale_facts=True, out_dir=project / "replay"))
    assert not allowed.collected and [s.probe for s in allowed.trace.stale_facts] == ["notes", "keyed"]


def test_collect_names_failed_probes_and_exits_2(project: Path) -> None:
    from policyrun.app.collect import CollectRequest, collect

    (project / "broken.yaml").write_text(
        "policyrun: 1\nname: broken\nmodes: {audit: {phases: [P]}}\n"
        "probes: {notes: {uses: file.read, with: {path: absent.yaml}}}\nphases: [{id: P}]\n", encoding="utf-8")
    result = collect(CollectRequest(RulebookRequest("./broken.yaml")))
    assert result.written is None and result.failed == ["notes"] and result.exit_code == 2
    assert [(p.probe, p.status, p.error_code) for p in result.probes()] == [("notes", "failed", "file.not_found")]
    assert result.facts.facts["notes"].error is not None
    assert result.facts.facts["notes"].error.code == "file.not_found"


def test_a_path_check_confines_evaluate_to_its_roots(project: Path) -> None:
    from policyrun.app.evaluate import EvaluateRequest, evaluate

    check = Refuse(project / "elsewhere")
    with pytest.raises(UsageError) as refused:
        evaluate(EvaluateRequest(ship(values={"notes": "elsewhere/NOTES.md"})), check)
    assert refused.value.code == "U032" and check.asked[-1] == ("elsewhere/NOTES.md", "input notes", False)
    with pytest.raises(UsageError):
        evaluate(EvaluateRequest(ship(), out_dir="elsewhere/out"), check)
    assert check.asked[-1] == ("elsewhere/out", "out_dir", True) and not (project / "elsewhere").exists()


# --- reading a trace ------------------------------------------------------------------------------

@pytest.fixture
def trace(project: Path) -> Path:
    from policyrun.app.evaluate import EvaluateRequest, evaluate

    evaluate(EvaluateRequest(ship(), out_dir=project / "out"))
    return project / "out" / "trace.json"


def test_explain_gives_the_text_and_the_records_it_explains(trace: Path) -> None:
    from policyrun.app.explain import ExplainRequest, explain
    from policyrun.render.explain import render_explain
    from policyrun.trace.model import load_trace

    result = explain(ExplainRequest(trace, failures_only=True))
    assert result.text == render_explain(load_trace(trace), failures=True) and result.inconsistencies == []
    assert [(e.phase.phase, [c.id for c in e.checks]) for e in result.phases] == [("NOTES", ["notes_exist"])]
    with pytest.raises(UsageError) as unknown:
        explain(ExplainRequest(trace, phase="NOPE"))
    assert unknown.value.code == "T004"


def test_next_actions_point_at_the_first_phase_that_stops_the_workflow(trace: Path) -> None:
    from policyrun.app.next_actions import NextActionsRequest, next_actions

    result = next_actions(NextActionsRequest(trace))
    assert result.now is not None and result.now.phase == "NOTES"
    assert result.now.next_allowed_action == "write the release notes at NOTES.md"
    assert [p.next_allowed_action for p in result.phases][1:] == ["none until NOTES passes"]


def test_report_renders_and_writes_and_refuses_options_of_other_formats(trace: Path) -> None:
    from policyrun.app.report import ReportRequest, report

    md = report(ReportRequest(trace, "md"))
    assert md.written is None and "NOTES" in md.text and md.notes == []
    out = trace.parent / "r.xml"
    junit = report(ReportRequest(trace, "junit", output=out))
    assert junit.written == out and out.read_text() == junit.text
    with pytest.raises(UsageError) as wrong:
        report(ReportRequest(trace, "md", sarif_located_only=True))
    assert wrong.value.code == "R009" and "use --format sarif" in wrong.value.message


def test_verify_evaluates_the_trace_again_over_its_facts(project: Path) -> None:
    from policyrun.app.collect import CollectRequest, collect
    from policyrun.app.evaluate import EvaluateRequest, evaluate
    from policyrun.app.verify import VerifyRequest, verify

    snap = project / "snap.json"
    collect(CollectRequest(ship(), output=snap))
    evaluate(EvaluateRequest(ship(), facts_files=(snap,), out_dir=project / "out"))
    trace = project / "out" / "trace.json"
    assert verify(VerifyRequest(trace, facts=(snap,))).ok
    changed = verify(VerifyRequest(trace, facts=(snap,), sets=("notes=CHANGES.md",), allow_stale_facts=True))
    assert not changed.ok and any("inputs" in line for line in changed.lines)
    with pytest.raises(UsageError) as malformed:
        verify(VerifyRequest(trace, facts=(snap,), rulebook_sha256=("abc",)))
    assert malformed.value.code == "U003"


# --- probes and expressions -----------------------------------------------------------------------

def test_probe_descriptions() -> None:
    from policyrun.app.probes import describe_probes

    every = describe_probes()
    assert [d.kind for d in every] == sorted(d.kind for d in every)
    (path,) = describe_probes("path")
    assert [p.name for p in path.params if p.required] == ["paths"] and path.side_effects == []
    assert path.facts_shape.startswith("{") and {f.name for f in path.fact_fields} >= {"missing"}
    assert path.as_json()["params"][0] == vars(path.params[0])
    with pytest.raises(UsageError) as typo:
        describe_probes("pth")
    assert typo.value.code == "U008" and "did you mean 'path'" in typo.value.message


def test_an_expression_over_a_snapshot(project: Path) -> None:
    from policyrun.app.collect import CollectRequest, collect
    from policyrun.app.expression import EvalRequest, evaluate_request

    snap = project / "snap.json"
    collect(CollectRequest(ship(), output=snap))
    value = evaluate_request(EvalRequest("facts.notes.missing", (snap,)))
    assert value.ok and value.value == ["NOTES.md"] and value.exit_code == 0
    assert [r["path"] for r in value.reads] == ["facts.notes.missing"]
    missing = evaluate_request(EvalRequest("facts.nothere.x", (snap,)))
    assert not missing.ok and missing.exit_code == 1 and missing.value is None and "nothere" in (missing.error or "")
    with pytest.raises(UsageError) as syntax:
        evaluate_request(EvalRequest("facts.notes.(", (snap,)))
    assert syntax.value.location is not None and syntax.value.location.file == "<expression>"


# --- the layer stands alone -----------------------------------------------------------------------

def test_the_use_cases_run_without_importing_an_interface(project: Path) -> None:
    """Not only the import graph (tests/test_import_graph.py): run, lazily imported modules included."""
    code = ("import sys\n"
            "from policyrun.app.lint import LintRequest, lint\n"
            "from policyrun.app.binding import RulebookRequest\n"
            "from policyrun.app.evaluate import EvaluateRequest, evaluate\n"
            "from policyrun.app.explain import ExplainRequest, explain\n"
            "from policyrun.app.next_actions import NextActionsRequest, next_actions\n"
            "from policyrun.app.probes import describe_probes\n"
            "assert lint(LintRequest(('ship.yaml',))).exit_code == 0\n"
            "r = evaluate(EvaluateRequest(RulebookRequest('ship.yaml'), formats=('md',)))\n"
            "explain(ExplainRequest('.policyrun/trace.json')); next_actions(NextActionsRequest('.policyrun/trace.json'))\n"
            "describe_probes()\n"
            "print(sorted(m for m in sys.modules if m.startswith(('policyrun.cli', 'policyrun.commands', "
            "'policyrun.mcp'))))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, cwd=project)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
