"""`policyrun lint` of a test file (`*.test.yaml`): its schema, and what its cases name checked
against the rulebook it tests, each finding at the line that names it. Before, lint read a test
file as a rulebook and said only "this file is not a rulebook"; `policyrun test` found the same
mistakes one at a time, as a case that cannot run."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from policyrun.checkid import split_in_phase
from policyrun.errors import Finding, Location, PolicyrunError
from policyrun.yamlsource import SourceMap

SUITE_SUFFIXES = (".test.yaml", ".test.yml")


def is_test_file(path: Path) -> bool:
    return path.name.endswith(SUITE_SUFFIXES)


def _hint(name: str, known: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, list(known), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


def lint_suite(path: Path) -> list[Finding]:
    from pydantic import ValidationError

    from policyrun.language.locate import resolve_ref
    from policyrun.language.rulebook import load_rulebook, validation_findings
    from policyrun.language.testsuite import Suite
    from policyrun.yamlsource import load_yaml_file

    try:
        data, smap = load_yaml_file(path)
        suite = Suite.model_validate(data)
    except PolicyrunError as exc:
        return exc.findings or [Finding(exc.code, exc.message, exc.location or Location(path.as_posix()))]
    except ValidationError as exc:
        return validation_findings(exc, smap)
    base = path.parent
    out: list[Finding] = []
    at_rulebook = smap.locate(("rulebook",))
    try:
        rb = load_rulebook(resolve_ref(suite.rulebook, relative_to=base)).model
    except PolicyrunError as exc:
        where = f" ({exc.location})" if exc.location else ""
        return [Finding("K001", f"the rulebook {suite.rulebook!r} cannot be loaded: {exc.message}{where}; fix the "
                                "path (relative to this test file) or the rulebook", at_rulebook, node="rulebook")]
    out += _files(base, suite.facts_files, ("facts_files",), smap)
    phases = {p.id: p for p in rb.phases}
    for i, case in enumerate(suite.cases):
        at = ("cases", i)
        node = f"cases[{i}] ({case.name})"
        if case.mode not in rb.modes:
            out.append(Finding("K002", f"case {case.name!r}: no mode {case.mode!r} in rulebook {rb.name!r}"
                                       f"{_hint(case.mode, rb.modes)}", smap.locate((*at, "mode")), node=node))
        from policyrun.language.inputs import input_aliases

        for name in case.inputs:
            if name not in input_aliases(rb):
                out.append(Finding("K002", f"case {case.name!r}: no input {name!r} in rulebook {rb.name!r}"
                                           f"{_hint(name, input_aliases(rb))}", _key(smap, (*at, "inputs", name)),
                                   node=node))
        for name in case.facts:
            if name not in rb.probes:
                out.append(Finding("K002", f"case {case.name!r}: the rulebook has no probe {name!r}, so this fact "
                                           f"is never read{_hint(name, rb.probes)}", _key(smap, (*at, "facts", name)),
                                   node=node))
        out += _files(base, case.facts_files, (*at, "facts_files"), smap)
        if case.waivers is not None and not (base / case.waivers).is_file():
            out.append(Finding("K003", f"case {case.name!r}: no waivers file {case.waivers!r} (relative to this "
                                       "test file)", smap.locate((*at, "waivers")), node=node))
        out += _expected(case.name, case.expect.model_dump(), phases, smap, (*at, "expect"), node)
    return out


def _key(smap: SourceMap, path: tuple[Any, ...]) -> Location:
    return smap.locate(path, key=True)


def _files(base: Path, names: list[str], at: tuple[Any, ...], smap: SourceMap) -> list[Finding]:
    from policyrun.facts import load_facts

    out = []
    for j, name in enumerate(names):
        where = smap.locate((*at, j))
        if not (base / name).is_file():
            out.append(Finding("K003", f"no snapshot file {name!r} (relative to this test file)", where))
            continue
        try:
            load_facts(base / name)
        except PolicyrunError as exc:
            out.append(Finding("K003", f"snapshot {name!r} cannot be read: {exc.message}", where))
    return out


def _expected(case: str, expect: dict[str, Any], phases: dict[str, Any], smap: SourceMap, at: tuple[Any, ...],
              node: str) -> list[Finding]:
    out = []
    for section in ("phases", "blockers", "next"):
        for pid in expect.get(section) or {}:
            if pid not in phases:
                out.append(Finding("K002", f"case {case!r}: expects phase {pid!r}, which the rulebook does not "
                                           f"have{_hint(pid, phases)}", _key(smap, (*at, section, pid)), node=node))
    refs = [(s, r) for s in ("messages", "checks") for r in expect.get(s) or {}] + \
           [("waived", r) for r in expect.get("waived") or []]
    for section, ref in refs:
        pid, cid = split_in_phase(ref)
        where = _key(smap, (*at, section, ref)) if section != "waived" else smap.locate((*at, section))
        if pid not in phases:
            out.append(Finding("K002", f"case {case!r}: {ref!r} names phase {pid!r}, which the rulebook does not "
                                       f"have{_hint(pid, phases)}", where, node=node))
            continue
        ids = [c.id for c in phases[pid].evidence] + [c.id for c in phases[pid].preconditions if c.id] + \
              [c.id for c in phases[pid].stop_when if c.id]
        if cid not in ids:
            out.append(Finding("K002", f"case {case!r}: phase {pid} has no check {cid!r}{_hint(cid, ids)}", where,
                               node=node))
    return out
