"""`policyrun lint [PATH ...]`: located findings, sorted; exit 1 when any is an error."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # lint's start-up imports nothing it can avoid (docs/lint.md)
    from collections.abc import Callable

    from policyrun.errors import Finding


def _paths(args: list[str]) -> list[Path]:
    """Files as given; folders contribute their *.yaml / *.yml files (not recursive); a name of a
    shipped rulebook stands for that file, even where a folder of that name is here."""
    from policyrun.errors import UsageError
    from policyrun.locate import is_path_form, resolve_ref, shipped_rulebooks

    out: list[Path] = []
    for arg in args:
        p = Path(arg)
        if p.is_dir() and (is_path_form(arg) or arg not in shipped_rulebooks()):
            # `*.test.yaml` files beside a rulebook are its test suites (`policyrun test`), not rulebooks.
            files = sorted(f for f in [*p.glob("*.yaml"), *p.glob("*.yml")] if not f.stem.endswith(".test"))
            if not files:
                raise UsageError(f"{arg}: no *.yaml or *.yml files in this folder", code="U009")
            out.extend(files)
        else:
            out.append(resolve_ref(arg))
    return out


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("lint", help="check rulebooks for errors, with file:line:col",
                       description="Check rulebook files or folders (default: rulebooks/). Prints "
                                   "`path:line:col: CODE message`; exit 0 when clean, 1 on any error.")
    p.add_argument("paths", nargs="*", default=["rulebooks"], metavar="PATH")
    p.add_argument("--format", choices=["text", "json", "sarif", "github"], default="text",
                   help="github: GitHub Actions workflow commands, one annotation per finding")
    p.set_defaults(func=run)


def lint_paths(paths: list[str], allow: Callable[[Path], None] | None = None) -> tuple[list[Path], list[Finding]]:
    """The files PATHs name (folders searched, shipped names resolved) and their findings, sorted.
    Shared by the command and the MCP tool (whose `allow` refuses a file outside its roots before any is read)."""
    from policyrun import lintcache
    from policyrun.errors import Finding

    findings: list[Finding] = []
    files = _paths(paths)
    if allow is not None:
        for path in files:
            allow(path)
    for path in files:
        # The cache answers without importing the rulebook model, YAML or CEL (docs/lint.md).
        cached = lintcache.lookup(path)
        if cached is None:
            from policyrun.lint import lint_file

            cached = lint_file(path)
        findings.extend(cached)
    return files, sorted(set(findings), key=Finding.sort_key)


def run(args: argparse.Namespace) -> int:
    files, findings = lint_paths(args.paths)
    errors = sum(f.severity == "error" for f in findings)
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
        warnings = len(findings) - errors
        sys.stderr.write(f"{len(files)} file(s) checked: {errors} error(s), {warnings} warning(s)\n")
    return 1 if errors else 0
