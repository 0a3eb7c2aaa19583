"""`policyrun mcp`: the tools an agent calls, through the MCP SDK's own client (in-process, and once
over stdio through the CLI entry), with the CLI's exit semantics and never a traceback."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from policyrun.cli import main

ROOT = Path(__file__).resolve().parents[1]
HAVE_SDK = importlib.util.find_spec("mcp") is not None
sdk = pytest.mark.skipif(not HAVE_SDK, reason="the MCP SDK is not installed (pip install '.[mcp]')")

RULEBOOK = """\
policyrun: 1
name: ship-check
inputs:
  notes: {type: path, default: NOTES.md}
  reviewed: {type: bool, default: false}
modes:
  audit: {phases: [NOTES, REVIEW, RELEASE]}
probes:
  notes: {uses: path, with: {paths: ["${inputs.notes}"]}}
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
      - {id: reviewed, check: inputs.reviewed, message: the notes are not reviewed}
    next: {FAIL: "ask a reviewer, then evaluate with reviewed=true", PASS: release}
  - id: RELEASE
    evidence:
      - {id: always, check: "true"}
verdicts:
  - {id: releasable, when: "phases.RELEASE.status == 'PASS'", summary: ready to release}
"""


def call(name: str, args: dict[str, Any], roots: tuple[Path, ...] = (), **kw: Any) -> Any:
    return session(lambda c: c.call_tool(name, args, **kw), roots)


def session(fn: Callable[[Any], Awaitable[Any]], roots: tuple[Path, ...] = ()) -> Any:
    import anyio
    from mcp import Client

    from policyrun.mcp.server import build_server

    async def go() -> Any:
        async with Client(build_server(roots)) as client:
            return await fn(client)

    return anyio.run(go)


def data(result: Any) -> dict[str, Any]:
    """The structured result, which the text content repeats for clients that read only text."""
    assert result.structured_content == json.loads(result.content[0].text)
    assert "Traceback" not in result.content[0].text
    out: dict[str, Any] = result.structured_content
    assert result.is_error == (out["exit_code"] >= 3)
    return out


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "ship.yaml").write_text(RULEBOOK, encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return tmp_path


# --- the tools and their schemas ----------------------------------------------------------------

@sdk
def test_lists_six_tools_with_input_and_output_schemas() -> None:
    tools = {t.name: t for t in session(lambda c: c.list_tools()).tools}
    assert set(tools) == {"lint", "evaluate", "collect", "explain", "next_actions", "probes"}
    for tool in tools.values():
        assert tool.input_schema["type"] == "object"
        assert {"exit_code", "error"} <= set(tool.output_schema["properties"])
        assert tool.description and "\n" not in tool.description
    assert tools["evaluate"].input_schema["required"] == ["rulebook"]
    assert set(tools["evaluate"].input_schema["properties"]) >= {"rulebook", "mode", "inputs", "inputs_file",
                                                                 "facts_files", "out_dir"}
    assert "ctx" not in tools["evaluate"].input_schema["properties"]
    assert tools["lint"].input_schema["required"] == ["paths"]
    assert tools["explain"].annotations.read_only_hint is True
    assert tools["evaluate"].annotations.read_only_hint is False


@sdk
def test_lint_findings_are_the_cli_findings(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = project / "bad.yaml"
    bad.write_text(RULEBOOK.replace("size(facts.notes.missing)", "size(facts.notez.missing)"), encoding="utf-8")
    out = data(call("lint", {"paths": [str(bad)]}))
    assert out["exit_code"] == 1 and out["errors"] >= 1
    typo = next(f for f in out["findings"] if f["code"] == "L003")
    line = next(i for i, text in enumerate(bad.read_text().splitlines(), 1) if "facts.notez" in text)
    assert (typo["file"], typo["line"]) == (str(bad), line) and typo["column"] > 0
    assert "did you mean 'notes'" in typo["message"]

    assert main(["lint", "--format", "json", str(bad)]) == 1
    cli = json.loads(capsys.readouterr().out)
    assert [{k: f[k] for k in ("code", "message", "file", "line", "column", "severity")} for f in out["findings"]] \
        == [{k: f[k] for k in ("code", "message", "file", "line", "column", "severity")} for f in cli]

    clean = data(call("lint", {"paths": ["ship.yaml"]}))
    assert (clean["exit_code"], clean["findings"], clean["files"]) == (0, [], ["ship.yaml"])


@sdk
def test_lint_of_a_missing_path_is_a_usage_error(project: Path) -> None:
    result = call("lint", {"paths": ["nope.yaml"]})
    out = data(result)
    assert result.is_error and out["exit_code"] == 3
    assert out["error"]["code"] == "U001" and "rulebook 'nope.yaml' is not a file" in out["error"]["message"]


@sdk
def test_evaluate_collects_and_follows_the_gates(project: Path) -> None:
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append((done, total, message))

    args = {"rulebook": "ship.yaml", "mode": "audit", "out_dir": "out"}
    blocked = data(call("evaluate", args, progress_callback=on_progress))
    assert blocked["exit_code"] == 2 and not blocked["error"], blocked  # the whole result, should it ever fail
    assert [(p["phase"], p["status"]) for p in blocked["phases"]] == [
        ("NOTES", "BLOCKED"), ("REVIEW", "SKIPPED"), ("RELEASE", "SKIPPED")]
    notes = blocked["phases"][0]
    assert notes["blocker"] == "no release notes at NOTES.md"
    assert notes["next_allowed_action"] == "write the release notes at NOTES.md"
    assert blocked["phases"][1]["reason"] == "gated by NOTES=BLOCKED"
    assert blocked["facts"]["source"] == "collected" and blocked["facts"]["count"] == 1
    assert progress[-1] == (1, 1, "notes: ok")

    trace_path = Path(blocked["trace_path"])
    assert trace_path == project / "out" / "trace.json"
    trace = json.loads(trace_path.read_text())
    assert trace["exit_code"] == 2
    assert [p["next_allowed_action"] for p in trace["phases"]] == [p["next_allowed_action"] for p in blocked["phases"]]
    assert str(trace_path) in blocked["written"]

    (project / "NOTES.md").write_text("# 1.0\n", encoding="utf-8")
    failed = data(call("evaluate", args))
    assert failed["exit_code"] == 1
    assert [p["status"] for p in failed["phases"]] == ["PASS", "FAIL", "SKIPPED"]
    assert failed["phases"][1]["next_allowed_action"] == "ask a reviewer, then evaluate with reviewed=true"

    passed = data(call("evaluate", {**args, "inputs": {"reviewed": True}}))
    assert passed["exit_code"] == 0 and passed["verdict"] == {"id": "releasable", "summary": "ready to release"}


@sdk
def test_evaluate_usage_errors_are_located(project: Path) -> None:
    unknown_input = data(call("evaluate", {"rulebook": "ship.yaml", "inputs": {"reviewd": True}}))
    assert unknown_input["exit_code"] == 3 and unknown_input["error"]["code"] == "U006"
    assert "did you mean 'reviewed'" in unknown_input["error"]["message"]

    (project / "broken.yaml").write_text(RULEBOOK.replace("on_fail: BLOCKED", "on_fail: BLOKED"), encoding="utf-8")
    broken = data(call("evaluate", {"rulebook": "broken.yaml"}))
    error = broken["error"]
    line = next(i for i, t in enumerate(RULEBOOK.splitlines(), 1) if "on_fail: BLOCKED" in t)
    assert broken["exit_code"] == 3 and error["file"] == "broken.yaml" and error["line"] == line
    assert error["column"] > 0 and error["findings"][0]["line"] == line
    assert not (project / ".policyrun").exists()  # refused before anything ran or was written


@sdk
def test_collect_then_evaluate_the_snapshot(project: Path) -> None:
    collected = data(call("collect", {"rulebook": "ship.yaml", "mode": "audit", "out": "facts/snap.json"}))
    assert collected["exit_code"] == 0 and collected["facts_path"] == str(project / "facts" / "snap.json")
    assert [(p["probe"], p["kind"], p["ok"], p["error"]) for p in collected["probes"]] == [
        ("notes", "path", True, None)]
    snapshot = json.loads(Path(collected["facts_path"]).read_text())
    assert snapshot["facts"]["notes"]["value"]["missing"] == ["NOTES.md"]

    (project / "NOTES.md").write_text("# 1.0\n", encoding="utf-8")  # the snapshot predates it
    replayed = data(call("evaluate", {"rulebook": "ship.yaml", "facts_files": [collected["facts_path"]],
                                      "out_dir": "replay"}))
    assert replayed["facts"]["source"] == "files" and replayed["exit_code"] == 2
    assert replayed["phases"][0]["status"] == "BLOCKED"

    only = data(call("collect", {"rulebook": "ship.yaml", "only": ["notez"]}))
    assert only["exit_code"] == 3 and only["error"]["code"] == "C001"


@sdk
def test_collect_with_a_failed_probe_answers_exit_2_like_the_cli(project: Path) -> None:
    (project / "broken-probe.yaml").write_text(
        "policyrun: 1\nname: broken-probe\nmodes: {audit: {phases: [P]}}\n"
        "probes: {notes: {uses: file.read, with: {path: absent.yaml}}}\nphases: [{id: P}]\n", encoding="utf-8")
    collected = data(call("collect", {"rulebook": "./broken-probe.yaml", "out": "snap.json"}))
    assert collected["exit_code"] == 2 and collected["errors"] == 1
    assert collected["probes"][0]["error"]["code"] == "file.not_found"


@sdk
def test_stale_facts_are_refused_as_the_cli_refuses_them(project: Path) -> None:
    facts = data(call("collect", {"rulebook": "ship.yaml", "out": "snap.json"}))["facts_path"]
    stale = data(call("evaluate", {"rulebook": "ship.yaml", "inputs": {"notes": "CHANGES.md"},
                                   "facts_files": [facts]}))
    assert stale["exit_code"] == 3 and stale["error"]["code"] == "F005"
    allowed = data(call("evaluate", {"rulebook": "ship.yaml", "inputs": {"notes": "CHANGES.md"},
                                     "facts_files": [facts], "allow_stale_facts": True}))
    assert allowed["exit_code"] == 2 and [s["probe"] for s in allowed["facts"]["stale"]] == ["notes"]


@sdk
def test_next_actions_and_explain_read_the_trace(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = data(call("evaluate", {"rulebook": "ship.yaml", "out_dir": "out"}))["trace_path"]

    actions = data(call("next_actions", {"trace": trace}))
    assert actions["exit_code"] == 0 and actions["trace_exit_code"] == 2
    assert actions["now"] == {"phase": "NOTES", "title": "", "status": "BLOCKED",
                              "next_allowed_action": "write the release notes at NOTES.md",
                              "blocker": "no release notes at NOTES.md"}
    assert [(a["phase"], a["next_allowed_action"]) for a in actions["phases"]][1:] == [
        ("REVIEW", "none until NOTES passes"), ("RELEASE", "none until NOTES passes")]

    explained = data(call("explain", {"trace": trace, "failures_only": True}))
    assert [p["phase"] for p in explained["phases"]] == ["NOTES"]
    check = explained["phases"][0]["checks"][0]
    assert (check["id"], check["result"], check["outcome"], check["probes"]) == (
        "notes_exist", "UNSATISFIED", "BLOCKED", ["notes"])
    assert check["reads"] == [{"path": "facts.notes.missing", "value": ["NOTES.md"], "missing": False,
                               "error": None, "truncated": False}]
    assert check["location"].startswith("ship.yaml:")
    assert main(["explain", trace, "--failures"]) == 0
    assert explained["text"] == capsys.readouterr().out

    whole = data(call("explain", {"trace": trace}))
    assert [p["phase"] for p in whole["phases"]] == ["NOTES", "REVIEW", "RELEASE"]
    nope = data(call("explain", {"trace": trace, "phase": "NOPE"}))
    assert nope["exit_code"] == 3 and nope["error"]["code"] == "T004"
    missing = data(call("next_actions", {"trace": "nowhere/trace.json"}))
    assert missing["exit_code"] == 3 and missing["error"]["code"].startswith("T")


@sdk
def test_a_trace_that_contradicts_itself_is_refused_unless_forced(project: Path) -> None:
    trace = Path(data(call("evaluate", {"rulebook": "ship.yaml"}))["trace_path"])
    doc = json.loads(trace.read_text())
    doc["phases"][0]["status"] = "PASS"  # NOTES was BLOCKED by its check
    trace.write_text(json.dumps(doc))
    refused = data(call("next_actions", {"trace": str(trace)}))
    assert refused["exit_code"] == 3 and refused["error"]["code"] == "T005"
    forced = data(call("next_actions", {"trace": str(trace), "force": True}))
    assert forced["exit_code"] == 0 and any("NOTES" in p for p in forced["inconsistencies"])
    explained = data(call("explain", {"trace": str(trace), "force": True}))
    assert explained["text"].startswith("INCONSISTENT TRACE") and explained["inconsistencies"]


@sdk
def test_flagship_example_replayed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(ROOT)  # the example's inputs name its evidence relative to the checkout
    example = ROOT / "examples" / "planning-pass"
    expected = json.loads((example / "expected" / "trace.json").read_text())
    out = data(call("evaluate", {"rulebook": "upgrade-gpu-version", "mode": "planning-audit",
                                 "inputs_file": "examples/planning-pass/inputs.yaml",
                                 "facts_files": ["examples/planning-pass/facts.json"], "out_dir": str(tmp_path)},
                    roots=(ROOT, tmp_path)))
    assert out["exit_code"] == expected["exit_code"] == 0
    assert out["verdict"]["id"] == expected["verdict"]["id"] == "plan_ready"
    assert [(p["phase"], p["status"], p["next_allowed_action"]) for p in out["phases"]] == [
        (p["phase"], p["status"], p["next_allowed_action"]) for p in expected["phases"]]

    snapshot = json.loads((example / "facts.json").read_text())["facts"]
    assert out["facts"]["source"] == "files" and out["facts"]["count"] == len(snapshot)
    assert [(f["probe"], f["error"]) for f in out["facts"]["failed"]] == [
        (pid, {"code": f["error"]["code"], "message": f["error"]["message"]})
        for pid, f in sorted(snapshot.items()) if f.get("error")]

    actions = data(call("next_actions", {"trace": out["trace_path"]}, roots=(tmp_path,)))
    assert actions["now"]["phase"] == "PRODUCE_STAGED_PLAN" and actions["now"]["status"] == "PASS"
    assert actions["now"]["next_allowed_action"].startswith("stop here (read-only)")


@sdk
def test_probes_lists_kinds_and_shows_one_in_full() -> None:
    from policyrun.probes.registry import registry

    every = data(call("probes", {}))
    assert [k["kind"] for k in every["kinds"]] == sorted(registry())
    path = next(k for k in every["kinds"] if k["kind"] == "path")
    assert {"name": "paths", "required": True} == {k: v for k, v in path["params"][0].items()
                                                   if k in ("name", "required")}
    assert {"paths", "missing", "root"} == {f["name"] for f in path["fact_fields"]}
    assert path["params_schema"] is None

    one = data(call("probes", {"kind": "path"}))
    assert one["kinds"][0]["params_schema"] == dict(registry()["path"].params_schema)
    typo = data(call("probes", {"kind": "pth"}))
    assert typo["exit_code"] == 3 and typo["error"]["code"] == "U008"
    assert "did you mean 'path'" in typo["error"]["message"]


@sdk
def test_an_internal_error_is_exit_4_with_a_log(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import policyrun.render.explain

    def boom(*args: Any, **kwargs: Any) -> str:
        raise RuntimeError("boom")

    trace = data(call("evaluate", {"rulebook": "ship.yaml"}))["trace_path"]
    monkeypatch.setattr(policyrun.render.explain, "render_explain", boom)
    out = data(call("explain", {"trace": trace}))
    assert out["exit_code"] == 4 and out["error"]["code"] == "internal"
    assert "RuntimeError: boom" in out["error"]["message"]
    assert "Traceback" in Path(out["error"]["file"]).read_text()


@sdk
def test_shipped_rulebooks_are_resources() -> None:
    uri = "policyrun://rulebooks/upgrade-gpu-version.yaml"
    listed = [str(r.uri) for r in session(lambda c: c.list_resources()).resources]
    assert uri in listed and "policyrun://references/upgrade-workbook.md" in listed
    read = session(lambda c: c.read_resource(uri))
    assert read.contents[0].text == (ROOT / "rulebooks" / "upgrade-gpu-version.yaml").read_text(encoding="utf-8")


@sdk
def test_the_cli_serves_over_stdio(project: Path) -> None:
    import anyio
    from mcp import Client, StdioServerParameters

    async def go() -> Any:
        # The SDK gives a server a minimal environment; the test's lint cache folder must reach it.
        env = {k: os.environ[k] for k in ("POLICYRUN_CACHE_DIR", "GIT_CONFIG_NOSYSTEM") if k in os.environ}
        server = StdioServerParameters(command=sys.executable, args=["-m", "policyrun", "mcp", "--cwd", str(project)],
                                       cwd=str(ROOT), env=env)
        async with Client(server) as client:
            return await client.call_tool("evaluate", {"rulebook": "ship.yaml"})

    out = data(anyio.run(go))
    assert out["exit_code"] == 2 and out["trace_path"] == str(project / ".policyrun" / "trace.json")


# --- without the SDK ----------------------------------------------------------------------------

def test_without_the_extra_mcp_exits_3_saying_how_to_install(monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    if HAVE_SDK:  # make this process look like one without the extra
        monkeypatch.setitem(sys.modules, "mcp", None)
        for name in [n for n in sys.modules if n.startswith(("mcp.", "policyrun.mcp.server"))]:
            monkeypatch.delitem(sys.modules, name)

        def not_installed(name: str) -> str:
            raise importlib.metadata.PackageNotFoundError(name)

        monkeypatch.setattr(importlib.metadata, "version", not_installed)
    assert main(["mcp"]) == 3
    err = capsys.readouterr().err
    assert "U030" in err and "the MCP SDK (`mcp`) is not installed" in err
    assert "pip install 'policyrun[mcp]'" in err and "pip install '.[mcp]'" in err
    assert "Traceback" not in err


def test_cwd_must_be_a_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["mcp", "--cwd", str(tmp_path / "nope")]) == 3
    assert "U031" in capsys.readouterr().err


def test_the_server_collects_garbage_although_the_cli_entry_turned_it_off(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """`policyrun` commands run with the cyclic collector off (cli.entry); a server is long-lived."""
    import gc

    from policyrun.commands import mcp as mcp_command

    seen: list[bool] = []

    class Server:
        def run(self, transport: str) -> None:
            seen.append(gc.isenabled())

    monkeypatch.setattr(mcp_command, "_load_server", lambda roots: Server())
    monkeypatch.chdir(tmp_path)
    was = gc.isenabled()
    gc.disable()
    try:
        assert main(["mcp"]) == 0
    finally:
        if was:
            gc.enable()
    assert seen == [True]


@sdk
def test_facts_file_with_a_5000_digit_integer_is_a_located_error(project: Path) -> None:
    facts = project / "huge.json"  # issue 19 item 5: was an internal error (exit 4)
    facts.write_text('{"policyrun_facts": 1,\n "facts": {"notes": {"value": ' + "9" * 5000
                     + ', "provenance": {"probe": "notes", "kind": "path"}}}}\n', encoding="utf-8")
    out = data(call("evaluate", {"rulebook": "ship.yaml", "facts_files": [str(facts)]}))
    error = out["error"]
    assert out["exit_code"] == 3 and error["code"] == "F002" and (error["line"], error["column"]) == (2, 31)
    assert "5,000 characters" in error["message"]
