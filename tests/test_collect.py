"""collect(): the probe DAG, parallelism, timeouts, permissions, parameter errors and provenance;
plus the `collect` and `probes` commands end to end."""

from __future__ import annotations

import io
import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from policyrun.cli import main
from policyrun.collection.progress import LineProgress, RichProgress, make_progress
from policyrun.collection.run import collect
from policyrun.errors import UsageError
from policyrun.facts import Fact, FactsSnapshot, load_facts
from policyrun.model import Rulebook
from policyrun.probes.base import ProbeContext, ProbeResult
from policyrun.probes.registry import registry
from tests.gitfixtures import GitRepo


class FakeProbe:
    summary = "test probe"
    fact_schema: dict[str, Any] = {}

    def __init__(self, kind: str, fn: Callable[[dict[str, Any]], Any], effects: frozenset[str] = frozenset()) -> None:
        self.kind = kind
        self.fn = fn
        self.effects = effects
        self.params_schema = {"type": "object"}
        self.calls = 0

    def side_effects(self, params: Any) -> frozenset[str]:
        return self.effects

    def run(self, params: Any, ctx: ProbeContext) -> ProbeResult:
        self.calls += 1
        return ProbeResult(value=self.fn(dict(params)))


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> Callable[..., FakeProbe]:
    def register(kind: str, fn: Callable[[dict[str, Any]], Any], effects: frozenset[str] = frozenset()) -> FakeProbe:
        probe = FakeProbe(kind, fn, effects)
        monkeypatch.setitem(registry(), kind, probe)
        return probe
    return register


def rulebook(probes: dict[str, Any], modes: dict[str, Any] | None = None, **extra: Any) -> Rulebook:
    return Rulebook.model_validate({"policyrun": 1, "name": "t", "modes": modes or {"m": {"phases": ["P"]}},
                                    "phases": [{"id": "P"}], "probes": probes, **extra})


def run(rb: Rulebook, tmp_path: Path, mode: str = "m", inputs: dict[str, Any] | None = None,
        **kw: Any) -> dict[str, Fact]:
    return collect(rb, mode, inputs or {}, base_dir=tmp_path, **kw).facts


def code(fact: Fact) -> str | None:
    return fact.error.code if fact.error else None


def message(fact: Fact) -> str:
    return fact.error.message if fact.error else ""


def const(value: Any, **extra: Any) -> dict[str, Any]:
    return {"uses": "const", "with": {"value": value}, **extra}


def test_independent_probes_run_in_parallel(fake: Any, tmp_path: Path) -> None:
    barrier = threading.Barrier(3, timeout=5)  # passes only if all three wait at the same time
    fake("test.meet", lambda p: barrier.wait() >= 0)
    facts = run(rulebook({f"p{i}": {"uses": "test.meet"} for i in range(3)}), tmp_path)
    assert [f.value for f in facts.values()] == [True, True, True]


def test_dependants_wait_for_the_facts_they_read(tmp_path: Path) -> None:
    facts = run(rulebook({
        "c": const("${facts.b + '!'}"),
        "b": const("${facts.a.sha + '-' + inputs.suffix}"),
        "a": const({"sha": "abc"}),
    }), tmp_path, inputs={"suffix": "x"})
    assert facts["c"].value == "abc-x!"
    assert facts["b"].provenance.params == {"value": "abc-x"}  # parameters after interpolation


