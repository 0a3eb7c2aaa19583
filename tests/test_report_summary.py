"""The one-page summary every human report opens with: each phase labelled by the evidence it
rests on (measured, attested, unverified), the commits, the supplied files with their sha256, who
ran it; the verdict's badge follows what the verdict means; md and HTML share one readiness model."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from policyrun.cli import main
from policyrun.render.explain import render_explain
from policyrun.render.html import render_html
from policyrun.render.markdown import render_markdown
from policyrun.render.view import build_view
from policyrun.trace.model import Trace, VerdictRecord, load_trace

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
TRACES = sorted(EXAMPLES.glob("*/expected/trace*.json"))
LABELS = {"measured", "attested", "unverified"}


def final_pass() -> Trace:
    return load_trace(EXAMPLES / "final-pass" / "expected" / "trace.json")


def gpu_unverified() -> Trace:
    """final-pass, as an implementation run gives it: exit 0, the GPU gate skipped by its `when`."""
    trace = final_pass()
    phases = [p.model_copy(update={"status": "SKIPPED", "evidence": [],
                                   "reason": "outside mode final-validation: inputs.gpu_validation is false"})
              if p.phase == "GPU_BASIC_E2E_GATE" else p for p in trace.phases]
    return trace.model_copy(update={
        "phases": phases, "verdict": VerdictRecord(id="implemented_gpu_unverified", summary="GPU-unverified")})


@pytest.mark.parametrize("path", TRACES, ids=lambda p: f"{p.parent.parent.name}/{p.name}")
def test_every_shipped_example_opens_with_the_summary(path: Path) -> None:
    trace = load_trace(path)
    summary = build_view(trace)["summary"]
    assert {p["label"] for p in summary["in_mode"]} <= LABELS
    md = render_markdown(trace)
    assert md.index("## Summary") < md.index("## Phases")
    for p in summary["in_mode"]:
        assert f"| {p['id']} | {p['status']} | **{p['label']}** |" in md
    for f in summary["files"]:
        assert f"| `{f['path']}` | `{f['sha256']}` |" in md
    html = render_html(trace)
    main_part = html[html.index("<main>"):]
    assert main_part.index('<section id="summary">') < main_part.index("<section id=\"pipeline\">")
    assert f'class="badge tone-{summary["verdict"]["tone"]}"' in html
    text = render_explain(trace)
    assert text.splitlines()[3] == f"summary: {summary['verdict']['badge']} — {summary['verdict']['why']}"


def test_final_pass_labels_attested_gates_with_their_files() -> None:
    trace = final_pass()
    summary = build_view(trace)["summary"]
    by_id = {p["id"]: p for p in summary["in_mode"]}
    assert summary["verdict"]["tone"] == "pass"
    assert by_id["FREEZE_IDENTITY"]["label"] == "measured"
    accuracy = by_id["GPU_ACCURACY_GATE"]
    sha = next(f.sha256 for f in trace.evidence_files if f.probe == "accuracy")
    assert accuracy["label"] == "attested" and f"accuracy.yaml (sha256 {sha[:12]}…)" in accuracy["why"]
    assert {c["sha"] for c in summary["commits"]} >= {"1a283b387ed0d5aaf19e06c12cb3b3603925c3d3"}


def test_architecture_gate_names_the_reviewer() -> None:
    trace = load_trace(EXAMPLES / "planning-pass" / "expected" / "trace.json")
    gate = next(p for p in build_view(trace)["summary"]["in_mode"] if p["id"] == "ARCHITECTURE_GATE")
    assert gate["label"] == "attested" and "reviewer: r.chen (GPU backend)" in gate["why"]


def test_gpu_unverified_is_not_a_green_pass() -> None:
    trace = gpu_unverified()
    summary = build_view(trace)["summary"]
    assert trace.exit_code == 0
    assert summary["verdict"] == {"tone": "partial", "badge": "PARTIAL",
                                  "why": "exit code 0, but 1 phase(s) of the mode did not run"}
    gate = next(p for p in summary["in_mode"] if p["id"] == "GPU_BASIC_E2E_GATE")
    assert gate["label"] == "unverified" and gate["why"].startswith("did not run: outside mode final-validation: ")
    html = render_html(trace)
    assert '<span id="verdict-badge" class="badge tone-partial"' in html and ">PARTIAL</span>" in html
    assert "**PARTIAL**: exit code 0, but 1 phase(s) of the mode did not run." in render_markdown(trace)


def test_a_waived_phase_is_unverified(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    from test_verify_auditor import AUDIT_RULEBOOK, WAIVERS, audit_facts

    monkeypatch.chdir(tmp_path)
    Path("rb.yaml").write_text(AUDIT_RULEBOOK)
    Path("facts.json").write_text(json.dumps(audit_facts(deleted=2)))
    Path("w.yaml").write_text(WAIVERS)
    assert main(["evaluate", "rb.yaml", "--mode", "audit", "--facts", "facts.json", "--waivers", "w.yaml",
                 "--out", "out", "-q", "--format", "html"]) == 0
    capsys.readouterr()
    summary = build_view(load_trace(Path("out/trace.json")))["summary"]
    a = next(p for p in summary["in_mode"] if p["id"] == "A")
    assert a["label"] == "unverified" and a["why"].startswith("waived: A.few_deletions: UNSATISFIED, waived by")
    assert summary["verdict"]["badge"] == "PARTIAL"
    assert 'class="badge tone-partial"' in Path("out/report.html").read_text()


def _md_readiness(md: str) -> dict[str, list[str]]:
    section = md.split("## Readiness", 1)[1].split("\n## ", 1)[0]
    groups: dict[str, list[str]] = {}
    current = ""
    for line in section.splitlines():
        if m := re.match(r"\*\*([\w-]+)\*\*", line):
            current = m.group(1)
            groups[current] = []
        elif line.startswith("- ") and current:
            groups[current].append(line[2:].split(" ", 1)[0].split(":", 1)[0])
    return groups


def _html_readiness(html: str) -> dict[str, list[str]]:
    section = html.split('<section id="readiness">', 1)[1].split("</section>", 1)[0]
    return {m.group(1): re.findall(r'<a href="#phase-(\w+)">', m.group(2))
            for m in re.finditer(r"<h3>([\w-]+)</h3>(.*?)</div>", section, re.S)}


@pytest.mark.parametrize("example", ["final-pass", "planning-pass", "final-unexplained-skip"])
def test_md_and_html_group_phases_into_the_same_readiness_classes(example: str, tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    trace = EXAMPLES / example / "expected" / "trace.json"
    assert main(["report", str(trace), "--format", "html", "-o", str(tmp_path / "r.html")]) == 0
    md = (EXAMPLES / example / "expected" / "report.md").read_text()  # the rulebook's own template
    html = _html_readiness((tmp_path / "r.html").read_text())
    ours = _md_readiness(md)
    assert list(ours.values()) == list(html.values()) and any(ours.values())


CHROMIUM = Path("/usr/bin/chromium")


@pytest.mark.skipif(not CHROMIUM.exists(), reason="no /usr/bin/chromium (apt-get install chromium)")
@pytest.mark.parametrize(("trace", "colour"), [(gpu_unverified, "rgb(255, 248, 197)"),
                                               (final_pass, "rgb(218, 251, 225)")])
def test_the_badge_colour_in_a_browser(trace: object, colour: str, tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    probe = ("<script>document.body.setAttribute('data-badge', getComputedStyle("
             "document.getElementById('verdict-badge')).backgroundColor);</script>")
    html = render_html(trace())  # type: ignore[operator]
    page.write_text(html.replace("</body>", probe + "</body>"), encoding="utf-8")
    proc = subprocess.run([str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                           f"--user-data-dir={tmp_path / 'profile'}", "--dump-dom", "--virtual-time-budget=2000",
                           page.as_uri()], capture_output=True, text=True, timeout=120, check=False)
    assert f'data-badge="{colour}"' in proc.stdout, proc.stderr[-2000:]


def test_lint_names_an_unknown_hardware_phase(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rb = tmp_path / "rb.yaml"
    rb.write_text("""\
