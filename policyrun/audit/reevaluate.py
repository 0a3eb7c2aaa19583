"""`policyrun verify`: evaluate again what a trace (or a signed statement) claims, and list every
field that differs.

Load-time consistency checks (policyrun.trace.consistency) catch careless edits; this catches any
edit. The claim names its rulebook (by sha256), mode, inputs, facts (by digest) and --fail-on;
the auditor supplies the facts snapshot. Anything the claim pins that does not match is refused
before evaluating (exit 3): another rulebook or other facts would answer another question. Then
the rulebook is evaluated again and the result compared with the claim field by field, ignoring
only `generated_at`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from policyrun.errors import Location, RulebookError, UsageError, display_path
from policyrun.trace.model import LayerRef, RulebookRef, Trace

if TYPE_CHECKING:
    from policyrun.model import Rulebook
    from policyrun.language.rulebook import LoadedRulebook

ABSENT: Any = type("Absent", (), {"__repr__": lambda self: "(absent)"})()
IGNORED = frozenset({"generated_at", "run"})  # who ran it, where and when: not a claim about the facts


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
class Pins:
    """What the auditor trusts, brought from outside the claim: any mismatch fails verification."""

    rulebook_sha256: list[str] = field(default_factory=list)  # any of these
    refs: dict[str, str] = field(default_factory=dict)  # ref name -> the commit it must resolve to


@dataclass(frozen=True)
class Reevaluation:
    trace: Trace
    notes: list[str]
    pin_mismatches: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Difference:
    path: str
    claimed: Any
    evaluated: Any

    def line(self, claimed: str = "trace", evaluated: str = "evaluation") -> str:
        return f"{self.path}: {claimed} has {show(self.claimed)}, {evaluated} gives {show(self.evaluated)}"


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


def pin_mismatches(pins: Pins, trace: Trace, facts: Any) -> list[str]:
    """Each way the claim departs from what the auditor pinned: the rulebook's sha256, and the
    commit each named ref resolved to in the facts (a moved tag reads as another commit)."""
    out: list[str] = []
    if pins.rulebook_sha256 and trace.rulebook.sha256 not in pins.rulebook_sha256:
        out.append(f"rulebook {trace.rulebook.path or trace.rulebook.name} has sha256 {trace.rulebook.sha256}, "
                   f"but you pinned {' or '.join(pins.rulebook_sha256)}")
    for name, want in pins.refs.items():
        seen = resolved_refs(facts).get(name)
        if not seen:
            out.append(f"ref {name}: pinned to {want}, but no fact records what {name} resolved to")
            continue
        for probe, sha in seen:
            if not sha.startswith(want.lower()):
                out.append(f"ref {name}: pinned to {want}, but {probe} resolved it to {sha}")
    return out


def resolved_refs(facts: Any) -> dict[str, list[tuple[str, str]]]:
    """Ref name -> [(probe, commit)] for every fact that resolved a named ref (git.resolve, and
    git probes that record `<role>` and `<role>_sha`)."""
    out: dict[str, list[tuple[str, str]]] = {}
    for probe, fact in sorted(facts.facts.items()):
        value = fact.value
        if fact.error is not None or not isinstance(value, dict):
            continue
        pairs: list[tuple[Any, Any]] = [(value.get("ref"), value.get("sha"))]
        pairs += [(value.get(k), value.get(f"{k}_sha")) for k in ("ancestor", "descendant", "base", "head")]
        for ref, sha in pairs:
            if isinstance(ref, str) and isinstance(sha, str) and ref != sha:
                entry = (probe, sha)
                if entry not in out.setdefault(ref, []):
                    out[ref].append(entry)
    return out


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


def trace_differences(claimed: Trace, evaluated: Trace) -> list[Difference]:
    return differences(claimed.model_dump(mode="json"), evaluated.model_dump(mode="json"), ignore=IGNORED)


def differences(claimed: Any, evaluated: Any, path: str = "", *, ignore: Iterable[str] = ()) -> list[Difference]:
    """Every leaf where two JSON values differ. Lists of records are matched by their identity
    (phase, kind:id, probe, path or name) when it is unique, so one inserted check does not shift
    every later one; otherwise by position."""
    return list(_walk(claimed, evaluated, path, frozenset(ignore)))


def _walk(a: Any, b: Any, path: str, ignore: frozenset[str]) -> Iterator[Difference]:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in [*a, *(k for k in b if k not in a)]:
            sub = f"{path}.{key}" if path else str(key)
            if sub in ignore:
                continue
            yield from _walk(a.get(key, ABSENT), b.get(key, ABSENT), sub, ignore)
    elif isinstance(a, list) and isinstance(b, list):
        yield from _walk_list(a, b, path, ignore)
    elif a != b or type(a) is not type(b):
        yield Difference(path, a, b)


_IDENTITIES = ("phase", "id", "probe", "path", "name")


def _identities(items: list[Any], ident: str) -> list[str] | None:
    keys = [f"{i['kind']}:{i[ident]}" if ident == "id" and "kind" in i else str(i[ident]) for i in items]
    return keys if len(set(keys)) == len(keys) else None


def _walk_list(a: list[Any], b: list[Any], path: str, ignore: frozenset[str]) -> Iterator[Difference]:
    both = a + b
    ident = next((f for f in _IDENTITIES if both and all(isinstance(i, dict) and f in i for i in both)), None)
    keys_a = _identities(a, ident) if ident else None
    keys_b = _identities(b, ident) if ident else None
    if keys_a is None or keys_b is None:
        for i in range(max(len(a), len(b))):
            yield from _walk(a[i] if i < len(a) else ABSENT, b[i] if i < len(b) else ABSENT, f"{path}[{i}]", ignore)
        return
    by_b = dict(zip(keys_b, b, strict=True))
    by_a = dict(zip(keys_a, a, strict=True))
    common_a = [k for k in keys_a if k in by_b]
    common_b = [k for k in keys_b if k in by_a]
    if common_a != common_b:
        yield Difference(f"{path} order", common_a, common_b)
    for key in [*keys_a, *(k for k in keys_b if k not in by_a)]:
        yield from _walk(by_a.get(key, ABSENT), by_b.get(key, ABSENT), f"{path}[{key}]", ignore)


_BARE = re.compile(r"[\w.:/@+<>-]+")
_JSON_LOOKALIKE = re.compile(r"null|true|false|-?[0-9][0-9.eE+-]*")  # quoted, so "1" never reads as 1


def show(value: Any, limit: int = 200) -> str:
    """A value in one line: simple strings bare, anything else as compact JSON, cut at `limit`."""
    if value is ABSENT:
        return "(absent)"
    if isinstance(value, str) and _BARE.fullmatch(value) and not _JSON_LOOKALIKE.fullmatch(value):
        text = value
    else:
        text = json.dumps(value, ensure_ascii=False, sort_keys=True, separators=(", ", ": "))
    return text if len(text) <= limit else text[:limit - 1] + "…"


@dataclass(frozen=True)
class Outcome:
    ok: bool
    lines: list[str]  # the result, for stdout
    notes: list[str] = field(default_factory=list)  # for stderr


def verify_trace(path: Path, request: Request) -> Outcome:
    from policyrun.trace.model import load_trace
    from policyrun.trace.consistency import inconsistencies

    claimed = load_trace(path, force=True)  # an inconsistent trace is what verify is for: report it
    again = reevaluate(Claim.of_trace(claimed), request)
    name = display_path(path)
    diffs = trace_differences(claimed, again.trace)
    pins = [f"PIN MISMATCH: {m}" for m in again.pin_mismatches]
    from policyrun.evaluate.tracevalues import problems as value_problems

    # The values the trace summarises, kept beside it (values/): each file must match its checksum.
    kept, kept_notes = value_problems(claimed, path)
    notes = [*again.notes, *kept_notes]
    if kept:
        lines = [f"VALUE MISMATCH: {p}" for p in kept]
        if diffs or pins:
            lines += [d.line() for d in diffs] + pins
        return Outcome(False, [*lines, f"NOT VERIFIED: {len(kept)} value file(s) beside {name} do not match the "
                                       "checksums the trace records"], notes)
    if not diffs and not pins:
        return Outcome(True, [f"verified: {name} is what its rulebook gives over these facts", *_summary(again.trace),
                              *_pins_held(request.pins)], notes)
    lines = [d.line() for d in diffs]
    if problems := inconsistencies(claimed):
        lines += ["the trace also contradicts itself:", *(f"  - {p}" for p in problems)]
    if diffs:
        lines.append(f"NOT VERIFIED: {name} differs from its re-evaluation in {len(diffs)} field(s) "
                     "(generated_at and run are not compared)")
    else:
        lines += [f"{name} is what its rulebook gives over these facts, but not what you pinned:",
                  *_summary(again.trace)]
    lines += pins
    if pins:
        lines.append(f"NOT VERIFIED: {len(pins)} pin(s) you gave do not match")
    return Outcome(False, lines, notes)


def _pins_held(pins: Pins | None) -> list[str]:
    """The pins that held, said so: an auditor reads what was checked, not only what failed."""
    if pins is None:
        return []
    return [*(f"  pinned    rulebook sha256 {' or '.join(pins.rulebook_sha256)}: matches" for _ in
              pins.rulebook_sha256[:1]),
            *(f"  pinned    {name} = {sha}: every fact that resolved {name} agrees" for name, sha in pins.refs.items())]


def _summary(trace: Trace) -> list[str]:
    from policyrun.trace.exceptions import summary_line, trace_exceptions

    rb = trace.rulebook
    exceptions = trace_exceptions(trace)
    lines = [f"  rulebook  {rb.path or rb.name} ({rb.name} {rb.version}) sha256 {rb.sha256}",
             *(f"  layer     {c.path} sha256 {c.sha256}" for c in rb.chain),
             f"  mode      {trace.mode}",
             f"  facts     sha256 {trace.facts_sha256}"]
    if trace.waivers is not None and trace.waivers.get("sha256"):
        lines.append(f"  waivers   {trace.waivers.get('file')} sha256 {trace.waivers['sha256']} "
                     f"(as of {trace.waivers.get('as_of')})")
    lines += [f"  verdict   {trace.verdict.id}, exit code {trace.exit_code}",
              f"  exceptions {summary_line(exceptions)}", *(f"    - {e.text()}" for e in exceptions)]
    return lines


def trusted_keys(keys: Iterable[Path]) -> list[Path]:
    """Each --key: a public key file, or a folder (a keyring) whose *.pem files are all trusted."""
    out: list[Path] = []
    for key in keys:
        if key.is_dir():
            ring = sorted(key.glob("*.pem"))
            if not ring:
                raise UsageError(f"keyring {key} holds no *.pem public key", code="A002", location=Location(str(key)))
            out += ring
        else:
            out.append(key)
    return out


def _verify_signature(envelope: dict[str, Any], keys: list[Path]) -> Any:
    """The first trusted key a signature verifies with; InvalidEnvelope naming every key tried."""
    from policyrun.trace import dsse

    errors: list[str] = []
    for key in keys:
        try:
            return dsse.verify(envelope, key)
        except dsse.InvalidEnvelope as exc:
            errors.append(str(exc))
    if len(errors) == 1:
        raise dsse.InvalidEnvelope(errors[0])
    raise dsse.InvalidEnvelope(f"none of the {len(keys)} trusted keys verifies a signature: "
                               + "; ".join(f"{k}: {e}" for k, e in zip(keys, errors, strict=True)))


def verify_envelope(path: Path, envelope: dict[str, Any], key: Path | list[Path] | None, request: Request,
                    trace_path: Path | None) -> Outcome:
    """The signature first (exit 1 when it does not verify); then, given a trace or facts, that the
    signed statement says what the trace says, or what evaluating again gives."""
    from policyrun.trace import dsse
    from policyrun.render import intoto

    name = display_path(path)
    keys = trusted_keys([key] if isinstance(key, Path) else key or [])
    if not keys:
        raise UsageError(f"{name} is a DSSE envelope; pass the signer's public key with --key PUB.pem", code="A002")
    try:
        signed = _verify_signature(envelope, keys)
        statement = _statement(signed.payload)
    except dsse.InvalidEnvelope as exc:
        return Outcome(False, [f"INVALID: {name}: {exc}"])
    kind = statement.get("predicateType")
    known = {intoto.VERDICT_PREDICATE: "in-toto", intoto.VSA_PREDICATE: "vsa"}
    lines = [f"signature valid: {name} is signed by the key with keyid {signed.keyid}",
             f"  statement {kind} about {len(statement.get('subject') or [])} subject(s)"]
    lines += _statement_exceptions(statement)
    pinned = _statement_pins(statement, request.pins)
    if trace_path is None and not request.facts:
        if not pinned:
            return Outcome(True, [*lines, *_pins_held(request.pins)])
        return Outcome(False, [*lines, *pinned, f"NOT VERIFIED: {len(pinned)} pin(s) you gave do not match"])
    if statement.get("_type") != intoto.STATEMENT_TYPE or kind not in known:
        raise UsageError(f"the signed statement is a {statement.get('_type')!r} of {kind!r}; --trace and --facts "
                         "check policyrun's own statements (report --format in-toto or vsa)", code="V006",
                         location=Location(name))
    fmt = known[kind]
    notes: list[str] = []
    if trace_path is not None:
        diffs = _statement_vs_trace(statement, fmt, trace_path)
        lines += [d.line("statement", "trace") for d in diffs]
        if request.facts:
            outcome = verify_trace(trace_path, request)
            lines += outcome.lines
            notes += outcome.notes
            ok = not diffs and outcome.ok
        else:
            ok = not diffs
            lines.append(f"statement matches {display_path(trace_path)}" if ok else
                         f"NOT VERIFIED: the statement differs from {display_path(trace_path)} in {len(diffs)} "
                         "field(s)")
        if pinned:
            lines += [*pinned, f"NOT VERIFIED: {len(pinned)} pin(s) you gave do not match"]
        return Outcome(ok and not pinned, lines, notes)
    if fmt == "vsa":
        raise UsageError("a verification summary does not record the mode and inputs it was evaluated with; pass "
                         "the trace it was made from with --trace TRACE", code="V004")
    again = reevaluate(Claim.of_predicate(statement.get("predicate"), name), request)
    expected = _as_json(intoto.verdict_statement(again.trace))
    diffs = differences(statement, expected, ignore={"predicate.generatedAt", "predicate.run"})
    pinned = [*pinned, *(p for p in (f"PIN MISMATCH: {m}" for m in again.pin_mismatches) if p not in pinned)]
    tail = [f"NOT VERIFIED: {len(pinned)} pin(s) you gave do not match"] if pinned else []
    if not diffs:
        verdict = ("verified: the statement is what its rulebook gives over these facts" if not pinned else
                   "the statement is what its rulebook gives over these facts, but not what you pinned:")
        return Outcome(not pinned, [*lines, verdict, *_summary(again.trace), *pinned, *tail], again.notes)
    return Outcome(False, [*lines, *(d.line("statement", "evaluation") for d in diffs),
                           f"NOT VERIFIED: the statement differs from its re-evaluation in {len(diffs)} field(s) "
                           "(generatedAt and run are not compared)", *pinned, *tail], again.notes)


def _statement_exceptions(statement: dict[str, Any]) -> list[str]:
    """The exceptions a signed statement declares, so a signature check alone shows them."""
    predicate = statement.get("predicate")
    if not isinstance(predicate, dict):
        return []
    listed = predicate.get("exceptions")
    if not isinstance(listed, list):
        policy = predicate.get("policy")
        annotations = policy.get("annotations") if isinstance(policy, dict) else None
        listed = annotations.get("exceptions") if isinstance(annotations, dict) else None
    if not isinstance(listed, list):
        return []
    from policyrun.trace.exceptions import KIND_LABELS

    kinds: dict[str, int] = {}
    for item in listed:
        kind = str(item.get("kind")) if isinstance(item, dict) else "?"
        kinds[kind] = kinds.get(kind, 0) + 1
    summary = ", ".join(f"{n} {KIND_LABELS.get(k, k)}" for k, n in kinds.items()) or "none"
    return [f"  exceptions {summary}", *(f"    - {_exception_text(e)}" for e in listed)]


def _exception_text(item: Any) -> str:
    from policyrun.trace.exceptions import KIND_LABELS

    if not isinstance(item, dict):
        return show(item)
    where = ".".join(str(item[k]) for k in ("phase", "check") if item.get(k))
    return (f"{KIND_LABELS.get(str(item.get('kind')), str(item.get('kind')))}: " + (f"{where}: " if where else "")
            + str(item.get("detail", "")))


def _statement_pins(statement: dict[str, Any], pins: Pins | None) -> list[str]:
    """The statement's rulebook (a verdict's `rulebook.sha256`, a VSA's `policy.digest.sha256`)
    against the auditor's pinned sha256."""
    if pins is None or not pins.rulebook_sha256:
        return []
    predicate = statement.get("predicate")
    sha = (_text(predicate, "rulebook", "sha256") or _text(predicate, "policy", "digest", "sha256"))
    if sha in pins.rulebook_sha256:
        return []
    return [f"PIN MISMATCH: the statement's rulebook has sha256 {sha}, but you pinned "
            f"{' or '.join(pins.rulebook_sha256)}"]


