"""`policyrun verify`: evaluate again what a trace (or a signed statement) claims, and list every
field that differs.

Load-time consistency checks (policyrun.trace.consistency) catch careless edits; this catches any
edit. The claim names its rulebook (by sha256), mode, inputs, facts (by digest) and --fail-on;
the auditor supplies the facts snapshot. Anything the claim pins that does not match is refused
before evaluating (exit 3): another rulebook or other facts would answer another question. Then
the rulebook is evaluated again and the result compared with the claim field by field, ignoring
only `generated_at`.

This module holds the two entry points (a trace file, a signed envelope) and what they print; the
work is in policyrun.audit.reevaluate (evaluating again), .differences (comparing), .pins (what the
auditor trusts) and .envelopes (signatures and signed statements).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from policyrun.audit.differences import differences, trace_differences
from policyrun.audit.envelopes import (as_json, signed_statement, statement_exceptions, statement_pins,
                                       statement_vs_trace, trusted_keys, verify_signature)
from policyrun.audit.pins import pins_held
from policyrun.audit.reevaluate import Claim, Request, reevaluate
from policyrun.errors import Location, UsageError, display_path
from policyrun.trace.model import Trace


@dataclass(frozen=True)
class Outcome:
    ok: bool
    lines: list[str]  # the result, for stdout
    notes: list[str] = field(default_factory=list)  # for stderr


def verify_trace(path: Path, request: Request) -> Outcome:
    from policyrun.trace.model import TRACE_FORMAT, read_trace
    from policyrun.trace.consistency import inconsistencies

    claimed, written_as = read_trace(path, force=True)  # an inconsistent trace is what verify is for: report it
    again = reevaluate(Claim.of_trace(claimed), request)
    name = display_path(path)
    diffs = trace_differences(claimed, again.trace)
    pins = [f"PIN MISMATCH: {m}" for m in again.pin_mismatches]
    from policyrun.evaluate.tracevalues import problems as value_problems

    # The values the trace summarises, kept beside it (values/): each file must match its checksum.
    kept, kept_notes = value_problems(claimed, path)
    notes = [*again.notes, *kept_notes]
    if written_as != TRACE_FORMAT:
        # The comparison is field by field in this policyrun's format: say so, so an auditor who
        # reads the file itself is not surprised that the checks sit elsewhere there.
        notes.insert(0, f"{display_path(path)} is trace format {written_as}; it was read as format {TRACE_FORMAT} "
                        "(each phase's checks in the field of their kind, nothing else changed: docs/semantics.md, "
                        "\"Trace format 2\") and compared with its re-evaluation in that format")
    if kept:
        lines = [f"VALUE MISMATCH: {p}" for p in kept]
        if diffs or pins:
            lines += [d.line() for d in diffs] + pins
        return Outcome(False, [*lines, f"NOT VERIFIED: {len(kept)} value file(s) beside {name} do not match the "
                                       "checksums the trace records"], notes)
    if not diffs and not pins:
        return Outcome(True, [f"verified: {name} is what its rulebook gives over these facts", *_summary(again.trace),
                              *pins_held(request.pins)], notes)
    lines = [d.line() for d in diffs]
    if problems := inconsistencies(claimed):
        lines += ["the trace also contradicts itself:", *(f"  - {p}" for p in problems)]
    if diffs:
        lines.append(f"NOT VERIFIED: {name} differs from its re-evaluation in {len(diffs)} field(s) "
                     "(generated_at and run are not compared)")
    else:
        lines += [f"{name} is what its rulebook gives over these facts, but not what you pinned:",
                  *_summary(again.trace)]
    lines += pins
    if pins:
        lines.append(f"NOT VERIFIED: {len(pins)} pin(s) you gave do not match")
    return Outcome(False, lines, notes)


def _summary(trace: Trace) -> list[str]:
    from policyrun.trace.exceptions import summary_line, trace_exceptions

    rb = trace.rulebook
    exceptions = trace_exceptions(trace)
    lines = [f"  rulebook  {rb.path or rb.name} ({rb.name} {rb.version}) sha256 {rb.sha256}",
             *(f"  layer     {c.path} sha256 {c.sha256}" for c in rb.chain),
             f"  mode      {trace.mode}",
             f"  facts     sha256 {trace.facts_sha256}"]
    if trace.waivers is not None and trace.waivers.get("sha256"):
        lines.append(f"  waivers   {trace.waivers.get('file')} sha256 {trace.waivers['sha256']} "
                     f"(as of {trace.waivers.get('as_of')})")
    lines += [f"  verdict   {trace.verdict.id}, exit code {trace.exit_code}",
              f"  exceptions {summary_line(exceptions)}", *(f"    - {e.text()}" for e in exceptions)]
    return lines


def verify_envelope(path: Path, envelope: dict[str, Any], key: Path | list[Path] | None, request: Request,
                    trace_path: Path | None) -> Outcome:
    """The signature first (exit 1 when it does not verify); then, given a trace or facts, that the
    signed statement says what the trace says, or what evaluating again gives."""
    from policyrun.trace import dsse
    from policyrun.render import intoto

    name = display_path(path)
    keys = trusted_keys([key] if isinstance(key, Path) else key or [])
    if not keys:
        raise UsageError(f"{name} is a DSSE envelope; pass the signer's public key with --key PUB.pem", code="A002")
    try:
        signed = verify_signature(envelope, keys)
        statement = signed_statement(signed.payload)
    except dsse.InvalidEnvelope as exc:
        return Outcome(False, [f"INVALID: {name}: {exc}"])
    kind = statement.get("predicateType")
    known = {intoto.VERDICT_PREDICATE: "in-toto", intoto.VSA_PREDICATE: "vsa"}
    lines = [f"signature valid: {name} is signed by the key with keyid {signed.keyid}",
             f"  statement {kind} about {len(statement.get('subject') or [])} subject(s)"]
    lines += statement_exceptions(statement)
    pinned = statement_pins(statement, request.pins)
    if trace_path is None and not request.facts:
        if not pinned:
            return Outcome(True, [*lines, *pins_held(request.pins)])
        return Outcome(False, [*lines, *pinned, f"NOT VERIFIED: {len(pinned)} pin(s) you gave do not match"])
    if statement.get("_type") != intoto.STATEMENT_TYPE or kind not in known:
        raise UsageError(f"the signed statement is a {statement.get('_type')!r} of {kind!r}; --trace and --facts "
                         "check policyrun's own statements (report --format in-toto or vsa)", code="V006",
                         location=Location(name))
    fmt = known[kind]
    notes: list[str] = []
    if trace_path is not None:
        diffs = statement_vs_trace(statement, fmt, trace_path)
        lines += [d.line("statement", "trace") for d in diffs]
        if request.facts:
            outcome = verify_trace(trace_path, request)
            lines += outcome.lines
            notes += outcome.notes
            ok = not diffs and outcome.ok
        else:
            ok = not diffs
            lines.append(f"statement matches {display_path(trace_path)}" if ok else
                         f"NOT VERIFIED: the statement differs from {display_path(trace_path)} in {len(diffs)} "
                         "field(s)")
        if pinned:
            lines += [*pinned, f"NOT VERIFIED: {len(pinned)} pin(s) you gave do not match"]
        return Outcome(ok and not pinned, lines, notes)
    if fmt == "vsa":
        raise UsageError("a verification summary does not record the mode and inputs it was evaluated with; pass "
                         "the trace it was made from with --trace TRACE", code="V004")
    again = reevaluate(Claim.of_predicate(statement.get("predicate"), name), request)
    expected = as_json(intoto.verdict_statement(again.trace))
    diffs = differences(statement, expected, ignore={"predicate.generatedAt", "predicate.run"})
    pinned = [*pinned, *(p for p in (f"PIN MISMATCH: {m}" for m in again.pin_mismatches) if p not in pinned)]
    tail = [f"NOT VERIFIED: {len(pinned)} pin(s) you gave do not match"] if pinned else []
    if not diffs:
        verdict = ("verified: the statement is what its rulebook gives over these facts" if not pinned else
                   "the statement is what its rulebook gives over these facts, but not what you pinned:")
        return Outcome(not pinned, [*lines, verdict, *_summary(again.trace), *pinned, *tail], again.notes)
    return Outcome(False, [*lines, *(d.line("statement", "evaluation") for d in diffs),
                           f"NOT VERIFIED: the statement differs from its re-evaluation in {len(diffs)} field(s) "
                           "(generatedAt and run are not compared)", *pinned, *tail], again.notes)


def read_claim_file(path: Path) -> Any:
    """The JSON of a trace or an envelope (bounded like a trace), to tell which it is."""
    from policyrun import limits
    from policyrun.jsonfile import parse_json, read_json_text

    name = display_path(path)
    text = read_json_text(path, what="trace or envelope", code="T001", max_bytes=limits.TRACE_BYTES)
    return parse_json(text, name, what="trace or envelope", code="T002", max_depth=limits.TRACE_DEPTH)
