"""A rulebook's own tests, as data, and the coverage of its checks.

A test file (`*.test.yaml`) names a rulebook and lists cases: facts (inline or snapshot files),
inputs, a mode, and the expected phase statuses, verdict and exit code. Coverage is read from the
traces the cases produce (never a second evaluation): for every precondition, stop condition
and evidence check, which results the suite made it take.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from policyrun.checkid import CheckId, rulebook_checks, split_in_phase
from policyrun.errors import RulebookError, UsageError
from policyrun.facts import Fact, FactError, FactsSnapshot, Provenance, load_facts
from policyrun.language.locate import resolve_ref
from policyrun.language.rulebook import LoadedRulebook, validation_findings
from policyrun.language.testsuite import Case, Expect, Suite
from policyrun.trace.model import Trace
from policyrun.yamlsource import load_yaml_file


@dataclass
class CaseResult:
    suite: Path
    case: Case
    trace: Trace | None
    failures: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.failures


@dataclass
class Coverage:
    """Per check, keyed by its CheckId text ("PHASE/kind/id", "mode/MODE/PHASE", "verdict/id",
    "derive/id"), the results it took across the suite: every condition and every derived value."""

    seen: dict[str, set[str]] = field(default_factory=dict)

    def declare(self, rb: LoadedRulebook) -> None:
        for check in rulebook_checks(rb.model):
            if check.id.kind == "mode_selection" and check.spec.when is None:
                continue  # a phase the mode always runs: nothing to cover
            self.seen.setdefault(str(check.id), set())

    def record(self, trace: Trace) -> None:
        for phase in trace.phases:
            for chk in phase.checks():
                key = str(CheckId.of_record(phase.phase, chk.kind, chk.id, trace.mode))
                if key in self.seen:
                    # A deliberate unknown('why') is the check's "not satisfied" side (`x || unknown(...)`
                    # is never false by design).
                    self.seen[key].add("DELIBERATE_UNKNOWN" if chk.unknown == "deliberate" else chk.result)
        for d in trace.derived:
            key = str(CheckId(None, "derive", d.id))
            if key in self.seen:
                self.seen[key].add("COMPUTED" if d.error is None else "MISSING")
        for chk in trace.verdict.conditions:
            key = str(CheckId(None, "verdict", chk.id))
            if key in self.seen:
                self.seen[key].add(chk.result)

    def covered(self, key: str) -> bool:
        """A condition is covered when the suite made it both true and false (NOT_APPLICABLE counts
        as false for evidence guarded by applies_when, and so does a deliberate `unknown('why')`); a derived
        value when some case computed it."""
        got = self.seen[key]
        if CheckId.parse(key).kind == "derive":
            return "COMPUTED" in got
        return "SATISFIED" in got and bool(got & {"UNSATISFIED", "NOT_APPLICABLE", "DELIBERATE_UNKNOWN"})

    def missing(self, key: str) -> list[str]:
        """The results the suite still has to produce for `key` to be covered (empty when covered)."""
        got = self.seen[key]
        if CheckId.parse(key).kind == "derive":
            return [] if "COMPUTED" in got else ["COMPUTED"]
        out = [] if "SATISFIED" in got else ["SATISFIED"]
        if not got & {"UNSATISFIED", "NOT_APPLICABLE", "DELIBERATE_UNKNOWN"}:
            out.append("UNSATISFIED")
        return out

    def missing_text(self, key: str) -> str:
        """`never UNSATISFIED`, `never SATISFIED, never UNSATISFIED`: what a case still has to show."""
        return ", ".join(f"never {r}" for r in self.missing(key))

    @property
    def percent(self) -> float:
        if not self.seen:
            return 100.0
        return 100.0 * sum(self.covered(k) for k in self.seen) / len(self.seen)


def discover(paths: list[str]) -> list[Path]:
    out: list[Path] = []
    for arg in paths:
        p = Path(arg)
        if p.is_dir():
            out.extend(sorted(p.rglob("*.test.yaml")))
        elif p.is_file():
            out.append(p)
        else:
            raise UsageError(f"{arg}: no such test file or folder", code="U009")
    if not out:
        raise UsageError(f"no *.test.yaml files under {', '.join(paths)}", code="U009")
    return out


def load_suite(path: Path) -> Suite:
    data, smap = load_yaml_file(path)
    try:
        return Suite.model_validate(data)
    except ValidationError as exc:
        findings = validation_findings(exc, smap)
        raise RulebookError(findings[0].message, code=findings[0].code, location=findings[0].location,
                            findings=findings) from None


def _error_of(value: Any) -> FactError | None:
    if isinstance(value, dict) and "__error__" in value:
        return FactError(code=str(value["__error__"]), message=str(value.get("message", "probe failed")))
    return None


def _inline_facts(facts: dict[str, Any], fan_outs: frozenset[str] = frozenset()) -> FactsSnapshot:
    """Inline facts as a snapshot. For a probe with `for_each` (`fan_outs`), the value is a map of
    elements, and an element stated as `{__error__: code}` is that element's error."""
    out: dict[str, Fact] = {}
    for pid, value in facts.items():
        prov = Provenance(probe=pid, kind="test")
        err = _error_of(value)
        if err is not None:
            out[pid] = Fact(error=err, provenance=prov.model_copy(update={"error": err}))
        elif pid in fan_outs and isinstance(value, dict):
            elements = {k: prov.model_copy(update={"error": _error_of(v)}) for k, v in value.items()}
            out[pid] = Fact(value={k: v for k, v in value.items() if _error_of(v) is None},
                            provenance=prov.model_copy(update={"elements": elements}))
        else:
            out[pid] = Fact(value=value, provenance=prov)
    return FactsSnapshot(facts=out)


