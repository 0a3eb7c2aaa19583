"""Which paths a caller may read and write: a check every use case asks before it touches one.

The CLI trusts its user and passes no check; the MCP server passes its roots
(policyrun.mcp.roots.Roots), because its caller is an agent steered by text it reads.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol


class PathCheck(Protocol):
    def check(self, path: str | Path, what: str, *, write: bool = False) -> None:
        """Raise a UsageError when `path` may not be read (or, with `write`, written)."""
