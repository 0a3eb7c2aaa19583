"""Where rulebooks are: a path, or the name of a shipped rulebook; and how each is shown.

The checkout under audit is untrusted input (docs/security.md): a file in the working directory
must never stand in for a shipped rulebook. So a rulebook argument (and an overlay's `extends:`)
is read one of two ways, decided by how it is written, never by what files happen to exist:
- a *path* has a path form: a separator (`./x`, `dir/x`, `/abs/x`) or a `.yaml` / `.yml` suffix;
- anything else is a *name*, and a name only ever means a shipped rulebook.
Shipped rulebooks are shown as `<shipped>/NAME.yaml`; every other file by a path that reads as
one (`./x`), so no output can show a local file as if it were shipped.

Kept free of pydantic and YAML imports so that `lint` can answer from its cache without them.
"""

from __future__ import annotations

import difflib
import os
from pathlib import Path

from policyrun.errors import UsageError

_PACKAGE_DIR = Path(__file__).resolve().parent.parent  # the policyrun package
_SUFFIXES = (".yaml", ".yml")
SHIPPED_PREFIX = "<shipped>/"


def shipped_dir(kind: str = "rulebooks") -> Path:
    """Where shipped rulebooks (or references, schemas) live: inside the installed package, or
    at the top of a source checkout for an editable install."""
    installed = _PACKAGE_DIR / "_shipped" / kind
    return installed if installed.is_dir() else _PACKAGE_DIR.parent / kind


def shipped_rulebooks() -> dict[str, Path]:
    folder = shipped_dir()
    return {p.stem: p for p in sorted(folder.glob("*.yaml")) if not p.stem.endswith(".test")} if folder.is_dir() else {}


def is_path_form(ref: str) -> bool:
    """Whether a rulebook reference is written as a path (else it is a shipped rulebook's name)."""
    separators = {"/", os.sep, *([os.altsep] if os.altsep else [])}
    return any(s in ref for s in separators) or ref.lower().endswith(_SUFFIXES)


def resolve_ref(ref: str | None, relative_to: Path | None = None) -> Path:
    """A rulebook argument: a path (path form, see the module doc; relative to `relative_to`, else the
    working directory), or the name of a shipped rulebook. Without one, ./policyrun.yaml."""
    if ref is None:
        default = Path("policyrun.yaml")
        if default.is_file():
            return default
        names = ", ".join(shipped_rulebooks()) or "none"
        raise UsageError(f"no rulebook given and no ./policyrun.yaml here; pass a path or a shipped "
                         f"rulebook name ({names})", code="U001")
    if is_path_form(ref):
        path = relative_to / ref if relative_to is not None else Path(ref)
        if path.is_file():
            return path
        what = "is a folder, not a rulebook file" if path.is_dir() else "is not a file"
        from policyrun.didyoumean import path_hint

        # A path most likely misspells a file: name the closest one, else what is shipped.
        hint = path_hint(ref, relative_to) or (f"; shipped rulebooks are named without a folder or suffix "
                                               f"({', '.join(shipped_rulebooks()) or 'none'})")
        raise UsageError(f"rulebook {ref!r} {what}{hint}", code="U001")
    found = shipped_or_hint(ref, relative_to or Path.cwd())
    if isinstance(found, Path):
        return found
    raise UsageError(f"rulebook {ref!r} is not a shipped rulebook{found}", code="U001")


def shipped_or_hint(name: str, folder: Path | None = None) -> Path | str:
    """The shipped rulebook called `name`, or the end of an error message saying what is shipped
    (a did-you-mean when a name is close). When `folder` holds a file called `name` (or `name.yaml`),
    the hint says how to name that file as a path instead."""
    shipped = shipped_rulebooks()
    if name in shipped:
        return shipped[name]
    if folder is not None:
        for candidate in (name, *(name + s for s in _SUFFIXES)):
            if (folder / candidate).is_file():
                return (f"; a bare name only ever means a shipped rulebook. To use the file {candidate!r} "
                        f"there, write it as a path: ./{candidate}")
    hint = difflib.get_close_matches(name, list(shipped), n=1)
    return f"; did you mean {hint[0]!r}?" if hint else f"; shipped rulebooks: {', '.join(shipped) or 'none'}"


def is_shipped(path: Path) -> bool:
    try:
        return path.resolve().is_relative_to(shipped_dir().resolve())
    except OSError:
        return False


def display_name(path: Path) -> str:
    """Shipped rulebooks are shown by a stable name, not an install-dependent absolute path; any
    other file by a path that reads as a path (`./x` for a bare file name), never as a name."""
    if is_shipped(path):
        return SHIPPED_PREFIX + path.resolve().relative_to(shipped_dir().resolve()).as_posix()
    shown = path.as_posix()
    if not path.is_absolute() and (not is_path_form(shown) or shown.startswith(SHIPPED_PREFIX.rstrip("/"))):
        shown = "./" + shown
    return shown

