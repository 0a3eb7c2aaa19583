"""`policyrun evaluate`: facts (from --facts, or collected now) → trace.json + a phase table."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from policyrun.app.binding import RulebookRequest


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("evaluate", help="evaluate a rulebook against facts; write the trace",
                       description="Evaluate RULEBOOK (a path or a shipped name) in one mode. With --facts, "
                                   "no probe runs; otherwise the rulebook's probes collect facts first.")
    add_rulebook_args(p)
    p.add_argument("--facts", action="append", type=Path, default=[], metavar="FILE",
                   help="facts snapshot (repeatable; merged, conflicts are an error)")
    p.add_argument("--out", type=Path, default=Path(".policyrun"), metavar="DIR",
                   help="where trace.json (and --format reports) go (default: .policyrun/)")
    p.add_argument("--format", default="", metavar="FMT[,FMT]",
                   help="also write reports: md, html, junit, sarif, json, github (workflow annotations), or a "
                        "report the rulebook declares under report.templates")
    from policyrun.commands.report import add_format_options

    add_format_options(p)
    out = p.add_mutually_exclusive_group()
    out.add_argument("--quiet", "-q", action="store_true", help="print only the verdict line")
    out.add_argument("--json", action="store_true", help="print the trace as JSON to stdout")
    p.add_argument("--waivers", type=Path, metavar="FILE",
                   help="waivers file: governed, expiring exceptions to checks (docs/waivers.md)")
    p.add_argument("--as-of", metavar="YYYY-MM-DD",
                   help="the date waivers are checked against (default: today, UTC; not before the waivers "
                        "file's `issued:` date, or today when it has none; always reported as a warning)")
    p.add_argument("--fail-on", choices=["warn"], default=None,
                   help="exit 1 when a phase ends WARN (default: warnings are reported and exit 0)")
    p.add_argument("--allow-stale-facts", action="store_true",
                   help="evaluate --facts collected with other probe kinds or parameters (recorded in the trace)")
    p.add_argument("--keep-facts", action="store_true",
                   help="also write the facts snapshot evaluated over as facts.json in --out (listed in its "
                        "manifest), so a later run can read it with --baseline")
    p.add_argument("--baseline", type=Path, metavar="DIR",
                   help="an earlier evaluation's --out folder, readable in checks as `baseline` (its verdict, "
                        "phase statuses and, when kept with --keep-facts, its facts); recorded in the trace")
    p.add_argument("--no-timestamp", action="store_true",
                   help="omit generated_at so the trace is byte-for-byte reproducible")
    p.set_defaults(func=run)


def add_rulebook_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("rulebook", nargs="?", help="rulebook path or shipped name (default: ./policyrun.yaml)")
    p.add_argument("--mode", "-m", help="mode to evaluate (required when the rulebook has several)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="sets",
                   help="set an input (repeatable)")
    p.add_argument("--inputs", type=Path, metavar="FILE", help="YAML or JSON file of inputs")


def rulebook_request(args: argparse.Namespace) -> RulebookRequest:
    """RULEBOOK --mode --set --inputs, as the application layer takes them."""
    from policyrun.app.binding import RulebookRequest

    return RulebookRequest(args.rulebook, args.mode, tuple(args.sets), args.inputs)


def run(args: argparse.Namespace) -> int:
    from policyrun.app.evaluate import EvaluateRequest, evaluate

    result = evaluate(EvaluateRequest(
        rulebook=rulebook_request(args), facts_files=tuple(args.facts), out_dir=args.out, formats=(args.format,),
        junit_include_outside_mode=args.junit_include_outside_mode, sarif_located_only=args.sarif_located_only,
        waivers=args.waivers, as_of=args.as_of, baseline=args.baseline, fail_on_warn=args.fail_on == "warn",
        allow_stale_facts=args.allow_stale_facts, keep_facts=args.keep_facts, timestamp=not args.no_timestamp))
    trace = result.trace
    from policyrun.render.console import print_trace

    print_trace(trace, quiet=args.quiet, as_json=args.json)
    if trace.waivers and not args.json:
        from policyrun.errors import terminal_text

        for warning in trace.waivers.get("warnings", []):
            sys.stderr.write(terminal_text(f"policyrun: warning: {warning}") + "\n")
    if not args.json and not args.quiet:
        sys.stderr.write("wrote " + ", ".join(str(p) for p in result.written) + "\n")
    return result.exit_code
