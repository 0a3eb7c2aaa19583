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
import time
from pathlib import Path
from typing import Any

from policyrun.commands.evaluate import add_rulebook_args
from policyrun.errors import EXIT_BLOCKED, EXIT_OK, UsageError


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
    from policyrun.collect import NOT_APPLICABLE, collect, make_progress, plan, unset_input_probes
    from policyrun.engine import check_locations, load_checked
    from policyrun.errors import terminal_text
    from policyrun.facts import PER_HOST
    from policyrun.inputs import mask_snapshot, resolve_inputs, select_mode

    if args.json and args.output == "-":
        raise UsageError("--json prints the summary on stdout; write the facts snapshot with -o FILE", code="U003")
    started = time.perf_counter()
    rb = load_checked(args.rulebook)
    mode = select_mode(rb.model, args.mode)
    inputs = resolve_inputs(rb.model, args.sets, args.inputs)
    only = set(args.only) or None
    if args.cluster is not None:
        from policyrun.cluster import collect_cluster, parse_cluster

        if args.host_label is not None or only is not None:
            raise UsageError("--cluster labels each node by its node id and collects every probe of the mode; "
                             "leave out --host-label and --only", code="U003")
        facts = collect_cluster(rb.model, mode, inputs, address=parse_cluster(args.cluster), base_dir=Path.cwd(),
                                rulebook_dir=rb.file_of(("schemas",)).parent, locations=check_locations(rb))
    else:
        from policyrun.hosts import check_label, label_snapshot

        label = check_label(args.host_label) if args.host_label is not None else None
        facts = collect(rb.model, mode, inputs, base_dir=Path.cwd(), progress=make_progress(sys.stderr),
                        only=only, rulebook_dir=rb.file_of(("schemas",)).parent, locations=check_locations(rb))
        if label is not None:
            facts = label_snapshot(facts, rb.model, label)
    text = mask_snapshot(facts, rb.model, inputs).to_json()
    if args.output == "-":
        from policyrun.safetext import json_controls

        sys.stdout.write(json_controls(text))  # the same JSON, inert on a terminal and in a CI log
    else:
        from policyrun.outfiles import write_file

        write_file(Path(args.output), text, code="U007", fix="choose another -o path")
    deps = plan(rb.model, mode, only).deps
    not_run = unset_input_probes(facts, deps)
    # A probe whose `when` is false (and what waits for it) was left out by the rulebook's choice.
    not_applicable = unset_input_probes(facts, deps, NOT_APPLICABLE) - not_run
    failed = sorted(pid for pid, fact in facts.facts.items()
                    if not fact.ok and pid not in not_run and pid not in not_applicable
                    and fact.error is not None and fact.error.code != PER_HOST)
    # In a cell, each host's failures are named by host (`probe@host`).
    failed += sorted(f"{pid}@{label}" for label, by_pid in (facts.by_host or {}).items()
                     for pid, fact in by_pid.items() if not fact.ok and pid not in not_run | not_applicable)
    code = EXIT_BLOCKED if failed else EXIT_OK
    where = "stdout" if args.output == "-" else args.output
    parts = [f"{len(facts.facts)} facts", f"{len(failed)} failed" + (f" ({', '.join(failed)})" if failed else "")]
    if not_run:
        parts.append(f"{len(not_run)} not run for an unset input ({', '.join(sorted(not_run))})")
    if not_applicable:
        parts.append(f"{len(not_applicable)} not applicable ({', '.join(sorted(not_applicable))})")
    line = f"collect: {', '.join(parts)} → {where}"
    if failed:
        line += f"\ncollect: exit {code}: the snapshot is incomplete; evaluating it treats those facts as missing"
    from policyrun.engine import rulebook_ref

    sys.stderr.write(terminal_text(f"collect: {rulebook_ref(rb).identity()}\n{line}") + "\n")
    if args.json:
        summary = _summary(facts, rb, mode, Path(args.output), failed, not_run | not_applicable, code,
                           time.perf_counter() - started)
        sys.stdout.write(json.dumps(summary, indent=2, ensure_ascii=False) + "\n")
    return code


def _summary(facts: Any, rb: Any, mode: str, output: Path, failed: list[str], not_run: set[str], code: int,
             seconds: float) -> dict[str, Any]:
    """The `--json` summary; its probe rows have the fields of the MCP `collect` tool's (docs/agents.md)."""
    probes = []
    for pid, fact in facts.facts.items():
        err = fact.error
        status = "ok" if err is None else ("not_run" if pid in not_run else "failed")  # not_run: by choice
        probes.append({"probe": pid, "kind": fact.provenance.kind, "status": status, "ok": err is None,
                       "error": {"code": err.code, "message": err.message} if err else None,
                       "duration_s": fact.provenance.duration_s})
    return {"exit_code": code, "rulebook": rb.display, "rulebook_sha256": rb.sha256, "mode": mode, "facts_path": str(output.resolve()),
            "facts_sha256": facts.digest(), "count": len(probes), "errors": sum(not p["ok"] for p in probes),
            "failed": failed, "not_run": sorted(not_run), "probes": probes, "seconds": round(seconds, 3)}
