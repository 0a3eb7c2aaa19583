"""`policyrun probes [KIND]`: the probe kinds, their parameters and the shape of their facts."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping
from typing import Any

from policyrun.app.probes import ParamDescription, ProbeDescription, type_text
from policyrun.errors import EXIT_OK


def add_parser(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("probes", help="list probe kinds, their parameters and facts",
                       description="List every registered probe kind (built-in and plugins) with its `with:` "
                                   "parameters (* = required), the shape of the fact it produces and its side "
                                   "effects. Name a KIND to see it in full.")
    p.add_argument("kind", nargs="?", help="show this kind in full")
    p.add_argument("--json", action="store_true", help="print the kinds as JSON, schemas included")
    p.set_defaults(func=run)


_MAX_DEPTH = 6


def fact_fields(schema: Mapping[str, Any], prefix: str = "", depth: int = 0) -> list[str]:
    """Every field of a fact, nested: `totals.failed (integer)`, `hits[].path (string)`, with its
    description, as a rulebook path would name it (a map's keys are shown as `<key>`)."""
    lines: list[str] = []
    if depth > _MAX_DEPTH:
        return lines
    for alt in [schema, *schema.get("anyOf", []), *schema.get("oneOf", [])]:
        for name, sub in (alt.get("properties") or {}).items():
            if not isinstance(sub, Mapping):
                continue
            path = f"{prefix}{name}"
            lines.append(f"    {path} ({type_text(sub)})  {sub.get('description', '')}".rstrip())
            lines += _below(sub, path, depth)
    return lines


def _below(sub: Mapping[str, Any], path: str, depth: int) -> list[str]:
    items = sub.get("items")
    if isinstance(items, Mapping) and (items.get("properties") or items.get("anyOf")):
        return fact_fields(items, f"{path}[].", depth + 1)
    extra = sub.get("additionalProperties")
    if isinstance(extra, Mapping):
        if extra.get("properties"):
            return fact_fields(extra, f"{path}.<key>.", depth + 1)
        if extra.get("type") or extra.get("items"):
            lines = [f"    {path}.<key> ({type_text(extra)})  {extra.get('description', '')}".rstrip()]
            return lines + _below(extra, f"{path}.<key>", depth + 1)
    if sub.get("properties"):
        return fact_fields(sub, f"{path}.", depth + 1)
    return []


def _param_line(p: ParamDescription) -> str:
    default = f", default {json.dumps(p.default)}" if p.default is not None else ""
    return f"{p.name}{'*' if p.required else ''} ({p.type}{default})"


def plain(probes: list[ProbeDescription], *, full: bool) -> str:
    lines: list[str] = []
    for d in probes:
        lines.append(f"{d.kind}  {d.summary}")
        if full:
            lines.append("  with:")
            lines += [f"    {_param_line(p)}  {p.description}".rstrip() for p in d.params] or ["    (none)"]
            lines.append(f"  facts: {d.facts_shape}")
            lines += fact_fields(d.fact_schema)
        else:
            lines.append("  with:  " + (", ".join(_param_line(p) for p in d.params) or "(none)"))
            lines.append(f"  facts: {d.facts_shape}")
        lines.append(f"  side effects: {', '.join(d.side_effects) or 'none'}")
        lines.append("")
    return "\n".join(lines)


def _table(probes: list[ProbeDescription]) -> None:
    from rich.console import Console
    from rich.table import Table

    from rich.markup import escape

    table = Table(title="probe kinds (* = required parameter; `policyrun probes KIND` for details)",
                  show_lines=True)
    for col in ("kind", "with", "facts", "side effects"):
        table.add_column(col, overflow="fold")
    for d in probes:
        table.add_row(f"[bold]{escape(d.kind)}[/]\n[dim]{escape(d.summary)}[/]",
                      escape("\n".join(_param_line(p) for p in d.params) or "—"),
                      escape(d.facts_shape), ", ".join(d.side_effects) or "none")
    Console().print(table, highlight=False)


def run(args: argparse.Namespace) -> int:
    from policyrun.app.probes import describe_probes

    probes = describe_probes(args.kind or None)
    if args.json:
        sys.stdout.write(json.dumps([d.as_json() for d in probes], indent=2, sort_keys=True) + "\n")
    elif sys.stdout.isatty() and not args.kind:
        _table(probes)
    else:
        sys.stdout.write(plain(probes, full=bool(args.kind)))
    return EXIT_OK
