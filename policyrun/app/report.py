"""Report: a saved trace rendered in one format (or stated as an attestation), and the options
of single formats that `evaluate` takes too."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from policyrun.render import ReportOptions


@dataclass(frozen=True)
class ReportRequest:
    trace: Path
    format: str = "md"
    output: Path | None = None  # None: the caller prints `text`
    template: Path | None = None
    context: Path | None = None
    against: Path | None = None  # an approved trace: md and html open with what changed since
    force: bool = False
    base: Path | None = None
    junit_include_outside_mode: bool = False
    sarif_located_only: bool = False
    sign_key: Path | None = None
    resource_uri: str | None = None
    policy_uri: str | None = None
    verifier_id: str | None = None


@dataclass(frozen=True)
class ReportResult:
    text: str
    written: Path | None
    inconsistencies: list[str] = field(default_factory=list)  # with force: what the trace contradicts
    notes: list[str] = field(default_factory=list)  # for the person running it (stderr)


def report_options(formats: list[str], *, junit_include_outside_mode: bool = False, sarif_located_only: bool = False,
                   base: Path | None = None, fix: str = "use --format {fmt}") -> ReportOptions:
    """The ReportOptions asked for; an option for a format not written is a usage error (R009), as
    a mistyped intent should not pass silently. `fix` says how to write that format."""
    from policyrun.errors import UsageError
    from policyrun.render import ReportOptions

    for flag, on, fmt in (("--junit-include-outside-mode", junit_include_outside_mode, "junit"),
                          ("--sarif-located-only", sarif_located_only, "sarif")):
        if on and fmt not in formats:
            raise UsageError(f"{flag} applies to the {fmt} report, which this command does not write; "
                             f"{fix.format(fmt=fmt)}", code="R009")
    return ReportOptions(base=base, junit_outside_mode=junit_include_outside_mode,
                         sarif_located_only=sarif_located_only)


def report(request: ReportRequest) -> ReportResult:
    from policyrun.errors import UsageError
    from policyrun.render import ATTESTATIONS, add_banner, render
    from policyrun.trace.model import load_trace
    from policyrun.trace.consistency import inconsistencies
    from policyrun.evaluate.tracevalues import expand

    trace = load_trace(request.trace, force=request.force)
    if request.against is not None and request.format not in ("md", "html"):
        raise UsageError("--against applies to md and html reports (policyrun diff compares traces as text or "
                         "JSON)", code="R009")
    options = report_options([request.format], junit_include_outside_mode=request.junit_include_outside_mode,
                             sarif_located_only=request.sarif_located_only, base=request.base)
    notes: list[str] = []
    if request.format in ATTESTATIONS:  # never of an inconsistent trace, --force or not
        from policyrun.render.intoto import AttestationOptions, attestation_text

        if request.template or request.context:
            raise UsageError("--template and --context apply to md and html reports", code="R009")
        opts = AttestationOptions(resource_uri=request.resource_uri, policy_uri=request.policy_uri,
                                  verifier_id=request.verifier_id, sign_key=request.sign_key)
        text = attestation_text(trace, request.format, opts, source=request.trace)
    elif request.sign_key or request.resource_uri or request.policy_uri or request.verifier_id:
        raise UsageError("--sign-key, --resource-uri, --policy-uri and --verifier-id apply to --format in-toto "
                         "and vsa", code="R009")
    else:
        own_template, own_context = _rulebook_report(trace, request.format, notes)
        template = request.template or own_template
        # Values the trace summarises are shown whole where they are kept beside it (values/); an
        # attestation (above) states the trace exactly as written.
        whole = expand(trace, request.trace)
        context = {**own_context, **load_context(request.context), **_against(request.against, whole)}
        text = render(whole, request.format, template=template, context=context, options=options)
    problems = inconsistencies(trace) if request.force else []
    if problems:
        text = add_banner(text, request.format, problems)
    written = None
    if request.output is not None:
        from policyrun.outfiles import write_file

        written = write_file(request.output, text, code="R005", fix="choose another -o path")
    return ReportResult(text, written, problems, notes)


def load_context(path: Path | None) -> dict[str, Any]:
    """A policy-sized YAML (`.yaml`, `.yml`) or JSON file, through the guarded loaders (bounded size
    and nesting, no alias bombs, no duplicate keys), errors located."""
    if path is None:
        return {}
    from policyrun import limits
    from policyrun.errors import Location, PolicyrunError, UsageError

    if path.suffix in (".yaml", ".yml"):
        from policyrun.yamlsource import load_yaml_file

        try:
            data, _ = load_yaml_file(path)
        except PolicyrunError as exc:
            code = "R006" if exc.code in ("Y006", "Y007") else exc.code
            raise UsageError(f"template context: {exc.message}", code=code, location=exc.location) from None
    else:
        from policyrun.jsonfile import parse_json, read_json_text

        text = read_json_text(path, what="template context", code="R006", max_bytes=limits.POLICY_BYTES)
        data = parse_json(text, str(path), what="template context", code="R006", max_depth=limits.POLICY_DEPTH)
    if not isinstance(data, dict):
        raise UsageError("template context must be a mapping (keys become `context.<key>` in templates)",
                         code="R006", location=Location(str(path)))
    return data


def _rulebook_report(trace: Any, fmt: str, notes: list[str]) -> tuple[Path | None, dict[str, Any]]:
    """The template the trace's own rulebook declares for this report (as `evaluate --format` uses)
    and what it tells every report (`report.hardware_phases`), when that rulebook is found with the
    very bytes the trace names; else the built-in template and nothing."""
    if fmt not in ("md", "html") or not trace.rulebook.path:
        return None, {}
    from policyrun.errors import PolicyrunError
    from policyrun.language.locate import shipped_dir
    from policyrun.render import rulebook_context
    from policyrun.render.templatefiles import rulebook_templates
    from policyrun.language.rulebook import load_rulebook

    recorded = trace.rulebook.path
    path = shipped_dir() / recorded.removeprefix("<shipped>/") if recorded.startswith("<shipped>/") else Path(recorded)
    try:
        rb = load_rulebook(path)
        if rb.sha256 != trace.rulebook.sha256:
            notes.append(f"{recorded} has changed since the trace was written; using the built-in template (pass "
                         "--template to choose)")
            return None, {}
        return rulebook_templates(rb.model, rb.file_of(("report",))).get(fmt), rulebook_context(rb.model)
    except (PolicyrunError, OSError):
        return None, {}


def _against(approved: Path | None, trace: Any) -> dict[str, Any]:
    """Template context `against`: the review of what changed since the approved trace."""
    if approved is None:
        return {}
    from policyrun.errors import display_path
    from policyrun.render.diff import render_diff_text, review_diff
    from policyrun.evaluate.tracevalues import load_trace_values

    diff = review_diff(load_trace_values(approved), trace)
    return {"against": {"path": display_path(approved), "changed": diff["changed"], "diff": diff,
                        "text": render_diff_text(diff)}}
