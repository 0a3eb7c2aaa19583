"""Markdown completion report, Mermaid diagram, and report templates (sandbox, errors, context)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import tracefactory as tf

from policyrun.errors import RulebookError
from policyrun.render.markdown import render_markdown
from policyrun.render.mermaid import render_mermaid
from policyrun.render.templating import compile_template, md_code, md_fenced, md_text


def _section(text: str, title: str) -> str:
    start = text.index(f"## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:end if end != -1 else None]


def test_markdown_golden() -> None:
    tf.golden("report.md", render_markdown(tf.flagship()))


def test_markdown_generic_golden() -> None:
    tf.golden("report-generic.md", render_markdown(tf.generic()))


def test_markdown_has_workbook_sections() -> None:
    md = render_markdown(tf.flagship())
    for title in ("Phases", "Refs and full SHAs", "Target stack", "Phase records", "Impact matrix",
                  "Evidence gaps", "Readiness", "Provenance"):
        assert f"\n## {title}\n" in md
    assert "`final-validation`" in md
    # The phase record in the workflow's own shape, for every phase.
    for phase in tf.flagship().phases:
        assert f"phase: {phase.phase}\nstatus: {phase.status}\n" in md
        assert f"next_allowed_action: {phase.next_allowed_action}" in md
    assert "blocker: none" in md


def test_refs_and_full_shas_come_from_reads_and_provenance() -> None:
    section = _section(render_markdown(tf.flagship()), "Refs and full SHAs")
    assert f"`{tf.TARGET_SHA}` | `v0.9.1`" in section  # read as facts.target, with its sibling ref
    assert tf.CURRENT_SHA in section  # read by a check
    assert f"HEAD of /src/afd` | `{tf.AFD_HEAD}`" in section  # a probe's repository HEAD


def test_stack_lists_gpu_and_python_facts_only() -> None:
    section = _section(render_markdown(tf.flagship()), "Target stack")
    assert "`facts.gpu.devices[0].name` | `\"NVIDIA H200\"`" in section
    assert "`facts.torch.torch_cuda`" in section
    assert "unit_junit" not in section


def test_gaps_and_readiness() -> None:
    md = render_markdown(tf.flagship())
    gaps = _section(md, "Evidence gaps")
    assert "lessons_read" in gaps and "tolerated in mode" in gaps
    assert "e2e_passed" in gaps and "phase BLOCKED" in gaps
    readiness = _section(md, "Readiness")
    hw, rest = readiness.split("**Shared-code:**")
    shared, unverified = rest.split("**Unverified:**")
    assert "TARGET_NATIVE_GPU_CONTROL" in hw and "FREEZE_IDENTITY" not in hw
    assert "FREEZE_IDENTITY" in shared and "DIFF_VLLM" in shared
    assert "INVENTORY_AFD_CONTRACTS — PASS with evidence gaps" in unverified
    assert "GPU_BASIC_E2E_GATE — BLOCKED" in unverified


def test_impact_matrix_from_reads_escapes_pipes() -> None:
    section = _section(render_markdown(tf.flagship()), "Impact matrix")
    rows = [line for line in section.splitlines() if line.startswith("|")]
    assert rows[0] == "| stage | upstream_cause | files | invariant | disposition |"
    # Every row has the same number of unescaped cell separators.
    assert len({len(re.findall(r"(?<!\\)\|", r)) for r in rows}) == 1
    assert "architecture decision \\| pending" in section


def test_impact_matrix_unavailable_is_labelled_not_invented() -> None:
    md = render_markdown(tf.generic())
    assert "Unavailable: no check read an impact matrix" in _section(md, "Impact matrix")


def test_context_supplies_rulebook_specific_sections() -> None:
    context = {"impact_matrix": {"columns": ["stage", "cause"], "rows": [["S1", "API moved"]]},
               "refs": {"current": "v0.9.0", "target": "v0.9.1"},
               "sections": [{"title": "Proposed lessons", "body": "- pin the runner module"}]}
    md = render_markdown(tf.generic(), context=context)
    assert "| S1 | API moved |" in md and "Source: template context." in md
    assert "| target | `v0.9.1` |" in md
    assert "## Proposed lessons\n\n- pin the runner module" in md


def test_table_cells_cannot_break_rows() -> None:
    md = render_markdown(tf.flagship())
    row = next(line for line in md.splitlines() if line.startswith("| 4 | ARCHITECTURE_GATE"))
    assert len(re.findall(r"(?<!\\)\|", row)) == 6
    assert "&lt;design&gt;" in row  # no raw HTML from facts


def test_markdown_helpers() -> None:
    assert md_text("a|b\n<c>") == "a\\|b &lt;c&gt;"
    assert md_code("x`y") == "``x`y``"
    assert md_code("`x") == "`` `x ``"
    assert md_code("a|b") == "`a\\|b`" and md_code("a|b", table=False) == "`a|b`"
    assert md_fenced("```\ncode") == "````\n```\ncode\n````"


def test_mermaid_colours_states_by_status() -> None:
    src = render_mermaid(tf.flagship())
    tf.golden("pipeline.mmd", src)
    assert src.startswith("stateDiagram-v2\n")
    for status in ("PASS", "FAIL", "BLOCKED", "STOPPED", "SKIPPED"):
        assert f"    classDef {status} fill:" in src
    assert "    class STATIC_AND_UNIT_GATE FAIL" in src
    assert "    [*] --> FREEZE_IDENTITY" in src and "    CAPTURE_LESSONS_AND_REPORT --> [*]" in src
    # Facts cannot inject Mermaid syntax: quotes, angle brackets and pipes are stripped.
    note = next(line for line in src.splitlines() if line.startswith("    note right of ARCHITECTURE_GATE"))
    assert not set('"<>|;#') & set(note)


def test_mermaid_reserved_ids_are_prefixed() -> None:
    trace = tf.generic()
    phases = [trace.phases[0].model_copy(update={"phase": "end"})]
    src = render_mermaid(trace.model_copy(update={"phases": phases}))
    assert 'state "end - PASS" as phase_end' in src


def test_markdown_in_report_embeds_mermaid() -> None:
    md = render_markdown(tf.flagship())
    assert "```mermaid\nstateDiagram-v2\n" in md


# --- rulebook templates ----------------------------------------------------------------------

def test_rulebook_template_extends_builtin(tmp_path: Path) -> None:
    tpl = tmp_path / "completion.md.j2"
    tpl.write_text('{% extends "policyrun/report.md.j2" %}\n'
                   "{% block impact_matrix %}\n## Impact matrix\n\nSee {{ context.plan_url }}.\n{% endblock %}\n")
    md = render_markdown(tf.flagship(), template=tpl, context={"plan_url": "plan.md"})
    assert "See plan.md." in md and "## Phase records" in md and "| stage |" not in md


def test_rulebook_template_standalone_and_include(tmp_path: Path) -> None:
    (tmp_path / "parts").mkdir()
    (tmp_path / "parts" / "row.j2").write_text("{{ p.id }}={{ p.status }}\n")
    tpl = tmp_path / "short.md.j2"
    tpl.write_text("{% for p in report.phases %}{% include 'parts/row.j2' %}{% endfor %}")
    assert render_markdown(tf.generic(), template=tpl) == "CHANGELOG=PASS\nTAG=FAIL\n"


def test_compile_template_reports_syntax_error_line(tmp_path: Path) -> None:
    tpl = tmp_path / "bad.md.j2"
    tpl.write_text("# ok\n\n{% for p in report.phases %}\n{{ p.id }\n{% endfor %}\n")
    [finding] = compile_template(tpl)
    assert finding.code == "R001"
    assert finding.location.file == str(tpl) and finding.location.line == 4
    assert "syntax error" in finding.message


def test_compile_template_unknown_filter_and_missing_include(tmp_path: Path) -> None:
    (tmp_path / "partial.j2").write_text("line 1\n{{ x | nosuchfilter }}\n")
    tpl = tmp_path / "main.md.j2"
    tpl.write_text("a\n{% include 'partial.j2' %}\n{% include 'missing.j2' %}\n")
    findings = compile_template(tpl)
    assert [(f.code, Path(f.location.file).name, f.location.line) for f in findings] == [
        ("R001", "partial.j2", 2), ("R002", "main.md.j2", 3)]


def test_compile_template_missing_file(tmp_path: Path) -> None:
    [finding] = compile_template(tmp_path / "nope.md.j2")
    assert finding.code == "R002" and "not found" in finding.message


def test_compile_template_accepts_builtin_templates() -> None:
    from policyrun.render.templating import BUILTIN_DIR

    for path in BUILTIN_DIR.glob("*.j2"):
        assert compile_template(path) == []


def test_render_error_is_located_and_strict(tmp_path: Path) -> None:
    tpl = tmp_path / "typo.md.j2"
    tpl.write_text("# {{ report.mode }}\n\n{{ report.no_such_field }}\n")
    with pytest.raises(RulebookError) as err:
        render_markdown(tf.generic(), template=tpl)
    assert err.value.code == "R003"
    assert err.value.location is not None and err.value.location.line == 3
    assert "no_such_field" in err.value.message


def test_template_syntax_error_raises_with_findings(tmp_path: Path) -> None:
    tpl = tmp_path / "bad.md.j2"
    tpl.write_text("{% if %}")
    with pytest.raises(RulebookError) as err:
        render_markdown(tf.generic(), template=tpl)
    assert err.value.code == "R001" and err.value.findings


@pytest.mark.parametrize("source", [
    "{{ ''.__class__.__mro__ }}",
    "{{ report.__class__ }}",
    "{{ cycler.__init__.__globals__ }}",
])
def test_templates_are_sandboxed(tmp_path: Path, source: str) -> None:
    tpl = tmp_path / "evil.md.j2"
    tpl.write_text(source)
    with pytest.raises(RulebookError) as err:
        render_markdown(tf.generic(), template=tpl)
    assert err.value.code == "R003"


def test_templates_cannot_read_outside_their_folder(tmp_path: Path) -> None:
    (tmp_path / "secret.txt").write_text("secret")
    (tmp_path / "t").mkdir()
    tpl = tmp_path / "t" / "x.md.j2"
    tpl.write_text("{% include '../secret.txt' %}")
    assert compile_template(tpl)[0].code == "R002"