policyrun: 1
name: hw
version: "1"
modes:
  m: {phases: [GPU_GATE]}
phases:
  - id: GPU_GATE
    evidence:
      - {id: ok, check: "true"}
report:
  hardware_phases: [GPU_GTAE]
""")
    assert main(["lint", str(rb)]) == 1
    out = capsys.readouterr()
    assert "rb.yaml:11:21: L004 report.hardware_phases names unknown phase 'GPU_GTAE'; did you mean 'GPU_GATE'?" \
        in out.out + out.err


def test_a_check_an_overlay_disabled_is_an_exception_where_its_phase_ran() -> None:
    from policyrun.render.intoto import attestation
    from policyrun.trace.exceptions import trace_exceptions

    trace = final_pass()
    disabled = [{"id": "skips_documented", "reason": "team B documents skips elsewhere"}]
    phases = [p.model_copy(update={"disabled": disabled}) if p.phase in ("GPU_BASIC_E2E_GATE", "DIFF_VLLM") else p
              for p in trace.phases]  # DIFF_VLLM is outside final-validation: nothing was decided there
    trace = trace.model_copy(update={"phases": phases, "generated_at": "2026-12-02T18:03:50Z"})
    assert [e.text() for e in trace_exceptions(trace)] == [
        "disabled by an overlay: GPU_BASIC_E2E_GATE.skips_documented: team B documents skips elsewhere"]
    summary = build_view(trace)["summary"]
    gate = next(p for p in summary["in_mode"] if p["id"] == "GPU_BASIC_E2E_GATE")
    assert gate["label"] == "unverified" and summary["verdict"]["badge"] == "PARTIAL"
    vsa = attestation(trace, "vsa")["predicate"]
    assert vsa["verificationResult"] == "FAILED" and vsa["policy"]["annotations"]["exceptions"][0]["kind"] == "disabled"
