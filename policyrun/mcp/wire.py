"""JSON-RPC error replies for the lines the SDK's stdio transport drops, and that transport.

The SDK's stdio transport validates each line and, when a line is not a JSON-RPC message it
accepts, drops it without a reply: a client that sent invalid JSON, an array, an object without
`jsonrpc: "2.0"` or with a method that is not a string, or params that are not an object, waits
for an answer forever. `screen` decides, for one line, whether it goes on to the SDK or gets the
error the JSON-RPC 2.0 specification names (-32700 parse error, -32600 invalid request, -32602
invalid params; the SDK itself answers -32601 for an unknown method). `serve_stdio` runs the
SDK's own transport on a filtered stdin, and keeps what the SDK's does for fd 0 and 1: while
serving they read /dev/null and write to stderr, so a probe's child process or a stray print can
neither read nor corrupt the protocol.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import IO, Any

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INVALID_PARAMS = -32602

_Id = str | int | None


def _error(ident: _Id, code: int, message: str) -> str:
    reply = {"jsonrpc": "2.0", "id": ident, "error": {"code": code, "message": message}}
    return json.dumps(reply, separators=(",", ":"))


def _valid_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def screen(line: str) -> tuple[bool, str | None]:
    """(forward the line to the SDK, the error reply to write back); a blank line is neither."""
    if not line.strip():
        return False, None
    try:
        msg = json.loads(line)
    except (ValueError, RecursionError):
        return False, _error(None, PARSE_ERROR, "Parse error: the line is not valid JSON")
    if isinstance(msg, list):
        return False, _error(None, INVALID_REQUEST, "Invalid Request: batches are not supported; send one "
                                                    "JSON-RPC object per line")
    if not isinstance(msg, dict):
        return False, _error(None, INVALID_REQUEST, "Invalid Request: a message is a JSON object")
    has_id = "id" in msg
    if has_id and not _valid_id(msg["id"]):
        return False, _error(None, INVALID_REQUEST, "Invalid Request: `id` must be a string or an integer")
    ident = msg["id"] if has_id else None
    if msg.get("jsonrpc") != "2.0":
        return False, _error(ident, INVALID_REQUEST, 'Invalid Request: `jsonrpc` must be "2.0"')
    if "method" in msg:
        if not isinstance(msg["method"], str):
            return False, _error(ident, INVALID_REQUEST, "Invalid Request: `method` must be a string")
        if "params" in msg and not isinstance(msg["params"], dict):
            # A notification is never answered, not even with an error (JSON-RPC 2.0, section 4.1).
            return False, _error(ident, INVALID_PARAMS, "Invalid params: `params` must be an object") \
                if has_id else None
    elif "result" not in msg and "error" not in msg:
        return False, _error(ident, INVALID_REQUEST, "Invalid Request: a message has a `method`, or is a "
                                                     "response with `result` or `error`")
    from mcp.types import jsonrpc_message_adapter

    try:  # the SDK's own check has the last word: whatever it would drop is answered here
        jsonrpc_message_adapter.validate_json(line, by_name=False)
    except ValueError:
        if "method" in msg and has_id:
            return False, _error(ident, INVALID_REQUEST, "Invalid Request: not a JSON-RPC request MCP accepts")
        return False, None  # a malformed notification or response: nothing to answer
    return True, None


class _Writer:
    """The wire's write side, one whole line at a time: the SDK's replies and ours never interleave."""

    def __init__(self, raw: IO[bytes]) -> None:
        import anyio

        self._file = anyio.wrap_file(raw)
        self._lock = anyio.Lock()

    async def write(self, text: str) -> None:
        async with self._lock:
            await self._file.write(text.encode("utf-8"))

    async def flush(self) -> None:
        async with self._lock:
            await self._file.flush()

    async def reply(self, text: str) -> None:
        async with self._lock:
            await self._file.write(text.encode("utf-8") + b"\n")
            await self._file.flush()


class _Screened:
    """stdin's lines for the SDK, less those `screen` answers or drops."""

    def __init__(self, raw: IO[bytes], out: _Writer) -> None:
        import anyio

        self._lines = anyio.wrap_file(raw)
        self._out = out

    def __aiter__(self) -> AsyncIterator[str]:
        return self._screened()

    async def _screened(self) -> AsyncIterator[str]:
        async for raw in self._lines:
            line = raw.decode("utf-8", errors="replace")
            forward, reply = screen(line)
            if reply is not None:
                await self._out.reply(reply)
            if forward:
                yield line


@contextmanager
def _claimed_stdio() -> Iterator[tuple[IO[bytes], IO[bytes]]]:
    """The wire on private descriptors; fd 0 and 1 point away from it until serving ends."""
    sys.stdout.flush()
    saved_in, saved_out = os.dup(0), os.dup(1)  # not inherited by child processes (PEP 446)
    wire_in, wire_out = os.fdopen(os.dup(0), "rb"), os.fdopen(os.dup(1), "wb")
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, 0)
        os.dup2(2, 1)
        yield wire_in, wire_out
    finally:
        os.close(null)
        os.dup2(saved_in, 0)
        os.dup2(saved_out, 1)
        for fd in (saved_in, saved_out):
            os.close(fd)
        for f in (wire_in, wire_out):
            try:
                f.close()
            except OSError:
                pass


async def serve_stdio(lowlevel: Any) -> None:
    """Serve the SDK's low-level server over stdin/stdout, every malformed line answered."""
    from mcp.server.stdio import stdio_server

    with _claimed_stdio() as (wire_in, wire_out):
        out = _Writer(wire_out)
        stdin: Any = _Screened(wire_in, out)
        stdout: Any = out
        async with stdio_server(stdin=stdin, stdout=stdout) as (read, write):
            await lowlevel.run(read, write, lowlevel.create_initialization_options())
