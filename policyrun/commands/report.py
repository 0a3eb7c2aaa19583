"""`policyrun report TRACE --format FMT [-o FILE]`: render a saved trace."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from policyrun.errors import PolicyrunError, UsageError, terminal_text

if TYPE_CHECKING:
    from policyrun.render import ReportOptions


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


def format_options(args: argparse.Namespace, formats: list[str], base: Path | None = None) -> ReportOptions:
    """The ReportOptions the command line asks for; an option for a format not written is a
    usage error, as a mistyped intent should not pass silently."""
    from policyrun.render import ReportOptions

    for flag, fmt in (("junit_include_outside_mode", "junit"), ("sarif_located_only", "sarif")):
        if getattr(args, flag) and fmt not in formats:
            fix = f"use --format {fmt}" if args.command == "report" else f"add {fmt} to --format"
            raise UsageError(f"--{flag.replace('_', '-')} applies to the {fmt} report, which this command does not "
                             f"write; {fix}", code="R009")
    return ReportOptions(base=base, junit_outside_mode=args.junit_include_outside_mode,
                         sarif_located_only=args.sarif_located_only)


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
    from policyrun.render import ATTESTATIONS, add_banner, render
    from policyrun.trace import load_trace
    from policyrun.traceconsistency import inconsistencies
    from policyrun.tracevalues import expand

    trace = load_trace(args.trace, force=args.force)
    if args.against is not None and args.format not in ("md", "html"):
        raise UsageError("--against applies to md and html reports (policyrun diff compares traces as text or "
                         "JSON)", code="R009")
    options = format_options(args, [args.format], base=args.base)
    if args.format in ATTESTATIONS:  # never of an inconsistent trace, --force or not
        from policyrun.render.intoto import AttestationOptions, attestation_text

        if args.template or args.context:
            raise UsageError("--template and --context apply to md and html reports", code="R009")
        opts = AttestationOptions(resource_uri=args.resource_uri, policy_uri=args.policy_uri,
                                  verifier_id=args.verifier_id, sign_key=args.sign_key)
        text = attestation_text(trace, args.format, opts, source=args.trace)
    elif args.sign_key or args.resource_uri or args.policy_uri or args.verifier_id:
        raise UsageError("--sign-key, --resource-uri, --policy-uri and --verifier-id apply to --format in-toto "
                         "and vsa", code="R009")
    else:
        own_template, own_context = _rulebook_report(trace, args.format)
        template = args.template or own_template
        # Values the trace summarises are shown whole where they are kept beside it (values/); an
        # attestation (above) states the trace exactly as written.
        whole = expand(trace, args.trace)
        context = {**own_context, **load_context(args.context), **_against(args.against, whole, args.format)}
        text = render(whole, args.format, template=template, context=context, options=options)
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


def _rulebook_report(trace: Any, fmt: str) -> tuple[Path | None, dict[str, Any]]:
    """The template the trace's own rulebook declares for this report (as `evaluate --format` uses)
    and what it tells every report (`report.hardware_phases`), when that rulebook is found with the
    very bytes the trace names; else the built-in template and nothing."""
    if fmt not in ("md", "html") or not trace.rulebook.path:
        return None, {}
    from policyrun.errors import PolicyrunError
    from policyrun.locate import shipped_dir
    from policyrun.render import rulebook_context
    from policyrun.render.templatefiles import rulebook_templates
    from policyrun.rulebook import load_rulebook

    recorded = trace.rulebook.path
    path = shipped_dir() / recorded.removeprefix("<shipped>/") if recorded.startswith("<shipped>/") else Path(recorded)
    try:
        rb = load_rulebook(path)
        if rb.sha256 != trace.rulebook.sha256:
            sys.stderr.write(terminal_text(f"policyrun: note: {recorded} has changed since the trace was written; "
                                           "using the built-in template (pass --template to choose)") + "\n")
            return None, {}
        return rulebook_templates(rb.model, rb.file_of(("report",))).get(fmt), rulebook_context(rb.model)
    except (PolicyrunError, OSError):
        return None, {}


def _against(approved: Path | None, trace: Any, fmt: str) -> dict[str, Any]:
    """Template context `against`: the review of what changed since the approved trace."""
    if approved is None:
        return {}
    from policyrun.errors import display_path
    from policyrun.render.diff import render_diff_text, review_diff
    from policyrun.tracevalues import load_trace_values

    diff = review_diff(load_trace_values(approved), trace)
    return {"against": {"path": display_path(approved), "changed": diff["changed"], "diff": diff,
                        "text": render_diff_text(diff)}}
