"""Lint L031 and L032: how checks read the `command` probe's fact.

A `command` probe fails closed: without `ok_exit_codes`, a run that does not exit 0 is a failed
fact. With `ok_exit_codes`, every run is a fact and `ok` says how it ended, so an expression that
parses `stdout` without looking at `ok` (or the exit code) reads the output of a failed run as an
answer: an empty stdout from a tool that could not reach its index reads as "nothing outdated"
(L031). The other way round, a rulebook written before the fail-closed default that tests
`facts.x.ok` or `exit_code` now finds the fact missing where it was false: the check is UNKNOWN
(BLOCKED, or its `on_missing`) instead of taking its `on_fail` (L032, the migration hint of
docs/migrating.md).

An expression is judged with the others of its unit (an evidence's applies_when, check, message
and next; one derived value; one precondition; ...), so `applies_when: facts.x.ok` guards the
check that reads `facts.x.stdout`.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from dataclasses import dataclass, field

from policyrun.language.checks import ExprSite
from policyrun.errors import Finding, FindingSink
from policyrun.language.rulebook import LoadedRulebook
from policyrun.yamlsource import NodePath

OUTPUT_FIELDS = frozenset({"stdout", "stderr"})
OUTCOME_FIELDS = frozenset({"ok", "exit_code", "timed_out", "signal"})


@dataclass
class _Unit:
    output: dict[str, tuple[ExprSite, str]] = field(default_factory=dict)  # pid → (site, read) of stdout/stderr
    outcome: dict[str, tuple[ExprSite, str]] = field(default_factory=dict)  # pid → (site, read) of ok/exit_code
    status: set[str] = field(default_factory=set)  # pids asked about with failed()/error_code()/...


def _unit_key(path: NodePath) -> NodePath:
    return path[:4] if path[:1] == ("phases",) else path[:2]


def command_read_findings(rb: LoadedRulebook) -> list[Finding]:
    from policyrun.language.checks import _ref, expression_sites
    from policyrun.language.expr import ExprError, compile_condition, compile_expr

    commands = {pid: "ok_exit_codes" in spec.with_ for pid, spec in rb.model.probes.items() if spec.uses == "command"}
    if not commands:
        return []
    units: dict[NodePath, _Unit] = defaultdict(_Unit)
    for site in expression_sites(rb):
        if not site.source.strip() or "facts" not in site.source:
            continue
        try:
            compiled = compile_condition(site.source) if site.condition else compile_expr(site.source.strip())
        except ExprError:
            continue  # reported by check_rulebook
        unit = units[_unit_key(site.path)]
        unit.status |= set(compiled.fact_status) & set(commands)
        for parts in compiled.read_parts:
            if len(parts) < 3 or parts[0] != "facts" or parts[1] not in commands:
                continue
            read = ".".join(parts[:3])
            if parts[2] in OUTPUT_FIELDS:
                unit.output.setdefault(parts[1], (site, read))
            elif parts[2] in OUTCOME_FIELDS:
                unit.outcome.setdefault(parts[1], (site, read))
    sink = FindingSink()
    for unit in units.values():
        for pid, (site, read) in sorted(unit.output.items()):
            if commands[pid] and pid not in unit.outcome and pid not in unit.status:
                _ref(rb, sink, site, read, "L031",
                     f"reads {read} without asking how the run ended: probe {pid!r} lists ok_exit_codes, so a "
                     f"failed run is a fact too and its output is no answer; also test facts.{pid}.ok (e.g. "
                     "`applies_when`), or drop ok_exit_codes so a failing run fails the fact")
                _severity(sink)
        for pid, (site, read) in sorted(unit.outcome.items()):
            if not commands[pid] and pid not in unit.status:
                _ref(rb, sink, site, read, "L032",
                     f"reads {read}, but probe {pid!r} lists no ok_exit_codes: a run that does not exit 0 fails "
                     "the fact (the command probe fails closed), so this is missing, not false, when the program "
                     f"fails; test `failed(facts.{pid})` and quote `error_message(facts.{pid})`, or list "
                     "`ok_exit_codes: [0]` to keep failing runs as facts (docs/migrating.md)")
                _severity(sink)
    return sink.findings


def _severity(sink: FindingSink) -> None:
    """`_ref` adds errors; these two codes are warnings."""
    sink.findings[-1] = dataclasses.replace(sink.findings[-1], severity="warning")
