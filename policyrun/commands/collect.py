"""`policyrun collect`: run a rulebook's probes for one mode and write a facts snapshot.

A probe that fails is recorded as an error fact, not a failed command: the snapshot says what
could not be collected and why, and `evaluate --facts` treats those facts as missing.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from policyrun.commands.evaluate import add_rulebook_args
from policyrun.errors import EXIT_OK


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("collect", help="run a rulebook's probes and write a facts snapshot",
                       description="Run the probes of RULEBOOK for one mode (in parallel where their "
                                   "parameters allow) and write every fact, or the error that stopped it, with "
                                   "provenance. Progress goes to stderr.")
    add_rulebook_args(p)
    p.add_argument("--only", action="append", default=[], metavar="PROBE",
                   help="collect only this probe and the probes its parameters read (repeatable)")
    p.add_argument("-o", "--output", default="-", metavar="FILE",
                   help="where to write the facts snapshot (default: stdout)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from policyrun.collect import collect, make_progress
    from policyrun.engine import check_locations, load_checked
    from policyrun.inputs import resolve_inputs, select_mode

    rb = load_checked(args.rulebook)
    mode = select_mode(rb.model, args.mode)
    inputs = resolve_inputs(rb.model, args.sets, args.inputs)
    facts = collect(rb.model, mode, inputs, base_dir=Path.cwd(), progress=make_progress(sys.stderr),
                    only=set(args.only) or None, rulebook_dir=rb.file_of(("schemas",)).parent,
                    locations=check_locations(rb))
    text = facts.to_json()
    if args.output == "-":
        sys.stdout.write(text)
    else:
        from policyrun.outfiles import write_file

        write_file(Path(args.output), text, code="U007", fix="choose another -o path")
    errors = sorted(pid for pid, fact in facts.facts.items() if not fact.ok)
    where = "stdout" if args.output == "-" else args.output
    detail = f" ({', '.join(errors)})" if errors else ""
    from policyrun.errors import terminal_text

    sys.stderr.write(terminal_text(f"collect: {len(facts.facts)} facts, {len(errors)} errors{detail} → {where}") + "\n")
    return EXIT_OK
