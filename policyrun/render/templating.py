"""Jinja2 for report templates: sandboxed, bounded, strict, and with errors at template lines.

Rulebooks may ship their own templates, so a template is untrusted input: it runs in a bounded
sandbox (policyrun.render.sandbox: no Python internals, a deadline, size limits), sees only plain
data (`report`, `trace`, `context`), and an undefined name is an error (`StrictUndefined`) rather
than an empty string that hides a typo in an audit report. Template files are read only from
inside their folder, symlinks resolved and checked, regular files of bounded size. A rulebook
template can extend ours: `{% extends "policyrun/report.md.j2" %}`.

Imported only when a report is rendered or a rulebook names templates, so Jinja2 loads here.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from jinja2 import BaseLoader, Environment, TemplateError, TemplateNotFound, TemplateSyntaxError, nodes

from policyrun import limits
from policyrun.errors import Finding, Location, RulebookError
from policyrun.safetext import escape_controls
from policyrun.render.sandbox import BoundedEnvironment, TemplateLimit, render_bounded

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
    """HTML output hook: escape, show control characters as escapes, write `//` as references.

    The page must not contain a URL a browser could fetch or a reviewer could mistake for one;
    fact values may hold remotes such as `https://...`. Character references render identically,
    so people still read and copy the exact value.
    """
    from markupsafe import Markup, escape

    if value is None:
        return value
    return Markup(escape_controls(str(escape(value))).replace("//", "&#47;&#47;"))


def _plain_text(value: Any) -> Any:
    """Markdown output hook: control characters from facts become visible escapes."""
    return escape_controls(value) if isinstance(value, str) else value


class TemplateRefused(Exception):
    """A template file policyrun will not read (R007): outside its folder, not a regular file, too big."""

    def __init__(self, name: str, path: str, reason: str) -> None:
        super().__init__(f"template {name!r} {reason}")
        self.name = name
        self.path = path
        self.reason = reason


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def _read_template(candidate: str, root: str, name: str) -> str:
    """A template's source, read only if it resolves (symlinks followed) inside `root` and is a
    regular file within the size bound."""
    if not _inside(os.path.realpath(candidate), root):
        raise TemplateRefused(name, candidate, "resolves outside its folder (a symlink or `..`?); keep "
                                               "templates and what they include in the template's folder")
    try:
        data = limits.read_limited(Path(candidate), limits.TEMPLATE_BYTES)
    except limits.Unreadable as exc:
        raise TemplateRefused(name, candidate, f"cannot be read: {exc.reason}") from None
    return data.decode("utf-8")


class _ContainedLoader(BaseLoader):
    """FileSystemLoader's lookup, but every file is checked by `_read_template` before it is read."""

    def __init__(self, folder: Path) -> None:
        self.folder = str(folder)
        self.root = os.path.realpath(folder)

    def get_source(self, environment: Environment, template: str) -> tuple[str, str, Callable[[], bool]]:
        from jinja2.loaders import split_template_path

        candidate = os.path.join(self.folder, *split_template_path(template))
        if not os.path.lexists(candidate) or os.path.isdir(candidate):
            raise TemplateNotFound(template)
        source = _read_template(candidate, self.root, template)
        mtime = os.path.getmtime(candidate)
        return source, candidate, lambda: os.path.getmtime(candidate) == mtime


def environment(search_dir: Path | None = None, *, html: bool = False) -> BoundedEnvironment:
    """A sandboxed, bounded environment; `search_dir` (a rulebook's template folder) comes first."""
    from jinja2 import ChoiceLoader, PrefixLoader, StrictUndefined

    builtin = _ContainedLoader(BUILTIN_DIR)
    loaders: list[Any] = [_ContainedLoader(search_dir)] if search_dir else []
    loaders += [PrefixLoader({BUILTIN_PREFIX: builtin}), builtin]
    env = BoundedEnvironment(loader=ChoiceLoader(loaders), undefined=StrictUndefined, autoescape=html,
                             trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
                             finalize=_defang if html else _plain_text)
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
    extends/includes/imports, does not exist; R007: a template file policyrun will not read
    (outside its folder, not a regular file, too large).

    Templates it extends, includes or imports by a constant name are compiled too, so an error in
    a partial is reported at the partial's line.
    """
    if not os.path.lexists(path) or path.is_dir():
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
        except TemplateRefused as exc:
            findings.append(Finding("R007", str(exc), via or Location(exc.path)))
            return
        except UnicodeDecodeError:
            findings.append(Finding("R001", "template is not valid UTF-8", via or Location(str(file))))
            return
        try:
            tree = env.parse(source, name, filename)
            env.compile(tree, name, filename)
        except TemplateSyntaxError as exc:
            findings.append(Finding("R001", f"template syntax error: {exc.message}",
                                    Location(filename or str(file), exc.lineno or 0, 1)))
            return
        except (RecursionError, SyntaxError, MemoryError):
            # Jinja2 compiles a template to Python: about 100 nested blocks exceed what Python's own
            # compiler accepts ("too many statically nested blocks"), a SyntaxError of its own.
            findings.append(Finding("R001", "template nests too deeply to compile; flatten it",
                                    Location(filename or str(file))))
            return
        for node in tree.find_all((nodes.Extends, nodes.Include, nodes.Import, nodes.FromImport)):
            target = getattr(node, "template", None)
            if isinstance(target, nodes.Const) and isinstance(target.value, str):
                visit(target.value, Path(filename or file), Location(filename or str(file), node.lineno, 1))

    visit(path.name, path, None)
    return findings


def rulebook_template_problem(base: Path, rel: str) -> str | None:
    """Why a rulebook's template path is refused, or None: it must name a regular file inside the
    rulebook's folder (`base`), symlinks resolved, within the template size bound."""
    if Path(rel).is_absolute():
        return "it is an absolute path"
    candidate = base / rel
    if not os.path.lexists(candidate):
        return None  # not found: R002, reported by the caller
    if not _inside(os.path.realpath(candidate), os.path.realpath(base)):
        return "it resolves outside it (a symlink or `..`)"
    try:
        limits.read_limited(candidate, limits.TEMPLATE_BYTES)
    except limits.Unreadable as exc:
        return exc.reason
    return None


def render_template(path: Path | None, builtin: str, variables: Mapping[str, Any], *, html: bool) -> str:
    """Render a rulebook template (or the built-in one); errors become RulebookError (exit 3)."""
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
    fallback = path or BUILTIN_DIR / builtin
    try:
        return render_bounded(env, env.get_template(name), dict(variables))
    except TemplateRefused as exc:
        raise RulebookError(str(exc), code="R007", location=_where(exc, fallback)) from None
    except TemplateLimit as exc:
        raise RulebookError(f"report template stopped: {exc.message}; a template may not run longer or build "
                            "more than policyrun's bounds (docs/security.md)", code="R008",
                            location=_where(exc, fallback)) from None
    except TemplateError as exc:
        raise RulebookError(f"report template failed: {exc.message or type(exc).__name__}; "
                            "templates see `report`, `trace` and `context` (docs/reports.md)",
                            code="R003", location=_where(exc, fallback)) from None
    except RecursionError:
        raise RulebookError("report template recursed too deeply (does it extend or include itself?)",
                            code="R003", location=Location(str(fallback))) from None
    except MemoryError:
        raise RulebookError("report template ran out of memory; it builds too much", code="R008",
                            location=Location(str(fallback))) from None
    except Exception as exc:  # an error in the template's own expressions: 1 // 0, int('x'), ...
        raise RulebookError(f"report template failed: {type(exc).__name__}: {exc}", code="R003",
                            location=_where(exc, fallback)) from None
