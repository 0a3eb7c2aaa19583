"""The parse helper's side of policyrun.probes.python.parsepool: read jobs, answer module summaries.

Runs in the helper process (`python -I -c "... from policyrun.probes.python.parseworker import main"`).
It lives apart from parsepool because summarising needs the resolver (python/resolve.py), which itself
starts the pool: one module for each side keeps the imports one-way.
"""

from __future__ import annotations

import pickle
import sys
from typing import IO, Any


def summarize(data: bytes, path: str, module: str, package: str) -> Any:
    """What the resolver needs of one module, without its syntax tree."""
    import ast

    from policyrun.probes.python.resolve import ModuleInfo, module_info
    from policyrun.probes.python.source import ParseError, parse_source

    parsed = parse_source(data, path, remember=False)  # each file once: a memo would only hold trees
    if isinstance(parsed, ParseError):
        return ModuleInfo(path, module, package, parsed)
    assert isinstance(parsed, ast.Module)
    return module_info(parsed, path, module, package)  # no source: the bytes stay on this side


def serve(stdin: IO[bytes], stdout: IO[bytes]) -> None:
    jobs = pickle.load(stdin)
    for i in range(len(jobs) - 1, -1, -1):
        try:
            summary: Any = summarize(*jobs[i])
        except Exception as exc:  # noqa: BLE001 — reported for this file; the resolver parses it itself
            summary = RuntimeError(f"{type(exc).__name__}: {exc}")
        pickle.dump((i, summary), stdout, protocol=pickle.HIGHEST_PROTOCOL)
        stdout.flush()


def main() -> None:
    try:
        serve(sys.stdin.buffer, sys.stdout.buffer)
    except (BrokenPipeError, EOFError, KeyboardInterrupt):  # the probe ended before the helper did
        pass
