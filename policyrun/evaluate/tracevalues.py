"""Values the trace summarises, kept in full beside it.

The trace records a value larger than limits.TRACE_VALUE_BYTES as `{"truncated": true, "type",
"length", "sha256"}` so that every trace stays readable (policyrun.evaluate.expreval.summarise). `evaluate
--out DIR` also keeps each such value whole, content-addressed, in `DIR/values/`: the file
`<sha256>.json` (a list or map, as the JSON text the checksum was taken over) or `<sha256>.txt` (a
string, as its UTF-8 text), so the file's own sha256 is its name and the checksum the trace already
records. The trace itself is unchanged, byte for byte.

One evaluation keeps at most limits.TRACE_VALUES_BYTES of values; what did not fit is listed in
`values/index.json` under `omitted` (the index also lists every value kept, and is in the run's
manifest). `report`, `explain` and the MCP server show a summarised value in full when its file is
there and matches its checksum (else the summary, as before); `verify` checks every file the index
lists against its checksum, and that every summarised value is either kept or listed as omitted.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from policyrun import limits

VALUES = "values"
INDEX = "index.json"


def file_name(digest: str, type_name: str) -> str:
    return f"{digest}.txt" if type_name == "str" else f"{digest}.json"


class ValueStore:
    """Writes summarised values into a folder as an evaluation summarises them. The evaluation may
    run in a forked guard child: the store writes files, which the parent then finds."""

    def __init__(self, folder: Path, cap: int) -> None:
        self.folder = folder
        self.cap = cap
        self.used = 0
        self.seen: set[str] = set()

    def keep(self, digest: str, type_name: str, text: str) -> None:
        if digest in self.seen:
            return
        self.seen.add(digest)
        data = text.encode("utf-8", "surrogatepass")  # the bytes the checksum was taken over
        if self.used + len(data) > self.cap:
            return  # over the cap: listed as omitted by the index
        path = self.folder / file_name(digest, type_name)
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            if not (path.is_file() and path.stat().st_size == len(data)):
                tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
                tmp.write_bytes(data)
                os.replace(tmp, path)  # content-addressed: a concurrent run writes the same bytes
        except OSError:
            return  # not kept: the index says so, and the trace is written regardless
        self.used += len(data)


@contextmanager
def keeping_values(folder: Path, cap: int | None = None) -> Iterator[ValueStore]:
    """While the block runs, every value the evaluation summarises is also written into `folder`."""
    from policyrun.evaluate import expreval

    store = ValueStore(folder, limits.TRACE_VALUES_BYTES if cap is None else cap)
    previous = expreval.on_summary
    expreval.on_summary = store.keep
    try:
        yield store
    finally:
        expreval.on_summary = previous


# --- the summaries a trace holds ------------------------------------------------------------------

@dataclass(frozen=True)
class Summary:
    digest: str
    type: str
    where: str  # the trace node that holds it, for messages


def _is_summary(value: Any) -> bool:
    return isinstance(value, dict) and value.get("truncated") is True and isinstance(value.get("sha256"), str) \
        and isinstance(value.get("type"), str) and set(value) == {"truncated", "type", "length", "sha256"}


def _slots(data: Any, where: str = "") -> Iterator[tuple[Any, Any, dict[str, Any], str]]:
    """(container, key, summary, trace node) for every summarised value in a trace's JSON: read
    values, violations lists, derived values, wherever the trace holds them."""
    def visit(node: Any, at: str) -> Iterator[tuple[Any, Any, dict[str, Any], str]]:
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for key, child in items:  # in document order: the first place a value appears names it
            if isinstance(child, dict):
                label = child.get("id") or child.get("phase") or child.get("path")
                name = f"{at}.{key}" if isinstance(key, str) else f"{at}[{label if isinstance(label, str) else key}]"
                if _is_summary(child):
                    yield node, key, child, name.lstrip(".")
                else:
                    yield from visit(child, name)
            elif isinstance(child, list):
                yield from visit(child, f"{at}.{key}" if isinstance(key, str) else f"{at}[{key}]")

    # Recursion is bounded: a trace nests at most limits.TRACE_DEPTH levels (load_trace refuses deeper).
    yield from visit(data, where)


def _summaries_in(data: Any) -> Iterator[Summary]:
    for _, _, summary, where in _slots(data):
        yield Summary(summary["sha256"], summary["type"], where)


def index_text(trace: Any, folder: Path) -> str | None:
    """`values/index.json` for a trace just written with `keeping_values(folder)`: every summarised
    value kept (with its size) or omitted. None when the trace summarises nothing."""
    summaries = {s.digest: s for s in _summaries_in(trace.model_dump(mode="json"))}
    if not summaries:
        return None
    kept: dict[str, Any] = {}
    omitted: dict[str, Any] = {}
    for digest, s in sorted(summaries.items()):
        path = folder / file_name(digest, s.type)
        if path.is_file():
            kept[digest] = {"type": s.type, "bytes": path.stat().st_size}
        else:
            omitted[digest] = {"type": s.type, "why": f"over the {limits.TRACE_VALUES_BYTES // limits.MIB} MiB "
                                                      "kept per evaluation, or it could not be written"}
    doc = {"policyrun_values": 1, "cap_bytes": limits.TRACE_VALUES_BYTES, "kept": kept, "omitted": omitted}
    return json.dumps(doc, indent=2) + "\n"


# --- reading them back ----------------------------------------------------------------------------

def _read(folder_fd: int, name: str, max_bytes: int | None = None) -> bytes | None:
    """A file's bytes from the values folder (a regular file, no symbolic link followed), or None."""
    from policyrun.probes._kit.bounded import read_beneath

    try:
        data = read_beneath(folder_fd, name.encode(), limits.TRACE_VALUES_BYTES if max_bytes is None else max_bytes)
    except OSError:
        return None
    return data if isinstance(data, bytes) else None


