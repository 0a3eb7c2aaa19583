"""Verify: a trace evaluated again and compared, or a DSSE-signed statement checked (and, given a
trace or facts, what it claims). The audit itself is policyrun.audit.verify; this reads what the caller
trusts and tells a trace from an envelope."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from policyrun.audit.pins import Pins
    from policyrun.audit.verify import Outcome


@dataclass(frozen=True)
class VerifyRequest:
    file: Path  # a trace.json, or a DSSE envelope
    facts: tuple[Path, ...] = ()
    rulebook: str | None = None  # default: the path or shipped name the claim records
    inputs_file: Path | None = None
    sets: tuple[str, ...] = ()
    allow_stale_facts: bool = False
    waivers: Path | None = None
    keys: tuple[Path, ...] = ()  # trusted ed25519 public keys, or folders of them
    rulebook_sha256: tuple[str, ...] = ()  # the rulebook hashes the caller trusts (any of them)
    refs: tuple[str, ...] = ()  # NAME=COMMIT: what a named ref must have resolved to
    trace: Path | None = None  # envelopes: the trace the statement was made from


def verify(request: VerifyRequest) -> Outcome:
    from policyrun.trace import dsse
    from policyrun.errors import UsageError
    from policyrun.audit.reevaluate import Request
    from policyrun.audit.verify import read_claim_file, verify_envelope, verify_trace

    audit = Request(facts=list(request.facts), rulebook=request.rulebook, inputs_file=request.inputs_file,
                    sets=list(request.sets), allow_stale=request.allow_stale_facts, waivers=request.waivers,
                    pins=pins(request.rulebook_sha256, request.refs))
    if audit.pins and audit.pins.refs and not audit.facts:
        raise UsageError("--ref is checked against the facts: pass the facts snapshot with --facts FILE", code="V004")
    data = read_claim_file(request.file)
    if dsse.is_envelope(data):
        return verify_envelope(request.file, data, list(request.keys), audit, request.trace)
    if isinstance(data, dict) and str(data.get("_type", "")).startswith("https://in-toto.io/Statement/"):
        raise UsageError("this is an unsigned in-toto statement, which anyone could have written; verify a signed "
                         "one (report --sign-key KEY.pem), or the trace it was made from", code="V005")
    if request.keys or request.trace:
        raise UsageError("--key and --trace apply to a DSSE envelope; FILE is a trace (verify it with --facts)",
                         code="V009")
    return verify_trace(request.file, audit)


def pins(rulebook_sha256: tuple[str, ...], refs: tuple[str, ...]) -> Pins | None:
    """What the caller trusts, checked for form (U003); None when nothing is pinned."""
    import re

    from policyrun.errors import UsageError
    from policyrun.audit.pins import Pins

    hexes = [h.lower() for h in rulebook_sha256]
    for h in hexes:
        if not re.fullmatch(r"[0-9a-f]{64}", h):
            raise UsageError(f"--rulebook-sha256 expects 64 hex digits, got {h!r}", code="U003")
    by_name: dict[str, str] = {}
    for item in refs:
        name, eq, sha = item.partition("=")
        if not eq or not name or not re.fullmatch(r"[0-9a-fA-F]{7,64}", sha):
            raise UsageError(f"--ref expects NAME=COMMIT (a hex commit id, at least 7 digits), got {item!r}",
                             code="U003")
        by_name[name] = sha.lower()
    return Pins(hexes, by_name) if hexes or by_name else None
