"""Exceptions a verdict was reached with: what an auditor must see beside the verdict, never only
in the raw trace.

Four kinds, all read from the trace alone:
- `stale_facts`: facts evaluated although collected with other parameters (`--allow-stale-facts`);
- `waived`: a failing check a waiver kept from imposing a status (and `--as-of`, when given);
- `disabled`: a check an overlay disabled;
- `unknown_tolerated`: a check whose result is UNKNOWN but imposed no status (the mode's or the
  check's `on_missing: UNKNOWN`), so its phase could still PASS without that evidence.

Every human report, `explain`, `verify`'s output and both attestations list them; a VSA of a run
with any exception is not PASSED (docs/auditors.md).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

from policyrun.trace.model import Trace

ExceptionKind = Literal["stale_facts", "waived", "disabled", "unknown_tolerated"]
KIND_LABELS: dict[str, str] = {"stale_facts": "stale facts", "waived": "waived", "disabled": "disabled by an overlay",
                               "unknown_tolerated": "UNKNOWN tolerated"}


@dataclass(frozen=True)
class TraceException:
    kind: ExceptionKind
    detail: str
    phase: str | None = None
    check: str | None = None

    def text(self) -> str:
        where = ".".join(x for x in (self.phase, self.check) if x)
        return f"{KIND_LABELS[self.kind]}: " + (f"{where}: " if where else "") + self.detail

    def as_json(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}


def trace_exceptions(trace: Trace) -> list[TraceException]:
    """Every exception, in a stable order: stale facts, then each phase's checks in rulebook order."""
    out = [TraceException("stale_facts", f"{s.probe}: {s.reason}") for s in trace.stale_facts]
    for phase in trace.phases:
        if phase.status == "SKIPPED":
            continue  # nothing was decided there (a check disabled in it changed nothing); reports say SKIPPED
        for d in phase.disabled:
            out.append(TraceException("disabled", d.get("reason", ""), phase.phase, d.get("id")))
        for check in phase.checks():
            if check.waiver:
                w = check.waiver
                out.append(TraceException(
                    "waived", f"{check.result}, waived by {w.get('owner')} until {w.get('expires')}: "
                              f"{w.get('reason')}" + (f" ({w['ticket']})" if w.get("ticket") else "")
                              + (f" [{w['source']}]" if w.get("source") else ""), phase.phase, check.id))
            elif check.result == "UNKNOWN" and check.outcome is None and check.kind in ("evidence", "stop_when"):
                why = check.message or "a fact it reads is missing"
                out.append(TraceException("unknown_tolerated", f"UNKNOWN ({why}); the phase was not held back by it",
                                          phase.phase, check.id))
    as_of = _as_of(trace)
    if as_of:  # each waiver was checked against another day than the evaluation's: say so with it
        out = [TraceException(e.kind, f"{e.detail}; checked as of {as_of.split()[1].rstrip(':')}", e.phase, e.check)
               if e.kind == "waived" else e for e in out]
    return out


def _as_of(trace: Trace) -> str | None:
    warnings = (trace.waivers or {}).get("warnings") or []
    return next((w for w in warnings if isinstance(w, str) and w.startswith("--as-of ")), None)


def counts(exceptions: list[TraceException]) -> dict[str, int]:
    out: dict[str, int] = {}
    for e in exceptions:
        out[e.kind] = out.get(e.kind, 0) + 1
    return out


def summary_line(exceptions: list[TraceException]) -> str:
    """`none`, or `2 waived, 1 UNKNOWN tolerated`."""
    if not exceptions:
        return "none"
    return ", ".join(f"{n} {KIND_LABELS[k]}" for k, n in counts(exceptions).items())
