"""The trace itself as the JSON report: the one format every other report is derived from."""

from __future__ import annotations

from policyrun.trace import Trace


def render_json(trace: Trace) -> str:
    return trace.to_json()
