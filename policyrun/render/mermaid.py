"""The phase pipeline as a Mermaid state diagram, each state coloured by its status.

GitHub, GitLab and most Markdown viewers render ```mermaid blocks, so the Markdown report gets a
picture without shipping an image. Labels are reduced to a safe character set: a blocker comes
from facts and must not be able to break the diagram's syntax.
"""

from __future__ import annotations

import re

from policyrun.model import STATUSES
from policyrun.trace.model import Trace

# fill, stroke, text colour per status; the HTML report uses the same palette.
PALETTE: dict[str, tuple[str, str, str]] = {
    "PASS": ("#dafbe1", "#1a7f37", "#0f5323"),
    "WARN": ("#fff8c5", "#9a6700", "#633c01"),
    "FAIL": ("#ffebe9", "#cf222e", "#82071e"),
    "BLOCKED": ("#fff1e5", "#bc4c00", "#762c00"),
    "STOPPED": ("#fbefff", "#8250df", "#512a97"),
    "SKIPPED": ("#f6f8fa", "#8c959f", "#57606a"),
}
_RESERVED = frozenset({"end", "state", "note", "direction", "classdef", "class", "style", "click",
                       "left", "right", "of", "as", "fork", "join", "choice", "default"})
_UNSAFE = re.compile(r"[^A-Za-z0-9 _.,:()/=+'@-]+")
_NOTE_LIMIT = 72


def _state_id(phase: str) -> str:
    return f"phase_{phase}" if phase.lower() in _RESERVED else phase


def _label(text: str, limit: int | None = None) -> str:
    text = _UNSAFE.sub(" ", text).strip()
    text = re.sub(r"\s+", " ", text)
    if limit and len(text) > limit:
        text = text[:limit - 3].rstrip() + "..."
    return text


def render_mermaid(trace: Trace) -> str:
    """`stateDiagram-v2` source (without the ``` fence)."""
    lines = ["stateDiagram-v2"]
    for status in STATUSES:
        fill, stroke, color = PALETTE[status]
        lines.append(f"    classDef {status} fill:{fill},stroke:{stroke},color:{color},stroke-width:2px")
    ids = [_state_id(p.phase) for p in trace.phases]
    for phase, sid in zip(trace.phases, ids, strict=True):
        lines.append(f'    state "{_label(phase.phase)} - {phase.status}" as {sid}')
    if ids:
        lines.append(f"    [*] --> {ids[0]}")
        lines.extend(f"    {a} --> {b}" for a, b in zip(ids, ids[1:], strict=False))
        lines.append(f"    {ids[-1]} --> [*]")
    for phase, sid in zip(trace.phases, ids, strict=True):
        if phase.status in ("FAIL", "BLOCKED", "STOPPED"):
            note = _label(phase.blocker or phase.reason, _NOTE_LIMIT)
            if note:
                lines.append(f"    note right of {sid} : {note}")
    for status in STATUSES:
        members = [sid for p, sid in zip(trace.phases, ids, strict=True) if p.status == status]
        if members:
            lines.append(f"    class {', '.join(members)} {status}")
    return "\n".join(lines) + "\n"
