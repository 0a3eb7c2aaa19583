"""Diff: two saved traces compared (verdict, statuses, checks, values read)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class DiffRequest:
    old: Path
    new: Path
    force: bool = False  # compare traces that contradict their own checks


@dataclass(frozen=True)
class DiffResult:
    diff: dict[str, Any]  # policyrun.render.diff.diff_traces

    @property
    def exit_code(self) -> int:
        from policyrun.errors import EXIT_FAIL, EXIT_OK

        return EXIT_FAIL if self.diff["changed"] else EXIT_OK


def diff(request: DiffRequest) -> DiffResult:
    from policyrun.render.diff import diff_traces
    from policyrun.trace.model import load_trace

    return DiffResult(diff_traces(load_trace(request.old, force=request.force),
                                  load_trace(request.new, force=request.force)))
