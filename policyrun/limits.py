"""Bounds on everything policyrun reads or renders, in one place (docs/security.md has the table).

A bound turns "reads until memory runs out" or "renders forever" into a located error that says
which bound was hit. Sizes are checked on what is actually read, never on `st_size` alone: a
device or a FIFO reports 0 bytes and never ends.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

MIB = 1024 * 1024

# Policy files: rulebooks, --inputs, *.test.yaml, report --context. People write these.
POLICY_BYTES = 4 * MIB
POLICY_DEPTH = 64
POLICY_NODES = 200_000  # after YAML alias expansion; a "billion laughs" document trips this early

# Machine-written data. A facts file nests a fact value 3 levels deep (facts → id → value) and a
# trace nests a value read by a check 7 levels deep (phases → [i] → evidence → [j] → reads → [k]
# → value), so a results file that collects fits a facts file, which fits the trace it produces.
FACTS_BYTES = 128 * MIB
FACTS_DEPTH = 128
TRACE_BYTES = 128 * MIB
TRACE_DEPTH = FACTS_DEPTH + 8
RESULTS_BYTES = 64 * MIB
RESULTS_DEPTH = FACTS_DEPTH - 8
RESULTS_NODES = 1_000_000  # YAML results files, after alias expansion

# Every number in a JSON or YAML document policyrun reads: the characters of its literal. Python
# refuses to convert integers of more than 4,300 digits (a ValueError deep inside the decoder) and
# CEL's integers are 64-bit (20 digits), so 100 is far above any value a check can use and far
# below what costs time to convert.
NUMBER_CHARS = 100

# A probe's `for_each`: elements of one fan-out. Each element is one run of the probe (scheduled
# on collection's bounded worker pool, never a thread each) and one entry of the fact's map.
FANOUT_ELEMENTS = 10_000

# Report templates: rulebooks may ship them, so they are bounded like untrusted code.
TEMPLATE_BYTES = 1 * MIB
TEMPLATE_SECONDS = 30.0  # wall clock for one report
TEMPLATE_OUTPUT_CHARS = 64 * MIB  # characters one report may produce
TEMPLATE_VALUE_ITEMS = 4 * MIB  # characters or items of one string or list a template builds
TEMPLATE_RANGE = 100_000  # items of one range()
TEMPLATE_INT_BITS = 4096  # an integer a template computes with ** (about 1,233 digits)


class Unreadable(Exception):
    """Why a file was not read; the caller turns it into its own located error."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class TooLarge(Unreadable):
    """The file is over its size bound."""


_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def read_limited(path: Path, limit: int) -> bytes:
    """The bytes of a regular file of at most `limit` bytes, or `Unreadable` saying why not.

    O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever. The type is
    checked on the open descriptor (fstat), so a path swapped after a check cannot slip through.
    """
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise Unreadable(exc.strerror or str(exc)) from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = next((name for test, name in _KINDS if test(mode)), "not a plain file")
            raise Unreadable(f"not a regular file ({kind}); pass a file")
        chunks: list[bytes] = []
        left = limit + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 * MIB))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
        data = b"".join(chunks)
    except OSError as exc:
        raise Unreadable(exc.strerror or str(exc)) from None
    finally:
        os.close(fd)
    if len(data) > limit:
        raise TooLarge(f"larger than the {_size(limit)} limit for this kind of file")
    return data


def _size(limit: int) -> str:
    return f"{limit // MIB} MiB" if limit >= MIB and limit % MIB == 0 else f"{limit}-byte"


def depth_exceeds(value: Any, limit: int) -> bool:
    """Whether lists and mappings nest deeper than `limit` (the outermost container is level 1).

    Level by level rather than recursively: the check must not itself hit Python's recursion
    limit on the very input it guards against.
    """
    level = [value] if isinstance(value, (dict, list)) else []
    depth = 0
    while level:
        depth += 1
        if depth > limit:
            return True
        nxt: list[Any] = []
        for item in level:
            children = item.values() if isinstance(item, dict) else item
            nxt.extend([c for c in children if isinstance(c, (dict, list))])
        level = nxt
    return False

# Derived values of one evaluation (or one collection), in sum: each expression already has its
# own time limit (policyrun.language.guard) and the function library its size bounds, but a chain of
# derived values each doubling the last stays under both while the whole grows without bound.
DERIVED_SECONDS = 60.0  # CPU spent computing derived values, all of them together
DERIVED_BYTES = 64 * MIB  # their values' size, counted as JSON text, all of them together
# What one value or message may put into a trace; larger values are summarised (type, length and
# sha256), so every trace `evaluate` writes stays within what `report`, `explain` and `verify` read.
TRACE_VALUE_BYTES = 16_384
# Of the values a trace summarises, `evaluate --out` keeps this much in full beside it (values/, in
# sum per evaluation; what does not fit is listed as omitted in values/index.json).
TRACE_VALUES_BYTES = 256 * MIB
MESSAGE_VALUE_CHARS = 64 * 1024  # characters one interpolated value may add to a message