@contextmanager
def _opened(folder: Path) -> Iterator[int | None]:
    try:
        fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except OSError:
        yield None
        return
    try:
        yield fd
    finally:
        os.close(fd)


def _value(data: bytes, type_name: str) -> Any:
    text = data.decode("utf-8", "surrogatepass")
    return text if type_name == "str" else json.loads(text)


def expand(trace: Any, trace_path: Path) -> Any:
    """The trace with each summarised value replaced by the whole value kept beside it, where its
    file is there and matches its checksum (the summary stays otherwise: run `verify`)."""
    folder = trace_path.parent / VALUES
    if not folder.is_dir():
        return trace
    data = trace.model_dump(mode="json")
    cache: dict[str, Any] = {}
    changed = False
    with _opened(folder) as fd:
        if fd is None:
            return trace

        def whole(value: Any) -> Any:
            nonlocal changed
            if not _is_summary(value):
                return value
            digest = value["sha256"]
            if digest not in cache:
                raw = _read(fd, file_name(digest, value["type"]))
                ok = raw is not None and hashlib.sha256(raw).hexdigest() == digest
                cache[digest] = _value(raw, value["type"]) if ok and raw is not None else value
            changed = changed or cache[digest] is not value
            return cache[digest]

        for container, key, summary, _ in list(_slots(data)):
            container[key] = whole(summary)
    return type(trace).model_validate(data) if changed else trace


def load_trace_values(path: Path, *, force: bool = False) -> Any:
    """`load_trace`, with summarised values shown whole from `values/` beside the trace."""
    from policyrun.trace.model import load_trace

    return expand(load_trace(path, force=force), path)


# --- verify ---------------------------------------------------------------------------------------

def problems(trace: Any, trace_path: Path) -> tuple[list[str], list[str]]:
    """(problems, notes) with the values kept beside a trace: a kept value whose file is missing or
    does not match its checksum, a summarised value neither kept nor listed as omitted, a values/
    folder without its index (problems); values omitted at the cap (a note). A trace with no values/
    folder beside it (copied on its own, or written before values were kept) has neither."""
    from policyrun.errors import display_path

    summaries = list(_summaries_in(trace.model_dump(mode="json")))
    if not summaries:
        return [], []
    folder = trace_path.parent / VALUES
    index_path = folder / INDEX
    with _opened(folder) as fd:
        if fd is None:
            return [], []  # a trace read on its own (copied, or written before values were kept): checksums only
        raw_index = _read(fd, INDEX, limits.TRACE_BYTES)
        if raw_index is None:
            return [f"{display_path(index_path)}:1:1: missing, though values/ is there; the values this trace "
                    "summarises cannot be checked without it (evaluate again with --out)"], []
        try:
            index = json.loads(raw_index)
            kept, omitted = dict(index["kept"]), dict(index["omitted"])
        except (ValueError, KeyError, TypeError):
            return [f"{display_path(index_path)}:1:1: not a values index written by `policyrun evaluate`"], []
        out: list[str] = []
        checked: set[str] = set()
        for s in summaries:
            name = file_name(s.digest, s.type)
            shown = display_path(folder / name)
            if s.digest in checked:
                continue
            checked.add(s.digest)
            if s.digest in omitted:
                continue
            if s.digest not in kept:
                out.append(f"{display_path(index_path)}:1:1: lists neither as kept nor as omitted the value {s.where} "
                           f"summarises (sha256 {s.digest})")
                continue
            data = _read(fd, name)
            if data is None:
                out.append(f"{shown}:1:1: missing; it holds the value {s.where} summarises "
                           "(the index lists it as kept)")
            elif (actual := hashlib.sha256(data).hexdigest()) != s.digest:
                out.append(f"{shown}:1:1: content has sha256 {actual}, not the {s.digest} the trace records for "
                           f"{s.where}: the file was edited or replaced")
    notes = [f"{display_path(index_path)}: {len(omitted)} summarised value(s) were not kept (over the "
             f"{limits.TRACE_VALUES_BYTES // limits.MIB} MiB kept per evaluation); only their checksums are in "
             "the trace"] if omitted else []
    return out, notes
