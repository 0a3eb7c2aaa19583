"""Reports rendered from a verdict trace: Markdown, HTML, JUnit, SARIF and the trace JSON.

Every renderer reads `policyrun.trace.Trace` and nothing else, so a report can always be
regenerated from a saved trace. Renderer modules import their dependencies (Jinja2, rich)
lazily; importing this package costs almost nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from policyrun.errors import Finding, Location, UsageError

if TYPE_CHECKING:
    from policyrun.model import Rulebook
    from policyrun.trace import Trace

# Format name → file name written by `write_reports`.
FORMATS: dict[str, str] = {
    "md": "report.md",
    "html": "report.html",
    "junit": "junit.xml",
    "sarif": "report.sarif",
    "json": "trace.json",
}
TEMPLATED = frozenset({"md", "html"})


def render(trace: Trace, fmt: str, *, template: Path | None = None, context: Mapping[str, Any] | None = None) -> str:
    """One report as text. `template` replaces the built-in template of `md` or `html`."""
    if fmt == "md":
        from policyrun.render.markdown import render_markdown
        return render_markdown(trace, template=template, context=context)
    if fmt == "html":
        from policyrun.render.html import render_html
        return render_html(trace, template=template, context=context)
    if template is not None:
        raise UsageError(f"--template applies to md and html reports, not {fmt}", code="R004")
    if fmt == "junit":
        from policyrun.render.junit import render_junit
        return render_junit(trace)
    if fmt == "sarif":
        from policyrun.render.sarif import trace_to_sarif
        return trace_to_sarif(trace)
    if fmt == "json":
        from policyrun.render.jsonout import render_json
        return render_json(trace)
    raise UsageError(f"unknown report format {fmt!r}; choose from {', '.join(FORMATS)}", code="R004")


def split_formats(formats: Iterable[str]) -> list[str]:
    """`["md,html", "junit"]` → `["md", "html", "junit"]`, without duplicates."""
    out: list[str] = []
    for item in formats:
        for name in item.split(","):
            name = name.strip()
            if name and name not in out:
                out.append(name)
    return out


def _custom_file_name(name: str, template: Path) -> str:
    stem = template.name
    for suffix in (".j2", ".jinja2", ".jinja"):
        stem = stem.removesuffix(suffix)
    return stem if "." in stem else f"{name}.txt"


def write_reports(trace: Trace, formats: Iterable[str], out_dir: Path, *,
                  rulebook_templates: Mapping[str, Path] | None = None,
                  context: Mapping[str, Any] | None = None) -> list[Path]:
    """Write each requested report into `out_dir`; returns the paths written, in order.

    `rulebook_templates` maps report names to template paths (see `rulebook_templates()`): a name
    `md` or `html` replaces that built-in template; any other name is an extra report that is
    written only when asked for, to a file named after its template (`completion.md.j2` →
    `completion.md`).
    """
    templates = dict(rulebook_templates or {})
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"cannot create report folder: {exc.strerror}", code="R005",
                         location=Location(str(out_dir))) from None
    written: list[Path] = []
    for fmt in split_formats(formats):
        if fmt in FORMATS:
            text = render(trace, fmt, template=templates.get(fmt) if fmt in TEMPLATED else None, context=context)
            path = out_dir / FORMATS[fmt]
        elif fmt in templates:
            from policyrun.render.markdown import template_variables
            from policyrun.render.templating import is_html, render_template

            tpl = templates[fmt]
            text = render_template(tpl, "", template_variables(trace, context), html=is_html(tpl.name))
            path = out_dir / _custom_file_name(fmt, tpl)
        else:
            choices = ", ".join([*FORMATS, *(t for t in templates if t not in FORMATS)])
            raise UsageError(f"unknown report format {fmt!r}; choose from {choices}", code="R004")
        try:
            path.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"cannot write report: {exc.strerror}", code="R005",
                             location=Location(str(path))) from None
        written.append(path)
    return written


def compile_template(path: Path) -> list[Finding]:
    """Lint hook (see `policyrun.render.templating.compile_template`)."""
    from policyrun.render.templating import compile_template as compile_one

    return compile_one(path)


def rulebook_templates(rulebook: Rulebook, rulebook_path: Path) -> dict[str, Path]:
    """The templates a rulebook names (`report.templates`, `report.template` = md), as paths."""
    spec = rulebook.report
    if spec is None:
        return {}
    names = dict(spec.templates)
    if spec.template and "md" not in names:
        names["md"] = spec.template
    base = rulebook_path.parent
    return {name: (base / rel) for name, rel in names.items()}
