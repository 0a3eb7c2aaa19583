"""The MCP tools as plain functions: arguments in, a result model out, never an exception.

Each one calls the same use case as its CLI command (policyrun.app), so both refuse the same
things with the same codes, minus printing: stdout is the MCP wire. A `PolicyrunError` becomes
`exit_code` 3 with the located error; anything else becomes exit 4 with a log file, as
`policyrun.cli.main` does. Given `roots` (the server always gives them), every path a tool reads
or writes is checked against them first (policyrun.mcp.roots).
"""

from __future__ import annotations

import json
import os
import tempfile
import time
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from policyrun.errors import EXIT_INTERNAL, EXIT_OK, PolicyrunError
from policyrun.mcp.results import (CheckOut, CollectResult, ErrorOut, EvaluateResult, ExplainedPhase, ExplainResult,
                                   FactErrorOut, FactsUsed, FieldOut, FindingOut, LintResult, NextAction,
                                   NextActionsResult, ParamOut, PhaseOut, ProbeKindOut, ProbeOutcome, ProbesResult,
                                   ReadOut, ToolResult, VerdictOut)
from policyrun.mcp.roots import Roots

if TYPE_CHECKING:
    from policyrun.app.binding import RulebookRequest
    from policyrun.app.collect import ProbeRun
    from policyrun.language.rulebook import LoadedRulebook
    from policyrun.trace.model import Trace

R = TypeVar("R", bound=ToolResult)

DEFAULT_OUT = ".policyrun"
DEFAULT_TRACE = ".policyrun/trace.json"
DEFAULT_FACTS = ".policyrun/facts.json"
# A read's value larger than this (as JSON) is cut in structured output; the trace keeps all of it.
READ_VALUE_CHARS = 2000


def answer(result_type: type[R], body: Callable[[], R]) -> R:
    """Run a tool body; errors become results with the CLI's exit codes, never tracebacks."""
    try:
        return body()
    except PolicyrunError as exc:
        return result_type(exit_code=exc.exit_code, error=ErrorOut.of(exc))
    except Exception as exc:  # the one place an unexpected error is caught, as in cli.main
        fd, log = tempfile.mkstemp(prefix="policyrun-crash-", suffix=".log")
        with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace") as fh:
            traceback.print_exc(file=fh)
        return result_type(exit_code=EXIT_INTERNAL, error=ErrorOut(
            code="internal", message=f"internal error: {type(exc).__name__}: {exc} (details in {log})", file=log))


# --- lint -----------------------------------------------------------------------------------------

def lint(paths: list[str], roots: Roots | None = None) -> LintResult:
    def body() -> LintResult:
        from policyrun.app.lint import LintRequest, lint as run_lint

        result = run_lint(LintRequest(tuple(paths)), roots)
        return LintResult(exit_code=result.exit_code, files=[str(f) for f in result.files], errors=result.errors,
                          warnings=result.warnings, findings=[FindingOut.of(f) for f in result.findings])

    return answer(LintResult, body)


# --- collect and evaluate -------------------------------------------------------------------------

def _rulebook(rulebook: str | None, mode: str | None, inputs: Mapping[str, Any] | None,
              inputs_file: str | None) -> RulebookRequest:
    from policyrun.app.binding import RulebookRequest

    return RulebookRequest(rulebook, mode, (), inputs_file or None, dict(inputs or {}))


def _used(rb: LoadedRulebook) -> dict[str, Any]:
    from policyrun.language.locate import SHIPPED_PREFIX

    return {"rulebook": rb.display, "rulebook_shipped": rb.display.startswith(SHIPPED_PREFIX),
            "rulebook_sha256": rb.sha256}


def _recorded(trace: Trace) -> dict[str, Any]:
    ref = trace.rulebook
    return {"rulebook": ref.path or ref.name, "rulebook_shipped": ref.shipped, "rulebook_sha256": ref.sha256}


def _outcomes(runs: list[ProbeRun]) -> list[ProbeOutcome]:
    return [ProbeOutcome(probe=r.probe, kind=r.kind, ok=r.error_code is None,
                         error=FactErrorOut(code=r.error_code, message=r.error_message or "")
                         if r.error_code is not None else None, duration_s=r.duration_s) for r in runs]


def collect(rulebook: str | None, mode: str | None = None, inputs: Mapping[str, Any] | None = None,
            inputs_file: str | None = None, only: list[str] | None = None, out: str = DEFAULT_FACTS,
            progress: Any = None, roots: Roots | None = None) -> CollectResult:
    def body() -> CollectResult:
        from policyrun.app.collect import CollectRequest, collect as run_collect

        result = run_collect(CollectRequest(_rulebook(rulebook, mode, inputs, inputs_file),
                                            only=frozenset(only) if only else None, output=out,
                                            progress=progress), roots)
        probes = _outcomes(result.probes())
        return CollectResult(exit_code=result.exit_code, **_used(result.rb), mode=result.mode,
                             facts_path=str(Path(out).resolve()), count=len(probes),
                             errors=sum(not p.ok for p in probes), probes=probes, seconds=round(result.seconds, 3))

    return answer(CollectResult, body)


