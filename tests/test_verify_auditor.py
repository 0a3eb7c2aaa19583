"""What an auditor brings to `policyrun verify`: the waivers file (checked by sha256 against the
trace), and pins of their own (the rulebook's sha256, the commit a named ref must resolve to,
the keys they trust). Every exception a verdict was reached with (stale facts, waivers, tolerated
UNKNOWNs) is shown by verify, explain, the reports and both statements; a VSA of such a run is
never PASSED.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from test_attestations import _keys, report
from test_verify import RULEBOOK, Scenario, facts_doc, result

from policyrun.cli import main

ORIGINAL_TAG = "3" * 40
MOVED_TAG = "4" * 40

# RULEBOOK, with waivers allowed and a tag a check reads and the verdict names.
AUDIT_RULEBOOK = RULEBOOK.replace("  audit: {phases: [A, B]}", "  audit: {phases: [A, B], waivers: all}").replace(
    "  lib: {uses: git.repo, with: {path: /src/lib}}",
    "  lib: {uses: git.repo, with: {path: /src/lib}}\n  tag: {uses: git.resolve, with: {path: /src/lib, ref: v1.0}}",
).replace('summary: "ready at ${facts.lib.head}"',
          'summary: "ready at ${facts.lib.head}, v1.0 is ${facts.tag.sha}"').replace(
    '        message: "no commits between v1 and v2"',
    '        message: "no commits between v1 and v2"\n      - {id: tag_resolved, check: "size(facts.tag.sha) == 40"}')

WAIVERS = """\
policyrun_waivers: 1
issued: 2026-01-01
waivers:
  - rulebook: verify-demo
    phase: A
    check: few_deletions
    reason: the deletions are the planned removal
    owner: ada@example.com
    expires: 2099-12-31
    ticket: AFD-7
