"""`policyrun mcp`: serve the commands as MCP tools over stdio, for coding agents (docs/agents.md)."""

from __future__ import annotations

import argparse
import gc
import os
from pathlib import Path

from policyrun.errors import EXIT_OK, UsageError

INSTALL_HINT = ("install it with `pip install 'policyrun[mcp]'` (from a checkout: `pip install '.[mcp]'`)")


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("mcp", help="serve policyrun to coding agents over MCP (stdio)",
                       description="Run a Model Context Protocol server on stdin/stdout with the tools lint, "
                                   "evaluate, collect, explain, next_actions and probes (docs/agents.md). An MCP "
                                   "client starts it; it runs until the client closes stdin. The tools read and "
                                   "write only under the working directory and the --root folders. Needs the `mcp` "
                                   "extra.")
    p.add_argument("--cwd", type=Path, metavar="DIR",
                   help="resolve the tools' relative paths (and a rulebook's `.` defaults) against DIR")
    p.add_argument("--root", type=Path, action="append", default=[], metavar="DIR",
                   help="another folder the tools may read and write besides the working directory "
                        "(repeatable; relative to --cwd); paths outside these roots are refused (the shipped "
                        "rulebooks are always readable)")
    p.set_defaults(func=run)


def _load_server(roots: list[Path]) -> object:
    import importlib.util

    if importlib.util.find_spec("mcp") is None:  # before policyrun.mcp.server, whose first import is anyio
        raise UsageError(f"policyrun mcp: the MCP SDK (`mcp`) is not installed; {INSTALL_HINT}", code="U030")
    try:
        from policyrun.mcp.server import build_server
    except ImportError as exc:
        # Missing, or an mcp 1.x without mcp.server.mcpserver: either way the extra is what fixes it.
        name = getattr(exc, "name", None) or ""
        if name == "mcp" or name.startswith("mcp."):
            raise UsageError(f"policyrun mcp: {_why(exc)}; {INSTALL_HINT}", code="U030") from None
        raise
    return build_server(roots)


def _why(exc: ImportError) -> str:
    from importlib.metadata import PackageNotFoundError, version

    from packaging.version import InvalidVersion, Version

    try:
        found = version("mcp")
    except PackageNotFoundError:
        return "the MCP SDK (`mcp`) is not installed"
    try:
        if Version(found).major < 2:
            return f"mcp {found} is installed, but policyrun mcp needs mcp>=2 (the MCPServer API)"
    except InvalidVersion:
        pass
    return f"mcp {found} is installed but cannot be imported ({exc})"


def run(args: argparse.Namespace) -> int:
    if args.cwd is not None:
        if not args.cwd.is_dir():
            raise UsageError(f"--cwd {args.cwd}: not a folder; pass the checkout the tools should work in",
                             code="U031")
        os.chdir(args.cwd)
    for root in args.root:
        if not root.is_dir():
            raise UsageError(f"--root {root}: not a folder; pass a folder the tools may read and write", code="U031")
    # The CLI entry turns the cyclic garbage collector off for one short command; a server runs
    # for as long as its client does, so it collects as any long-lived process must.
    gc.enable()
    server = _load_server(args.root)
    server.run("stdio")  # type: ignore[attr-defined]
    return EXIT_OK
