"""What kind of evidence each probe kind's facts are: *measured* by policyrun (git objects, ASTs,
NVML, processes, the interpreter it ran), or *supplied* (a file a person or an agent wrote and
handed over: an attestation, a JUnit or results file, an environment variable).

Reports label each phase by the evidence it rests on (policyrun.render.summary), and the trace
lists every supplied file with its sha256 (`evidence_files`), so an auditor can tell a verdict
policyrun measured from one that rests on what someone wrote. A probe kind not listed here (a
third party's) counts as supplied unless it declares `evidence = "measured"`: claiming less is the
safe default.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Literal

from policyrun.facts import FactsSnapshot

Evidence = Literal["measured", "supplied", "rulebook"]

KINDS: dict[str, Evidence] = {
    # Read from files a person (or an agent) wrote and chose: what they say is what they claim.
    "attestation": "supplied", "tests.junit": "supplied", "results": "supplied", "file.read": "supplied",
    "env": "supplied",
    # The rulebook's own values: no evidence about the world.
    "const": "rulebook",
    # Measured by policyrun itself.
    "command": "measured", "path": "measured", "docs.claims": "measured", "markers": "measured",
    "pins.constant": "measured", "pins.package": "measured", "python.constants": "measured",
    "python.imports": "measured", "python.symbols": "measured", "python.modules": "measured",
    "python.stack": "measured", "python.record": "measured", "search.literal": "measured", "search.regex": "measured",
    "system.ports": "measured", "system.processes": "measured", "system.shm": "measured",
    "toolchain": "measured", "gpu.nvml": "measured",
}
# Keys of a supplied document that name who wrote or vouched for it, first found wins.
AUTHOR_KEYS = ("author", "attested_by", "reviewer", "owner", "approver", "signed_off_by")
_DEPTH = 3


def evidence_of(kind: str) -> Evidence:
    if kind in KINDS:
        return KINDS[kind]
    if kind.startswith("git."):
        return "measured"
    from policyrun.probes.registry import get

    declared = getattr(get(kind), "evidence", None)
    return "measured" if declared == "measured" else "supplied"


def evidence_files(facts: FactsSnapshot, probes: Iterable[str]) -> list[dict[str, Any]]:
    """Every file a supplied fact was read from, with its sha256 (as the probe recorded it) and the
    author its document names, by probe id; in probe order, each (probe, path) once."""
    out: list[dict[str, Any]] = []
    for probe in sorted(probes):
        fact = facts.facts.get(probe)
        if fact is None or fact.error is not None or evidence_of(fact.provenance.kind) != "supplied":
            continue
        seen: set[str] = set()
        for path, sha, holder in _files(fact.value):
            if path in seen:
                continue
            seen.add(path)
            row: dict[str, Any] = {"probe": probe, "kind": fact.provenance.kind, "path": path, "sha256": sha}
            if (author := _author(holder)) is not None:
                row["author"] = author
            out.append(row)
    return out


def _files(value: Any, depth: int = 0) -> Iterator[tuple[str, str, Mapping[str, Any]]]:
    """(path, sha256, the mapping holding them) for every `{path, sha256}` a fact value records."""
    if depth > _DEPTH:
        return
    if isinstance(value, Mapping):
        path, sha = value.get("path"), value.get("sha256")
        if isinstance(path, str) and isinstance(sha, str):
            yield path, sha, value
        for key, item in value.items():
            if key != "document":  # a document's own contents are not files policyrun read
                yield from _files(item, depth + 1)
    elif isinstance(value, list):
        for item in value:
            yield from _files(item, depth + 1)


def _author(holder: Mapping[str, Any]) -> str | None:
    doc = holder.get("document")
    if not isinstance(doc, Mapping):
        return None
    for key in AUTHOR_KEYS:
        if isinstance(doc.get(key), str) and doc[key]:
            return f"{key}: {doc[key]}"
    return None
