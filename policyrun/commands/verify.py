"""`policyrun verify FILE`: re-evaluate a trace and list every difference, or check a DSSE-signed
statement (and, given --trace or --facts, what it claims)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from policyrun.errors import EXIT_FAIL, EXIT_OK, terminal_text


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("verify", help="re-evaluate a trace or check a signed attestation",
                       description="FILE is a trace: evaluate its rulebook again over --facts with the trace's "
                                   "mode, inputs and --fail-on, and compare field by field (generated_at "
                                   "aside). FILE is a DSSE envelope (report --sign-key): check its signature "
                                   "with --key, then, given --trace or --facts, what the statement claims. "
                                   "Exit 0 verified, 1 a difference or an invalid signature, 3 another "
                                   "rulebook or other facts than the claim pins, or bad usage.")
    p.add_argument("file", type=Path, metavar="FILE", help="trace.json, or a DSSE envelope")
    p.add_argument("--facts", action="append", type=Path, default=[], metavar="FILE",
                   help="the facts snapshot(s) the trace was evaluated over (merged like evaluate's)")
    p.add_argument("--rulebook", metavar="RULEBOOK",
                   help="the rulebook file (default: the path or shipped name the trace records)")
    p.add_argument("--inputs", type=Path, metavar="FILE", help="override the trace's inputs (reported as differences)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="sets",
                   help="override one input (repeatable; reported as a difference)")
    p.add_argument("--allow-stale-facts", action="store_true",
                   help="verify over facts that evaluate would refuse (F005) although the trace does not record it")
    p.add_argument("--waivers", type=Path, metavar="FILE",
                   help="the waivers file the trace was evaluated with (its sha256 must be the one the trace records)")
    p.add_argument("--key", action="append", type=Path, default=[], metavar="PUB.pem",
                   help="a trusted ed25519 public key, or a folder of *.pem keys (repeatable; envelopes: one "
                        "signature must verify with one of them)")
    p.add_argument("--rulebook-sha256", action="append", default=[], metavar="HEX", dest="rulebook_sha256",
                   help="the rulebook sha256 you trust (repeatable: any of them); another one fails (exit 1)")
    p.add_argument("--ref", action="append", default=[], metavar="NAME=SHA", dest="refs",
                   help="the commit a named ref must have resolved to in the facts (repeatable); a moved tag fails "
                        "(exit 1)")
    p.add_argument("--trace", type=Path, metavar="TRACE",
                   help="envelopes: the trace the statement was made from, to compare with it")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from policyrun.app.verify import VerifyRequest, verify

    outcome = verify(VerifyRequest(args.file, facts=tuple(args.facts), rulebook=args.rulebook, inputs_file=args.inputs,
                                   sets=tuple(args.sets), allow_stale_facts=args.allow_stale_facts,
                                   waivers=args.waivers, keys=tuple(args.key),
                                   rulebook_sha256=tuple(args.rulebook_sha256), refs=tuple(args.refs),
                                   trace=args.trace))
    for note in outcome.notes:
        sys.stderr.write(terminal_text(f"policyrun: note: {note}\n"))
    sys.stdout.write(terminal_text("".join(f"{line}\n" for line in outcome.lines)))
    return EXIT_OK if outcome.ok else EXIT_FAIL
