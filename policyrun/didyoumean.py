"""Did-you-mean hints: the closest of a set of names, or the existing file a misspelt path meant.

Kept free of YAML and pydantic imports (locate.py, which `lint` uses before its cache, calls it).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from pathlib import Path

_RULEBOOK_SUFFIXES = (".yaml", ".yml")


def hint(name: str, options: Iterable[str]) -> str:
    """`; did you mean 'x'?` for the option closest to `name`, or '' when none is close."""
    close = difflib.get_close_matches(name, list(options), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def looks_like_path(ref: str) -> bool:
    return "/" in ref or "\\" in ref or ref.endswith(_RULEBOOK_SUFFIXES)


def similar_path(ref: str, base: Path | None = None) -> str | None:
    """For a path that names no file: the existing file it most likely meant, found component by
    component among the names in each folder (so a misspelt folder is corrected too), written as
    `ref` was (relative to `base`, default the working directory); None when some component has no
    close name."""
    root = base if base is not None else Path(".")
    parts = Path(ref).parts
    if not parts:
        return None
    anchor = Path(parts[0]) if Path(ref).is_absolute() else None
    current = anchor if anchor is not None else root
    fixed: list[str] = [parts[0]] if anchor is not None else []
    names = parts[1:] if anchor is not None else parts
    for k, part in enumerate(names):
        last = k == len(names) - 1
        candidate = current / part
        if (candidate.is_file() if last else candidate.is_dir()):
            fixed.append(part)
            current = candidate
            continue
        try:
            siblings = [e.name for e in current.iterdir() if (e.is_file() if last else e.is_dir())]
        except OSError:
            return None
        close = difflib.get_close_matches(part, siblings, n=1, cutoff=0.75)
        if not close:
            return None
        fixed.append(close[0])
        current = current / close[0]
    shown = str(Path(*fixed))
    return shown if shown != ref else None


def path_hint(ref: str, base: Path | None = None) -> str:
    """`; did you mean 'rulebooks/x.yaml'?` for a path-like `ref` that names no file, or ''."""
    if not looks_like_path(ref):
        return ""
    near = similar_path(ref, base)
    return f"; did you mean {near!r}?" if near else ""
