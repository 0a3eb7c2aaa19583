"""What an auditor pins from outside a claim (`verify --rulebook-sha256`, `--ref NAME=SHA`): the rulebook's
sha256 and the commit each named ref must resolve to, and where an evaluation departs from them.

Kept apart from re-evaluation: a pin is not part of the claim, it is checked against the result,
and the trace and the envelope checks both report it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from policyrun.trace.model import Trace


@dataclass(frozen=True)
class Pins:
    """What the auditor trusts, brought from outside the claim: any mismatch fails verification."""

    rulebook_sha256: list[str] = field(default_factory=list)  # any of these
    refs: dict[str, str] = field(default_factory=dict)  # ref name -> the commit it must resolve to


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


def pins_held(pins: Pins | None) -> list[str]:
    """The pins that held, said so: an auditor reads what was checked, not only what failed."""
    if pins is None:
        return []
    return [*(f"  pinned    rulebook sha256 {' or '.join(pins.rulebook_sha256)}: matches" for _ in
              pins.rulebook_sha256[:1]),
            *(f"  pinned    {name} = {sha}: every fact that resolved {name} agrees" for name, sha in pins.refs.items())]
