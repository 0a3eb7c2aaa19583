"""`policyrun mcp` answers every malformed JSON-RPC line with the error the specification names,
instead of leaving the client waiting forever (issue 19, defect 11). Over a real subprocess."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_mcp import sdk

ROOT = Path(__file__).resolve().parents[1]
# A guard against the hang this fixes, far above any real reply time; no test measures time.
REPLY_WAIT_S = 60

INIT = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}

MALFORMED = [
    ("{not json", None, -32700),
    ('{"jsonrpc": "2.0", "id": 1, "method": "ping"', None, -32700),
    ("[1, 2]", None, -32600),
    ("[]", None, -32600),
    ("42", None, -32600),
    ('"ping"', None, -32600),
    ('{"id": 2, "method": "ping"}', 2, -32600),
    ('{"jsonrpc": "1.0", "id": 3, "method": "ping"}', 3, -32600),
    ('{"jsonrpc": "2.0", "id": 4, "method": 5}', 4, -32600),
    ('{"jsonrpc": "2.0", "id": {"a": 1}, "method": "ping"}', None, -32600),
    ('{"jsonrpc": "2.0", "id": 5}', 5, -32600),
    ('{"jsonrpc": "2.0", "id": 6, "method": "no/such/method"}', 6, -32601),
    ('{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": 5}', 7, -32602),
    ('{"jsonrpc": "2.0", "id": "eight", "method": "ping", "params": [1]}', "eight", -32602),
    ('{"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {}}', 9, -32602),
]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[subprocess.Popen[str]]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, "-m", "policyrun", "mcp", "--cwd", str(tmp_path)], cwd=str(ROOT),
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env)
    try:
        yield proc
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


def _send(proc: subprocess.Popen[str], line: str) -> None:
    assert proc.stdin is not None
    proc.stdin.write(line + "\n")
    proc.stdin.flush()


def _reply(proc: subprocess.Popen[str]) -> dict[str, Any]:
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], REPLY_WAIT_S)
    assert ready, "no reply: the client would wait forever"
    line = proc.stdout.readline()
    assert line, "the server closed its output"
    reply: dict[str, Any] = json.loads(line)
    return reply


@sdk
def test_every_malformed_line_gets_the_json_rpc_error_the_spec_names(server: subprocess.Popen[str]) -> None:
    _send(server, json.dumps(INIT))
    assert _reply(server)["id"] == 0
    _send(server, json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
    for line, ident, code in MALFORMED:
        _send(server, line)
        reply = _reply(server)
        assert (reply.get("jsonrpc"), reply.get("id"), reply.get("error", {}).get("code")) == ("2.0", ident, code), \
            (line, reply)
    _send(server, "")  # a blank line is no message: nothing to answer, and the session goes on
    _send(server, '{"jsonrpc": "2.0", "method": "notifications/x", "params": 5}')  # notifications get no reply
    _send(server, json.dumps({"jsonrpc": "2.0", "id": 10, "method": "ping"}))
    assert _reply(server) == {"jsonrpc": "2.0", "id": 10, "result": {}}
    assert server.stdin is not None
    server.stdin.close()
    assert server.wait(timeout=REPLY_WAIT_S) == 0


@pytest.mark.parametrize("line,ident,code", [m for m in MALFORMED if m[2] != -32601 and m[0] != MALFORMED[-1][0]])
def test_screen_answers_what_the_sdk_would_drop(line: str, ident: object, code: int) -> None:
    from policyrun.mcp.wire import screen

    forward, reply = screen(line)
    assert not forward and reply is not None
    assert json.loads(reply) == {"jsonrpc": "2.0", "id": ident, "error": {"code": code, "message": json.loads(reply)[
        "error"]["message"]}}


@sdk
def test_screen_forwards_well_formed_messages_and_answers_no_notification() -> None:
    from policyrun.mcp.wire import screen

    for line in ('{"jsonrpc": "2.0", "id": 1, "method": "ping"}', '{"jsonrpc": "2.0", "method": "notifications/x"}',
                 '{"jsonrpc": "2.0", "id": 1, "result": {}}'):
        assert screen(line) == (True, None)
    assert screen("   \n") == (False, None)
    assert screen('{"jsonrpc": "2.0", "method": "notifications/x", "params": [1]}') == (False, None)
