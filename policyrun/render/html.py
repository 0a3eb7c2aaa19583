"""A self-contained HTML report: inline CSS, JS and SVG, nothing fetched from the network.

The phase pipeline is an SVG drawn here (geometry only; the template emits the elements, so
every label goes through the same autoescaping as the rest of the page). Phases wrap into rows
in a snake order so arrows stay short and never cross. It is drawn twice, in rows of four and in
one column, and the page's CSS shows the one that fits the screen: a drawing scaled down to a
phone's width would leave its labels too small to read.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from policyrun.trace.model import Trace

BUILTIN_TEMPLATE = "report.html.j2"

_COLUMNS = 4
_BOX_W, _BOX_H = 260, 64
_GAP_X, _GAP_Y = 44, 40
_MARGIN = 16
_ID_CHARS = 32  # monospace characters that fit in a box next to the step number
_TITLE_CHARS = 38


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "…"


def pipeline_layout(phases: list[dict[str, Any]], columns: int = _COLUMNS) -> dict[str, Any]:
    """Boxes and arrows for the pipeline diagram, from the view's phases."""
    columns = max(1, min(columns, len(phases) or 1))
    nodes = []
    for i, phase in enumerate(phases):
        row, col = divmod(i, columns)
        if row % 2:
            col = columns - 1 - col  # snake: odd rows run right to left
        x = _MARGIN + col * (_BOX_W + _GAP_X)
        y = _MARGIN + row * (_BOX_H + _GAP_Y)
        nodes.append({"x": x, "y": y, "w": _BOX_W, "h": _BOX_H, "cx": x + _BOX_W // 2, "cy": y + _BOX_H // 2,
                      "id": phase["id"], "label": _clip(f"{phase['index']}. {phase['id']}", _ID_CHARS),
                      "sub": _clip(f"{phase['status']} · {phase['title'] or phase['reason']}", _TITLE_CHARS),
                      "status": phase["status"],
                      "tooltip": f"{phase['id']}: {phase['status']} — {phase['blocker'] or phase['reason']}"})
    edges = []
    for a, b in zip(nodes, nodes[1:], strict=False):
        if a["y"] == b["y"]:
            left_to_right = b["x"] > a["x"]
            x1 = a["x"] + (_BOX_W if left_to_right else 0)
            x2 = b["x"] + (0 if left_to_right else _BOX_W)
            edges.append({"d": f"M{x1},{a['cy']} L{x2 + (-4 if left_to_right else 4)},{b['cy']}"})
        else:
            edges.append({"d": f"M{a['cx']},{a['y'] + _BOX_H} L{b['cx']},{b['y'] - 4}"})
    rows = (len(nodes) + columns - 1) // columns
    width = 2 * _MARGIN + columns * _BOX_W + (columns - 1) * _GAP_X
    height = 2 * _MARGIN + rows * _BOX_H + max(rows - 1, 0) * _GAP_Y
    return {"nodes": nodes, "edges": edges, "width": width, "height": height}


def render_html(trace: Trace, *, template: Path | None = None, context: Mapping[str, Any] | None = None) -> str:
    from policyrun.render.markdown import template_variables
    from policyrun.render.mermaid import PALETTE
    from policyrun.render.templating import render_template

    variables = template_variables(trace, context)
    variables["pipeline"] = pipeline_layout(variables["report"]["phases"])
    variables["pipeline_narrow"] = pipeline_layout(variables["report"]["phases"], columns=1)
    variables["palette"] = PALETTE
    return render_template(template, BUILTIN_TEMPLATE, variables, html=True)
