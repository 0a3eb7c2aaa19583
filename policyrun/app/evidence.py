"""Evidence files a rulebook asks people to write: their schemas, a prefilled skeleton, and a
check of a file against its schema.

Evidence (attestations) is what no probe can judge: an architecture review, a staged plan. The
rulebook declares each file's JSON Schema under `schemas:`; a schema may name, with
`x-policyrun-skeleton`, a derived value that is the file prefilled from the facts (the impact rows
to classify, the patches to dispose of), every judgment left `TODO: ...`. The rulebook's schema
refuses `TODO` values, so an unfinished skeleton never passes a gate.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from policyrun.app.binding import RulebookRequest

if TYPE_CHECKING:
    from policyrun.language.rulebook import LoadedRulebook

SKELETON_KEY = "x-policyrun-skeleton"


@dataclass(frozen=True)
class SkeletonRequest:
    rulebook: RulebookRequest
    schema: str
    facts_files: tuple[Path, ...] = ()  # instead of collecting the facts the skeleton reads
    output: Path | None = None  # None: the caller prints the text
    force: bool = False  # replace an existing output file


@dataclass(frozen=True)
class EvidenceCheck:
    path: Path
    schema: str
    problems: list[str] = field(default_factory=list)  # each at file:line:col

    @property
    def exit_code(self) -> int:
        from policyrun.errors import EXIT_FAIL, EXIT_OK

        return EXIT_FAIL if self.problems else EXIT_OK


def attestations(rb: LoadedRulebook) -> dict[str, list[tuple[str, Any]]]:
    """Schema name → (probe id, its `path` parameter as written) of the attestation probes reading it."""
    out: dict[str, list[tuple[str, Any]]] = {}
    for pid, spec in rb.model.probes.items():
        if spec.uses == "attestation" and isinstance(spec.with_.get("schema"), str):
            out.setdefault(spec.with_["schema"], []).append((pid, spec.with_.get("path")))
    return out


def listing(rb: LoadedRulebook, ref: str) -> str:
    """Every evidence schema of the rulebook: its title, the files read against it, required
    fields, and the command that writes its skeleton (`ref` names the rulebook in it)."""
    if not rb.model.schemas:
        return f"{rb.display} declares no evidence schemas (`schemas:`)\n"
    readers = attestations(rb)
    lines = []
    for name in rb.model.schemas:
        schema = resolve_schema(rb, name)
        title = schema.get("title") or ""
        lines.append(f"{name}{': ' + title if title else ''}")
        for pid, path in readers.get(name, []):
            lines.append(f"  file: {path} (probe {pid})")
        required = schema.get("required") or []
        if required:
            lines.append(f"  required: {', '.join(map(str, required))}")
        if SKELETON_KEY in schema:
            lines.append(f"  skeleton: derived.{schema[SKELETON_KEY]} "
                         f"(policyrun evidence {ref} --schema {name} --skeleton)")
    return "\n".join(lines) + "\n"


def resolve_schema(rb: LoadedRulebook, name: str) -> dict[str, Any]:
    """The JSON Schema declared as `name` (a file path is read relative to the rulebook)."""
    from policyrun.errors import UsageError
    from policyrun.probes.base import ProbeError
    from policyrun.probes.repo.files import load_schema

    if name not in rb.model.schemas:
        declared = ", ".join(rb.model.schemas) or "none"
        raise UsageError(f"{rb.display} declares no evidence schema {name!r} (declared: {declared})", code="U040")
    value = rb.model.schemas[name]
    if isinstance(value, dict):
        return value
    try:
        return load_schema(rb.file_of(("schemas",)).parent / value)
    except ProbeError as exc:
        raise UsageError(exc.message, code="U040") from None


def check_file(schema: dict[str, Any], path: Path, name: str) -> EvidenceCheck:
    """Validate one evidence file against schema `name`; every problem located at file:line:col."""
    from policyrun.errors import UsageError
    from policyrun.probes.base import ProbeError
    from policyrun.probes.repo.files import FORMATS, checked_validator, load_document, schema_problems

    shown = str(path)
    fmt = {".yml": "yaml", ".yaml": "yaml", ".json": "json", ".toml": "toml"}.get(path.suffix.lower())
    if fmt is None:
        raise UsageError(f"cannot tell the format of {shown} from its extension ({', '.join(FORMATS)})",
                         code="U041")
    try:
        validator = checked_validator(schema, shown)
        doc, smap, _ = load_document(path, fmt, shown)
    except ProbeError as exc:
        raise UsageError(exc.message, code="U041") from None
    return EvidenceCheck(path, name, list(schema_problems(validator, doc, smap, shown)))


def skeleton(rb: LoadedRulebook, request: SkeletonRequest, schema: dict[str, Any]) -> str:
    """The skeleton the schema names, computed from the facts, as commented YAML; written to
    `request.output` when given (never over an existing file unless `force`)."""
    import yaml

    from policyrun.app.binding import bind_loaded
    from policyrun.app.expression import evaluate_expression
    from policyrun.errors import UsageError

    derived = schema.get(SKELETON_KEY)
    if not isinstance(derived, str) or derived not in rb.model.derive:
        what = f"names derived.{derived}, which the rulebook does not derive" if derived else \
            f"has no `{SKELETON_KEY}` (the derived value that prefills it)"
        raise UsageError(f"schema {request.schema!r} of {rb.display} {what}; print the schema (--schema) and write "
                         "the file from it", code="U040")
    bound = bind_loaded(rb, request.rulebook)
    mode, inputs = bound.mode, bound.inputs
    facts = _facts(rb, mode, inputs, list(request.facts_files), derived)
    result = evaluate_expression(f"derived.{derived}", rb.model, mode, inputs, facts)
    if not result["ok"]:
        raise UsageError(f"the `{request.schema}` skeleton (derived.{derived}) cannot be computed in mode {mode}: "
                         f"{result['error']}", code="U042")
    ref = str(request.rulebook.rulebook or rb.display)
    header = (f"# `{request.schema}` evidence for {rb.model.name} (mode {mode}), prefilled by `policyrun evidence`.\n"
              "# Replace every TODO: the schema refuses them, so this file passes no gate until it is complete.\n"
              f"# Schema: policyrun evidence {ref} --schema {request.schema}; "
              f"check: policyrun evidence {ref} --schema {request.schema} --check FILE\n")
    body: str = yaml.safe_dump(in_schema_order(result["value"], schema), sort_keys=False, allow_unicode=True,
                               width=100)
    text = header + body
    if request.output is not None:
        _write(request.output, text, force=request.force)
    return text


def in_schema_order(value: Any, schema: Any) -> Any:
    """`value` with each map's keys in the order its schema lists them (CEL maps have no order),
    so the skeleton reads like the schema: decision and reviewer first, rows last."""
    if not isinstance(schema, dict):
        return value
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        keys = [k for k in props if k in value] + sorted(k for k in value if k not in props)
        return {k: in_schema_order(value[k], props.get(k)) for k in keys}
    if isinstance(value, list):
        return [in_schema_order(v, schema.get("items")) for v in value]
    return value


def _facts(rb: LoadedRulebook, mode: str, inputs: dict[str, Any], files: list[Path], derived: str) -> Any:
    """The facts the skeleton reads: the snapshots given, or those probes collected now."""
    if files:
        from policyrun.app.collect import load_snapshots

        return load_snapshots(files)
    from policyrun.app.collect import gather

    return gather(rb, mode, inputs, only=_probes_read(rb, derived))


def _probes_read(rb: LoadedRulebook, derived: str) -> set[str]:
    """The probes a derived value reads, through the derived values it reads."""
    from policyrun.language.expr import compile_expr

    probes: set[str] = set()
    seen: set[str] = set()
    todo = [derived]
    while todo:
        name = todo.pop()
        if name in seen or name not in rb.model.derive:
            continue
        seen.add(name)
        compiled = compile_expr(rb.model.derive[name].value)
        probes |= set(compiled.facts)
        todo.extend(compiled.derived)
    return probes


def _write(path: Path, text: str, *, force: bool) -> None:
    from policyrun.errors import UsageError
    from policyrun.outfiles import write_file

    if path.exists() and not force:
        raise UsageError(f"{path} exists; policyrun never overwrites evidence someone may have written "
                         "(pass --force to replace it)", code="U043")
    write_file(path, text, code="U007", fix="choose another -o path")
