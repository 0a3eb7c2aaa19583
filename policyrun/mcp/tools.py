"""The MCP tools as plain functions: arguments in, a result model out, never an exception.

Each one does what its CLI command does, through the same library calls (and the commands' own
helpers where the CLI keeps a rule in one place, so both refuse the same things with the same
codes), minus printing: stdout is the MCP wire. A `PolicyrunError` becomes `exit_code` 3 with the
located error; anything else becomes exit 4 with a log file, as `policyrun.cli.main` does.
Given `roots` (the server always gives them), every path a tool reads or writes is checked against
them first (policyrun.mcp.roots).
"""

from __future__ import annotations

import json
import os
import tempfile
import time
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from policyrun.errors import EXIT_BLOCKED, EXIT_INTERNAL, EXIT_OK, PolicyrunError, UsageError
from policyrun.mcp.roots import Roots
from policyrun.mcp.results import (CheckOut, CollectResult, ErrorOut, EvaluateResult, ExplainedPhase, ExplainResult,
                                   FactErrorOut, FactsUsed, FieldOut, FindingOut, LintResult, NextAction,
                                   NextActionsResult, ParamOut, PhaseOut, ProbeKindOut, ProbeOutcome, ProbesResult,
                                   ReadOut, ToolResult, VerdictOut)

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
        from policyrun.commands.lint import lint_paths  # the CLI's rule for folders and shipped names
        from policyrun.locate import is_path_form, shipped_rulebooks

        for arg in paths:
            if roots is not None and (is_path_form(arg) or arg not in shipped_rulebooks()):
                roots.check(arg, "path")
        files, findings = lint_paths(paths, allow=(lambda f: roots.check(f, "rulebook")) if roots else None)
        errors = sum(f.severity == "error" for f in findings)
        return LintResult(exit_code=1 if errors else EXIT_OK, files=[str(f) for f in files], errors=errors,
                          warnings=len(findings) - errors, findings=[FindingOut.of(f) for f in findings])

    return answer(LintResult, body)


# --- collect and evaluate -------------------------------------------------------------------------

def _bind(rulebook: str | None, mode: str | None, inputs: Mapping[str, Any] | None,
          inputs_file: str | None, roots: Roots | None) -> tuple[Any, str, dict[str, Any]]:
    from policyrun.engine import load_checked
    from policyrun.inputs import resolve_inputs, select_mode
    from policyrun.locate import is_path_form, resolve_ref

    if roots and rulebook is not None and is_path_form(rulebook):
        roots.check(rulebook, "rulebook")  # before resolving: an error must not tell what exists outside
    path = resolve_ref(rulebook)  # a bare name is a shipped rulebook, whatever files are here
    if roots:
        roots.check(path, "rulebook")
        if inputs_file:
            roots.check(inputs_file, "inputs_file")
    rb = load_checked(path)
    chosen = select_mode(rb.model, mode)
    bound = resolve_inputs(rb.model, (), Path(inputs_file) if inputs_file else None, values=dict(inputs or {}))
    return rb, chosen, bound


def _check_path_inputs(rb: Any, bound: dict[str, Any], roots: Roots | None) -> None:
    """The folders the probes will read, as given to this call (a rulebook's own defaults are its own)."""
    for name, spec in rb.model.inputs.items():
        value = bound.get(name)
        if roots and spec.type == "path" and isinstance(value, str) and value and value != spec.default:
            roots.check(value, f"input {name}")


def _used(rb: Any) -> dict[str, Any]:
    from policyrun.locate import SHIPPED_PREFIX

    return {"rulebook": rb.display, "rulebook_shipped": rb.display.startswith(SHIPPED_PREFIX),
            "rulebook_sha256": rb.sha256}


def _recorded(trace: Any) -> dict[str, Any]:
    ref = trace.rulebook
    return {"rulebook": ref.path or ref.name, "rulebook_shipped": ref.shipped, "rulebook_sha256": ref.sha256}


def _outcomes(facts: Any, *, failed_only: bool) -> list[ProbeOutcome]:
    out = []
    for pid, fact in facts.facts.items():
        if failed_only and fact.ok:
            continue
        err = fact.error
        out.append(ProbeOutcome(probe=pid, kind=fact.provenance.kind, ok=fact.ok,
                                error=FactErrorOut(code=err.code, message=err.message) if err else None,
                                duration_s=fact.provenance.duration_s))
    return out


def _collect(rb: Any, mode: str, inputs: dict[str, Any], progress: Any, only: set[str] | None = None) -> Any:
    from policyrun.collect import collect as run_probes

    return run_probes(rb.model, mode, inputs, base_dir=Path.cwd(), progress=progress, only=only,
                      rulebook_dir=rb.file_of(("schemas",)).parent)


