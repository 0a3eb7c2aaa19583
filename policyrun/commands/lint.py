"""`policyrun lint [PATH ...]`: located findings, sorted; exit 1 when any is an error."""

from __future__ import annotations

import argparse
import json
import sys


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("lint", help="check rulebooks for errors, with file:line:col",
                       description="Check rulebook files or folders (default: rulebooks/). Prints "
                                   "`path:line:col: CODE message`; exit 0 when clean, 1 on any error.")
    p.add_argument("paths", nargs="*", default=["rulebooks"], metavar="PATH")
    p.add_argument("--format", choices=["text", "json", "sarif", "github"], default="text",
                   help="github: GitHub Actions workflow commands, one annotation per finding")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from policyrun.app.lint import LintRequest, lint

    result = lint(LintRequest(tuple(args.paths)))
    files, findings, errors = result.files, result.findings, result.errors
    if args.format == "json":
        json.dump([{"code": f.code, "severity": f.severity, "message": f.message, "file": f.location.file,
                    "line": f.location.line, "column": f.location.column, "node": f.node, "excerpt": f.excerpt}
                   for f in findings],
                  sys.stdout, indent=2)
        sys.stdout.write("\n")
    elif args.format == "sarif":
        from policyrun import __version__
        from policyrun.render.sarif import render_sarif

        sys.stdout.write(render_sarif(findings, tool_version=__version__))
    elif args.format == "github":
        from policyrun.render.github import render_lint_github

        sys.stdout.write(render_lint_github(findings))
    else:
        for f in findings:
            sys.stdout.write(f.render() + "\n")
        sys.stderr.write(f"{len(files)} file(s) checked: {errors} error(s), {result.warnings} warning(s)\n")
    return result.exit_code
