"""The report templates a rulebook names: where they are, that they stay inside its folder, and
lint's findings about them (the template compiled in the sandbox, located at the rulebook line
that names it).

Templates are part of the rulebook language, so lint (below the renderers) reads them through
this module; Jinja2 is imported only when a template is compiled.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from policyrun.errors import Finding, Location, RulebookError

if TYPE_CHECKING:
    from policyrun.model import Rulebook
    from policyrun.language.rulebook import LoadedRulebook


def _template_names(rulebook: Rulebook) -> dict[str, str]:
    spec = rulebook.report
    if spec is None:
        return {}
    names = dict(spec.templates)
    if spec.template and "md" not in names:
        names["md"] = spec.template
    return names


def rulebook_templates(rulebook: Rulebook, rulebook_path: Path) -> dict[str, Path]:
    """The templates a rulebook names (`report.templates`, `report.template` = md), as paths.

    Each must lie inside the rulebook's folder (symlinks resolved) and be a regular file of bounded
    size; `lint` reports a violation at the rulebook line (R007), and this refuses it again.
    """
    from policyrun.render.templating import rulebook_template_problem

    base = rulebook_path.parent
    out: dict[str, Path] = {}
    for name, rel in _template_names(rulebook).items():
        problem = rulebook_template_problem(base, rel)
        if problem:
            raise RulebookError(_outside_message(rel, problem), code="R007", location=Location(str(rulebook_path)))
        out[name] = base / rel
    return out


def _outside_message(rel: str, problem: str) -> str:
    return (f"report template {rel!r} must be a file inside the rulebook's folder ({problem}); keep templates "
            "beside the rulebook, or pass one with `policyrun report --template`")


def template_findings(rb: LoadedRulebook) -> list[Finding]:
    """Lint hook: the rulebook's templates, located at the rulebook lines that name them."""
    from policyrun.language.rulebook import node_path_text
    from policyrun.render.templating import compile_template as compile_one
    from policyrun.render.templating import rulebook_template_problem

    spec = rb.model.report
    if spec is None:
        return []
    findings: list[Finding] = []
    base = rb.file_of(("report",)).parent  # an overlay's report may come from its base
    for name, rel in _template_names(rb.model).items():
        node = ("report", "templates", name) if name in spec.templates else ("report", "template")
        problem = rulebook_template_problem(base, rel)
        if problem:
            findings.append(Finding("R007", _outside_message(rel, problem), rb.locate(node),
                                    node=node_path_text(node)))
        elif not (base / rel).is_file():
            findings.append(Finding("R002", f"report template {rel!r} not found (paths are relative to the "
                                            "rulebook)", rb.locate(node), node=node_path_text(node)))
        else:
            findings.extend(compile_one(base / rel))
    return findings
