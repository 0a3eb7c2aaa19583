"""Where rulebooks are: a path, or the name of a shipped rulebook; and how each is shown.

Kept free of pydantic and YAML imports so that `lint` can answer from its cache without them.
"""

from __future__ import annotations

import difflib
from pathlib import Path

from policyrun.errors import UsageError

_PACKAGE_DIR = Path(__file__).resolve().parent


def shipped_dir(kind: str = "rulebooks") -> Path:
    """Where shipped rulebooks (or references, schemas) live: inside the installed package, or
    at the top of a source checkout for an editable install."""
    installed = _PACKAGE_DIR / "_shipped" / kind
    return installed if installed.is_dir() else _PACKAGE_DIR.parent / kind


def shipped_rulebooks() -> dict[str, Path]:
    folder = shipped_dir()
    return {p.stem: p for p in sorted(folder.glob("*.yaml")) if not p.stem.endswith(".test")} if folder.is_dir() else {}


def resolve_ref(ref: str | None) -> Path:
    """A rulebook argument is a path, or the name of a shipped rulebook."""
    if ref is None:
        default = Path("policyrun.yaml")
        if default.is_file():
            return default
        names = ", ".join(shipped_rulebooks()) or "none"
        raise UsageError(f"no rulebook given and no ./policyrun.yaml here; pass a path or a shipped "
                         f"rulebook name ({names})", code="U001")
    path = Path(ref)
    if path.is_file():
        return path
    found = shipped_or_hint(ref)
    if isinstance(found, Path):
        return found
    from policyrun.didyoumean import path_hint

    # A path-like argument (a '/' or a .yaml suffix) most likely misspells a file: name the closest.
    raise UsageError(f"rulebook {ref!r} is neither a file nor a shipped rulebook{path_hint(ref) or found}",
                     code="U001")


def shipped_or_hint(name: str) -> Path | str:
    """The shipped rulebook called `name`, or the end of an error message saying what is shipped
    (a did-you-mean when a name is close)."""
    shipped = shipped_rulebooks()
    if name in shipped:
        return shipped[name]
    hint = difflib.get_close_matches(name, list(shipped), n=1)
    return f"; did you mean {hint[0]!r}?" if hint else f"; shipped rulebooks: {', '.join(shipped) or 'none'}"


def display_name(path: Path) -> str:
    """Shipped rulebooks are shown by a stable name, not an install-dependent absolute path."""
    try:
        resolved = path.resolve()
        if resolved.is_relative_to(shipped_dir().resolve()):
            return f"<shipped>/{resolved.relative_to(shipped_dir().resolve()).as_posix()}"
    except OSError:
        pass
    return path.as_posix()


