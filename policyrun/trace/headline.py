"""What a phase's one line says (the console's REASON column, the `incomplete` verdict's summary).

Kept apart from the interpreter so the renderers can use it without importing the evaluator.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


def headline(rec: Mapping[str, Any], checks: Iterable[Mapping[str, Any]]) -> str:
    """What a phase's one line says: its blocker, but when the phase is BLOCKED or STOPPED and some
    of its checks also FAILed, those failures first. A real FAIL (a test, a stale annotation) is
    what the engineer must fix; an environment BLOCK beside it must not hide it (issue 18 item 12).
    `checks` are all the phase's checks (a phase record keeps each kind in a field of its own)."""
    blocker = rec.get("blocker") or rec.get("reason") or ""
    if rec.get("status") not in ("BLOCKED", "STOPPED"):
        return str(blocker)
    fails = [c["message"] for c in checks if c.get("outcome") == "FAIL" and c.get("message")]
    if not fails:
        return str(blocker)
    return f"FAIL: {'; '.join(fails)}; and {rec['status']}: {blocker}"
