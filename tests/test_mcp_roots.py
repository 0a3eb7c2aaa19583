"""The MCP tools read and write only under the server's roots, never quote a file that is not a
rulebook, and name the rulebook file they used (issue 19, defects 1 and 6)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from test_mcp import RULEBOOK, call, data, sdk

from policyrun.cli import main
from policyrun.language.locate import shipped_rulebooks

SHADOW = "root:$6$SALTsalt$HASHhashHASHhash:19000:0:99999:7:::\ndaemon:*:19000:0:99999:7:::\n"
DOTENV = "API_TOKEN=sk_live_abcdef123456\nDB_PASSWORD: hunter2\n"
SECRETS = ("SALTsalt", "HASHhash", "daemon", "sk_live", "hunter2", "API_TOKEN", "DB_PASSWORD")
FLAGSHIP = "upgrade-gpu-version"


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The server's working directory (its root by default), beside a folder outside it."""
    inside = tmp_path / "checkout"
    inside.mkdir()
    (inside / "ship.yaml").write_text(RULEBOOK, encoding="utf-8")
    (tmp_path / "outside").mkdir()
    monkeypatch.chdir(inside)
    return inside


def _quotes_nothing(result: dict[str, Any]) -> None:
    text = json.dumps(result)
    assert not [s for s in SECRETS if s in text], text


@sdk
@pytest.mark.parametrize("content", [SHADOW, DOTENV], ids=["shadow", "dotenv"])
def test_lint_of_a_file_that_is_not_a_rulebook_is_one_finding_quoting_nothing(root: Path, content: str) -> None:
    (root / "secrets").write_text(content, encoding="utf-8")
    out = data(call("lint", {"paths": ["./secrets"]}))
    assert out["exit_code"] == 1 and len(out["findings"]) == 1
    finding = out["findings"][0]
    assert (finding["code"], finding["line"], finding["column"]) == ("S001", 1, 1)
    assert "is not a rulebook" in finding["message"] and "`policyrun:`" in finding["message"]
    _quotes_nothing(out)


@sdk
def test_extends_of_a_file_that_is_not_a_rulebook_quotes_nothing(root: Path) -> None:
    (root / ".env").write_text(DOTENV, encoding="utf-8")
    (root / "overlay.yaml").write_text("policyrun: 1\nname: o\nextends: ./.env\n", encoding="utf-8")
    for tool, args in (("lint", {"paths": ["overlay.yaml"]}), ("evaluate", {"rulebook": "overlay.yaml"})):
        out = data(call(tool, args))
        found = out["findings"] if tool == "lint" else out["error"]["findings"] or [out["error"]]
        assert [(f["code"], f["line"]) for f in found] == [("O001", 3)], out
        _quotes_nothing(out)


@sdk
def test_paths_outside_the_roots_are_refused_before_anything_is_read_or_written(root: Path) -> None:
    outside = root.parent / "outside"
    (outside / "shadow").write_text(SHADOW, encoding="utf-8")
    (outside / "ship.yaml").write_text(RULEBOOK, encoding="utf-8")
    (outside / "facts.json").write_text('{"facts": {}}', encoding="utf-8")
    (outside / "inputs.yaml").write_text(SHADOW, encoding="utf-8")
    (root / "link.yaml").symlink_to(outside / "ship.yaml")  # a link in the checkout does not escape
    calls = [("lint", {"paths": [str(outside / "shadow")]}, "path"),
             ("lint", {"paths": [str(outside)]}, "path"),
             ("lint", {"paths": ["../outside/ship.yaml"]}, "path"),
             ("lint", {"paths": ["link.yaml"]}, "path"),
             ("evaluate", {"rulebook": "link.yaml"}, "rulebook"),
             ("evaluate", {"rulebook": str(outside / "nope.yaml")}, "rulebook"),
             ("evaluate", {"rulebook": "ship.yaml", "inputs_file": "../outside/inputs.yaml"}, "inputs_file"),
             ("evaluate", {"rulebook": "ship.yaml", "facts_files": [str(outside / "facts.json")]}, "facts_files"),
             ("evaluate", {"rulebook": "ship.yaml", "out_dir": str(outside / "out")}, "out_dir"),
             ("evaluate", {"rulebook": "ship.yaml", "inputs": {"notes": "../outside/shadow"}}, "input notes"),
             ("collect", {"rulebook": "ship.yaml", "out": "../outside/facts2.json"}, "out"),
             ("collect", {"rulebook": "ship.yaml", "inputs": {"notes": str(outside / "shadow")}}, "input notes"),
             ("explain", {"trace": str(outside / "facts.json")}, "trace"),
             ("next_actions", {"trace": "../outside/facts.json"}, "trace")]
    for tool, args, what in calls:
        out = data(call(tool, args))
        assert out["exit_code"] == 3 and out["error"]["code"] == "U032", (tool, args, out)
        message = out["error"]["message"]
        assert message.startswith(f"{what} ") and "outside the MCP server's roots" in message
        assert "policyrun mcp --root DIR" in out["error"]["message"]
        _quotes_nothing(out)
    assert sorted(p.name for p in outside.iterdir()) == ["facts.json", "inputs.yaml", "shadow", "ship.yaml"]
    assert not (root / ".policyrun").exists()


