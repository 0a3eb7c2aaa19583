"""Pausing Python's cyclic garbage collector around work that builds large acyclic graphs.

Syntax trees, fact rows and trace records are freed by reference counting; the cyclic collector
only rescans them while they are alive (on vLLM's sources its passes cost as much as the parsing:
2.0 s -> 1.0 s). Probes run on several threads, so the pause is counted: the collector comes back
when the last pauser leaves, not when the first one does, and only if it was on to begin with.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_depth = 0
_was_enabled = False


@contextmanager
def gc_paused() -> Iterator[None]:
    global _depth, _was_enabled
    with _lock:
        if _depth == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _was_enabled:
                gc.enable()
