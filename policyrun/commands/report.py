"""`policyrun report TRACE --format FMT [-o FILE]`: render a saved trace."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from policyrun.errors import terminal_text


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("report", help="render a trace: md, html, junit, sarif, json, github, in-toto, vsa",
                       description="Render TRACE (a trace.json from `policyrun evaluate`) as a Markdown "
                                   "completion report, a self-contained HTML page, JUnit XML (one testcase "
                                   "per phase), SARIF (failing phases at the code their checks read), the trace "
                                   "JSON, or an in-toto Statement (in-toto: policyrun's verdict; vsa: a SLSA "
                                   "Verification Summary), optionally in a signed DSSE envelope. Exit 0, or 3 "
                                   "on bad usage, an unreadable trace or a template error.")
    p.add_argument("trace", type=Path, metavar="TRACE")
    from policyrun.render import ATTESTATIONS, FORMATS

    p.add_argument("--format", "-f", choices=[*FORMATS, *ATTESTATIONS], default="md")
    p.add_argument("-o", "--output", default="-", metavar="FILE", help="output file; - or absent: stdout")
    p.add_argument("--template", type=Path, metavar="FILE",
                   help="a Jinja2 template to use instead of the built-in one (md and html)")
    p.add_argument("--context", type=Path, metavar="FILE",
                   help="YAML or JSON mapping passed to templates as `context` (e.g. impact_matrix, refs)")
    p.add_argument("--against", type=Path, metavar="APPROVED_TRACE",
                   help="md, html: open the report with what changed since this (approved) trace: verdict, "
                        "statuses, checks, commits, evidence files and their sha256, exceptions, rulebook sha256")
    p.add_argument("--force", action="store_true",
                   help="render a trace that fails its consistency checks (hand-edited?) under a warning banner")
    p.add_argument("--base", type=Path, metavar="DIR", help="sarif, github: make code locations relative to DIR "
                   "(default: the repository most of the trace's probes read)")
    add_format_options(p)
    a = p.add_argument_group("attestations (--format in-toto or vsa; docs/auditors.md)")
    a.add_argument("--sign-key", type=Path, metavar="KEY.pem",
                   help="wrap the statement in a DSSE envelope signed with this ed25519 private key")
    a.add_argument("--resource-uri", metavar="URI",
                   help="vsa: resourceUri (default: a git+file URI of the first repository)")
    a.add_argument("--policy-uri", metavar="URI", help="vsa: policy.uri (default: from the rulebook's path)")
    a.add_argument("--verifier-id", metavar="URI", help="vsa: verifier.id, the identity consumers trust")
    p.set_defaults(func=run)


def add_format_options(p: argparse.ArgumentParser) -> None:
    """Options of one format, named after it (`report` and `evaluate` take the same ones)."""
    p.add_argument("--junit-include-outside-mode", action="store_true",
                   help="junit: also list phases outside the mode, as skipped testcases (default: left out)")
    p.add_argument("--sarif-located-only", action="store_true",
                   help="sarif: leave out results with no location (GitHub code scanning refuses a file with any)")


def run(args: argparse.Namespace) -> int:
    from policyrun.app.report import ReportRequest, report

    result = report(ReportRequest(
        args.trace, args.format, output=None if args.output == "-" else Path(args.output), template=args.template,
        context=args.context, against=args.against, force=args.force, base=args.base,
        junit_include_outside_mode=args.junit_include_outside_mode, sarif_located_only=args.sarif_located_only,
        sign_key=args.sign_key, resource_uri=args.resource_uri, policy_uri=args.policy_uri,
        verifier_id=args.verifier_id))
    for note in result.notes:
        sys.stderr.write(terminal_text(f"policyrun: note: {note}") + "\n")
    if result.inconsistencies:
        sys.stderr.write(terminal_text(f"policyrun: warning: INCONSISTENT TRACE rendered with --force "
                                       f"({len(result.inconsistencies)} problem(s))\n"))
    if result.written is None:
        sys.stdout.write(result.text)
    return 0
