"""Evaluating again what a trace or a verdict statement claims, over the auditor's facts.

The claim names its rulebook (by sha256), mode, inputs, facts (by digest), --fail-on and waivers;
evaluating is refused (exit 3) when the rulebook, the facts or the waivers file are not the ones
it pins. The inputs are bound again as evaluate binds them, and the result is relocated to the
paths the claim names, so a rulebook read from another place does not read as a changed verdict.

Kept apart from comparing (policyrun.audit.differences) and from the signed envelopes
(policyrun.audit.envelopes): this is the only part of `policyrun verify` that loads and evaluates.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from policyrun.audit.differences import ABSENT
from policyrun.audit.pins import Pins, pin_mismatches
from policyrun.errors import Location, RulebookError, UsageError
from policyrun.trace.model import LayerRef, RulebookRef, Trace

if TYPE_CHECKING:
    from policyrun.model import Rulebook
    from policyrun.language.rulebook import LoadedRulebook


@dataclass(frozen=True)
class Claim:
    """What was evaluated, as a trace or a verdict statement records it."""

    rulebook: RulebookRef
    mode: str
    inputs: dict[str, Any]
    facts_sha256: str
    fail_on_warn: bool
    stale: bool  # evaluated with --allow-stale-facts (and some fact was stale)
    source: str = "trace"  # for messages: "trace" or "statement"
    waivers: dict[str, Any] | None = None  # evaluated with --waivers: {file, sha256, as_of, as_of_given}

    @classmethod
    def of_trace(cls, trace: Trace) -> Claim:
        waivers = None
        if trace.waivers is not None:
            warnings = trace.waivers.get("warnings") or []
            waivers = {"file": trace.waivers.get("file"), "sha256": trace.waivers.get("sha256"),
                       "as_of": trace.waivers.get("as_of"),
                       "as_of_given": any(str(w).startswith("--as-of ") for w in warnings)}
        if trace.baseline is not None:
            # Its checks read an earlier evaluation that verify is not given: evaluating again without
            # it would compare a different question, so fail closed rather than report a mismatch.
            raise UsageError(f"this trace was evaluated with --baseline {trace.baseline.path}; verify does not "
                             "re-evaluate against a baseline yet (evaluate it again with the same --facts and "
                             "--baseline and compare the traces)", code="V008")
        return cls(trace.rulebook, trace.mode, dict(trace.inputs), trace.facts_sha256, trace.fail_on_warn,
                   bool(trace.stale_facts), waivers=waivers)

    @classmethod
    def of_predicate(cls, predicate: Any, where: str) -> Claim:
        """From a policyrun verdict predicate (policyrun.render.intoto.verdict_statement)."""
        try:
            rb = predicate["rulebook"]
            ref = RulebookRef(name=rb["name"], version=rb["version"], sha256=rb["sha256"], path=rb.get("path"),
                              chain=[LayerRef(**c) for c in rb.get("chain", [])])
            inputs, mode = predicate["inputs"], predicate["mode"]
            if not isinstance(inputs, dict) or not isinstance(mode, str):
                raise TypeError("inputs must be a mapping and mode a string")
            waivers = predicate.get("waivers")
            if waivers is not None:
                waivers = {"file": waivers["file"], "sha256": waivers["sha256"], "as_of": waivers["asOf"],
                           "as_of_given": bool(waivers.get("asOfGiven"))}
            return cls(ref, mode, inputs, str(predicate["factsSha256"]), bool(predicate["failOnWarn"]),
                       bool(predicate["staleFacts"]), "statement", waivers)
        except (KeyError, TypeError, ValueError) as exc:
            raise UsageError(f"the statement's predicate is not a policyrun verdict ({type(exc).__name__}: {exc})",
                             code="V006", location=Location(where)) from None


@dataclass(frozen=True)
class Request:
    """What the auditor supplies: the facts, and optionally another rulebook file and inputs."""

    facts: list[Path]
    rulebook: str | None = None
    inputs_file: Path | None = None
    sets: list[str] = field(default_factory=list)
    allow_stale: bool = False
    waivers: Path | None = None
    pins: Pins | None = None


@dataclass(frozen=True)
class Reevaluation:
    trace: Trace
    notes: list[str]
    pin_mismatches: list[str] = field(default_factory=list)


def reevaluate(claim: Claim, request: Request) -> Reevaluation:
    """The trace this rulebook gives for the claim's mode and inputs over the auditor's facts;
    refused (exit 3) when the rulebook or the facts are not the ones the claim pins."""
    from policyrun.collection.stale import stale_facts
    from policyrun.evaluate.engine import evaluate
    from policyrun.facts import load_facts, merge_facts
    from policyrun.language.inputs import select_mode

    if not request.facts:
        raise UsageError(f"pass the facts snapshot the {claim.source} was evaluated over: --facts FILE (repeatable)",
                         code="V004")
    rb = _load_rulebook(claim, request.rulebook)
    _same_rulebook(rb, claim)
    facts = merge_facts((str(p), load_facts(p)) for p in request.facts)
    legacy = facts.digest() != claim.facts_sha256 and facts.digest_v1() == claim.facts_sha256
    if facts.digest() != claim.facts_sha256 and not legacy:
        raise UsageError(f"the facts have sha256 {facts.digest()}, but the {claim.source} was evaluated over facts "
                         f"{claim.facts_sha256}; pass the snapshot it was evaluated over (facts changed after the "
                         "fact cannot confirm a verdict)", code="V003")
    mode = select_mode(rb.model, claim.mode)
    inputs = bind_inputs(rb.model, claim.inputs, request.inputs_file, request.sets)
    notes: dict[str, object] = {}
    if stale := stale_facts(rb.model, mode, inputs, facts):
        if not (claim.stale or request.allow_stale):
            raise _stale_error(stale, rb.display, mode, claim.source)
        notes = {"stale_facts": stale}
    trace = evaluate(rb, mode=mode, inputs=inputs, facts=facts, timestamp=False, notes=notes,
                     fail_on_warn=claim.fail_on_warn, waivers=_waivers(claim, request.waivers))
    again = _relocated(trace, rb, claim)
    if legacy:  # a trace written before digest format 2 (docs/semantics.md): the same facts
        again = Reevaluation(again.trace.model_copy(update={"facts_sha256": claim.facts_sha256}),
                             [*again.notes, f"the {claim.source} records the facts digest in format 1 (absolute "
                                            "paths); these facts give it"])
    mismatches = pin_mismatches(request.pins, again.trace, facts) if request.pins else []
    return Reevaluation(again.trace, again.notes, mismatches)


def _waivers(claim: Claim, given: Path | None) -> Any:
    """The waivers the claim was evaluated with, from the auditor's copy of the file: its sha256
    must be the one the claim records, and it is checked as of the day the claim records."""
    from datetime import date

    from policyrun.language.waivers import Waivers, file_sha256, load_waivers_file

    recorded = claim.waivers
    if recorded is None:
        if given is not None:
            raise UsageError(f"the {claim.source} was evaluated without waivers; leave --waivers out", code="V007")
        return None
    if given is None:
        what = f"{recorded['file']} (sha256 {recorded['sha256']})" if recorded.get("sha256") else "a waivers file"
        raise UsageError(f"the {claim.source} was evaluated with waivers from {what}; pass that file with "
                         "--waivers FILE (without it, every waived check would read as a difference)", code="V007")
    sha = file_sha256(given)
    if not recorded.get("sha256"):
        raise UsageError(f"the {claim.source} does not record its waivers file's sha256 (made before policyrun "
                         "recorded it), so no file can be shown to be the one it used; evaluate again",
                         code="V007", location=Location(str(given)))
    if sha != recorded["sha256"]:
        raise UsageError(f"waivers file {given} has sha256 {sha}, but the {claim.source} records "
                         f"{recorded['file']} with sha256 {recorded['sha256']}; pass the file it was evaluated with",
                         code="V007", location=Location(str(given)))
    parsed, sources, _ = load_waivers_file(given)
    shown, old = str(recorded["file"]), str(given)
    # Waivers name the file they came from; compare as if read from the path the claim records.
    sources = [replace(s, file=shown) if s.file == old else s for s in sources]
    return Waivers(list(parsed.waivers), sources, as_of=date.fromisoformat(recorded["as_of"]),
                   as_of_given=bool(recorded.get("as_of_given")), file=shown, sha256=sha)


def _load_rulebook(claim: Claim, given: str | None) -> LoadedRulebook:
    """--rulebook, else the file the claim names (a shipped one by its name), else its name."""
    from policyrun.evaluate.engine import load_checked
    from policyrun.language.locate import shipped_rulebooks

    if given:
        return load_checked(given)
    ref = claim.rulebook
    path = ref.path or ""
    shipped = shipped_rulebooks()
    if path.startswith("<shipped>/") and Path(path).stem in shipped:
        return load_checked(Path(path).stem)
    if path and Path(path).is_file():
        return load_checked(Path(path))
    if ref.name in shipped:
        return load_checked(ref.name)
    raise UsageError(f"the {claim.source} names rulebook {path or ref.name!r}, which is not here; pass --rulebook FILE "
                     f"(the file with sha256 {ref.sha256})", code="U001")


def _same_rulebook(rb: LoadedRulebook, claim: Claim) -> None:
    ref, src = claim.rulebook, claim.source
    if rb.sha256 != ref.sha256:
        raise RulebookError(f"rulebook {rb.display} has sha256 {rb.sha256}, but the {src} records {ref.sha256}; it "
                            f"is not the rulebook that produced the {src}: pass that exact file with --rulebook",
                            code="V001", location=Location(rb.display))
    chain = [(c.name, c.sha256) for c in rb.chain] if len(rb.chain) > 1 else []
    recorded = [(c.name, c.sha256) for c in ref.chain]
    if chain == recorded:
        return
    if len(chain) != len(recorded):
        raise RulebookError(f"rulebook {rb.display} is a chain of {len(chain) or 1} file(s), but the {src} records "
                            f"{len(recorded) or 1}", code="V002", location=Location(rb.display))
    for layer, (name, sha) in zip(rb.chain, recorded, strict=True):
        if (layer.name, layer.sha256) != (name, sha):
            raise RulebookError(f"overlay layer {layer.path} ({layer.name}) has sha256 {layer.sha256}, but the {src} "
                                f"records {name} with sha256 {sha}; the base the overlay extends has changed",
                                code="V002", location=Location(layer.path))


def bind_inputs(rulebook: Rulebook, recorded: dict[str, Any], inputs_file: Path | None,
                sets: Iterable[str]) -> dict[str, Any]:
    """The recorded inputs, typed against the rulebook, with --inputs and --set on top. An input
    the trace recorded as null stays null: the environment of the auditor is not consulted. A
    secret input the trace masks is bound again as evaluate binds it (--set, --inputs, its
    environment variable): the trace never held its value."""
    from policyrun.language.inputs import canonical_inputs, parse_sets, resolve_inputs
    from policyrun.masking import MASK

    sets = list(sets)
    recorded = canonical_inputs(rulebook, recorded)  # a trace written before an input was renamed
    from_file = canonical_inputs(rulebook, _inputs_file(inputs_file))
    given = {*from_file, *canonical_inputs(rulebook, parse_sets(sets))}
    declared = rulebook.inputs
    masked = {k for k, v in recorded.items()
              if v == MASK and k in declared and (declared[k].secret or declared[k].env is not None)}
    kept = {k: v for k, v in recorded.items() if k in declared and v is not None and k not in masked}
    resolved = resolve_inputs(rulebook, sets, None, values={**kept, **from_file})
    unbound = sorted(k for k in masked if resolved.get(k) is None)
    if unbound:
        how = " ".join(f"--set {k}=..." + (f" (or ${declared[k].env})" if declared[k].env else "") for k in unbound)
        raise UsageError(f"the trace masks secret input{'s' if len(unbound) > 1 else ''} {', '.join(unbound)}; "
                         f"pass the value{'s' if len(unbound) > 1 else ''} the evaluation used: {how}", code="U005")
    return {name: resolved[name] if name in given or name in masked or recorded.get(name, ABSENT) is not None
            else None for name in declared}


def _inputs_file(path: Path | None) -> dict[str, Any]:
    if path is None:
        return {}
    from policyrun.yamlsource import load_yaml_file

    try:
        data, _ = load_yaml_file(path)
    except RulebookError as exc:
        raise UsageError(exc.message, code=exc.code, location=exc.location) from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise UsageError("an inputs file is a mapping of input name to value", code="U006",
                         location=Location(str(path), 1, 1))
    return data


def _stale_error(stale: list[dict[str, str]], rulebook: str, mode: str, source: str) -> UsageError:
    lines = "\n".join(f"  {s['probe']}: {s['reason']}" for s in stale[:10])
    more = f"\n  ... and {len(stale) - 10} more" if len(stale) > 10 else ""
    return UsageError(f"the facts do not match rulebook {rulebook} in mode {mode} with the {source}'s inputs "
                      f"({len(stale)} probe(s)):\n{lines}{more}\nthe {source} does not record --allow-stale-facts, so "
                      "`evaluate` would have refused these facts; pass --allow-stale-facts to verify anyway",
                      code="F005")


# Fields whose text may name a rulebook location ("rulebook.yaml:12:16"). Fact data (values read,
# inputs, provenance) is never rewritten.
_LOCATED_TEXT = frozenset({"location", "message", "blocker", "blockers", "reason", "next_allowed_action",
                           "summary", "error"})
_FACT_DATA = frozenset({"reads", "value", "violations", "inputs", "vars", "provenance", "stale_facts"})


def _relocated(trace: Trace, rb: LoadedRulebook, claim: Claim) -> Reevaluation:
    """The trace as if the rulebook had been read from the path the claim names. Its bytes are the
    same (checked above); only where it lies differs, and that must not read as a changed verdict."""
    ref = claim.rulebook
    moves: dict[str, str] = {}
    if ref.path and rb.display != ref.path:
        moves[rb.display] = ref.path
    if len(rb.chain) > 1:
        moves.update({layer.path: rec.path for layer, rec in zip(rb.chain, ref.chain, strict=True)
                      if layer.path != rec.path})
    if not moves:
        return Reevaluation(trace, [])
    # A whole path followed by :LINE:COL, never the tail of a longer path.
    pattern = re.compile(r"(?<![\w./\\-])(?:" + "|".join(re.escape(old) for old in sorted(moves, key=len, reverse=True))
                         + r")(?=:\d+:\d+)")
    data = trace.model_dump(mode="json")

    def text(value: Any) -> Any:
        if isinstance(value, str):
            return pattern.sub(lambda m: moves[m.group()], value)
        return [text(x) for x in value] if isinstance(value, list) else walk(value)

    def walk(node: Any) -> Any:
        if isinstance(node, list):
            return [walk(x) for x in node]
        if not isinstance(node, dict):
            return node
        return {k: v if k in _FACT_DATA else text(v) if k in _LOCATED_TEXT else walk(v) for k, v in node.items()}

    data = walk(data)
    data["rulebook"]["path"] = ref.path
    for layer, rec in zip(data["rulebook"]["chain"], ref.chain, strict=False):
        layer["path"] = rec.path
    notes = [f"rulebook read from {old}; the {claim.source} names it {new} (same sha256), so locations are "
             f"compared as {new}"
             for old, new in moves.items()]
    return Reevaluation(Trace.model_validate(data), notes)
