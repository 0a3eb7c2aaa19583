"""A disk cache of lint results, so checking an unchanged rulebook costs a file read and a hash.

Linting compiles and type-checks every expression, validates probe parameters and compiles the
report templates: most of `policyrun lint`'s time. The result depends only on the rulebook's
bytes, the files it names (templates and their folders, schema files), policyrun's own code and
the installed probe plugins, so it is cached under a key made of exactly those:

- the entry's name hashes the rulebook's bytes, the path as given (findings quote it), this
  policyrun's code (every module's path, size and mtime) and Python's version;
- the entry records every other file lint read with its sha256, checked before it is used;
- it also records the modification times of the package directories on sys.path, which change
  when a package (a probe plugin among them) is installed or removed.

The cache lives in $POLICYRUN_CACHE_DIR, else $XDG_CACHE_HOME/policyrun, else ~/.cache/policyrun.
POLICYRUN_NO_CACHE=1 turns it off. A cache that cannot be read or written is ignored: linting is
never wrong because of it, only slower.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

from policyrun.errors import Finding, Location

_FORMAT = 1
_MAX_ENTRIES = 512
_PACKAGE = Path(__file__).resolve().parent.parent  # the whole policyrun package


def cache_dir() -> Path | None:
    if os.environ.get("POLICYRUN_NO_CACHE") == "1":
        return None
    explicit = os.environ.get("POLICYRUN_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "policyrun"


@cache
def _code_fingerprint() -> str:
    """policyrun's code and shipped templates as they are now (stat only: no file is read)."""
    h = hashlib.sha256(f"{_FORMAT} {sys.version}".encode())
    for path in sorted(_PACKAGE.rglob("*")):
        if path.suffix in (".py", ".j2", ".json", ".yaml") and "__pycache__" not in path.parts:
            st = path.stat()
            h.update(f"{path.relative_to(_PACKAGE)} {st.st_size} {st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def _environment() -> list[list[Any]]:
    """Modification times of the package directories on sys.path (an install or uninstall, of a
    probe plugin among others, changes them)."""
    out: list[list[Any]] = []
    for entry in sys.path:
        if not entry.endswith(("site-packages", "dist-packages")):
            continue
        try:
            out.append([entry, os.stat(entry or ".").st_mtime_ns])
        except OSError:
            out.append([entry, None])
    return out


def _sha256(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return None


def _entry(path: Path, data: bytes) -> Path | None:
    folder = cache_dir()
    if folder is None:
        return None
    key = hashlib.sha256(b"\0".join([data, os.fsencode(path), _code_fingerprint().encode()])).hexdigest()
    return folder / "lint" / f"{key}.json"


def lookup(path: Path) -> list[Finding] | None:
    """The cached findings for this rulebook as it is now, or None."""
    try:
        data = path.read_bytes()
        entry = _entry(path, data)
        if entry is None or not entry.is_file():
            return None
        record = json.loads(entry.read_text(encoding="utf-8"))
        if record.get("format") != _FORMAT or record.get("environment") != _environment():
            return None
        if any(_sha256(dep) != digest for dep, digest in record.get("deps", [])):
            return None
        return [Finding(f["code"], f["message"], Location(f["file"], f["line"], f["column"]), f["severity"],
                        f["node"], f.get("excerpt", "")) for f in record["findings"]]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def store(path: Path, findings: list[Finding], deps: list[Path]) -> None:
    """Remember the findings; `deps` are the other files lint read for them."""
    try:
        data = path.read_bytes()
        entry = _entry(path, data)
        if entry is None:
            return
        record = {"format": _FORMAT, "environment": _environment(),
                  "deps": [[str(d), _sha256(str(d))] for d in sorted(set(deps))],
                  "findings": [{"code": f.code, "message": f.message, "file": f.location.file,
                                "line": f.location.line, "column": f.location.column, "severity": f.severity,
                                "node": f.node, "excerpt": f.excerpt} for f in findings]}
        entry.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=entry.parent, prefix=".tmp-", suffix=".json")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(record, f)
        os.replace(tmp, entry)
        _prune(entry.parent)
    except (OSError, ValueError, TypeError):
        return


def _prune(folder: Path) -> None:
    entries = sorted(folder.glob("*.json"), key=lambda p: p.stat().st_mtime)
    for old in entries[:-_MAX_ENTRIES]:
        try:
            old.unlink()
        except OSError:
            pass