def collect(rulebook: str | None, mode: str | None = None, inputs: Mapping[str, Any] | None = None,
            inputs_file: str | None = None, only: list[str] | None = None, out: str = DEFAULT_FACTS,
            progress: Any = None, roots: Roots | None = None) -> CollectResult:
    def body() -> CollectResult:
        t0 = time.perf_counter()
        if roots:
            roots.check(out, "out", write=True)
        rb, chosen, bound = _bind(rulebook, mode, inputs, inputs_file, roots)
        _check_path_inputs(rb, bound, roots)
        facts = _collect(rb, chosen, bound, progress, set(only) if only else None)
        target = Path(out)
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(facts.to_json(), encoding="utf-8")
        except OSError as exc:  # same refusal as `policyrun collect -o`
            raise UsageError(f"cannot write {target}: {exc.strerror}; choose another -o path", code="U007") from None
        probes = _outcomes(facts, failed_only=False)
        from policyrun.collect import NOT_APPLICABLE, plan, unset_input_probes

        # The CLI's rule (docs/cli.md): a probe that failed makes the snapshot incomplete, exit 2;
        # one not run because the caller left an optional input unset, or whose `when` is false, does not.
        deps = plan(rb.model, chosen, set(only) if only else None).deps
        not_run = unset_input_probes(facts, deps) | unset_input_probes(facts, deps, NOT_APPLICABLE)
        failed = any(not p.ok and p.probe not in not_run for p in probes)
        return CollectResult(exit_code=EXIT_BLOCKED if failed else EXIT_OK, **_used(rb), mode=chosen, facts_path=str(target.resolve()),
                             count=len(probes), errors=sum(not p.ok for p in probes), probes=probes,
                             seconds=round(time.perf_counter() - t0, 3))

    return answer(CollectResult, body)


def evaluate(rulebook: str | None, mode: str | None = None, inputs: Mapping[str, Any] | None = None,
             inputs_file: str | None = None, facts_files: list[str] | None = None, out_dir: str = DEFAULT_OUT,
             formats: list[str] | None = None, allow_stale_facts: bool = False, fail_on_warn: bool = False,
             timestamp: bool = True, progress: Any = None, roots: Roots | None = None) -> EvaluateResult:
    def body() -> EvaluateResult:
        from policyrun.commands.evaluate import _check_snapshot  # the CLI's F005 replay check
        from policyrun.engine import evaluate as run_evaluation
        from policyrun.facts import load_facts, merge_facts
        from policyrun.render import check_formats, write_run
        from policyrun.render.templatefiles import rulebook_templates

        t0 = time.perf_counter()
        if roots:
            roots.check(out_dir, "out_dir", write=True)
            for p in facts_files or []:
                roots.check(p, "facts_files")
        rb, chosen, bound = _bind(rulebook, mode, inputs, inputs_file, roots)
        if not facts_files:
            _check_path_inputs(rb, bound, roots)
        templates = rulebook_templates(rb.model, rb.file_of(("report",))) if formats else None
        names = check_formats(formats or [], templates)  # before any probe runs
        notes: dict[str, object] = {}
        if facts_files:
            facts = merge_facts((p, load_facts(Path(p))) for p in facts_files)
            notes = _check_snapshot(rb, chosen, bound, facts, allow=allow_stale_facts)
        else:
            facts = _collect(rb, chosen, bound, progress)
        from policyrun.tracevalues import VALUES, index_text, keeping_values

        values = Path(out_dir) / VALUES  # summarised values kept whole, as `evaluate --out` keeps them
        with keeping_values(values):
            trace = run_evaluation(rb, mode=chosen, inputs=bound, facts=facts, timestamp=timestamp, notes=notes,
                                   fail_on_warn=fail_on_warn)
        index = index_text(trace, values)
        if index is not None:
            values.mkdir(parents=True, exist_ok=True)
        written = write_run(trace, names, Path(out_dir), rulebook_templates=templates,
                            extra={f"{VALUES}/index.json": index} if index is not None else None)
        used = FactsUsed(source="files" if facts_files else "collected", files=list(facts_files or []),
                         count=len(facts.facts), failed=_outcomes(facts, failed_only=True),
                         stale=[{"probe": s.probe, "reason": s.reason} for s in trace.stale_facts])
        return EvaluateResult(exit_code=trace.exit_code, **_used(rb), mode=chosen,
                              verdict=_verdict(trace), phases=[_phase(p) for p in trace.phases],
                              trace_path=str((Path(out_dir) / "trace.json").resolve()),
                              written=[str(p.resolve()) for p in written], facts=used,
                              seconds=round(time.perf_counter() - t0, 3))

    return answer(EvaluateResult, body)


def _verdict(trace: Any) -> VerdictOut:
    return VerdictOut(id=trace.verdict.id, summary=trace.verdict.summary)


def _phase(p: Any) -> PhaseOut:
    return PhaseOut(phase=p.phase, title=p.title, status=p.status, reason=p.reason, blocker=p.blocker,
                    blockers=list(p.blockers), next_allowed_action=p.next_allowed_action)