def _cell(facts: FactsSnapshot, hosts: dict[str, dict[str, Any]], fan_outs: frozenset[str]) -> FactsSnapshot:
    """A case's `hosts:` as a snapshot of several hosts (policyrun.facts.with_hosts)."""
    from policyrun.facts import HostInfo, with_hosts

    per_host = {label: {pid: f.model_copy(update={"provenance": f.provenance.model_copy(update={"host": label})})
                        for pid, f in _inline_facts(by_pid, fan_outs).facts.items()}
                for label, by_pid in hosts.items()}
    return with_hosts(facts.facts, {label: HostInfo(hostname=label) for label in hosts}, per_host)


def stack_snapshots(snapshots: list[tuple[str, FactsSnapshot]]) -> dict[str, Fact]:
    """The facts of snapshot files stacked in order: the suite's `facts_files`, then the case's,
    each fact of a later file replacing the whole fact of the same probe id in an earlier one. A
    case thus starts from a shared baseline and names the file that changes one fact, where
    `merge_facts` (for `evaluate --facts A --facts B`) refuses two versions of one fact."""
    stacked: dict[str, Fact] = {}
    for _, snap in snapshots:
        stacked.update(snap.facts)
    return stacked


def _patched(case: Case, snapshot: dict[str, Fact]) -> dict[str, Any]:
    """The case's inline facts, those it merges applied to the snapshot's values as merge patches."""
    out = dict(case.facts)
    wanted = case.merge if isinstance(case.merge, list) else []
    for pid in wanted:
        if pid not in case.facts:
            raise UsageError(f"case {case.name!r}: merge names {pid!r}, but the case states no fact {pid!r}",
                             code="U020")
    for pid, patch in case.facts.items():
        if not case.merges(pid) or (isinstance(patch, dict) and "__error__" in patch):
            continue  # an error stated inline is the fact, whatever the snapshot held
        base = snapshot.get(pid)
        if base is None or base.error is not None:
            why = f"its snapshot fact failed ({base.error.code})" if base is not None and base.error is not None \
                else "no snapshot file holds it"
            raise UsageError(f"case {case.name!r}: cannot merge fact {pid!r} into the snapshot: {why}; state the "
                             "whole fact without `merge`", code="U020")
        out[pid] = merge_patch(base.value, patch)
    return out


def merge_patch(target: Any, patch: Any) -> Any:
    """JSON Merge Patch (RFC 7386): objects merge key by key, null removes a key, anything else
    (a list, a scalar) replaces the target."""
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


@dataclass
class Selection:
    """Which cases run (`policyrun test -k`), and how many were left out."""

    accepts: Callable[[str], bool]
    deselected: int = 0


