"""`policyrun verify FILE`: re-evaluate a trace and list every difference, or check a DSSE-signed
statement (and, given --trace or --facts, what it claims)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from policyrun.errors import EXIT_FAIL, EXIT_OK, UsageError, terminal_text


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
    from policyrun import dsse
    from policyrun.verify import Request, read_claim_file, verify_envelope, verify_trace

    request = Request(facts=list(args.facts), rulebook=args.rulebook, inputs_file=args.inputs, sets=list(args.sets),
                      allow_stale=args.allow_stale_facts, waivers=args.waivers, pins=_pins(args))
    if request.pins and request.pins.refs and not request.facts:
        raise UsageError("--ref is checked against the facts: pass the facts snapshot with --facts FILE", code="V004")
    data = read_claim_file(args.file)
    if dsse.is_envelope(data):
        outcome = verify_envelope(args.file, data, args.key, request, args.trace)
    elif isinstance(data, dict) and str(data.get("_type", "")).startswith("https://in-toto.io/Statement/"):
        raise UsageError("this is an unsigned in-toto statement, which anyone could have written; verify a signed "
                         "one (report --sign-key KEY.pem), or the trace it was made from", code="V005")
    else:
        if args.key or args.trace:
            raise UsageError("--key and --trace apply to a DSSE envelope; FILE is a trace (verify it with --facts)",
                             code="V009")
        outcome = verify_trace(args.file, request)
    for note in outcome.notes:
        sys.stderr.write(terminal_text(f"policyrun: note: {note}\n"))
    sys.stdout.write(terminal_text("".join(f"{line}\n" for line in outcome.lines)))
    return EXIT_OK if outcome.ok else EXIT_FAIL


def _pins(args: argparse.Namespace) -> Any:
    import re

    from policyrun.verify import Pins

    hexes = [h.lower() for h in args.rulebook_sha256]
    for h in hexes:
        if not re.fullmatch(r"[0-9a-f]{64}", h):
            raise UsageError(f"--rulebook-sha256 expects 64 hex digits, got {h!r}", code="U003")
    refs: dict[str, str] = {}
    for item in args.refs:
        name, eq, sha = item.partition("=")
        if not eq or not name or not re.fullmatch(r"[0-9a-fA-F]{7,64}", sha):
            raise UsageError(f"--ref expects NAME=COMMIT (a hex commit id, at least 7 digits), got {item!r}",
                             code="U003")
        refs[name] = sha.lower()
    return Pins(hexes, refs) if hexes or refs else None
