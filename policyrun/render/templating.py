"""Jinja2 for report templates: sandboxed, strict, and with errors that point at template lines.

Rulebooks may ship their own templates, so a template is untrusted input: it runs in
`SandboxedEnvironment`, sees only plain data (`report`, `trace`, `context`), and an undefined
name is an error (`StrictUndefined`) rather than an empty string that hides a typo in an audit
report. A rulebook template can extend ours: `{% extends "policyrun/report.md.j2" %}`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from policyrun.errors import Finding, Location, RulebookError

if TYPE_CHECKING:
    from jinja2 import Environment

BUILTIN_DIR = Path(__file__).resolve().parent.parent / "templates"
BUILTIN_PREFIX = "policyrun"


def is_html(name: str) -> bool:
    return bool(re.search(r"\.(html?|xml|svg)(\.j2|\.jinja2?)?$", name))


def md_text(value: Any) -> str:
    """Inline Markdown text that is safe in a table cell: no raw HTML, pipes or line breaks."""
    text = "" if value is None else str(value)
    text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("|", "\\|")
    return re.sub(r"\s*\n\s*", " ", text)


def md_code(value: Any, table: bool = True) -> str:
    """A Markdown code span that survives backticks in the value (and pipes, inside tables)."""
    text = re.sub(r"\s*\n\s*", " ", "" if value is None else str(value))
    if not text:
        return ""
    ticks = max((len(m) for m in re.findall(r"`+", text)), default=0) + 1
    fence = "`" * ticks
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    if table:
        text = text.replace("|", "\\|")
    return f"{fence}{pad}{text}{pad}{fence}"


def md_fenced(value: Any, lang: str = "") -> str:
    """A fenced code block whose fence is longer than any backtick run inside it."""
    text = "" if value is None else str(value)
    ticks = max(3, max((len(m) for m in re.findall(r"`+", text)), default=0) + 1)
    fence = "`" * ticks
    return f"{fence}{lang}\n{text.rstrip()}\n{fence}"


def to_json(value: Any, indent: int | None = None) -> str:
    return json.dumps(value, ensure_ascii=False, indent=indent, default=str)


def _defang(value: Any) -> Any:
    """HTML output hook: escape, then write `//` as character references.

    The page must not contain a URL a browser could fetch or a reviewer could mistake for one;
    fact values may hold remotes such as `https://...`. Character references render identically,
    so people still read and copy the exact value.
    """
    from markupsafe import Markup, escape

    if value is None:
        return value
    return Markup(str(escape(value)).replace("//", "&#47;&#47;"))


def environment(search_dir: Path | None = None, *, html: bool = False) -> Environment:
    """A sandboxed environment; `search_dir` (a rulebook's template folder) comes first."""
    from jinja2 import ChoiceLoader, FileSystemLoader, PrefixLoader, StrictUndefined
    from jinja2.sandbox import SandboxedEnvironment

    builtin = FileSystemLoader(str(BUILTIN_DIR))
    loaders: list[Any] = [FileSystemLoader(str(search_dir))] if search_dir else []
    loaders += [PrefixLoader({BUILTIN_PREFIX: builtin}), builtin]
    env = SandboxedEnvironment(loader=ChoiceLoader(loaders), undefined=StrictUndefined, autoescape=html,
                               trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
                               finalize=_defang if html else None)
    env.filters.update(md=md_text, code=md_code, fenced=md_fenced, json=to_json)
    return env


def _where(exc: BaseException, fallback: Path) -> Location:
    """The template file:line an error happened at, from the traceback Jinja rewrites."""
    lineno = getattr(exc, "lineno", None)
    filename = getattr(exc, "filename", None)
    if lineno:
        return Location(filename or str(fallback), lineno, 1)
    tb = exc.__traceback__
    found: Location | None = None
    while tb is not None:
        name = tb.tb_frame.f_code.co_filename
        if name.endswith((".j2", ".jinja", ".jinja2", ".html", ".md")) or name == str(fallback):
            found = Location(name, tb.tb_lineno, 1)
        tb = tb.tb_next
    return found or Location(str(fallback))


def compile_template(path: Path) -> list[Finding]:
    """Lint hook: findings for a template that cannot compile, located at file:line.

    R001: syntax error (or unknown filter/test) at the template line; R002: a template, or one it
    extends/includes/imports, does not exist.

    Templates it extends, includes or imports by a constant name are compiled too, so an error in
    a partial is reported at the partial's line.
    """
    from jinja2 import TemplateNotFound, TemplateSyntaxError, nodes

    if not path.is_file():
        return [Finding("R002", "report template not found; check report.templates in the rulebook "
                                "(paths are relative to the rulebook file)", Location(str(path)))]
    env = environment(path.parent, html=is_html(path.name))
    findings: list[Finding] = []
    seen: set[str] = set()

    def visit(name: str, file: Path, via: Location | None) -> None:
        if name in seen:
            return
        seen.add(name)
        try:
            source, filename, _ = env.loader.get_source(env, name)  # type: ignore[union-attr]
        except TemplateNotFound:
            findings.append(Finding("R002", f"template {name!r} not found next to the rulebook template or "
                                            f"among the built-in ones ({BUILTIN_PREFIX}/...)",
                                    via or Location(str(file))))
            return
        except UnicodeDecodeError:
            findings.append(Finding("R001", "template is not valid UTF-8", Location(str(filename or file))))
            return
        try:
            tree = env.parse(source, name, filename)
            env.compile(tree, name, filename)
        except TemplateSyntaxError as exc:
            findings.append(Finding("R001", f"template syntax error: {exc.message}",
                                    Location(filename or str(file), exc.lineno or 0, 1)))
            return
        for node in tree.find_all((nodes.Extends, nodes.Include, nodes.Import, nodes.FromImport)):
            target = getattr(node, "template", None)
            if isinstance(target, nodes.Const) and isinstance(target.value, str):
                visit(target.value, Path(filename or file), Location(filename or str(file), node.lineno, 1))

    visit(path.name, path, None)
    return findings


def render_template(path: Path | None, builtin: str, variables: Mapping[str, Any], *, html: bool) -> str:
    """Render a rulebook template (or the built-in one); errors become RulebookError (exit 3)."""
    from jinja2 import TemplateError

    if path is not None:
        findings = compile_template(path)
        if findings:
            raise RulebookError(findings[0].message, code=findings[0].code, location=findings[0].location,
                                findings=findings)
        env = environment(path.parent, html=html)
        name = path.name
    else:
        env = environment(html=html)
        name = builtin
    try:
        return env.get_template(name).render(**variables)
    except TemplateError as exc:
        where = _where(exc, path or BUILTIN_DIR / builtin)
        raise RulebookError(f"report template failed: {exc.message or type(exc).__name__}; "
                            "templates see `report`, `trace` and `context` (docs/reports.md)",
                            code="R003", location=where) from None
    except RecursionError:
        raise RulebookError("report template recursed too deeply (does it extend or include itself?)",
                            code="R003", location=Location(str(path or builtin))) from None
