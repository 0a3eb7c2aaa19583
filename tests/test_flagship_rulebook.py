"""The flagship rulebook's shape, its own test suite, and the reproducibility of its test snapshots."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from policyrun.evaluate.engine import load_checked
from policyrun.language.lint import findings_for
from policyrun.audit.ruletest import Coverage, run_suite
from tests import afdfixtures as fx

ROOT = Path(__file__).resolve().parent.parent
RULEBOOK = ROOT / "rulebooks" / "upgrade-gpu-version.yaml"
SUITE = ROOT / "rulebooks" / "upgrade-gpu-version.test.yaml"

PHASES = ["FREEZE_IDENTITY", "INVENTORY_AFD_CONTRACTS", "DIFF_VLLM", "ARCHITECTURE_GATE", "PRODUCE_STAGED_PLAN",
          "IMPLEMENT_ATOMIC_ADAPTATIONS", "STATIC_AND_UNIT_GATE", "TARGET_NATIVE_GPU_CONTROL", "GPU_BASIC_E2E_GATE",
          "GPU_ACCURACY_GATE", "DOCUMENTATION_REFRESH_GATE", "FINAL_AUDIT", "CAPTURE_LESSONS_AND_REPORT"]
GPU_AND_AFTER = PHASES[7:]


def test_first_line_names_the_schema() -> None:
    assert RULEBOOK.read_text().splitlines()[0] == "# yaml-language-server: $schema=../schemas/rulebook.schema.json"


def test_lint_is_clean() -> None:
    rb = load_checked(RULEBOOK)
    assert [f.render() for f in findings_for(rb)] == []


def test_phases_modes_and_inputs() -> None:
    model = load_checked(RULEBOOK).model
    assert [p.id for p in model.phases] == PHASES
    assert all(p.title and p.description and p.next.get("PASS") for p in model.phases)
    assert list(model.modes) == ["planning-audit", "implementation", "final-validation"]

    planning = model.modes["planning-audit"]
    assert [m.phase for m in planning.phases] == PHASES[:5]
    assert all(m.when is None for m in planning.phases)
    assert planning.permissions and not any(planning.permissions.values())

    implementation = model.modes["implementation"]
    assert [m.phase for m in implementation.phases] == PHASES
    assert {m.phase: m.when for m in implementation.phases if m.when} == {p: "inputs.gpu_validation"
                                                                           for p in GPU_AND_AFTER}

    final = model.modes["final-validation"]
    assert [m.phase for m in final.phases] == ["FREEZE_IDENTITY", "STATIC_AND_UNIT_GATE", *GPU_AND_AFTER]
    assert final.on_missing == "BLOCKED" and final.permissions.get("write_repos") is False

    inputs = model.inputs
    # The generic rulebook's plugin_repo/plugin_base, still answering to the AFD names users type.
    assert inputs["plugin_repo"].aliases == ["afd_repo"] and inputs["plugin_base"].aliases == ["afd_base"]
    assert inputs["plugin_repo"].default == "." and inputs["vllm_src"].required and inputs["target_ref"].required
    assert inputs["evidence_dir"].default == ".policyrun/evidence"
    assert inputs["gpu_validation"].type == "bool" and inputs["gpu_validation"].default is False
    for name in ("current_ref", "plugin_base", "python", "unit_junit", "e2e_junit", "accuracy_results"):
        assert name in inputs and not inputs[name].required
    assert set(model.schemas) >= {"architecture", "plan", "native_control", "accuracy"}


def test_references_resolve() -> None:
    model = load_checked(RULEBOOK).model
    linked = set(model.references) | {r for p in model.phases for r in p.references}
    assert {"../references/upgrade-workbook.md", "../references/documentation-refresh.md",
            "../references/lessons-format.md"} <= linked
    for ref in linked:
        assert (RULEBOOK.parent / ref).is_file(), ref


def test_references_are_our_own_words() -> None:
    """No sentence of the policy the rulebook encodes is copied into the references."""
    source = Path("/work/shared/reference/upgrade-gpu-version-skill.txt")
    if not source.is_file():
        pytest.skip("the reference policy text is not available here")
    # Prose sentences only: the status list and the phase ids are an interface and must match exactly.
    sentences = {s.strip() for s in re.split(r"(?<=[.;:])\s+", source.read_text())
                 if sum(w.isalpha() and w.islower() for w in s.split()) >= 6}
    for ref in (ROOT / "references").glob("*.md"):
        text = " ".join(ref.read_text().split())
        copied = [s for s in sentences if " ".join(s.split()) in text]
        assert copied == [], f"{ref.name} copies: {copied[:2]}"


# Conditions that cannot be made false by design: a missing comment field or an unnamed upstream is
# a deliberate UNKNOWN gap (`size(violations) == 0 || unknown(...)`), never UNSATISFIED.
NEVER_FALSE = {"INVENTORY_AFD_CONTRACTS/evidence/patch_comments_present",
               "INVENTORY_AFD_CONTRACTS/evidence/patch_upstream_known"}


def test_rulebook_suite_passes_with_full_coverage() -> None:
    coverage = Coverage()
    results = run_suite(SUITE, coverage)
    failures = {r.case.name: r.failures for r in results if not r.ok}
    assert failures == {}
    assert len(results) >= 130
    assert {k for k in coverage.seen if not coverage.covered(k)} == set()
    for key in NEVER_FALSE:  # `x || unknown(...)`: satisfied, or deliberately unknown, never false
        assert coverage.seen[key] == {"SATISFIED", "DELIBERATE_UNKNOWN"}, key
    assert coverage.percent == 100.0
    modes = {r.case.mode for r in results}
    assert modes == {"planning-audit", "implementation", "final-validation"}
    # Every phase is seen passing and not passing somewhere in the suite, and every case asserts
    # more than statuses: a blocker, message, next action, check result or derived value.
    seen: dict[str, set[str]] = {p: set() for p in PHASES}
    for r in results:
        assert r.trace is not None
        for rec in r.trace.phases:
            seen[rec.phase].add(rec.status)
        e = r.case.expect
        assert e.blockers or e.messages or e.next or e.checks or e.derived or e.verdict_summary or e.verdict, r.case.name
    for pid, got in seen.items():
        assert "PASS" in got and got - {"PASS", "SKIPPED"}, (pid, got)


def test_suite_overrides_raw_facts_only() -> None:
    """Cases state raw facts; derived values are recomputed, never injected as facts."""
    from policyrun.audit.ruletest import load_suite

    model = load_checked(RULEBOOK).model
    suite = load_suite(SUITE)
    for case in suite.cases:
        assert set(case.facts) <= set(model.probes), (case.name, set(case.facts) - set(model.probes))
        assert not set(case.facts) & set(model.derive), case.name


@pytest.mark.parametrize("name", list(fx.SNAPSHOTS))
def test_snapshots_are_reproducible(name: str, tmp_path: Path, afd_repos: fx.FixtureRepos) -> None:
    """rulebooks/tests/<name>.facts.json is what collecting from the fixture repositories gives today.

    A change to the rulebook's probes or derived facts that changes the snapshot fails here;
    regenerate with `python -m tests.afdfixtures snapshots` and review the test cases.
    """
    out = tmp_path / f"{name}.facts.json"
    fx.make_snapshot(name, out, afd_repos)
    stored = ROOT / "rulebooks" / "tests" / f"{name}.facts.json"
    assert json.loads(out.read_text()) == json.loads(stored.read_text())


def test_a_second_collection_in_one_process_records_the_same_provenance(tmp_path: Path,
                                                                         afd_repos: fx.FixtureRepos) -> None:
    """Parses and module summaries are shared across probes and collections in one process (an MCP
    server, a test run); what a fact's provenance names must not depend on which probe read a file
    first: the second collection reuses every summary and still names `git cat-file --batch`."""
    first, second = tmp_path / "first.json", tmp_path / "second.json"
    fx.make_snapshot("planning", first, afd_repos)
    fx.make_snapshot("planning", second, afd_repos)
    a, b = json.loads(first.read_text()), json.loads(second.read_text())
    assert {pid: f["provenance"]["commands"] for pid, f in a["facts"].items()} == \
        {pid: f["provenance"]["commands"] for pid, f in b["facts"].items()}