def test_the_head_of_the_longest_chain_starts_first(fake: Any, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """With one worker, the ready probe that the most probes wait on (in a chain) runs before probes
    nothing waits for, whatever the declaration order."""
    import policyrun.collection.run as collect_module

    monkeypatch.setattr(collect_module, "MAX_WORKERS", 1)
    started: list[str] = []
    fake("test.log", lambda p: started.append(p["name"]) or p["name"])
    facts = run(rulebook({
        "leaf1": {"uses": "test.log", "with": {"name": "leaf1"}},
        "leaf2": {"uses": "test.log", "with": {"name": "leaf2"}},
        "head": {"uses": "test.log", "with": {"name": "head"}},
        "middle": {"uses": "test.log", "with": {"name": "middle-${facts.head}"}},
        "tail": {"uses": "test.log", "with": {"name": "tail-${facts.middle}"}},
    }), tmp_path)
    assert started[0] == "head" and started[1] == "middle-head"
    assert facts["tail"].value == "tail-middle-head" and sorted(started[2:]) == ["leaf1", "leaf2", "tail-middle-head"]


def test_a_failed_probe_fails_only_its_dependants(tmp_path: Path) -> None:
    (tmp_path / "plain").mkdir()
    snap = collect(rulebook({
        "head": {"uses": "git.resolve", "with": {"path": "plain", "ref": "HEAD"}},
        "uses_head": const("${facts.head.sha}"),
        "uses_that": const("${facts.uses_head}"),
        "other": const(1),
    }), "m", {}, base_dir=tmp_path)
    facts = snap.facts
    assert code(facts["head"]) == "git.not_a_repository"
    assert code(facts["uses_head"]) == "dependency.failed"
    assert "'head'" in message(facts["uses_head"]) and "git.not_a_repository" in message(facts["uses_head"])
    assert code(facts["uses_that"]) == "dependency.failed" and "'uses_head'" in message(facts["uses_that"])
    assert facts["other"].value == 1
    assert set(snap.values()) == {"other"}  # what the interpreter sees: failed facts are missing


def test_a_probe_that_hangs_times_out_without_hanging_collect(fake: Any, tmp_path: Path) -> None:
    release = threading.Event()
    fake("test.hang", lambda p: release.wait(30))
    started = time.monotonic()
    try:
        facts = run(rulebook({"slow": {"uses": "test.hang", "timeout_s": 0.2}, "fast": const(1),
                              "after": const("${facts.slow}")}), tmp_path)
    finally:
        release.set()
    assert time.monotonic() - started < 25  # the probe itself would hang for 30 s: generous for loaded machines
    assert code(facts["slow"]) == "probe.timeout" and "0.2s" in message(facts["slow"])
    assert code(facts["after"]) == "dependency.failed" and facts["fast"].value == 1


def test_permissions_refuse_probes_before_they_run(fake: Any, tmp_path: Path) -> None:
    gpu = fake("test.gpu", lambda p: "touched the GPU", effects=frozenset({"gpu_context"}))
    modes = {"audit": {"phases": ["P"], "permissions": {"gpu_context": False}},
             "validate": {"phases": ["P"], "permissions": {"gpu_context": True}}}
    rb = rulebook({"gpu": {"uses": "test.gpu"}}, modes)
    refused = run(rb, tmp_path, mode="audit")["gpu"]
    assert code(refused) == "refused.permission" and gpu.calls == 0
    assert "'gpu_context'" in message(refused) and "'audit'" in message(refused)
    assert run(rb, tmp_path, mode="validate")["gpu"].value == "touched the GPU"


def test_probes_outside_the_mode_are_not_collected(tmp_path: Path) -> None:
    modes = {"a": {"phases": ["P"]}, "b": {"phases": ["P"]}}
    rb = rulebook({"only_b": const(1, modes=["b"]), "all": const(2), "reads_b": const("${facts.only_b}")}, modes)
    facts = run(rb, tmp_path, mode="a")
    assert set(facts) == {"all", "reads_b"}
    assert code(facts["reads_b"]) == "dependency.failed" and "not collected in mode 'a'" in message(facts["reads_b"])
    with pytest.raises(UsageError, match="unknown|not defined"):
        run(rb, tmp_path, mode="c")


def test_parameter_errors(tmp_path: Path) -> None:
    facts = run(rulebook({
        "interp": const("${inputs.missing_input}"),
        "no_ref": {"uses": "git.resolve", "with": {"path": "."}},
        "option": {"uses": "git.resolve", "with": {"ref": "--all"}},
        "kind": {"uses": "git.nonsense"},
        "ghost": const("${facts.nobody.x}"),
    }), tmp_path)
    assert code(facts["interp"]) == "params.interpolation" and "inputs.missing_input" in message(facts["interp"])
    assert code(facts["no_ref"]) == "params.invalid" and "'ref' is a required property" in message(facts["no_ref"])
    assert code(facts["option"]) == "params.invalid" and "parameter ref" in message(facts["option"])
    assert code(facts["kind"]) == "probe.unknown_kind" and "git.nonsense" in message(facts["kind"])
    assert code(facts["ghost"]) == "params.interpolation" and "no probe 'nobody'" in message(facts["ghost"])


def test_crashes_become_facts(fake: Any, tmp_path: Path) -> None:
    def boom(p: Any) -> Any:
        raise RuntimeError("boom")
    fake("test.boom", boom)
    fake("test.set", lambda p: {1, 2})
    facts = run(rulebook({"boom": {"uses": "test.boom"}, "notjson": {"uses": "test.set"}}), tmp_path)
    assert code(facts["boom"]) == "probe.crashed" and message(facts["boom"]) == "RuntimeError: boom"
    assert code(facts["notjson"]) == "probe.crashed"
    assert facts["boom"].provenance.duration_s is not None


def test_cycles_are_errors_not_hangs(tmp_path: Path) -> None:
    facts = run(rulebook({"a": const("${facts.b}"), "b": const("${facts.a}"), "c": const("${facts.a}"),
                          "me": const("${facts.me}")}), tmp_path)
    assert code(facts["a"]) == code(facts["b"]) == code(facts["me"]) == "dependency.cycle"
    assert code(facts["c"]) == "dependency.failed"


def test_only_collects_the_probe_and_what_it_reads(tmp_path: Path) -> None:
    rb = rulebook({"a": const(1), "b": const("${facts.a + 1}"), "c": const(3)})
    assert {k: f.value for k, f in run(rb, tmp_path, only={"b"}).items()} == {"a": 1, "b": 2}
    with pytest.raises(UsageError, match="no probe of that name"):
        run(rb, tmp_path, only={"zzz"})


def test_git_provenance(tmp_path: Path, history: GitRepo) -> None:
    repo = history  # in tmp_path/repo
    rb = rulebook({"target": {"uses": "git.resolve", "with": {"path": "${inputs.repo}", "ref": "v1"}}})
    fact = run(rb, tmp_path, inputs={"repo": "repo"})["target"]
    prov = fact.provenance
    assert (prov.probe, prov.kind, prov.params) == ("target", "git.resolve", {"path": "repo", "ref": "v1"})
    assert prov.repo is not None and prov.repo.head == repo.sha("HEAD")
    assert prov.repo.path == str(repo.path.resolve())
    root = repo.path.resolve()
    # Finding the repository and reading its config (to neutralise program-running keys) come first.
    assert prov.commands == [
        f"git -C {root} rev-parse --absolute-git-dir --git-common-dir --is-bare-repository --is-inside-work-tree "
        "--show-cdup HEAD",
        f"git -C {root} config -z --list",
        f"git -C {root} rev-parse v1 'v1^{{}}' --symbolic-full-name v1 --"]
    iso = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"
    assert re.fullmatch(iso, prov.started_at or "") and re.fullmatch(iso, prov.finished_at or "")
    assert prov.duration_s is not None and prov.duration_s >= 0 and prov.error is None


def test_line_progress(tmp_path: Path) -> None:
    out = io.StringIO()
    run(rulebook({"good": const(1), "bad": {"uses": "nope"}}), tmp_path, progress=LineProgress(out))
    lines = sorted(out.getvalue().splitlines())
    assert lines[0].startswith("collect: bad error probe.unknown_kind: no probe kind 'nope'")
    assert re.fullmatch(r"collect: good ok \d+\.\d\ds", lines[1])


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_kind_follows_terminal_and_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    assert isinstance(make_progress(io.StringIO()), LineProgress)
    assert isinstance(make_progress(_Tty()), RichProgress)
    monkeypatch.setenv("CI", "true")
    assert isinstance(make_progress(_Tty()), LineProgress)


# --- commands -----------------------------------------------------------------------------------

RULEBOOK = """\
policyrun: 1
name: collect-demo
inputs:
  repo: {type: path, required: true}
modes:
  audit:
    phases: [IDENTITY]
probes:
  head: {uses: git.resolve, with: {path: "${inputs.repo}", ref: v2}}
  diff: {uses: git.diff, with: {path: "${inputs.repo}", base: v1, head: "${facts.head.sha}"}}
phases:
  - id: IDENTITY
    evidence:
      - id: head_sha
        check: facts.head.sha.matches('^[0-9a-f]{40}$') && facts.diff.totals.renamed == 1
"""


@pytest.fixture
def demo(tmp_path: Path, history: GitRepo) -> Iterator[tuple[Path, GitRepo]]:
    repo = history  # in tmp_path/repo
    (tmp_path / "rules.yaml").write_text(RULEBOOK)
    yield tmp_path / "rules.yaml", repo


def test_collect_command_writes_a_facts_file(demo: tuple[Path, GitRepo], tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    rules, repo = demo
    out = tmp_path / "out" / "facts.json"
    assert main(["collect", str(rules), "--mode", "audit", "--set", f"repo={repo.path}", "-o", str(out)]) == 0
    facts = load_facts(out)
    assert (facts.rulebook, facts.mode) == ("collect-demo", "audit")
    assert facts.facts["head"].value["sha"] == repo.sha("v2^{commit}")
    assert facts.facts["diff"].value["totals"]["renamed"] == 1
    err = capsys.readouterr().err
    assert re.search(r"^collect: head ok ", err, re.M) and "collect: 2 facts, 0 failed" in err
    assert main(["evaluate", str(rules), "--mode", "audit", "--set", f"repo={repo.path}", "--facts", str(out),
                 "--out", str(tmp_path / "ev"), "-q"]) == 0


def test_collect_command_only_and_stdout(demo: tuple[Path, GitRepo], capsys: pytest.CaptureFixture[str]) -> None:
    rules, repo = demo
    assert main(["collect", str(rules), "-m", "audit", "--set", f"repo={repo.path}", "--only", "head"]) == 0
    snap = FactsSnapshot.model_validate(json.loads(capsys.readouterr().out))
    assert set(snap.facts) == {"head"}
    assert main(["collect", str(rules), "-m", "audit", "--set", f"repo={repo.path}", "--only", "nope"]) == 3


INCOMPLETE = """\
policyrun: 1
name: incomplete
inputs:
  base: {type: string}
modes:
  audit: {phases: [P]}
probes:
  here: {uses: const, with: {value: 1}}
  notes: {uses: file.read, with: {path: NOTES.yaml}}
  base: {uses: const, with: {value: "${inputs.base}"}}
  after_base: {uses: const, with: {value: "${facts.base}"}}
phases:
  - id: P
    evidence:
      - {id: ok, check: "facts.here == 1 && facts.notes != null && facts.after_base != null"}
"""


def _incomplete(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "rules.yaml").write_text(INCOMPLETE)
    return tmp_path / "rules.yaml"


def test_collect_exits_2_when_a_probe_failed_and_still_writes_the_snapshot(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    rules = _incomplete(tmp_path, monkeypatch)
    out = tmp_path / "facts.json"
    assert main(["collect", str(rules), "--set", "base=x", "-o", str(out)]) == 2
    facts = load_facts(out)  # written all the same: it says what could not be collected
    assert code(facts.facts["notes"]) == "file.not_found" and facts.facts["here"].ok
    err = capsys.readouterr().err
    assert "collect: 4 facts, 1 failed (notes) → " in err and "exit 2: the snapshot is incomplete" in err
    # The snapshot evaluates: the missing fact blocks the phase, as a failed probe always does.
    assert main(["evaluate", str(rules), "--set", "base=x", "--facts", str(out), "--out", str(tmp_path / "e"),
                 "-q"]) == 2
    (tmp_path / "NOTES.yaml").write_text("a: 1\n")
    assert main(["collect", str(rules), "--set", "base=x", "-o", str(out)]) == 0


def test_a_probe_not_run_for_an_unset_optional_input_is_no_failure(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The rulebook made `base` (and `after_base`, which reads it) depend on an optional input: not
    passing it is the command line's choice, not a failed collection (the flagship's planning audit
    leaves afd_base unset this way)."""
    rules = _incomplete(tmp_path, monkeypatch)
    (tmp_path / "NOTES.yaml").write_text("a: 1\n")
    assert main(["collect", str(rules), "-o", "facts.json", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert {p["probe"]: (p["status"], p["error"]["code"] if p["error"] else None) for p in summary["probes"]} == {
        "after_base": ("not_run", "dependency.failed"), "base": ("not_run", "params.missing_input"),
        "here": ("ok", None), "notes": ("ok", None)}
    assert (summary["exit_code"], summary["failed"], summary["not_run"]) == (0, [], ["after_base", "base"])
    # ... but a probe that waits for a failed one has failed too.
    (tmp_path / "NOTES.yaml").unlink()
    assert main(["collect", str(rules), "-o", "facts.json", "--json"]) == 2
    summary = json.loads(capsys.readouterr().out)
    assert (summary["exit_code"], summary["failed"]) == (2, ["notes"])


def test_collect_json_summary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                              capsys: pytest.CaptureFixture[str]) -> None:
    rules = _incomplete(tmp_path, monkeypatch)
    assert main(["collect", str(rules), "--mode", "audit", "--set", "base=x", "-o", "out/facts.json", "--json"]) == 2
    captured = capsys.readouterr()
    summary = json.loads(captured.out)  # stdout holds the summary alone; progress stays on stderr
    facts = load_facts(tmp_path / "out" / "facts.json")
    assert summary["facts_path"] == str(tmp_path / "out" / "facts.json")
    assert summary["facts_sha256"] == facts.digest()
    assert (summary["rulebook"], summary["mode"], summary["count"], summary["errors"]) == (str(rules), "audit", 4, 1)
    assert (summary["exit_code"], summary["failed"], summary["not_run"]) == (2, ["notes"], [])
    notes = next(p for p in summary["probes"] if p["probe"] == "notes")
    assert notes["status"] == "failed" and notes["ok"] is False and notes["kind"] == "file.read"
    assert notes["error"] == {"code": "file.not_found", "message": facts.facts["notes"].error.message}  # type: ignore[union-attr]
    assert [p["probe"] for p in summary["probes"]] == sorted(facts.facts)
    assert all(isinstance(p["duration_s"], float) for p in summary["probes"] if p["ok"])
    assert set(summary) == {"exit_code", "rulebook", "rulebook_sha256", "mode", "facts_path", "facts_sha256", "count", "errors",
                            "failed", "not_run", "probes", "seconds"}
    # --json needs a file for the snapshot: stdout is the summary's.
    assert main(["collect", str(rules), "--json"]) == 3
    assert "U003" in capsys.readouterr().err


def test_probes_command(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["probes"]) == 0
    text = capsys.readouterr().out
    assert "git.diff  Rename-aware changes" in text and "base* (string)" in text
    assert "facts: [{path, head, branch, detached, bare, main, locked, prunable}]" in text
    assert main(["probes", "--json"]) == 0
    kinds = json.loads(capsys.readouterr().out)
    assert [k["kind"] for k in kinds] == sorted(registry())
    diff = next(k for k in kinds if k["kind"] == "git.diff")
    assert diff["side_effects"] == [] and diff["params_schema"]["required"] == ["base", "head"]
    assert main(["probes", "search.regex"]) == 0
    assert "max_hits (integer, default 1000)" in capsys.readouterr().out
    assert main(["probes", "tests.junit"]) == 0  # every fact field, nested, as a rulebook path names it
    text = capsys.readouterr().out
    assert "    totals.failed (integer)" in text and "    skips[].reason (string)" in text
    assert "    tests.<key>.outcome (passed|failed|error|skipped)" in text
    assert main(["probes", "git.dif"]) == 3
    assert "did you mean 'git.diff'" in capsys.readouterr().err


def test_a_parameter_from_an_unset_input_names_the_input(tmp_path: Path) -> None:
    rb = rulebook({"base": {"uses": "git.ancestry",
                            "with": {"path": ".", "ancestor": "${inputs.afd_base}", "descendant": "HEAD"}}},
                  inputs={"afd_base": {"type": "string"}})
    fact = run(rb, tmp_path, inputs={"afd_base": None})["base"]
    assert code(fact) == "params.missing_input"
    assert message(fact) == "parameter 'ancestor' comes from input 'afd_base', which is not set; pass --set afd_base=..."


def test_a_long_chain_of_probes_is_scheduled_without_recursion(tmp_path: Path) -> None:
    """Priorities come from the longest chain behind each probe; a plan that is one chain of 3,000
    probes (deeper than Python's recursion limit) collects."""
    probes = {"p0": const(0)} | {f"p{i}": const(f"${{facts.p{i - 1} + 1}}") for i in range(1, 3000)}
    facts = run(rulebook(probes), tmp_path)
    assert facts["p2999"].value == 2999


DOCS_RULEBOOK = """\
policyrun: 1
name: ci-facts
inputs:
  base: {type: string}
modes:
  audit: {phases: [P]}
probes:
  here: {uses: const, with: {value: 1}}
  notes: {uses: file.read, with: {path: NOTES.yaml}}
  base: {uses: const, with: {value: "${inputs.base}"}}
phases:
  - id: P
    evidence:
      - {id: ok, check: "facts.here == 1 && facts.notes != null"}
"""


def test_the_collect_json_shown_in_docs_cli_md_is_real(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    """docs/cli.md shows `collect --json` for the rulebook above: the same output, but for the
    path, the timings (and so nothing else)."""
    docs = (Path(__file__).parent.parent / "docs" / "cli.md").read_text()
    block = docs[docs.index("$ policyrun collect rules.yaml -o facts.json --json\n"):]
    shown = json.loads(block[block.index("\n") + 1:block.index("\n```")])
    stderr_block = docs[docs.index("and on stderr, after a line per probe:"):]
    stderr_lines = stderr_block[stderr_block.index("```text\n") + 8:].split("\n```")[0].splitlines()
    monkeypatch.chdir(tmp_path)
    (tmp_path / "rules.yaml").write_text(DOCS_RULEBOOK)
    assert main(["collect", "rules.yaml", "-o", "facts.json", "--json"]) == shown["exit_code"] == 2
    captured = capsys.readouterr()
    actual = json.loads(captured.out)
    assert actual["facts_path"] == str(tmp_path / "facts.json")
    for row, doc_row in zip(actual["probes"], shown["probes"], strict=True):
        assert (row["duration_s"] is None) == (doc_row["duration_s"] is None)
        row["duration_s"] = doc_row["duration_s"]
    actual.update(facts_path=shown["facts_path"], seconds=shown["seconds"])
    assert actual == shown
    assert captured.err.splitlines()[-2:] == stderr_lines
