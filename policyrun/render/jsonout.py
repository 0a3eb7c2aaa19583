"""The trace itself as the JSON report: the one format every other report is derived from."""

from __future__ import annotations

from policyrun.safetext import json_controls
from policyrun.trace.model import Trace


def render_json(trace: Trace) -> str:
    # The same JSON value as trace.json; DEL, C1 and bidi characters are written as \u escapes.
    return json_controls(trace.to_json())