def evaluate(rulebook: str | None, mode: str | None = None, inputs: Mapping[str, Any] | None = None,
             inputs_file: str | None = None, facts_files: list[str] | None = None, out_dir: str = DEFAULT_OUT,
             formats: list[str] | None = None, allow_stale_facts: bool = False, fail_on_warn: bool = False,
             timestamp: bool = True, progress: Any = None, roots: Roots | None = None) -> EvaluateResult:
    def body() -> EvaluateResult:
        from policyrun.app.collect import probe_runs
        from policyrun.app.evaluate import EvaluateRequest, evaluate as run_evaluate

        t0 = time.perf_counter()
        result = run_evaluate(EvaluateRequest(
            _rulebook(rulebook, mode, inputs, inputs_file), facts_files=tuple(facts_files or ()),
            out_dir=out_dir, formats=tuple(formats or ()), fail_on_warn=fail_on_warn,
            allow_stale_facts=allow_stale_facts, timestamp=timestamp, progress=progress), roots)
        trace = result.trace
        used = FactsUsed(source="collected" if result.collected else "files", files=list(facts_files or []),
                         count=len(result.facts.facts), failed=_outcomes([r for r in probe_runs(result.facts) if not r.ok]),
                         stale=[{"probe": s.probe, "reason": s.reason} for s in trace.stale_facts])
        return EvaluateResult(exit_code=result.exit_code, **_used(result.rb), mode=result.mode,
                              verdict=VerdictOut.of(trace.verdict), phases=[PhaseOut.of(p) for p in trace.phases],
                              trace_path=str((Path(out_dir) / "trace.json").resolve()),
                              written=[str(p.resolve()) for p in result.written], facts=used,
                              seconds=round(time.perf_counter() - t0, 3))

    return answer(EvaluateResult, body)


# --- reading a trace ------------------------------------------------------------------------------

def _read(r: Any) -> ReadOut:
    text = json.dumps(r.value, ensure_ascii=False, default=str)
    if len(text) > READ_VALUE_CHARS:
        return ReadOut.of(r, value=text[:READ_VALUE_CHARS], truncated=True)
    return ReadOut.of(r)


def _check(c: Any) -> CheckOut:
    from policyrun.render.records import check_probes

    return CheckOut.of(c, reads=[_read(r) for r in c.reads], probes=check_probes(c))


def explain(trace: str = DEFAULT_TRACE, phase: str | None = None, failures_only: bool = False,
            force: bool = False, roots: Roots | None = None) -> ExplainResult:
    def body() -> ExplainResult:
        from policyrun.app.explain import ExplainRequest, explain as run_explain

        result = run_explain(ExplainRequest(trace, phase, failures_only, force), roots)
        loaded = result.trace
        phases = [ExplainedPhase.of(e.phase, checks=[_check(c) for c in e.checks]) for e in result.phases]
        return ExplainResult(exit_code=EXIT_OK, **_recorded(loaded), text=result.text,
                             verdict=VerdictOut.of(loaded.verdict), trace_exit_code=loaded.exit_code, phases=phases,
                             inconsistencies=result.inconsistencies)

    return answer(ExplainResult, body)


def next_actions(trace: str = DEFAULT_TRACE, force: bool = False, roots: Roots | None = None) -> NextActionsResult:
    def body() -> NextActionsResult:
        from policyrun.app.next_actions import NextActionsRequest, next_actions as run_next_actions

        result = run_next_actions(NextActionsRequest(trace, force), roots)
        loaded = result.trace
        return NextActionsResult(exit_code=EXIT_OK, **_recorded(loaded), mode=loaded.mode,
                                 verdict=VerdictOut.of(loaded.verdict), trace_exit_code=loaded.exit_code,
                                 now=NextAction.of(result.now) if result.now is not None else None,
                                 phases=[NextAction.of(p) for p in result.phases],
                                 inconsistencies=result.inconsistencies)

    return answer(NextActionsResult, body)


# --- probes ---------------------------------------------------------------------------------------

def probes(kind: str | None = None) -> ProbesResult:
    def body() -> ProbesResult:
        from policyrun.app.probes import describe_probes

        out = [ProbeKindOut(kind=d.kind, summary=d.summary, side_effects=d.side_effects,
                            params=[ParamOut(**vars(p)) for p in d.params], facts_shape=d.facts_shape,
                            fact_fields=[FieldOut(**vars(f)) for f in d.fact_fields],
                            params_schema=d.params_schema if kind else None,
                            fact_schema=d.fact_schema if kind else None)
               for d in describe_probes(kind)]
        return ProbesResult(exit_code=EXIT_OK, kinds=out)

    return answer(ProbesResult, body)
