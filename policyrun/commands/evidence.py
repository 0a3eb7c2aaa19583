"""`policyrun evidence`: the evidence files a rulebook asks people to write — their schemas, a
prefilled skeleton, and a check of a file against its schema.

Evidence (attestations) is what no probe can judge: an architecture review, a staged plan. The
rulebook declares each file's JSON Schema under `schemas:`; a schema may name, with
`x-policyrun-skeleton`, a derived value that is the file prefilled from the facts (the impact rows
to classify, the patches to dispose of), every judgment left `TODO: ...`. The rulebook's schema
refuses `TODO` values, so an unfinished skeleton never passes a gate.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from policyrun.errors import EXIT_FAIL, EXIT_OK, UsageError

SKELETON_KEY = "x-policyrun-skeleton"


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("evidence", help="print evidence schemas, write a prefilled skeleton, check a file",
                       description="The evidence files (attestations) RULEBOOK asks for. Without --schema: list "
                                   "them (schema, file, skeleton). With --schema NAME: print its JSON Schema; "
                                   "with --check FILE, validate FILE against it (exit 0 valid, 1 with every "
                                   "problem at file:line:col); with --skeleton, write the file prefilled from "
                                   "the facts (collected now, or --facts), to complete where it says TODO (the "
                                   "schema refuses TODO, so an unfinished skeleton never passes). Exit 3 on a "
                                   "usage or rulebook error.")
    from policyrun.commands.evaluate import add_rulebook_args

    add_rulebook_args(p)
    p.add_argument("--schema", metavar="NAME", help="an evidence schema of the rulebook (`schemas:`)")
    action = p.add_mutually_exclusive_group()
    action.add_argument("--check", type=Path, metavar="FILE", help="validate FILE against the schema")
    action.add_argument("--skeleton", action="store_true",
                        help="write the schema's prefilled skeleton (YAML) to stdout or -o")
    p.add_argument("--facts", action="append", type=Path, default=[], metavar="FILE",
                   help="with --skeleton: a facts snapshot (repeatable) instead of collecting")
    p.add_argument("--output", "-o", type=Path, metavar="FILE", help="with --skeleton: write here, not to stdout")
    p.add_argument("--force", action="store_true", help="with -o: replace an existing file")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from policyrun.engine import load_checked

    rb = load_checked(args.rulebook)
    if args.schema is None:
        if args.check or args.skeleton:
            raise UsageError("--check and --skeleton need --schema NAME", code="U003")
        sys.stdout.write(listing(rb, args.rulebook or rb.display))
        return EXIT_OK
    schema = resolve_schema(rb, args.schema)
    if args.check:
        return check(schema, args.check, args.schema)
    if args.skeleton:
        text = skeleton_text(rb, args, schema)
        if args.output is None:
            sys.stdout.write(text)
        else:
            _write(args.output, text, force=args.force)
            sys.stderr.write(f"wrote {args.output}: the `{args.schema}` skeleton; replace every TODO\n")
        return EXIT_OK
    sys.stdout.write(json.dumps(schema, indent=2, ensure_ascii=False) + "\n")
    return EXIT_OK


def _attestations(rb: Any) -> dict[str, list[tuple[str, Any]]]:
    """Schema name → (probe id, its `path` parameter as written) of the attestation probes reading it."""
    out: dict[str, list[tuple[str, Any]]] = {}
    for pid, spec in rb.model.probes.items():
        if spec.uses == "attestation" and isinstance(spec.with_.get("schema"), str):
            out.setdefault(spec.with_["schema"], []).append((pid, spec.with_.get("path")))
    return out


def listing(rb: Any, ref: str) -> str:
    if not rb.model.schemas:
        return f"{rb.display} declares no evidence schemas (`schemas:`)\n"
    readers = _attestations(rb)
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


def resolve_schema(rb: Any, name: str) -> dict[str, Any]:
    """The JSON Schema declared as `name` (a file path is read relative to the rulebook)."""
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


def check(schema: dict[str, Any], path: Path, name: str) -> int:
    """Validate one evidence file; print every problem at file:line:col."""
    from policyrun.errors import terminal_text
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
    problems = schema_problems(validator, doc, smap, shown)
    if not problems:
        sys.stdout.write(terminal_text(f"{shown}: matches schema `{name}`") + "\n")
        return EXIT_OK
    for problem in problems:
        sys.stdout.write(terminal_text(problem) + "\n")
    sys.stdout.write(terminal_text(f"{shown}: {len(problems)} problem(s) against schema `{name}`") + "\n")
    return EXIT_FAIL


def skeleton_text(rb: Any, args: argparse.Namespace, schema: dict[str, Any]) -> str:
    """The skeleton the schema names, computed from the facts, as commented YAML."""
    import yaml

    from policyrun.commands.eval import evaluate_expression
    from policyrun.inputs import resolve_inputs, select_mode

    derived = schema.get(SKELETON_KEY)
    if not isinstance(derived, str) or derived not in rb.model.derive:
        what = f"names derived.{derived}, which the rulebook does not derive" if derived else \
            f"has no `{SKELETON_KEY}` (the derived value that prefills it)"
        raise UsageError(f"schema {args.schema!r} of {rb.display} {what}; print the schema (--schema) and write "
                         "the file from it", code="U040")
    mode = select_mode(rb.model, args.mode)
    inputs = resolve_inputs(rb.model, args.sets, args.inputs)
    facts = _facts(rb, mode, inputs, args.facts, derived)
    result = evaluate_expression(f"derived.{derived}", rb.model, mode, inputs, facts)
    if not result["ok"]:
        raise UsageError(f"the `{args.schema}` skeleton (derived.{derived}) cannot be computed in mode {mode}: "
                         f"{result['error']}", code="U042")
    ref = args.rulebook or rb.display
    header = (f"# `{args.schema}` evidence for {rb.model.name} (mode {mode}), prefilled by `policyrun evidence`.\n"
              "# Replace every TODO: the schema refuses them, so this file passes no gate until it is complete.\n"
              f"# Schema: policyrun evidence {ref} --schema {args.schema}; "
              f"check: policyrun evidence {ref} --schema {args.schema} --check FILE\n")
    body: str = yaml.safe_dump(in_schema_order(result["value"], schema), sort_keys=False, allow_unicode=True,
                               width=100)
    return header + body


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


def _facts(rb: Any, mode: str, inputs: dict[str, Any], files: list[Path], derived: str) -> Any:
    """The facts the skeleton reads: the snapshots given, or those probes collected now."""
    if files:
        from policyrun.facts import load_facts, merge_facts

        return merge_facts((str(p), load_facts(p)) for p in files)
    from policyrun.collect import collect

    return collect(rb.model, mode, inputs, base_dir=Path.cwd(), only=_probes_read(rb, derived),
                   rulebook_dir=rb.file_of(("schemas",)).parent)


def _probes_read(rb: Any, derived: str) -> set[str]:
    """The probes a derived value reads, through the derived values it reads."""
    from policyrun.expr import compile_expr

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
    from policyrun.outfiles import write_file

    if path.exists() and not force:
        raise UsageError(f"{path} exists; policyrun never overwrites evidence someone may have written "
                         "(pass --force to replace it)", code="U043")
    write_file(path, text, code="U007", fix="choose another -o path")
