"""Stale facts (F005): facts in a snapshot that this rulebook, mode and inputs would not collect.

Another probe kind, another `when`, other `for_each` elements or other parameters: `evaluate
--facts` refuses such a snapshot (unless --allow-stale-facts).

Separate because replay runs no probe: it re-resolves each probe's parameters over the
snapshot's own facts (policyrun.collection.params, the resolver collection uses) and compares
them with the recorded ones, down to the innermost key, so a refusal says what changed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from policyrun.collection.params import NOT_APPLICABLE, Resolver
from policyrun.collection.plan import plan
from policyrun.facts import Fact, FactsSnapshot
from policyrun.model import ProbeSpec, Rulebook


def stale_facts(rulebook: Rulebook, mode: str, inputs: Mapping[str, Any], facts: FactsSnapshot,
                locations: Mapping[str, str] | None = None) -> list[dict[str, str]]:
    """Facts in a snapshot that this rulebook, mode and these inputs would not have collected:
    another probe kind, or other parameters (re-resolved from the rulebook over the snapshot's own
    facts, so a fact whose parameters read another fact is checked against that fact's value).
    `evaluate --facts` refuses a snapshot with any (unless --allow-stale-facts)."""
    if mode not in rulebook.modes:
        return []
    from policyrun.language.inputs import secret_inputs, secret_texts

    texts = secret_texts(secret_inputs(rulebook, inputs))
    state = Resolver(rulebook, mode, inputs, locations)
    state.facts = dict(facts.facts)
    state.values = facts.values()
    out: list[dict[str, str]] = []
    for pid, spec in plan(rulebook, mode).probes.items():
        fact = facts.facts.get(pid)
        if fact is None:
            continue
        prov = fact.provenance
        if prov.kind != spec.uses:
            out.append({"probe": pid, "reason": f"collected by probe kind {prov.kind!r}; the rulebook's probe "
                                                f"{pid!r} uses {spec.uses!r}"})
            continue
        if spec.when is not None:
            skip = state.not_applicable(pid, spec)
            now = skip is not None and skip.error is not None and skip.error.code == NOT_APPLICABLE
            was = fact.error is not None and fact.error.code == NOT_APPLICABLE
            if now != was:
                out.append({"probe": pid, "reason": f"`when: {spec.when}` is {'false' if now else 'true'} with these "
                                                    f"inputs, but the snapshot {'holds' if now else 'lacks'} its fact"
                                                    + ("" if now else " (it was not applicable when collected)")})
                continue
            if skip is not None:
                continue
        if spec.for_each is not None:
            out += [{"probe": pid, "reason": r} for r in _stale_elements(state, pid, spec, fact, texts)]
            continue
        resolved = state.resolve(pid, spec)
        if isinstance(resolved, tuple):
            if fact.error is None:
                out.append({"probe": pid, "reason": f"holds a value, but its parameters cannot be resolved from "
                                                    f"this snapshot and these inputs ({resolved[1]})"})
            continue
        if fact.error is not None and prov.params == dict(spec.with_):
            continue  # failed before its parameters were resolved; nothing to compare
        differs = _params_differ(prov.params, resolved, texts)
        if differs:
            out.append({"probe": pid, "reason": f"collected with other parameters ({differs})"})
    return out


def _params_differ(collected: Mapping[str, Any], resolved: Mapping[str, Any], texts: Any) -> str | None:
    """How recorded parameters differ from the ones resolved now (None when they do not). A
    snapshot is written with secret inputs masked (inputs.mask_snapshot): compared masked."""
    from policyrun.masking import redact_tree

    resolved = redact_tree(resolved, texts, exact=texts)
    collected = redact_tree(collected, texts, exact=texts)
    if _canonical(collected) == _canonical(resolved):
        return None
    diffs = _param_differences(_without_nulls(collected), _without_nulls(resolved), "")
    return ", ".join(diffs[:3]) + (f", and {len(diffs) - 3} more" if len(diffs) > 3 else "")


def _stale_elements(state: Resolver, pid: str, spec: ProbeSpec, fact: Fact, texts: Any) -> list[str]:
    """How a fan-out's recorded elements differ from what for_each gives now: other keys, or an
    element collected with other parameters."""
    if fact.error is not None:
        return []  # the fan-out failed as a whole before its elements were resolved: nothing to compare
    recorded = fact.provenance.elements or {}
    found = state.elements(pid, spec)
    if isinstance(found, tuple):
        return [f"holds a value, but its elements cannot be resolved from this snapshot and these inputs "
                f"({found[1]})"]
    keys = [key for key, _ in found]
    if sorted(keys) != sorted(recorded):
        extra, lacking = sorted(set(recorded) - set(keys)), sorted(set(keys) - set(recorded))
        return [f"collected for other elements of for_each (" + "; ".join(
            part for part in (f"not expected: {', '.join(map(repr, extra[:5]))}" if extra else "",
                              f"not collected: {', '.join(map(repr, lacking[:5]))}" if lacking else "") if part) + ")"]
    out = []
    for key, item in found:
        element = recorded[key]
        resolved = state.resolve(pid, spec, (item,))
        if isinstance(resolved, tuple):
            if element.error is None:
                out.append(f"element {key!r} holds a value, but its parameters cannot be resolved ({resolved[1]})")
            continue
        if element.error is not None and element.params == dict(spec.with_):
            continue
        differs = _params_differ(element.params, resolved, texts)
        if differs:
            out.append(f"element {key!r} was collected with other parameters ({differs})")
    return out


_ABSENT_PARAM = object()


def _param_differences(collected: Any, expected: Any, path: str) -> list[str]:
    """Where two parameter values differ, down to the innermost key or item (`paths[2]`,
    `headers.Accept`), so a long list or nested map shows what changed, not two cut-off texts."""
    if _canonical(collected) == _canonical(expected):
        return []
    if isinstance(collected, dict) and isinstance(expected, dict):
        return [d for k in sorted(set(collected) | set(expected), key=str)
                for d in _param_differences(collected.get(k, _ABSENT_PARAM), expected.get(k, _ABSENT_PARAM),
                                            f"{path}.{k}" if path else str(k))]
    if isinstance(collected, list) and isinstance(expected, list):
        if len(collected) == len(expected):
            return [d for i, (a, b) in enumerate(zip(collected, expected))
                    for d in _param_differences(a, b, f"{path}[{i}]")]
        have, want = {_canonical(v) for v in collected}, {_canonical(v) for v in expected}
        added = [_short(v) for v in expected if _canonical(v) not in have][:3]
        dropped = [_short(v) for v in collected if _canonical(v) not in want][:3]
        detail = "; ".join(part for part in (f"expected adds {', '.join(added)}" if added else "",
                                             f"expected lacks {', '.join(dropped)}" if dropped else "") if part)
        return [f"{path}: collected {len(collected)} items, expected {len(expected)}"
                + (f" ({detail})" if detail else "")]
    return [f"{path}: collected {_shown_param(collected)}, expected {_shown_param(expected)}"]


def _shown_param(value: Any) -> str:
    return "nothing" if value is _ABSENT_PARAM else _short(value)


def _canonical(value: Any) -> str:
    return json.dumps(_without_nulls(value), sort_keys=True, ensure_ascii=False, default=str)


def _without_nulls(value: Any) -> Any:
    """Snapshots are written without null values (FactsSnapshot.to_json), so a parameter that
    resolved to null and one that is absent are the same parameter."""
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) for v in value]
    return value


def _short(value: Any) -> str:
    text = _canonical(value)
    return text if len(text) <= 80 else text[:77] + "..."
