"""`failed(facts.x)`, `error_code(facts.x)` and `error_message(facts.x)`: a failed probe as a value.

A check that reads a failed fact is UNKNOWN (fail closed). Sometimes the failure itself is the
fact a policy needs ("no NVML means no NVIDIA GPU"), or the blocker must show why a fact is
missing (an evidence file that does not match its schema, with every problem located): these
functions ask whether a probe's fact is missing, and why, without reading it. `facts.x` inside them is rewritten by the compiler
to the probe id (`failed('x')`, the canonical form; see policyrun.language.expr), so the argument is never
evaluated. The interpreter installs the status of every fact of the evaluation before it runs.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any
from contextlib import contextmanager

from policyrun.language.functions.base import FunctionError

NOT_COLLECTED = "not_collected"
# probe id → error code, or None for a fact collected without error. Probe ids absent from the
# map were not collected in this evaluation.
_status: Mapping[str, str | None] = {}


@contextmanager
def fact_status(status: Mapping[str, str | None]) -> Iterator[None]:
    """Make `failed()`/`error_code()` answer for these facts while the block runs."""
    global _status
    previous, _status = _status, status
    try:
        yield
    finally:
        _status = previous


def _probe_id(probe: str) -> str:
    if not probe:
        raise FunctionError("failed: name the probe, as failed(facts.<id>) or failed('<id>')")
    return probe


def failed(probe: str) -> bool:
    """Whether the probe's fact is missing: its probe failed or was not collected."""
    return _status.get(_probe_id(probe), NOT_COLLECTED) is not None


def error_code(probe: str) -> str | None:
    """The failed probe's error code (`not_collected` when it did not run); null when it succeeded."""
    return _status.get(_probe_id(probe), NOT_COLLECTED)


def error_message(probe: str) -> str | None:
    """The failed probe's error message (what a failed `command` exited with and its stderr tail);
    null when it succeeded. The status map installed by an evaluation answers `message(pid)`
    (policyrun.evaluate.expreval.fact_status_of); one without messages (collection's own) answers the
    code, so a message quoting it still says something true."""
    code = error_code(probe)
    if code is None:
        return None
    if code == NOT_COLLECTED and probe not in _status:
        return "the probe was not collected in this evaluation"
    message = getattr(_status, "message", None)
    text = message(probe) if callable(message) else None
    return text if isinstance(text, str) else code
