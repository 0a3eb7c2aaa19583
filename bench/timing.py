"""The one timing helper the benchmarks share (scripts run as `python bench/<name>.py`, so this
module sits beside them on sys.path)."""

from __future__ import annotations

import time
from collections.abc import Callable


def best_of(fn: Callable[[], object], repeat: int = 5) -> float:
    """Best wall time of `repeat` runs: the least disturbed by other work on the machine."""
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)