def run_suite(path: Path, coverage: Coverage, selection: Selection | None = None) -> list[CaseResult]:
    """Run the cases of one test file that `selection` accepts (every case without it). The
    rulebook is loaded once and every case is evaluated in one guarded child (engine.evaluate_all),
    so the rulebook's expressions are compiled once per file, not once per case."""
    from policyrun.evaluate.engine import Run, evaluate_all, load_checked
    from policyrun.language.inputs import resolve_inputs, select_mode
    from policyrun.language.waivers import Waivers, load_waivers

    suite = load_suite(path)
    base = path.parent
    # The rule for rulebook arguments (policyrun.language.locate): a path is relative to the suite, a name is shipped.
    rb = load_checked(resolve_ref(suite.rulebook, relative_to=base))
    coverage.declare(rb)
    loaded: dict[str, FactsSnapshot] = {}  # cases of a file often share snapshot files

    def snapshot(name: str) -> tuple[str, FactsSnapshot]:
        key = str(base / name)
        if key not in loaded:
            loaded[key] = load_facts(base / name)
        return key, loaded[key]

    results: list[CaseResult] = []
    runs: list[tuple[int, Run]] = []
    for case in suite.cases:
        if selection is not None and not selection.accepts(case.name):
            selection.deselected += 1
            continue
        try:
            snapshots = [snapshot(f) for f in [*suite.facts_files, *case.facts_files]]
            # Inline facts override snapshot facts of the same id (or, with `merge`, patch them):
            # a case states what differs.
            merged = stack_snapshots(snapshots)
            fan_outs = frozenset(pid for pid, spec in rb.model.probes.items() if spec.for_each is not None)
            inline = _inline_facts(_patched(case, merged), fan_outs)
            facts = FactsSnapshot(facts=dict(sorted({**merged, **inline.facts}.items())))
            if case.hosts:
                facts = _cell(facts, case.hosts, fan_outs)
            mode = select_mode(rb.model, case.mode)
            inputs = resolve_inputs(rb.model, values=case.inputs)
            waivers = None
            if case.waivers is not None and case.as_of is not None:  # the model requires both together
                listed, sources = load_waivers(base / case.waivers)
                waivers = Waivers(listed, sources, as_of=case.as_of)
        except UsageError as exc:
            results.append(CaseResult(path, case, None, [f"cannot run: {exc.render()}"]))
            continue
        runs.append((len(results), Run(mode, inputs, facts, waivers=waivers)))
        results.append(CaseResult(path, case, None))
    traces = evaluate_all(rb, [run for _, run in runs], timestamp=False) if runs else []
    for (at, _), trace in zip(runs, traces):
        coverage.record(trace)
        results[at].trace = trace
        results[at].failures = _compare(results[at].case.expect, trace)
    return results


def _check(by_id: dict[str, Any], ref: str) -> Any:
    pid, cid = split_in_phase(ref)
    rec = by_id.get(pid)
    return next((c for c in rec.checks() if c.id == cid), None) if rec else None


def _compare(expect: Expect, trace: Trace) -> list[str]:
    failures: list[str] = []
    by_id = {p.phase: p for p in trace.phases}
    for pid, status in expect.phases.items():
        rec = by_id.get(pid)
        if rec is None:
            failures.append(f"phase {pid} is not in the rulebook")
        elif rec.status != status:
            why = rec.blocker or rec.reason
            failures.append(f"{pid}: expected {status}, got {rec.status} ({why})")
    for pid, text in expect.blockers.items():
        rec = by_id.get(pid)
        if rec is None or not rec.blocker or text not in rec.blocker:
            failures.append(f"{pid}: expected a blocker containing {text!r}, got {rec.blocker if rec else None!r}")
    for pid, text in expect.next.items():
        rec = by_id.get(pid)
        if rec is None or text not in rec.next_allowed_action:
            failures.append(f"{pid}: expected a next action containing {text!r}, "
                            f"got {rec.next_allowed_action if rec else None!r}")
    for ref, text in expect.messages.items():
        chk = _check(by_id, ref)
        if chk is None or not chk.message or text not in chk.message:
            failures.append(f"{ref}: expected a message containing {text!r}, got {chk.message if chk else None!r}")
    for ref, result in expect.checks.items():
        chk = _check(by_id, ref)
        if chk is None or chk.result != result:
            failures.append(f"{ref}: expected {result}, got {chk.result if chk else 'no such check'}")
    derived = {d.id: d for d in trace.derived}
    for did, value in expect.derived.items():
        got = derived.get(did)
        if got is None or got.error is not None or got.value != value:
            failures.append(f"derived.{did}: expected {value!r}, got "
                            f"{(got.error or got.value) if got else 'no such derived value'!r}")
    for ref in expect.waived:
        chk = _check(by_id, ref)
        if chk is None or chk.waiver is None:
            failures.append(f"{ref}: expected a waiver to apply, got {'no such check' if chk is None else 'none'}")
    warnings = (trace.waivers or {}).get("warnings", [])
    for text in expect.waiver_warnings:
        if not any(text in w for w in warnings):
            failures.append(f"waivers: expected a warning containing {text!r}, got {warnings!r}")
    if expect.verdict_summary is not None and expect.verdict_summary not in trace.verdict.summary:
        failures.append(f"verdict summary: expected it to contain {expect.verdict_summary!r}, "
                        f"got {trace.verdict.summary!r}")
    if expect.verdict is not None and trace.verdict.id != expect.verdict:
        failures.append(f"verdict: expected {expect.verdict}, got {trace.verdict.id} ({trace.verdict.summary})")
    if expect.exit_code is not None and trace.exit_code != expect.exit_code:
        failures.append(f"exit code: expected {expect.exit_code}, got {trace.exit_code}")
    return failures

