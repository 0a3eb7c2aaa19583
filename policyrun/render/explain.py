"""`policyrun explain`: why each phase got its status, for a person.

A filter over the recorded trace (like OPA's `--explain`), never a second evaluation: the checks
that decided each phase, the values they read, and where each value came from.
"""

from __future__ import annotations

from policyrun.checkid import check_label
from policyrun.errors import UsageError
from policyrun.facts import Provenance
from policyrun.safetext import escape_controls
from policyrun.render.records import check_probes, outside_mode
from policyrun.render.view import FAILING, RESULT_ICONS, format_read, is_decisive
from policyrun.trace.model import CheckRecord, PhaseRecord, Trace, waiver_text

_VALUE_LIMIT = 200


def _provenance_lines(probe: str, prov: Provenance | None) -> list[str]:
    if prov is None:
        return [f"from {probe}: no provenance recorded (the fact was never collected)"]
    lines = [f"from {probe} ({prov.kind})"]
    lines += [f"  ran:   {c}" for c in prov.commands]
    lines += [f"  file:  {s}" for s in prov.sources]
    if prov.repo is not None:
        lines.append(f"  repo:  {prov.repo.path}" + (f" @ {prov.repo.head}" if prov.repo.head else ""))
    if prov.params and not prov.commands and not prov.sources:
        lines.append("  with:  " + ", ".join(f"{k}={v!r}" for k, v in sorted(prov.params.items())))
    if prov.error is not None:
        lines.append(f"  error: {prov.error.code}: {prov.error.message}")
    if prov.elements is not None:
        lines += _element_lines(prov.elements)
    return lines


_ELEMENTS_SHOWN = 8


def _element_lines(elements: dict[str, Provenance]) -> list[str]:
    """A fan-out's elements: how many failed, and the first few with what ran and their error."""
    failed = [k for k, e in elements.items() if e.error is not None]
    lines = [f"  for_each: {len(elements)} element(s), {len(failed)} failed"]
    # Failed elements first: they are what a reader of a failing check looks for.
    shown = [*failed, *(k for k in elements if k not in failed)][:_ELEMENTS_SHOWN]
    for key in shown:
        e = elements[key]
        what = e.commands[0] if e.commands else ", ".join(f"{k}={v!r}" for k, v in sorted(e.params.items()))
        lines.append(f"  [{key}] {what}" + (f" -> error: {e.error.code}: {e.error.message}" if e.error else ""))
    if len(elements) > len(shown):
        lines.append(f"  ... {len(elements) - len(shown)} more")
    return lines


def _check_lines(check: CheckRecord, trace: Trace) -> list[str]:
    outcome = f" -> phase {check.outcome}" if check.outcome else ""
    if check.waiver:
        outcome = f" -> WAIVED ({waiver_text(check.waiver)})"
    where = f"  ({check.location})" if check.location else ""
    lines = [f"{RESULT_ICONS.get(check.result, '?')} {check_label(check.kind, check.id)}: {check.result}{outcome}{where}",
             f"    {check.expression}"]
    if check.message:
        lines.append(f"    why: {check.message}")
    lines += [f"    read {format_read(r, _VALUE_LIMIT)}" for r in check.reads]
    asked = asked_only(check)
    for probe in check_probes(check):
        prov = trace.provenance.get(probe)
        if probe in asked:
            lines.append(f"    asked only whether {probe} failed, never read: {_status_words(prov)}")
        lines += [f"    {line}" for line in _provenance_lines(probe, prov)]
    return lines


def asked_only(check: CheckRecord) -> list[str]:
    """Probes the check asks about only through failed()/error_code(), never reading their value
    (from the parsed expression: the one CEL parser, never a second lexer)."""
    from policyrun.language.expr import ExprError, compile_expr

    try:
        status = compile_expr(check.expression).fact_status
    except ExprError:  # a trace from a rulebook whose expression no longer compiles here
        return []
    read = {r.path.split(".")[1] for r in check.reads if r.path.startswith("facts.") and r.path.count(".") >= 1}
    return [p for p in check.facts if p in status and p not in read]


def _status_words(prov: Provenance | None) -> str:
    if prov is None:
        return "never collected"
    if prov.error is not None:
        return f"failed ({prov.error.code})"
    return f"collected ({prov.kind})"


