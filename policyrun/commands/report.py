"""`policyrun report TRACE --format FMT [-o FILE]`: render a saved trace."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from policyrun.errors import Location, UsageError

_FORMATS = ("md", "html", "junit", "sarif", "json")


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("report", help="render a trace as md, html, junit, sarif or json",
                       description="Render TRACE (a trace.json from `policyrun evaluate`) as a Markdown "
                                   "completion report, a self-contained HTML page, JUnit XML (one testcase "
                                   "per phase), SARIF (non-PASS phases at their rulebook lines) or the trace "
                                   "JSON. Exit 0, or 3 on bad usage, an unreadable trace or a template error.")
    p.add_argument("trace", type=Path, metavar="TRACE")
    p.add_argument("--format", "-f", choices=_FORMATS, default="md")
    p.add_argument("-o", "--output", default="-", metavar="FILE", help="output file; - or absent: stdout")
    p.add_argument("--template", type=Path, metavar="FILE",
                   help="a Jinja2 template to use instead of the built-in one (md and html)")
    p.add_argument("--context", type=Path, metavar="FILE",
                   help="YAML or JSON mapping passed to templates as `context` (e.g. impact_matrix, refs)")
    p.set_defaults(func=run)


def load_context(path: Path | None) -> dict[str, Any]:
    if path is None:
        return {}
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) else "not UTF-8"
        raise UsageError(f"cannot read template context: {why}", code="R006", location=Location(str(path))) from None
    import yaml

    try:
        data = yaml.safe_load(text) if path.suffix in (".yaml", ".yml") else json.loads(text)
    except (ValueError, yaml.YAMLError) as exc:
        raise UsageError(f"template context is not valid {'YAML' if path.suffix in ('.yaml', '.yml') else 'JSON'}:"
                         f" {exc}", code="R006", location=Location(str(path))) from None
    if not isinstance(data, dict):
        raise UsageError("template context must be a mapping (keys become `context.<key>` in templates)",
                         code="R006", location=Location(str(path)))
    return data


def run(args: argparse.Namespace) -> int:
    from policyrun.render import render
    from policyrun.trace import load_trace

    trace = load_trace(args.trace)
    text = render(trace, args.format, template=args.template, context=load_context(args.context))
    if args.output == "-":
        sys.stdout.write(text)
        return 0
    out = Path(args.output)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cannot write report: {exc.strerror}", code="R005", location=Location(str(out))) from None
    return 0
