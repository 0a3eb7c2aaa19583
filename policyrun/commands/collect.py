"""`policyrun collect`: run a rulebook's probes for one mode and write a facts snapshot.

A probe that fails is recorded as an error fact, and the snapshot is written all the same: it says
what could not be collected and why, and `evaluate --facts` treats those facts as missing. The
command then exits 2, like a BLOCKED phase, because the facts are incomplete; a probe that did not
run only because an optional input was not set is no failure (exit 0).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from policyrun.commands.evaluate import add_rulebook_args, rulebook_request
from policyrun.errors import UsageError

if TYPE_CHECKING:
    from policyrun.app.collect import CollectResult


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("collect", help="run a rulebook's probes and write a facts snapshot",
                       description="Run the probes of RULEBOOK for one mode (in parallel where their "
                                   "parameters allow) and write every fact, or the error that stopped it, with "
                                   "provenance. Progress goes to stderr. Exit 0 when every probe collected its "
                                   "fact (or did not run because an optional input is unset), 2 when a probe "
                                   "failed (the snapshot is written all the same), 3 on a usage or rulebook error.")
    add_rulebook_args(p)
    p.add_argument("--only", action="append", default=[], metavar="PROBE",
                   help="collect only this probe and the probes its parameters read (repeatable)")
    p.add_argument("-o", "--output", default="-", metavar="FILE",
                   help="where to write the facts snapshot (default: stdout)")
    p.add_argument("--host-label", metavar="NAME",
                   help="label this host's facts NAME (host-scoped probes: GPUs, stack, processes, environment), so "
                        "snapshots of several hosts merge into a cell with evaluate --facts A --facts B")
    p.add_argument("--cluster", metavar="ray[=ADDRESS]",
                   help="run the host-scoped probes on every alive node of an existing Ray cluster (needs the "
                        "`cluster` extra), the others once here; each node's facts are labelled by its node id")
    p.add_argument("--json", action="store_true",
                   help="print a summary as JSON on stdout: each probe's status, error and duration, and the "
                        "snapshot's path (needs -o FILE)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from policyrun.app.collect import CollectRequest, collect
    from policyrun.collection.progress import make_progress
    from policyrun.evaluate.engine import rulebook_ref
    from policyrun.errors import terminal_text

    if args.json and args.output == "-":
        raise UsageError("--json prints the summary on stdout; write the facts snapshot with -o FILE", code="U003")
    result = collect(CollectRequest(
        rulebook=rulebook_request(args), only=frozenset(args.only) or None,
        output=None if args.output == "-" else Path(args.output), host_label=args.host_label, cluster=args.cluster,
        progress=make_progress(sys.stderr) if args.cluster is None else None))
    if result.written is None:
        from policyrun.safetext import json_controls

        sys.stdout.write(json_controls(result.text))  # the same JSON, inert on a terminal and in a CI log
    facts, failed, not_run, not_applicable = result.facts, result.failed, result.not_run, result.not_applicable
    code = result.exit_code
    where = "stdout" if args.output == "-" else args.output
    parts = [f"{len(facts.facts)} facts", f"{len(failed)} failed" + (f" ({', '.join(failed)})" if failed else "")]
    if not_run:
        parts.append(f"{len(not_run)} not run for an unset input ({', '.join(sorted(not_run))})")
    if not_applicable:
        parts.append(f"{len(not_applicable)} not applicable ({', '.join(sorted(not_applicable))})")
    line = f"collect: {', '.join(parts)} → {where}"
    if failed:
        line += f"\ncollect: exit {code}: the snapshot is incomplete; evaluating it treats those facts as missing"
    sys.stderr.write(terminal_text(f"collect: {rulebook_ref(result.rb).identity()}\n{line}") + "\n")
    if args.json:
        summary = _summary(result, Path(args.output))
        sys.stdout.write(json.dumps(summary, indent=2, ensure_ascii=False) + "\n")
    return code


def _summary(result: CollectResult, output: Path) -> dict[str, Any]:
    """The `--json` summary; its probe rows have the fields of the MCP `collect` tool's (docs/agents.md)."""
    probes = [{"probe": p.probe, "kind": p.kind, "status": p.status, "ok": p.ok,
               "error": {"code": p.error_code, "message": p.error_message} if p.error_code is not None else None,
               "duration_s": p.duration_s} for p in result.probes()]
    return {"exit_code": result.exit_code, "rulebook": result.rb.display, "rulebook_sha256": result.rb.sha256,
            "mode": result.mode, "facts_path": str(output.resolve()), "facts_sha256": result.facts.digest(),
            "count": len(probes), "errors": sum(not p["ok"] for p in probes), "failed": result.failed,
            "not_run": sorted(result.not_run | result.not_applicable), "probes": probes,
            "seconds": round(result.seconds, 3)}