def _phase_lines(phase: PhaseRecord, trace: Trace, failures: bool) -> list[str]:
    title = f" — {phase.title}" if phase.title else ""
    lines = [f"{phase.phase}{title}: {phase.status}", f"  reason:  {phase.reason}"]
    if phase.blocker:
        lines.append(f"  blocker: {phase.blocker}")
    lines.append(f"  next:    {phase.next_allowed_action}")
    if phase.location:
        lines.append(f"  defined: {phase.location}")
    recorded = list(phase.checks())
    deciders = [c for c in recorded if c.outcome is not None]
    if deciders:
        lines.append("  decided by: " + ", ".join(f"{check_label(c.kind, c.id)} -> {c.outcome}" for c in deciders))
    checks = [c for c in recorded if is_decisive(c)] if failures else recorded
    if checks:
        lines.append("  checks:")
        for check in checks:
            lines += [f"    {line}" for line in _check_lines(check, trace)]
    elif not recorded:
        why = " (the phase was not evaluated)" if phase.status == "SKIPPED" else ""
        lines.append(f"  checks: none recorded{why}")
    return lines


def _summary_lines(trace: Trace) -> list[str]:
    from policyrun.render.summary import build_summary, summary_lines
    from policyrun.render.view import _identities, provenance_view
    from policyrun.trace.exceptions import trace_exceptions

    provenance = {p: provenance_view(v) for p, v in trace.provenance.items()}
    return summary_lines(build_summary(trace, trace_exceptions(trace), _identities(trace, provenance)))


def _exception_lines(trace: Trace) -> list[str]:
    from policyrun.trace.exceptions import summary_line, trace_exceptions

    exceptions = trace_exceptions(trace)
    return [f"exceptions: {summary_line(exceptions)}", *(f"  - {e.text()}" for e in exceptions)]


def render_explain(trace: Trace, *, phase: str | None = None, failures: bool = False) -> str:
    """Explain every phase, one phase (`phase`), or only what did not pass (`failures`)."""
    phases = list(trace.phases)
    if phase is not None:
        found = trace.phase(phase)
        if found is None:
            known = ", ".join(p.phase for p in trace.phases) or "none"
            raise UsageError(f"no phase {phase!r} in this trace; phases: {known}", code="T004")
        phases = [found]
    not_run: list[PhaseRecord] = []
    if failures:
        # A phase of this mode that never ran (skipped by a `when`, or gated) is not a phase that
        # passed: it is listed apart, never under "nothing failed".
        not_run = [p for p in phases if p.status == "SKIPPED" and not outside_mode(p, trace.mode)]
        phases = [p for p in phases if p.status in FAILING]
    summary = f" — {trace.verdict.summary}" if trace.verdict.summary else ""
    out = [f"{trace.rulebook.name} {trace.rulebook.version} · mode {trace.mode}",
           f"verdict: {trace.verdict.id}{summary} (exit {trace.exit_code})",
           f"{trace.rulebook.identity()} · facts sha256 {trace.facts_sha256}"]
    out += _summary_lines(trace) + _exception_lines(trace)  # the summary comes first, right after the header
    asked = sorted({p for ph in trace.phases for c in ph.checks() for p in asked_only(c)}
                   - {r.path.split(".")[1] for ph in trace.phases for c in ph.checks() for r in c.reads
                      if r.path.startswith("facts.")})
    if asked:
        out.append("probes read only through failed()/error_code(): " + ", ".join(
            f"{p} — {_status_words(trace.provenance.get(p))}" for p in asked))
    if not phases and not not_run:
        scope = f"phase {phase} is" if phase else f"all {len(trace.phases)} phases are"
        out += ["", f"Nothing failed: {scope} PASS or outside this mode."]
    elif not phases:
        out += ["", "No phase is FAIL, BLOCKED or STOPPED, but what did not run was not verified:"]
    for p in phases:
        out += ["", *_phase_lines(p, trace, failures)]
    if not_run:
        out += ["", f"Did not run in mode {trace.mode} ({len(not_run)}; nothing is known about them):"]
        out += [f"  {p.phase}: SKIPPED — {p.reason}" for p in not_run]
    return escape_controls("\n".join(out) + "\n")
