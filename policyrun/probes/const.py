"""`const`: a fact written in the rulebook itself.

Useful for tests, for pinning a value an overlay may change, and for facts computed purely
from other facts (`with: {value: "${facts.a.x + 1}"}`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policyrun.probes.base import ProbeContext, ProbeResult


class ConstProbe:
    kind = "const"
    summary = "A value given in the rulebook (after interpolation)."
    params_schema: Mapping[str, Any] = {
        "type": "object",
        "properties": {"value": {"description": "Any JSON value."}},
        "required": ["value"],
        "additionalProperties": False,
    }
    fact_schema: Mapping[str, Any] = {"description": "The `value` parameter, unchanged."}

    def side_effects(self, params: Mapping[str, Any]) -> frozenset[str]:
        return frozenset()

    def run(self, params: Mapping[str, Any], ctx: ProbeContext) -> ProbeResult:
        return ProbeResult(value=params["value"])


PROBES = [ConstProbe()]
