"""A probe's time limit, kept by a daemon thread: a probe that never returns cannot hang collection.

Separate because it is the one place collection leaves a thread behind on purpose (a Python
thread cannot be killed; a daemon thread at least does not hold up the exit), which deserves
its own few lines rather than a corner of the scheduler.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any


class Timeout(Exception):
    """The probe did not return within its time limit (its thread runs on, as a daemon)."""


def call_with_timeout(fn: Callable[[], Any], timeout_s: float, name: str) -> Any:
    """Run `fn` in a daemon thread: a probe that never returns cannot hang collect or the exit."""
    outcome: list[tuple[bool, Any]] = []

    def target() -> None:
        try:
            outcome.append((True, fn()))
        except BaseException as exc:  # handed to the caller, who records it as the fact's error
            outcome.append((False, exc))

    thread = threading.Thread(target=target, name=f"probe:{name}", daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        raise Timeout
    ok, value = outcome[0]
    if not ok:
        raise value
    return value
