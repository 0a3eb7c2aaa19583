"""`policyrun evaluate`: facts (from --facts, or collected now) → trace.json + a phase table."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from policyrun.errors import UsageError


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


def run(args: argparse.Namespace) -> int:
    from policyrun.engine import evaluate, load_checked
    from policyrun.facts import load_facts, merge_facts
    from policyrun.inputs import resolve_inputs, select_mode

    rb = load_checked(args.rulebook)
    mode = select_mode(rb.model, args.mode)
    inputs = resolve_inputs(rb.model, args.sets, args.inputs)
    from policyrun.render import check_formats, write_run
    from policyrun.render.templatefiles import rulebook_templates

    templates = rulebook_templates(rb.model, rb.file_of(("report",))) if args.format else None
    formats = check_formats([args.format], templates)  # before any probe runs
    from policyrun.commands.report import format_options

    options = format_options(args, formats)
    waivers = _waivers(args.waivers, args.as_of)  # checked before any probe runs
    baseline = None
    if args.baseline is not None:
        from policyrun.baseline import load_baseline

        baseline = load_baseline(args.baseline)  # checked before any probe runs
    notes: dict[str, object] = {}
    if args.facts:
        facts = merge_facts((str(p), load_facts(p)) for p in args.facts)
        notes = _check_snapshot(rb, mode, inputs, facts, allow=args.allow_stale_facts)
    else:
        from policyrun.collect import collect

        from policyrun.engine import check_locations

        facts = collect(rb.model, mode, inputs, base_dir=Path.cwd(), rulebook_dir=rb.file_of(("schemas",)).parent,
                        locations=check_locations(rb))
    kept = None
    if args.keep_facts:
        # Evaluated over the snapshot exactly as written (secret inputs masked, as `collect -o` writes
        # it; keys in the file's order), so the trace's facts_sha256 is the kept file's digest and a
        # later --baseline or verify can check one against the other.
        from policyrun.facts import FactsSnapshot
        from policyrun.inputs import mask_snapshot

        kept = mask_snapshot(facts, rb.model, inputs).to_json()
        facts = FactsSnapshot.model_validate_json(kept)
    from policyrun.tracevalues import VALUES, index_text, keeping_values

    # Values the trace summarises are kept whole in --out/values/, by checksum (policyrun.tracevalues).
    with keeping_values(args.out / VALUES):
        trace = evaluate(rb, mode=mode, inputs=inputs, facts=facts, timestamp=not args.no_timestamp, notes=notes,
                         fail_on_warn=args.fail_on == "warn", waivers=waivers, baseline=baseline)
    index = index_text(trace, args.out / VALUES)
    if index is not None:
        (args.out / VALUES).mkdir(parents=True, exist_ok=True)  # it holds index.json even when nothing fit

    # Rendered first, then written atomically under the folder's lock (policyrun.outfiles).
    from policyrun.render import rulebook_context

    written = write_run(trace, formats, args.out, rulebook_templates=templates, options=options,
                        context=rulebook_context(rb.model),
                        extra={**({"facts.json": kept} if kept is not None else {}),
                               **({f"{VALUES}/index.json": index} if index is not None else {})})
    from policyrun.render.console import print_trace

    print_trace(trace, quiet=args.quiet, as_json=args.json)
    if trace.waivers and not args.json:
        from policyrun.errors import terminal_text

        for warning in trace.waivers.get("warnings", []):
            sys.stderr.write(terminal_text(f"policyrun: warning: {warning}") + "\n")
    if not args.json and not args.quiet:
        sys.stderr.write("wrote " + ", ".join(str(p) for p in written) + "\n")
    return trace.exit_code


def _check_snapshot(rb: Any, mode: str, inputs: dict[str, Any], facts: Any, *, allow: bool) -> dict[str, object]:
    """Refuse facts this rulebook would not have collected (another probe kind, other parameters):
    replaying them would evaluate a different question than the one the trace claims to answer."""
    from policyrun.collect import stale_facts

    from policyrun.engine import check_locations

    stale = stale_facts(rb.model, mode, inputs, facts, check_locations(rb))
    if not stale:
        return {}
    if allow:
        return {"stale_facts": stale}
    lines = "\n".join(f"  {s['probe']}: {s['reason']}" for s in stale[:10])
    more = f"\n  ... and {len(stale) - 10} more" if len(stale) > 10 else ""
    raise UsageError(f"the facts do not match rulebook {rb.display} in mode {mode} with these inputs "
                     f"({len(stale)} probe(s)):\n{lines}{more}\ncollect them again with `policyrun collect`, "
                     "or pass --allow-stale-facts to evaluate them anyway (the trace records it)", code="F005")


def _waivers(path: Path | None, as_of: str | None) -> Any:
    if path is None:
        if as_of is not None:
            raise UsageError("--as-of applies to --waivers", code="U003")
        return None
    from datetime import UTC, date, datetime

    from policyrun.errors import Location
    from policyrun.waivers import Waivers, as_of_refusal, file_sha256, load_waivers_file

    today = datetime.now(UTC).date()
    if as_of is None:
        day = today
    else:
        try:
            day = date.fromisoformat(as_of)
        except ValueError:
            raise UsageError(f"--as-of expects YYYY-MM-DD, got {as_of!r}", code="U003") from None
    parsed, sources, issued_at = load_waivers_file(path)
    # A past --as-of would apply a waiver that has expired: bounded by the file's date (waivers.py).
    refusal = as_of_refusal(day, today, parsed.issued) if as_of is not None else None
    if refusal is not None:
        raise UsageError(refusal, code="U003", location=issued_at or Location(str(path), 1, 1))
    return Waivers(list(parsed.waivers), sources, as_of=day, as_of_given=as_of is not None, file=str(path),
                   sha256=file_sha256(path))
