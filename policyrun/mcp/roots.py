"""The folders the MCP tools may read and write: the server's roots.

An MCP client (an agent, possibly steered by text in the checkout it reads) chooses every path a
tool is given. The tools therefore read and write only under the roots: the server's working
directory (after `--cwd`) and the folders added with `policyrun mcp --root DIR` (repeatable; the
vLLM source beside a plugin checkout, say); the shipped rulebooks are always readable. A path is compared
after resolving `..` and symbolic links, so a link in the checkout cannot point a tool outside.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from policyrun.errors import UsageError
from policyrun.language.locate import shipped_dir


@dataclass(frozen=True)
class Roots:
    dirs: tuple[Path, ...]
    readonly: tuple[Path, ...]

    @classmethod
    def of(cls, dirs: Sequence[Path] = ()) -> Roots:
        return cls(tuple(Path(d).resolve() for d in (Path.cwd(), *dirs)), (shipped_dir("rulebooks").resolve(),))

    def describe(self) -> str:
        return ", ".join(str(d) for d in self.dirs)

    def check(self, path: str | Path, what: str, *, write: bool = False) -> None:
        """Refuse (exit 3, U032) a path outside the roots; relative paths are from the working directory."""
        target = Path(path).resolve()
        allowed = self.dirs if write else (*self.dirs, *self.readonly)
        if any(target.is_relative_to(d) for d in allowed):
            return
        verb = "write" if write else "read"
        raise UsageError(f"{what} {str(path)!r} is outside the MCP server's roots ({self.describe()}); the tools "
                         f"{verb} only under them. To allow another folder, start the server with "
                         "`policyrun mcp --root DIR` (repeatable)",
                         code="U032")