"""


def audit_facts(*, tag: str = ORIGINAL_TAG, deleted: int = 1) -> dict[str, Any]:
    doc = facts_doc(deleted=deleted)
    doc["facts"]["tag"] = {"value": {"ref": "v1.0", "sha": tag, "kind": "tag"},
                           "provenance": {"probe": "tag", "kind": "git.resolve",
                                          "params": {"path": "/src/lib", "ref": "v1.0"},
                                          "repo": {"path": "/src/lib", "head": tag}}}
    return doc


@pytest.fixture()
def scenario(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Scenario:
    monkeypatch.chdir(tmp_path)
    s = Scenario(tmp_path, rulebook=AUDIT_RULEBOOK, facts=audit_facts())
    s.rulebook, s.facts, s.trace = Path("rb.yaml"), Path("facts.json"), Path("out/trace.json")
    return s


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --- waivers: verify takes the file and checks it is the one the trace used ---------------------------


def waived(scenario: Scenario, capsys: pytest.CaptureFixture[str]) -> Path:
    scenario.facts.write_text(json.dumps(audit_facts(deleted=2)))  # A fails, unless waived
    waivers = Path("waivers.yaml")
    waivers.write_text(WAIVERS)
    assert scenario.evaluate("--waivers", str(waivers)) == 0
    capsys.readouterr()
    return waivers


def test_a_waived_trace_verifies_with_its_waivers_file(scenario: Scenario,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    waivers = waived(scenario, capsys)
    assert scenario.load()["waivers"]["sha256"] == sha256(waivers)
    assert scenario.verify(None, "--waivers", str(waivers)) == 0
    lines, _ = result(capsys)
    assert lines[0] == "verified: out/trace.json is what its rulebook gives over these facts"
    assert f"  waivers   waivers.yaml sha256 {sha256(waivers)} (as of " in "\n".join(lines)
    assert "  exceptions 1 waived" in lines
    assert any(line.startswith("    - waived: A.few_deletions: UNSATISFIED, waived by ada@example.com until "
                               "2099-12-31") for line in lines)


def test_a_waived_trace_without_its_waivers_file_is_refused(scenario: Scenario,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    waivers = waived(scenario, capsys)
    assert scenario.verify() == 3
    err = result(capsys)[1]
    assert "V007" in err and f"waivers.yaml (sha256 {sha256(waivers)})" in err and "--waivers FILE" in err


def test_another_waivers_file_is_refused(scenario: Scenario, capsys: pytest.CaptureFixture[str]) -> None:
    waivers = waived(scenario, capsys)
    other = Path("other.yaml")
    other.write_text(WAIVERS.replace("2099-12-31", "2098-12-31"))
    assert scenario.verify(None, "--waivers", str(other)) == 3
    err = result(capsys)[1]
    assert f"other.yaml has sha256 {sha256(other)}, but the trace records waivers.yaml with sha256 " \
           f"{sha256(waivers)}" in err


def test_a_waived_run_is_flagged_in_every_output(scenario: Scenario, capsys: pytest.CaptureFixture[str]) -> None:
    waived(scenario, capsys)
    assert main(["explain", str(scenario.trace)]) == 0
    explain = capsys.readouterr().out
    assert "exceptions: 1 waived\n  - waived: A.few_deletions: UNSATISFIED, waived by ada@example.com" in explain
    assert main(["report", str(scenario.trace), "--format", "md", "-o", "r.md"]) == 0
    md = Path("r.md").read_text()
    assert "| Exceptions | 1 waived |" in md and "- **waived** A.few_deletions: UNSATISFIED" in md
    statement = report(capsys, scenario.trace, "in-toto")["predicate"]
    assert statement["waivers"]["sha256"] == sha256(Path("waivers.yaml"))
    assert [(e["kind"], e["phase"], e["check"]) for e in statement["exceptions"]] == [("waived", "A", "few_deletions")]
    vsa = report(capsys, scenario.trace, "vsa")["predicate"]
    assert scenario.load()["exit_code"] == 0
    assert vsa["verificationResult"] == "FAILED" and vsa["verifiedLevels"] == ["FAILED"]
    assert vsa["policy"]["annotations"]["exitCode"] == 0
    assert vsa["policy"]["annotations"]["exceptions"][0]["kind"] == "waived"


def test_a_run_without_exceptions_passes_the_vsa(scenario: Scenario, capsys: pytest.CaptureFixture[str]) -> None:
    assert scenario.evaluate() == 0
    vsa = report(capsys, scenario.trace, "vsa")["predicate"]
    assert vsa["verificationResult"] == "PASSED" and "annotations" not in vsa["policy"]
    assert main(["explain", str(scenario.trace)]) == 0
    assert "exceptions: none" in capsys.readouterr().out


# --- stale facts --------------------------------------------------------------------------------------


def test_stale_facts_are_flagged_by_verify_and_the_vsa(scenario: Scenario,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    doc = audit_facts()
    doc["facts"]["lib"]["provenance"]["params"]["path"] = "/src/other"  # collected for another question
    scenario.facts.write_text(json.dumps(doc))
    assert scenario.evaluate("--allow-stale-facts") == 0
    capsys.readouterr()
    assert scenario.verify() == 0
    lines, _ = result(capsys)
    assert "  exceptions 1 stale facts" in lines
    assert "    - stale facts: lib: collected with other parameters (path: collected \"/src/other\", expected " \
           "\"/src/lib\")" in lines
    assert report(capsys, scenario.trace, "vsa")["predicate"]["verificationResult"] == "FAILED"
    assert main(["report", str(scenario.trace), "--format", "html", "-o", "r.html"]) == 0
    assert '<dd id="exceptions-summary">1 stale facts</dd>' in Path("r.html").read_text()


# --- pins the auditor brings ----------------------------------------------------------------------------


def test_a_moved_tag_is_caught_when_the_auditor_pins_the_commit(scenario: Scenario,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    scenario.facts.write_text(json.dumps(audit_facts(tag=MOVED_TAG)))  # v1.0 was moved before collection
    assert scenario.evaluate() == 0
    capsys.readouterr()
    assert scenario.verify() == 0  # nothing in the trace and facts alone says the tag moved
    capsys.readouterr()
    assert scenario.verify(None, "--ref", f"v1.0={ORIGINAL_TAG}") == 1
    lines, _ = result(capsys)
    assert f"PIN MISMATCH: ref v1.0: pinned to {ORIGINAL_TAG}, but tag resolved it to {MOVED_TAG}" in lines
    assert lines[-1] == "NOT VERIFIED: 1 pin(s) you gave do not match"
    assert scenario.verify(None, "--ref", f"v1.0={MOVED_TAG[:12]}") == 0  # a prefix is enough
    capsys.readouterr()
    assert scenario.verify(None, "--ref", f"v9.9={ORIGINAL_TAG}") == 1
    assert f"PIN MISMATCH: ref v9.9: pinned to {ORIGINAL_TAG}, but no fact records what v9.9 resolved to" \
        in result(capsys)[0]


def test_a_weakened_rulebook_is_caught_by_a_pinned_sha256(scenario: Scenario,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    trusted = sha256(scenario.rulebook)
    # Same name and version, a weaker check: the trace it gives verifies against itself ...
    scenario.rulebook.write_text(AUDIT_RULEBOOK.replace("size(derived.deleted) <= inputs.limit", "true"))
    scenario.facts.write_text(json.dumps(audit_facts(deleted=5)))
    assert scenario.evaluate() == 0
    capsys.readouterr()
    assert scenario.verify() == 0
    capsys.readouterr()
    # ... but not against the sha256 the auditor trusts.
    assert scenario.verify(None, "--rulebook-sha256", trusted) == 1
    lines, _ = result(capsys)
    assert f"PIN MISMATCH: rulebook rb.yaml has sha256 {sha256(scenario.rulebook)}, but you pinned {trusted}" in lines
    assert scenario.verify(None, "--rulebook-sha256", "zz") == 3
    assert "--rulebook-sha256 expects 64 hex digits" in result(capsys)[1]


def test_edited_facts_re_evaluated_are_caught_by_pins(scenario: Scenario, capsys: pytest.CaptureFixture[str]) -> None:
    """Whoever can write facts can re-evaluate and get a trace that verifies; what the auditor
    knows independently (the commit a tag names) catches the edit."""
    doc = audit_facts()
    doc["facts"]["tag"]["value"]["sha"] = MOVED_TAG  # an edited fact, then evaluated again
    scenario.facts.write_text(json.dumps(doc))
    assert scenario.evaluate() == 0
    capsys.readouterr()
    assert scenario.verify() == 0
    capsys.readouterr()
    assert scenario.verify(None, "--ref", f"v1.0={ORIGINAL_TAG}") == 1
    assert "PIN MISMATCH: ref v1.0" in "\n".join(result(capsys)[0])


def test_ref_pins_need_the_facts(scenario: Scenario, capsys: pytest.CaptureFixture[str]) -> None:
    assert scenario.evaluate() == 0
    capsys.readouterr()
    assert main(["verify", str(scenario.trace), "--ref", f"v1.0={ORIGINAL_TAG}"]) == 3
    assert "V004" in capsys.readouterr().err
    assert main(["verify", str(scenario.trace), "--facts", "facts.json", "--ref", "v1.0"]) == 3
    assert "--ref expects NAME=COMMIT" in capsys.readouterr().err


def test_only_trusted_keys_verify_a_signed_statement(scenario: Scenario, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    signer, signer_pub = _keys(tmp_path, "signer")
    _, other_pub = _keys(tmp_path, "other")
    assert scenario.evaluate() == 0
    assert main(["report", str(scenario.trace), "--format", "in-toto", "--sign-key", str(signer),
                 "-o", "v.json"]) == 0
    capsys.readouterr()
    assert main(["verify", "v.json", "--key", str(other_pub)]) == 1  # signed by a key the auditor does not trust
    assert "INVALID" in capsys.readouterr().out
    assert main(["verify", "v.json", "--key", str(other_pub), "--key", str(signer_pub)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("signature valid: v.json is signed by the key with keyid ")
    assert "  exceptions none" in out
    ring = tmp_path / "ring"
    ring.mkdir()
    (ring / "other.pem").write_bytes(other_pub.read_bytes())
    assert main(["verify", "v.json", "--key", str(ring)]) == 1
    assert "INVALID" in capsys.readouterr().out
    (ring / "signer.pem").write_bytes(signer_pub.read_bytes())
    assert main(["verify", "v.json", "--key", str(ring)]) == 0
    capsys.readouterr()
    # The statement's rulebook is checked against a pinned sha256 without any facts.
    assert main(["verify", "v.json", "--key", str(signer_pub), "--rulebook-sha256", "0" * 64]) == 1
    assert "PIN MISMATCH: the statement's rulebook has sha256 " in capsys.readouterr().out


# --- provenance of the run ------------------------------------------------------------------------------


def test_the_trace_and_statement_say_who_ran_it_where_and_with_what(scenario: Scenario,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    import platform
    import socket

    from policyrun import __version__

    assert scenario.evaluate() == 0
    run = scenario.load()["run"]
    assert run["policyrun_version"] == __version__ and run["python_version"] == platform.python_version()
    assert run["hostname"] == socket.gethostname() and run["platform"] == platform.platform()
    assert report(capsys, scenario.trace, "in-toto")["predicate"]["run"] == run
    # Like generated_at it is not a claim about the facts: verify does not compare it ...
    edited = scenario.edit(lambda t: t["run"].update(user="someone-else"))
    assert scenario.verify(edited) == 0
    capsys.readouterr()
    # ... and --no-timestamp leaves it out, so traces stay byte-for-byte reproducible.
    assert scenario.evaluate("--no-timestamp") == 0
    assert scenario.load()["run"] is None


def test_supplied_evidence_files_are_listed_with_their_sha256(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    Path("plan.yaml").write_text("author: ada@example.com\nstages: [S1]\n")
    Path("rb.yaml").write_text("""\
