"""A disk cache of compiled expressions, so a rulebook is not compiled again on every run.

Compiling an expression (parse, type-check, then walk the checked tree for the paths it reads)
costs about 0.2 ms; a 1,000-rule rulebook paid 0.2–0.3 s for it on every `evaluate`. The CEL
runtime can serialise a compiled program (`Expression.serialize`) and load it back
(`Env.deserialize`, about 16 µs), so each expression is stored with its program, its checked
syntax tree and what `policyrun.language.expr.compile_expr` derived from it (the paths it reads, the facts
it asks about): loading it back compiles nothing.

One file per rulebook, named like the lint cache's entries (policyrun.language.lintcache: the rulebook's
bytes, its path and policyrun's code, so a new policyrun or CEL runtime never reads an old entry);
inside, entries are keyed by the expression's text, so an entry can only ever stand for the very
expression it was compiled from. A file that cannot be read, or an entry that does not load, is
ignored: the expression is compiled as usual. POLICYRUN_NO_CACHE=1 turns it off.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import tempfile
from functools import cache
from pathlib import Path
from typing import Any

from policyrun.language import expr
from policyrun.language.lintcache import _code_fingerprint, cache_dir

_FORMAT = 1
_MAX_ENTRIES = 256


def _file(path: Path, data: bytes) -> Path | None:
    folder = cache_dir()
    if folder is None:
        return None
    runtime = _runtime()
    if runtime is None:
        return None
    key = hashlib.sha256(b"\0".join([data, os.fsencode(path), _code_fingerprint().encode(),
                                     runtime.encode()])).hexdigest()
    return folder / "compiled" / f"{key}.json"


@cache
def _runtime() -> str | None:
    """The CEL runtime's extension module as installed (path, size, mtime): another version never
    reads programs this one serialised. (A stat, where importlib.metadata scans every package.)"""
    try:
        from cel_expr_python import cel

        st = os.stat(str(cel.__file__))
        return f"{cel.__file__} {st.st_size} {st.st_mtime_ns}"
    except (ImportError, OSError, TypeError):
        return None


def preload(path: Path) -> bool:
    """Make the compiled expressions stored for this rulebook available to compile_expr; whether
    there were any."""
    try:
        entry = _file(path, path.read_bytes())
        if entry is None or not entry.is_file():
            return False
        record = json.loads(entry.read_text(encoding="utf-8"))
        if record.get("format") != _FORMAT or not isinstance(record.get("expressions"), dict):
            return False
        expr.offer_compiled(record["expressions"])
        # Loaded now, before the guard's child is forked: the child inherits them, and a later
        # child (other facts) does not load them again.
        for source in record["expressions"]:
            try:
                expr.compile_expr(source)
            except expr.ExprError:
                continue
        return True
    except (OSError, ValueError):
        return False


def store(path: Path, sources: list[str]) -> None:
    """Remember the compiled form of `sources` (compiled now where they are not yet)."""
    try:
        entry = _file(path, path.read_bytes())
        if entry is None:
            return
        expressions: dict[str, Any] = {}
        for source in dict.fromkeys(sources):
            try:
                expressions[source] = record_of(expr.compile_expr(source))
            except expr.ExprError:
                continue  # lint reports it; evaluation never runs it
        entry.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=entry.parent, prefix=".tmp-", suffix=".json")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({"format": _FORMAT, "expressions": expressions}, f)
        os.replace(tmp, entry)
        _prune(entry.parent)
    except (OSError, ValueError, TypeError, RuntimeError):
        return


def record_of(compiled: expr.Compiled) -> dict[str, Any]:
    """A compiled expression as JSON data (`expr.compiled_from_record` reads it back)."""
    program = compiled.program.serialize()
    # The checked tree is the program's own unless failed(facts.x) was rewritten for evaluation.
    return {"program": base64.b64encode(program).decode("ascii"),
            "ast": None if program == compiled.serialized else base64.b64encode(compiled.serialized).decode("ascii"),
            "result_type": compiled.result_type,
            "read_parts": [list(p) for p in compiled.read_parts],
            "reads_all_facts": compiled.reads_all_facts,
            "fact_status": sorted(compiled.fact_status),
            "element_status": sorted(list(e) for e in compiled.element_status),
            "strict_facts": sorted(compiled.strict_facts),
            "strict_elements": sorted(list(e) for e in compiled.strict_elements)}


def _prune(folder: Path) -> None:
    entries = sorted(folder.glob("*.json"), key=lambda p: p.stat().st_mtime)
    for old in entries[:-_MAX_ENTRIES]:
        try:
            old.unlink()
        except OSError:
            pass