def _statement(payload: bytes) -> dict[str, Any]:
    from policyrun import limits
    from policyrun.trace import dsse
    from policyrun.jsonfile import parse_json

    try:
        data = parse_json(payload.decode("utf-8"), "payload", what="signed statement", code="V005",
                          max_depth=limits.TRACE_DEPTH)
    except (UnicodeDecodeError, UsageError) as exc:
        raise dsse.InvalidEnvelope(f"the signed payload is not a JSON statement ({exc})") from None
    if not isinstance(data, dict):
        raise dsse.InvalidEnvelope("the signed payload is not a JSON object")
    return data


def _statement_vs_trace(statement: dict[str, Any], fmt: str, trace_path: Path) -> list[Difference]:
    from policyrun.render import intoto
    from policyrun.trace.model import load_trace

    trace = load_trace(trace_path, force=True)
    # A VSA's verifier, resource and policy URIs are the signer's choice (report options), not the trace's.
    opts = intoto.AttestationOptions(resource_uri=_text(statement, "predicate", "resourceUri"),
                                     policy_uri=_text(statement, "predicate", "policy", "uri"),
                                     verifier_id=_text(statement, "predicate", "verifier", "id"))
    return differences(statement, _as_json(intoto.attestation(trace, fmt, opts)))


def _text(data: Any, *keys: str) -> str | None:
    for key in keys:
        data = data.get(key) if isinstance(data, dict) else None
    return data if isinstance(data, str) else None


def _as_json(value: Any) -> Any:
    return json.loads(json.dumps(value))


def read_claim_file(path: Path) -> Any:
    """The JSON of a trace or an envelope (bounded like a trace), to tell which it is."""
    from policyrun import limits
    from policyrun.jsonfile import parse_json, read_json_text

    name = display_path(path)
    text = read_json_text(path, what="trace or envelope", code="T001", max_bytes=limits.TRACE_BYTES)
    return parse_json(text, name, what="trace or envelope", code="T002", max_depth=limits.TRACE_DEPTH)
