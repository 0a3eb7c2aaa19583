"""`lint` proper: static checks plus what needs the probe registry and report templates.

`evaluate` and `collect` refuse a rulebook with any error-level finding from here, so what
lint accepts is exactly what runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from policyrun.language.checks import check_rulebook
from policyrun.errors import Finding, FindingSink, Location, PolicyrunError
from policyrun.language.rulebook import LoadedRulebook, load_rulebook, node_path_text


def lint_file(path: Path) -> list[Finding]:
    """Every finding for one rulebook file (from the lint cache when nothing it depends on changed)."""
    from policyrun.language import lintcache

    cached = lintcache.lookup(path)
    if cached is not None:
        return cached
    from policyrun.language.suitelint import is_test_file, lint_suite

    if is_test_file(path):
        return lint_suite(path)  # not cached: the findings depend on the rulebook and snapshots it names
    if _is_waivers_file(path):
        from policyrun.language.waivers import lint_waivers

        return lint_waivers(path)  # not cached: expiry depends on the day
    try:
        rb = load_rulebook(path)
    except PolicyrunError as exc:
        if exc.findings:
            return exc.findings
        return [Finding(exc.code, exc.message, exc.location or Location(path.as_posix()))]
    findings = findings_for(rb)
    lintcache.store(path, findings, lint_dependencies(rb))
    return findings


def lint_dependencies(rb: LoadedRulebook) -> list[Path]:
    """Files besides the rulebook whose content lint's findings depend on: schema files, and the
    report templates' folders (a template may include or extend any file there)."""
    base = rb.directory
    deps: list[Path] = []
    from policyrun.language.locate import shipped_dir

    for layer in rb.chain[:-1]:  # an overlay's bases
        deps.append(shipped_dir() / layer.path.removeprefix("<shipped>/") if layer.path.startswith("<shipped>/")
                    else Path(layer.path))
    for schema in rb.model.schemas.values():
        if isinstance(schema, str):
            deps.append(base / schema)
    spec = rb.model.report
    if spec is not None:
        for rel in [*spec.templates.values(), *([spec.template] if spec.template else [])]:
            folder = (base / rel).parent
            try:
                deps.extend(sorted(p for p in folder.rglob("*") if p.is_file())[:500])
            except OSError:
                deps.append(base / rel)
    return deps


def findings_for(rb: LoadedRulebook) -> list[Finding]:
    from policyrun.language.commandlint import command_read_findings
    from policyrun.language.vacuous import vacuous_findings

    return (check_rulebook(rb) + _probe_findings(rb) + _type_findings(rb) + vacuous_findings(rb)
            + command_read_findings(rb) + _template_findings(rb) + _disabled_findings(rb))


def _disabled_findings(rb: LoadedRulebook) -> list[Finding]:
    """Every check an overlay disables, as a warning at the `disable` entry that removed it: a reader
    of the overlay sees each loosening of the policy it adapts, not only the trace."""
    out: list[Finding] = []
    for i, phase in enumerate(rb.model.phases):
        for k, entry in enumerate(phase.disabled):
            path = ("phases", i, "disabled", k)
            out.append(Finding("O005", f"disables check {entry.id!r} of phase {phase.id} ({entry.reason})",
                               rb.locate(path), "warning", node=f"phases → {phase.id} → disable[{k}]"))
    return out


def _type_findings(rb: LoadedRulebook) -> list[Finding]:
    """Fact paths and comparison operands checked against the probes' fact schemas."""
    from policyrun.language.checks import _position, expression_sites
    from policyrun.language.typecheck import check_source, fact_schemas

    schemas = fact_schemas(rb.model)
    if not schemas:
        return []
    sink = FindingSink()
    for site in expression_sites(rb):
        if not site.source.strip() or "facts" not in site.source:
            continue
        text = site.source if site.condition else site.source.strip()
        lead = 0 if site.condition else len(site.source) - len(site.source.lstrip())
        for found in check_source(text, schemas):
            where = _position(rb, site, found.line, found.column + (lead if found.line == 1 else 0))
            sink.add(found.code, found.message, where, node=node_path_text(site.path))
    return sink.findings


def _probe_findings(rb: LoadedRulebook) -> list[Finding]:
    from policyrun.language.interpolation import has_template
    from policyrun.probes.declared import declarations

    sink = FindingSink()
    kinds = declarations() if rb.model.probes else {}
    validators: dict[str, Any] = {}
    for pid, spec in rb.model.probes.items():
        path = ("probes", pid)
        probe = kinds.get(spec.uses)
        if probe is None:
            import difflib

            hint = difflib.get_close_matches(spec.uses, list(kinds), n=1)
            extra = f"; did you mean {hint[0]!r}?" if hint else "; `policyrun probes` lists the kinds"
            sink.add("L011", f"unknown probe kind {spec.uses!r}{extra}", rb.locate((*path, "uses")),
                     node=node_path_text((*path, "uses")))
            continue
        schema_name = spec.with_.get("schema")
        if isinstance(schema_name, str) and spec.uses == "attestation" and schema_name not in rb.model.schemas:
            sink.add("L027", f"attestation schema {schema_name!r} is not declared under `schemas`",
                     rb.locate((*path, "with", "schema")), node=node_path_text((*path, "with", "schema")))
        if spec.uses not in validators:  # one validator per kind, not per probe
            from jsonschema import Draft202012Validator

            validators[spec.uses] = Draft202012Validator(dict(probe.params_schema))
        # Parameters still holding `${...}` are checked for shape after interpolation, at collect time.
        concrete = {k: v for k, v in spec.with_.items() if not has_template(v)}
        validator = validators[spec.uses]
        for err in validator.iter_errors(concrete):
            if err.validator == "required" and any(has_template(v) for v in spec.with_.values()):
                missing = err.message.split("'")[1] if "'" in err.message else ""
                if missing in spec.with_:
                    continue
            if err.validator in ("oneOf", "anyOf") and not err.absolute_path and \
                    any(has_template(v) for v in spec.with_.values()):
                continue  # a templated parameter may satisfy a branch; collect checks it after interpolation
            where = (*path, "with", *err.absolute_path)
            sink.add("L012", f"invalid parameters for {spec.uses}: {err.message}", rb.locate(where),
                     node=node_path_text(where))
    return sink.findings


def _template_findings(rb: LoadedRulebook) -> list[Finding]:
    if rb.model.report is None:
        return []
    # policyrun.render is cheap to import (renderers load Jinja2 lazily), so only a rulebook that
    # names templates pulls Jinja2 into lint. Paths are checked there (inside the rulebook's folder).
    from policyrun.render.templatefiles import template_findings

    return template_findings(rb)


def _is_waivers_file(path: Path) -> bool:
    """A waivers file names its format on a top-level `policyrun_waivers:` line."""
    try:
        with open(path, "rb") as f:
            head = f.read(4096)
    except OSError:
        return False
    return any(line.startswith(b"policyrun_waivers:") for line in head.splitlines())