@sdk
def test_configured_roots_add_folders_and_shipped_rulebooks_stay_readable(root: Path) -> None:
    outside = root.parent / "outside"
    (outside / "ship.yaml").write_text(RULEBOOK, encoding="utf-8")
    (root.parent / "third").mkdir()
    (root.parent / "third" / "ship.yaml").write_text(RULEBOOK, encoding="utf-8")
    out = data(call("lint", {"paths": [str(outside / "ship.yaml"), "ship.yaml", FLAGSHIP]}, roots=(outside,)))
    assert out["exit_code"] == 0 and out["files"][:2] == [str(outside / "ship.yaml"), "ship.yaml"]
    refused = data(call("lint", {"paths": ["../third/ship.yaml"]}, roots=(outside,)))
    assert refused["error"]["code"] == "U032"
    both = data(call("evaluate", {"rulebook": "ship.yaml", "inputs": {"notes": "../outside/NOTES.md"}},
                     roots=(outside,)))
    assert both["exit_code"] == 2 and both["phases"][0]["blocker"] == "no release notes at ../outside/NOTES.md"


@sdk
def test_a_shipped_name_is_the_shipped_rulebook_and_the_result_says_which_file(root: Path) -> None:
    (root / FLAGSHIP).write_text(RULEBOOK, encoding="utf-8")  # the checkout's file under the flagship's name
    shipped_sha = hashlib.sha256(shipped_rulebooks()[FLAGSHIP].read_bytes()).hexdigest()
    args = {"mode": "planning-audit", "inputs": {"vllm_src": ".", "target_ref": "v1"}}
    collected = data(call("collect", {"rulebook": FLAGSHIP, **args, "only": ["nope"]}))
    assert collected["error"]["code"] == "C001"  # the flagship's probes, not ship-check's
    (root / "empty.json").write_text('{"facts": {}}', encoding="utf-8")
    out = data(call("evaluate", {"rulebook": FLAGSHIP, **args, "facts_files": ["empty.json"]}))
    assert (out["rulebook"], out["rulebook_shipped"], out["rulebook_sha256"]) == (
        f"<shipped>/{FLAGSHIP}.yaml", True, shipped_sha)
    assert out["phases"][0]["phase"] == "FREEZE_IDENTITY"
    local = data(call("evaluate", {"rulebook": f"./{FLAGSHIP}", "mode": "audit"}))
    assert (local["rulebook"], local["rulebook_shipped"], local["rulebook_sha256"]) == (
        f"./{FLAGSHIP}", False, hashlib.sha256(RULEBOOK.encode()).hexdigest())
    actions = data(call("next_actions", {"trace": local["trace_path"]}))
    assert (actions["rulebook"], actions["rulebook_shipped"]) == (f"./{FLAGSHIP}", False)
    explained = data(call("explain", {"trace": local["trace_path"]}))
    assert f"rulebook ./{FLAGSHIP} (a file, not a shipped rulebook" in explained["text"]


def test_a_root_must_be_a_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["mcp", "--root", str(tmp_path / "nope")]) == 3
    assert "U031" in capsys.readouterr().err


@pytest.mark.parametrize("content", [
    SHADOW.encode(), DOTENV.encode(),
    b"AWS_SECRET: hunter2\ntoken: [unclosed\n",             # YAML that does not parse
    b"API_TOKEN: sk_live_abcdef\nbad: \xff\xfe hunter2\n",  # not UTF-8
    b"- hunter2\n- sk_live_abcdef\n",                       # not a mapping
], ids=["shadow", "dotenv", "yaml-error", "not-utf8", "list"])
def test_lint_never_quotes_a_file_that_is_not_a_rulebook(content: bytes, tmp_path: Path,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "secrets"
    target.write_bytes(content)
    assert main(["lint", str(target)]) == 1
    out = capsys.readouterr().out
    assert out == (f"{target}:1:1: S001 this file is not a rulebook: its top level has no `policyrun:` key (a rulebook "
                   "starts with `policyrun: 1`); its content is not shown\n")


def test_a_rulebook_with_a_yaml_error_still_gets_the_located_error(tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    for text in ("policyrun: 1\nname: [unclosed\n", '{"policyrun": 1, "name": [}\n'):
        target = tmp_path / "rb.yaml"
        target.write_text(text, encoding="utf-8")
        assert main(["lint", str(target)]) == 1
        assert " Y000 YAML syntax error" in capsys.readouterr().out
