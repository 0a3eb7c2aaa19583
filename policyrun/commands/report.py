"""`policyrun report TRACE --format FMT [-o FILE]`: render a saved trace."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from policyrun.errors import PolicyrunError, UsageError, terminal_text


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("report", help="render a trace as md, html, junit, sarif or json",
                       description="Render TRACE (a trace.json from `policyrun evaluate`) as a Markdown "
                                   "completion report, a self-contained HTML page, JUnit XML (one testcase "
                                   "per phase), SARIF (non-PASS phases at their rulebook lines) or the trace "
                                   "JSON. Exit 0, or 3 on bad usage, an unreadable trace or a template error.")
    p.add_argument("trace", type=Path, metavar="TRACE")
    from policyrun.render import FORMATS

    p.add_argument("--format", "-f", choices=list(FORMATS), default="md")
    p.add_argument("-o", "--output", default="-", metavar="FILE", help="output file; - or absent: stdout")
    p.add_argument("--template", type=Path, metavar="FILE",
                   help="a Jinja2 template to use instead of the built-in one (md and html)")
    p.add_argument("--context", type=Path, metavar="FILE",
                   help="YAML or JSON mapping passed to templates as `context` (e.g. impact_matrix, refs)")
    p.add_argument("--force", action="store_true",
                   help="render a trace that fails its consistency checks (hand-edited?) under a warning banner")
    p.set_defaults(func=run)


def load_context(path: Path | None) -> dict[str, Any]:
    """A policy-sized YAML (`.yaml`, `.yml`) or JSON file, through the guarded loaders (bounded size
    and nesting, no alias bombs, no duplicate keys), errors located."""
    if path is None:
        return {}
    from policyrun import limits
    from policyrun.errors import Location

    if path.suffix in (".yaml", ".yml"):
        from policyrun.yamlsource import load_yaml_file

        try:
            data, _ = load_yaml_file(path)
        except PolicyrunError as exc:
            code = "R006" if exc.code in ("Y006", "Y007") else exc.code
            raise UsageError(f"template context: {exc.message}", code=code, location=exc.location) from None
    else:
        from policyrun.jsonfile import parse_json, read_json_text

        text = read_json_text(path, what="template context", code="R006", max_bytes=limits.POLICY_BYTES)
        data = parse_json(text, str(path), what="template context", code="R006", max_depth=limits.POLICY_DEPTH)
    if not isinstance(data, dict):
        raise UsageError("template context must be a mapping (keys become `context.<key>` in templates)",
                         code="R006", location=Location(str(path)))
    return data


def run(args: argparse.Namespace) -> int:
    from policyrun.render import add_banner, render
    from policyrun.trace import load_trace
    from policyrun.traceconsistency import inconsistencies

    trace = load_trace(args.trace, force=args.force)
    text = render(trace, args.format, template=args.template, context=load_context(args.context))
    if args.force and (problems := inconsistencies(trace)):
        text = add_banner(text, args.format, problems)
        sys.stderr.write(terminal_text(f"policyrun: warning: INCONSISTENT TRACE rendered with --force "
                                       f"({len(problems)} problem(s))\n"))
    if args.output == "-":
        sys.stdout.write(text)
        return 0
    from policyrun.outfiles import write_file

    write_file(Path(args.output), text, code="R005", fix="choose another -o path")
    return 0
