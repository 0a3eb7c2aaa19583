"""The Markdown completion report, from the trace and optional template context."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from policyrun.trace.model import Trace

BUILTIN_TEMPLATE = "report.md.j2"


def template_variables(trace: Trace, context: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """What every report template sees: `report` (the view), `trace` (JSON data), `context`."""
    from policyrun.render.view import build_view

    return {"report": build_view(trace, context), "trace": trace.model_dump(mode="json"),
            "context": dict(context or {})}


def render_markdown(trace: Trace, *, template: Path | None = None,
                    context: Mapping[str, Any] | None = None) -> str:
    """Render the built-in completion report, or a rulebook's own template."""
    from policyrun.render.templating import render_template

    return render_template(template, BUILTIN_TEMPLATE, template_variables(trace, context), html=False)