# --- reading a trace ------------------------------------------------------------------------------

def _read(r: Any) -> ReadOut:
    text = json.dumps(r.value, ensure_ascii=False, default=str)
    if len(text) > READ_VALUE_CHARS:
        return ReadOut(path=r.path, value=text[:READ_VALUE_CHARS], missing=r.missing, error=r.error, truncated=True)
    return ReadOut(path=r.path, value=r.value, missing=r.missing, error=r.error)


def _check(c: Any) -> CheckOut:
    from policyrun.render.records import check_probes

    return CheckOut(id=c.id, kind=c.kind, result=c.result, outcome=c.outcome, expression=c.expression,
                    message=c.message, location=c.location, reads=[_read(r) for r in c.reads],
                    probes=check_probes(c))


def explain(trace: str = DEFAULT_TRACE, phase: str | None = None, failures_only: bool = False,
            force: bool = False, roots: Roots | None = None) -> ExplainResult:
    def body() -> ExplainResult:
        from policyrun.errors import terminal_text
        from policyrun.render.explain import render_explain
        from policyrun.render.view import FAILING, is_decisive
        from policyrun.traceconsistency import banner_lines, inconsistencies
        from policyrun.tracevalues import load_trace_values

        if roots:
            roots.check(trace, "trace")
        loaded = load_trace_values(Path(trace), force=force)  # summarised values whole, from values/ beside it
        text = render_explain(loaded, phase=phase, failures=failures_only)  # T004 for an unknown phase
        problems = inconsistencies(loaded) if force else []
        if problems:
            text = terminal_text("\n".join(banner_lines(problems))) + "\n\n" + text
        # The same selection render_explain makes, as data.
        chosen = [p for p in loaded.phases if phase is None or p.phase == phase]
        if failures_only:
            chosen = [p for p in chosen if p.status in FAILING]
        phases = [ExplainedPhase(**_phase(p).model_dump(), location=p.location,
                                 checks=[_check(c) for c in p.evidence if not failures_only or is_decisive(c)])
                  for p in chosen]
        return ExplainResult(exit_code=EXIT_OK, **_recorded(loaded), text=text, verdict=_verdict(loaded),
                             trace_exit_code=loaded.exit_code, phases=phases, inconsistencies=problems)

    return answer(ExplainResult, body)


def next_actions(trace: str = DEFAULT_TRACE, force: bool = False, roots: Roots | None = None) -> NextActionsResult:
    def body() -> NextActionsResult:
        from policyrun.render.view import FAILING
        from policyrun.trace import load_trace
        from policyrun.traceconsistency import inconsistencies

        if roots:
            roots.check(trace, "trace")
        loaded = load_trace(Path(trace), force=force)
        rows = [NextAction(phase=p.phase, title=p.title, status=p.status, next_allowed_action=p.next_allowed_action,
                           blocker=p.blocker) for p in loaded.phases]
        ran = [r for r in rows if r.status != "SKIPPED"]
        now = next((r for r in rows if r.status in FAILING), ran[-1] if ran else None)
        return NextActionsResult(exit_code=EXIT_OK, **_recorded(loaded), mode=loaded.mode, verdict=_verdict(loaded),
                                 trace_exit_code=loaded.exit_code, now=now, phases=rows,
                                 inconsistencies=inconsistencies(loaded) if force else [])

    return answer(NextActionsResult, body)


# --- probes ---------------------------------------------------------------------------------------

def probes(kind: str | None = None) -> ProbesResult:
    def body() -> ProbesResult:
        import difflib

        from policyrun.commands.probes import _type_text, describe, shape
        from policyrun.probes.registry import registry

        kinds = registry()
        if kind is not None and kind not in kinds:
            hint = difflib.get_close_matches(kind, list(kinds), n=1)
            extra = f"did you mean {hint[0]!r}? " if hint else ""
            raise UsageError(f"no probe kind {kind!r}; {extra}run `policyrun probes` to list them", code="U008")
        chosen = [kinds[kind]] if kind is not None else [kinds[k] for k in sorted(kinds)]
        out = []
        for probe in chosen:
            d = describe(probe)
            schema = probe.fact_schema
            props = schema.get("properties") or (schema.get("items") or {}).get("properties", {})
            out.append(ProbeKindOut(
                kind=d["kind"], summary=d["summary"], side_effects=d["side_effects"],
                params=[ParamOut(**p) for p in d["params"]], facts_shape=shape(schema),
                fact_fields=[FieldOut(name=k, type=_type_text(v), description=v.get("description", ""))
                             for k, v in props.items()],
                params_schema=d["params_schema"] if kind else None, fact_schema=d["fact_schema"] if kind else None))
        return ProbesResult(exit_code=EXIT_OK, kinds=out)

    return answer(ProbesResult, body)

