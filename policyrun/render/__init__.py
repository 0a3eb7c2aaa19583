"""Reports rendered from a verdict trace: Markdown, HTML, JUnit, SARIF and the trace JSON.

Every renderer reads `policyrun.trace.model.Trace` and nothing else, so a report can always be
regenerated from a saved trace. Renderer modules import their dependencies (Jinja2, rich)
lazily; importing this package costs almost nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from policyrun.errors import Finding, UsageError

if TYPE_CHECKING:
    from policyrun.model import Rulebook
    from policyrun.trace.model import Trace

# Format name → file name written by `write_reports`.
FORMATS: dict[str, str] = {
    "md": "report.md",
    "html": "report.html",
    "junit": "junit.xml",
    "sarif": "report.sarif",
    "json": "trace.json",
    "github": "github-annotations.txt",  # GitHub Actions workflow commands (policyrun.render.github)
}
TEMPLATED = frozenset({"md", "html"})
# Attestations (policyrun.render.intoto): `report --format` only, since a VSA takes options and
# an attestation can be signed; `evaluate --format` writes the formats above.
ATTESTATIONS: dict[str, str] = {"in-toto": "statement.intoto.json", "vsa": "vsa.intoto.json"}


@dataclass(frozen=True)
class ReportOptions:
    """Options of single formats: `--base` (sarif, github), `--junit-include-outside-mode`,
    `--sarif-located-only` (docs/reports.md)."""

    base: Path | None = None  # sarif, github: code locations relative to this folder
    junit_outside_mode: bool = False  # junit: phases outside the mode as skipped testcases
    sarif_located_only: bool = False  # sarif: leave out results that have no location


def render(trace: Trace, fmt: str, *, template: Path | None = None, context: Mapping[str, Any] | None = None,
           base: Path | None = None, options: ReportOptions | None = None) -> str:
    """One report as text. `template` replaces the built-in template of `md` or `html`."""
    options = options or ReportOptions()
    base = base or options.base
    if fmt == "md":
        from policyrun.render.markdown import render_markdown
        return render_markdown(trace, template=template, context=context)
    if fmt == "html":
        from policyrun.render.html import render_html
        return render_html(trace, template=template, context=context)
    if template is not None:
        raise UsageError(f"--template applies to md and html reports, not {fmt}", code="R009")
    if fmt == "junit":
        from policyrun.render.junit import render_junit
        return render_junit(trace, include_outside_mode=options.junit_outside_mode)
    if fmt == "sarif":
        from policyrun.render.sarif import trace_to_sarif
        return trace_to_sarif(trace, base_dir=base, located_only=options.sarif_located_only)
    if fmt == "github":
        from policyrun.render.github import render_trace_github
        return render_trace_github(trace, base_dir=base)
    if fmt == "json":
        from policyrun.render.jsonout import render_json
        return render_json(trace)
    if fmt in ATTESTATIONS:
        from policyrun.render.intoto import attestation_text
        return attestation_text(trace, fmt)
    raise UsageError(f"unknown report format {fmt!r}; choose from {', '.join(FORMATS)}", code="R004")


def report_names(rulebook_templates: Mapping[str, Path] | None = None) -> list[str]:
    """Every report `evaluate --format` can write: the built-in formats, then the reports a
    rulebook declares under `report.templates` (the one list; `report --format` takes the
    built-ins, or any template with --template)."""
    return [*FORMATS, *(t for t in (rulebook_templates or {}) if t not in FORMATS)]


def check_formats(formats: Iterable[str], rulebook_templates: Mapping[str, Path] | None = None) -> list[str]:
    """The requested formats, split and checked before any work is done."""
    names = split_formats(formats)
    known = report_names(rulebook_templates)
    if bad := [f for f in names if f not in known]:
        raise UsageError(f"unknown report format {', '.join(bad)}; choose from {', '.join(known)}", code="R004")
    return names


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


def render_reports(trace: Trace, formats: Iterable[str], *,
                   rulebook_templates: Mapping[str, Path] | None = None,
                   context: Mapping[str, Any] | None = None, options: ReportOptions | None = None) -> dict[str, str]:
    """Each requested report rendered, by file name, in order (nothing is written).

    `rulebook_templates` maps report names to template paths (see `rulebook_templates()`): a name
    `md` or `html` replaces that built-in template; any other name is an extra report that is
    rendered only when asked for, to a file named after its template (`completion.md.j2` →
    `completion.md`).
    """
    templates = dict(rulebook_templates or {})
    out: dict[str, str] = {}
    for fmt in split_formats(formats):
        if fmt in FORMATS:
            out[FORMATS[fmt]] = render(trace, fmt, template=templates.get(fmt) if fmt in TEMPLATED else None,
                                       context=context, options=options)
        elif fmt in templates:
            from policyrun.render.markdown import template_variables
            from policyrun.render.templating import is_html, render_template

            tpl = templates[fmt]
            out[_custom_file_name(fmt, tpl)] = render_template(tpl, "", template_variables(trace, context),
                                                               html=is_html(tpl.name))
        else:
            choices = ", ".join([*FORMATS, *(t for t in templates if t not in FORMATS)])
            raise UsageError(f"unknown report format {fmt!r}; choose from {choices}", code="R004")
    return out


def write_reports(trace: Trace, formats: Iterable[str], out_dir: Path, *,
                  rulebook_templates: Mapping[str, Path] | None = None,
                  context: Mapping[str, Any] | None = None, options: ReportOptions | None = None) -> list[Path]:
    """Render every requested report, then write them into `out_dir` (atomically, under the
    folder's lock: see policyrun.outfiles); returns the paths written, in order. A report that
    fails to render leaves the folder untouched."""
    from policyrun.outfiles import write_files

    rendered = render_reports(trace, formats, rulebook_templates=rulebook_templates, context=context, options=options)
    return write_files(out_dir, rendered, code="R005", fix="choose another output folder")


def rulebook_context(rulebook: Rulebook) -> dict[str, Any]:
    """What a rulebook tells every report beside its templates (`report.hardware_phases`)."""
    phases = rulebook.report.hardware_phases if rulebook.report is not None else []
    return {"hardware_phases": list(phases)} if phases else {}


def write_run(trace: Trace, formats: Iterable[str], out_dir: Path, *,
              rulebook_templates: Mapping[str, Path] | None = None, options: ReportOptions | None = None,
              context: Mapping[str, Any] | None = None, extra: Mapping[str, str] | None = None) -> list[Path]:
    """What `evaluate --out DIR` writes: trace.json and the requested reports (and `extra` files,
    e.g. facts.json with --keep-facts), rendered first and then written together under the
    folder's lock, followed by manifest.json listing them."""
    from policyrun.outfiles import write_files

    text = trace.to_json()
    _check_readable(text)
    files = {"trace.json": text,
             **render_reports(trace, formats, rulebook_templates=rulebook_templates, options=options,
                              context=context), **(extra or {})}
    return write_files(out_dir, files, code="U007", fix="choose another --out folder", manifest=True)


def _check_readable(text: str) -> None:
    """Refuse to write a trace that `report`, `explain` and `verify` would refuse to read. Values
    are summarised (docs/security.md), so only a rulebook whose checks read very many large values
    gets here."""
    from policyrun import limits

    if len(text) * 4 <= limits.TRACE_BYTES:
        return  # UTF-8 takes at most 4 bytes a character: no need to encode
    size = len(text.encode("utf-8", "surrogatepass"))
    if size > limits.TRACE_BYTES:
        def shown(n: int) -> str:
            return f"{n / limits.MIB:.1f} MiB" if n >= limits.MIB else f"{n} bytes"

        raise UsageError(f"the trace would be {shown(size)}, over the {shown(limits.TRACE_BYTES)} that report, explain "
                         "and verify read; nothing was written. Split the rulebook's checks or have them read fewer "
                         "large values", code="T006")


def compile_template(path: Path) -> list[Finding]:
    """Lint hook (see `policyrun.render.templating.compile_template`)."""
    from policyrun.render.templating import compile_template as compile_one

    return compile_one(path)


def add_banner(text: str, fmt: str, problems: list[str]) -> str:
    """A report of an inconsistent trace (`--force`), with the inconsistencies on top where the
    format has room for prose (Markdown, HTML); machine formats are left as they are."""
    from policyrun.safetext import escape_controls
    from policyrun.trace.consistency import banner_lines

    lines = [escape_controls(line) for line in banner_lines(problems)]
    if fmt == "md":
        from policyrun.render.templating import md_text

        return "\n".join([f"> **{md_text(lines[0])}**", *(f"> {md_text(line)}  " for line in lines[1:])]) + "\n\n" + text
    if fmt == "html":
        from markupsafe import escape

        items = "".join(f"<li>{escape(line.strip(' -'))}</li>" for line in lines[1:])
        box = (f'<div role="alert" style="border:3px solid #cf222e;background:#ffebe9;padding:12px;margin:12px">'
               f"<strong>{escape(lines[0])}</strong><ul>{items}</ul></div>")
        body = text.find("<body")
        at = text.find(">", body) + 1 if body >= 0 else 0
        text = text[:at] + box + text[at:]
        return text.replace("<title>", "<title>INCONSISTENT TRACE — ", 1)
    return text