policyrun: 1
name: evidence-demo
version: "1"
modes:
  audit: {phases: [PLAN]}
probes:
  plan: {uses: attestation, with: {path: plan.yaml, schema: {type: object}}}
phases:
  - id: PLAN
    evidence:
      - {id: staged, check: "size(facts.plan.document.stages) > 0"}
""")
    # An inline `schema:` (a mapping) once crashed lint's type check: exit 4.
    assert main(["evaluate", "rb.yaml", "--mode", "audit", "--out", "out", "-q"]) == 0
    trace = json.loads(Path("out/trace.json").read_text())
    assert trace["evidence_files"] == [{"probe": "plan", "kind": "attestation", "path": str(tmp_path / "plan.yaml"),
                                        "sha256": sha256(Path("plan.yaml")), "author": "author: ada@example.com"}]
    assert report(capsys, Path("out/trace.json"), "in-toto")["predicate"]["evidenceFiles"] == [
        {k: v for k, v in trace["evidence_files"][0].items()}]


# --- the facts digest does not depend on where the repositories are ----------------------------------------


def test_the_facts_digest_is_the_same_wherever_the_repositories_were_checked_out() -> None:
    from policyrun.facts import FactsSnapshot

    def snapshot(app: str, lib: str) -> FactsSnapshot:
        text = json.dumps(facts_doc()).replace("/src/app", app).replace("/src/lib", lib)
        return FactsSnapshot.model_validate_json(text)

    here, there = snapshot("/src/app", "/src/lib"), snapshot("/home/ada/work/app", "/tmp/x/lib")
    assert here.digest() == there.digest()
    assert here.digest_v1() != there.digest_v1()  # format 1 hashed the absolute paths
    assert here.roots() == {"/src/app": "1" * 40, "/src/lib": "2" * 40}
    # Another commit, or a path that only starts like a root, is another snapshot.
    moved = FactsSnapshot.model_validate_json(json.dumps(facts_doc()).replace('"head": "' + "2" * 40,
                                                                              '"head": "' + "5" * 40))
    assert moved.digest() != here.digest()
    longer = FactsSnapshot.model_validate_json(json.dumps(facts_doc()).replace('"/src/other"', '"/src/app-old"'))
    doc = facts_doc()
    doc["facts"]["lib"]["value"]["note"] = "/src/app-old/x"
    assert FactsSnapshot.model_validate(doc).digest() != here.digest()
    assert longer.digest() == here.digest()


def test_a_trace_with_a_format_1_digest_still_verifies(scenario: Scenario,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    from policyrun.facts import load_facts

    assert scenario.evaluate() == 0
    v1 = load_facts(scenario.facts).digest_v1()
    edited = scenario.edit(lambda t: t.update(facts_sha256=v1))
    capsys.readouterr()
    assert scenario.verify(edited) == 0
    assert "records the facts digest in format 1" in result(capsys)[1]


# --- report --against the last approved trace ---------------------------------------------------------


def test_report_against_the_approved_trace(scenario: Scenario, capsys: pytest.CaptureFixture[str]) -> None:
    assert scenario.evaluate() == 0
    approved = Path("approved.json")
    approved.write_text(scenario.trace.read_text())
    scenario.facts.write_text(json.dumps(audit_facts(tag=MOVED_TAG)))  # the tag moved: the same verdict
    assert scenario.evaluate() == 0
    capsys.readouterr()
    assert main(["report", str(scenario.trace), "--against", str(approved), "-o", "r.md"]) == 0
    md = Path("r.md").read_text()
    changes = md.split("## Changes since the approved trace", 1)[1].split("\n## ", 1)[0]
    assert "Compared with `approved.json`." in changes
    changes = "\n".join(line.removeprefix("    ") for line in changes.splitlines())  # an indented code block
    assert "\nverdict: " not in changes and "~ B: status unchanged\n    ~ evidence tag_resolved\n" in changes
    assert f'reads now:  facts.tag.sha = "{MOVED_TAG}"' in changes
    assert f"commits:\n  ~ /src/lib: {ORIGINAL_TAG} -> {MOVED_TAG}" in changes
    assert md.index("## Summary") < md.index("## Changes since the approved trace") < md.index("## Phases")
    assert main(["report", str(scenario.trace), "--against", str(approved), "--format", "html", "-o", "r.html"]) == 0
    assert '<section id="against">' in Path("r.html").read_text()
    assert main(["report", str(approved), "--against", str(approved), "-o", "same.md"]) == 0
    assert "Compared with `approved.json`: nothing changed." in Path("same.md").read_text()
    assert main(["report", str(scenario.trace), "--against", str(approved), "--format", "junit"]) == 3
    assert "--against applies to md and html" in capsys.readouterr().err


def test_review_lists_changed_evidence_files_and_exceptions() -> None:
    from policyrun.render.diff import render_diff_text, review_diff
    from policyrun.trace.model import EvidenceFile, StaleFact, Trace

    approved = Trace.model_validate(json.loads((Path(__file__).resolve().parent.parent / "examples" / "final-pass"
                                                / "expected" / "trace.json").read_text()))
    files = [f.model_copy(update={"sha256": "f" * 64}) if f.probe == "e2e" else f for f in approved.evidence_files]
    files.append(EvidenceFile(probe="extra", kind="results", path="r.json", sha256="e" * 64))
    new = approved.model_copy(update={"evidence_files": files,
                                      "stale_facts": [StaleFact(probe="gpu", reason="collected elsewhere")]})
    diff = review_diff(approved, new)
    text = render_diff_text(diff)
    e2e = next(f for f in approved.evidence_files if f.probe == "e2e")
    assert diff["changed"] and not diff["phases"]
    assert (f"evidence files (sha256):\n  ~ e2e: {e2e.path}: {e2e.sha256} -> {'f' * 64}\n"
            f"  + extra: r.json {'e' * 64}\n") in text
    assert "exceptions:\n  + stale facts: gpu: collected elsewhere\n" in text
    assert "0 input(s), 0 commit(s), 2 evidence file(s) and 1 exception(s) changed." in text
