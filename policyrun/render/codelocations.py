"""The code a failing check points at, found in the values it read (for SARIF and GitHub annotations).

A check's trace record lists what it read and, for evidence with a `violations:` list, the
violations. Those values carry the places the verdict is about: search hits (`path` + `line`),
rows of the Python source probes, markers, claims and pins (`file` + `line`, `site: "path:line"`),
JUnit failures (`file`/`line`), git diff paths. This module walks them — boundedly: values may be
large, and a summarised value (`{"truncated": true, ...}`) simply yields nothing — and resolves
each path against the probe that produced it (its `root` parameter, else its repository), then
against a source root: `base` when given, else the repository most of the trace's probes read.
Nothing is read from disk; everything comes from the trace.
"""

from __future__ import annotations

import posixpath
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from policyrun.errors import Location
from policyrun.facts import Provenance
from policyrun.render.records import probe_of
from policyrun.render.view import is_decisive
from policyrun.trace.model import CheckRecord, PhaseRecord, Trace
from policyrun.language.violationrows import row_site

SRCROOT = "%SRCROOT%"
MAX_LOCATIONS = 20
_MAX_NODES = 5000  # values visited per read: a large fact costs a bounded walk
# Probe kinds whose rows name files relative to where the run happened (pytest's working
# directory, the evidence folder), not to a probe root.
_FILE_KINDS = frozenset({"tests.junit", "attestation", "file.read", "results"})
# Kinds whose facts name places in source trees. Other facts may hold paths too (an installed
# package's directory in `python.stack`, keys of an attestation document) that are not code a
# finding is about, so their values are not searched.
_LOCATION_KINDS = frozenset({"search.regex", "search.literal", "git.diff", "python.imports", "python.constants",
                             "python.symbols", "markers", "docs.claims", "pins.package", "pins.constant",
                             "tests.junit"})
# Folders a file of an installed package lives under: never a location in the user's repository.
_PACKAGE_PARTS = ("/site-packages/", "/dist-packages/", "/policyrun/_shipped/")
_SITE_KEYS = frozenset({"site", "sites", "source", "sources", "location", "locations"})
# `path:line` with a file name that has an extension, e.g. `afd_plugin/compat/vllm.py:12`.
_SITE = re.compile(r"(?<![\w./-])((?:[\w.-]+/)*[\w.-]+\.[A-Za-z][A-Za-z0-9_]*):([1-9][0-9]*)(?::([1-9][0-9]*))?(?![\w/])")


@dataclass(frozen=True)
class CodeLocation:
    """A Location in a source tree: its file relative to `base` (a SARIF uriBaseId), or absolute
    when base is None."""

    at: Location
    base: str | None = SRCROOT
    note: str = ""  # what pointed here, for people
    site: str = ""  # `path:line` as the value or message wrote it, to link a mention of it (SARIF)

    @property
    def path(self) -> str:
        return self.at.file

    @property
    def line(self) -> int:
        return self.at.line

    @property
    def column(self) -> int:
        return self.at.column

    @property
    def in_source_root(self) -> bool:
        return self.base == SRCROOT and not self.path.startswith("../")

    def text(self) -> str:
        """`path:line[:column]`, as source sites are written in facts and messages (a column only when
        known), for people reading a report."""
        return self.path + (f":{self.line}" if self.line else "") + (f":{self.column}" if self.column else "")


@dataclass(frozen=True)
class _Raw:
    at: Location  # as the fact wrote it: relative to the probe's root, or absolute
    where: str
    site: str = ""


class Resolver:
    """Turns a path found in a fact into a CodeLocation, relative to a source root."""

    def __init__(self, trace: Trace, base: Path | None = None) -> None:
        self.trace = trace
        repos = [p.repo.path for p in trace.provenance.values() if p.repo is not None]
        if base is not None:
            self.root: str | None = posixpath.normpath(Path(base).absolute().as_posix())
        elif repos:
            # The repository most probes read is the one the rulebook is about (the others are
            # references, like an upstream checkout); ties go to the first in sorted order.
            counts = Counter(repos)
            self.root = min(counts, key=lambda r: (-counts[r], r))
        else:
            self.root = None
        self.bases: dict[str, str] = {}  # repository path → uriBaseId, for the other repositories

    def probe_root(self, probe: str) -> tuple[str | None, str | None]:
        """(directory the probe's rows are relative to, repository path) for a probe id."""
        prov = self.trace.provenance.get(probe)
        if prov is None:
            return None, None
        repo = prov.repo.path if prov.repo is not None else None
        if prov.kind in _FILE_KINDS:
            return None, repo
        root = prov.params.get("root")
        if prov.kind.startswith("git.") or prov.kind == "python.symbols":
            root = repo if prov.kind.startswith("git.") and repo else prov.params.get("path")
        if not isinstance(root, str):
            root = repo
        return root, repo

    def resolve(self, raw: _Raw, root: str | None, repo: str | None) -> CodeLocation:
        path = raw.at.file.replace("\\", "/")
        if not posixpath.isabs(path) and root:
            path = posixpath.join(root, path)
        path = posixpath.normpath(path)
        site = raw.site or (f"{raw.at.file}:{raw.at.line}" if raw.at.line else "")

        def at(file: str, base: str | None) -> CodeLocation:
            return CodeLocation(replace(raw.at, file=file), base, raw.where, site)

        if not posixpath.isabs(path):
            # Relative to where the run happened, which CI makes the repository root.
            return at(path, None if path.startswith("../") else SRCROOT)
        if self.root and _under(path, self.root):
            return at(posixpath.relpath(path, self.root), SRCROOT)
        if repo and posixpath.isabs(repo) and _under(path, repo):
            return at(posixpath.relpath(path, repo), self._base_id(repo))
        return at(path, None)

    def _base_id(self, repo: str) -> str:
        if repo not in self.bases:
            name = re.sub(r"[^A-Za-z0-9]+", "_", posixpath.basename(repo.rstrip("/")) or "repo").upper()
            taken = set(self.bases.values())
            ident, n = f"REPO_{name}", 2
            while ident in taken:
                ident, n = f"REPO_{name}_{n}", n + 1
            self.bases[repo] = ident
        return self.bases[repo]

    def original_uri_base_ids(self) -> dict[str, dict[str, Any]]:
        """SARIF `originalUriBaseIds` for the repositories other than the source root."""
        heads = {p.repo.path: p.repo.head for p in self.trace.provenance.values() if p.repo is not None}
        out: dict[str, dict[str, Any]] = {}
        for repo, ident in sorted(self.bases.items(), key=lambda kv: kv[1]):
            head = heads.get(repo)
            out[ident] = {"uri": Path(repo).as_uri().rstrip("/") + "/",
                          "description": {"text": f"repository {repo}" + (f" at {head}" if head else "")}}
        return out

    def rulebook(self, loc: Location | str | None) -> CodeLocation | None:
        """A place in the rulebook (a check's or phase's location as the trace records it) as a
        CodeLocation, or None for a shipped rulebook: its file is inside the installed package, not
        the user's repository, so it is no place to show a result (code scanning would list a file
        that does not exist in the repository)."""
        if isinstance(loc, str):
            loc = Location.parse(loc) if loc else None
        if loc is None or is_shipped(loc.file):
            return None
        return self.resolve(_Raw(loc, ""), None, None)


def is_shipped(file: str) -> bool:
    """Whether a rulebook file named in a trace is one policyrun ships: the trace names those
    `<shipped>/NAME.yaml` (policyrun.language.locate.display_name), whether they were read from the
    installed package or from a source checkout's rulebooks/ folder. A path into an installed
    package (a trace written by other means) counts too."""
    posix = file.replace("\\", "/")
    return posix.startswith("<") or any(part in posix for part in _PACKAGE_PARTS)


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


_WHOLE_SITE = re.compile(r"([^\s:]+):([1-9][0-9]*)(?::([1-9][0-9]*))?")


def _sites(text: str, where: str) -> Iterator[_Raw]:
    """`path:line[:col]` sites in a string: the whole string (`Dockerfile:3`), else every
    `dir/name.ext:line` inside it (`constant afd/x.py:12 = 0.26.0`)."""
    whole = _WHOLE_SITE.fullmatch(text.strip())
    if whole is not None:
        yield _Raw(_site_location(whole), where, whole.group(0))
        return
    for m in _SITE.finditer(text):
        yield _Raw(_site_location(m), where, m.group(0))


def _site_location(m: re.Match[str]) -> Location:
    return Location(m.group(1), int(m.group(2)), int(m.group(3) or 0))


def _walk(value: Any, key: str, where: str, budget: list[int]) -> Iterator[_Raw]:
    """Paths with lines in a fact value, in document order."""
    budget[0] -= 1
    if budget[0] < 0:
        return
    if isinstance(value, dict):
        if value.get("truncated") is True and "sha256" in value:
            return  # a value the trace summarised: nothing left to find
        for field in ("path", "file"):
            name = value.get(field)
            if isinstance(name, str) and name:
                yield _Raw(Location(name, _int(value.get("line")), _int(value.get("column"))), where)
                return
        site = value.get("site")
        if isinstance(site, str):
            found = list(_sites(site, where))
            if found:
                yield from found
                return
        for k, v in value.items():
            yield from _walk(v, str(k), where, budget)
    elif isinstance(value, list):
        for item in value:
            yield from _walk(item, key, where, budget)
            if budget[0] < 0:
                return
    elif isinstance(value, str):
        if key in _SITE_KEYS:
            yield from _sites(value, where)
        elif key.endswith("_paths") and value:  # git.diff's added/changed/deleted/modified paths
            yield _Raw(Location(value), where)


def _candidates(trace: Trace, path: str, fallback: list[str]) -> list[str]:
    """Probe ids a read's value may come from: the probe it names, or a derived value's probes."""
    probe = probe_of(path)
    if probe is not None:
        return [probe]
    parts = path.split(".")
    if parts[0] == "derived" and len(parts) > 1:
        rec = next((d for d in trace.derived if d.id == parts[1]), None)
        if rec is not None:
            return list(rec.facts)
    return list(fallback)


def _root_for(resolver: Resolver, probes: list[str]) -> tuple[str | None, str | None]:
    """One root for rows that may come from several probes: the most common one among them."""
    roots = [resolver.probe_root(p) for p in probes]
    roots = [r for r in roots if r != (None, None)] or [(None, None)]
    counts = Counter(roots)
    return max(counts, key=lambda r: (counts[r], -roots.index(r)))


class _Collector:
    """Locations in order, one per file line: a later one with a column refines an earlier one
    without (a violation names `path:line`, the search hit behind it has the column too)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.items: list[CodeLocation] = []
        self.index: dict[tuple[str, int, str | None], int] = {}

    def add(self, loc: CodeLocation) -> None:
        key = (loc.path, loc.line, loc.base)
        at = self.index.get(key)
        if at is None:
            if len(self.items) < self.limit:
                self.index[key] = len(self.items)
                self.items.append(loc)
        else:
            old = self.items[at]
            column = old.column or loc.column
            if column != old.column or (loc.site and not old.site):
                self.items[at] = replace(old, at=replace(old.at, column=column), site=old.site or loc.site)

    @property
    def full(self) -> bool:
        return len(self.items) >= self.limit


def check_locations(trace: Trace, check: CheckRecord, resolver: Resolver,
                    limit: int = MAX_LOCATIONS) -> list[CodeLocation]:
    """The code a check points at: its violations first (the precise offenders), then its reads."""
    out = _Collector(limit)

    def add(found: Iterator[_Raw], probes: list[str]) -> None:
        root, repo = _root_for(resolver, probes)
        for raw in found:
            out.add(resolver.resolve(raw, root, repo))

    if check.violations is not None:
        # Violations are what the rulebook itself names as the offenders: `path:line` strings in them
        # are taken whatever the facts' kinds; structured ones are searched like facts.
        located = any((prov := trace.provenance.get(p)) is not None and prov.kind in _LOCATION_KINDS
                      for p in check.facts)
        items = check.violations if isinstance(check.violations, list) else [check.violations]
        for item in items:
            where = f"violation of {check.id}"
            if check.row is not None and (site := row_site(item, check.row)) is not None:
                add(iter([_Raw(site, where)]), list(check.facts))  # the row's declared location
            elif isinstance(item, str):
                add(_sites(item, where), list(check.facts))
            elif located:
                add(_walk(item, "", where, [_MAX_NODES]), list(check.facts))
    if check.message:
        # The message the rulebook wrote for this verdict names the places it is about: both sides of
        # a disagreement ("pin pyproject.toml:16 = 0.26.1, but constant afd/x.py:12 = 0.26.0"), where the
        # violations list only the offenders.
        add(_sites(check.message, f"named in the message of {check.id}"), list(check.facts))
    for read in check.reads:
        if read.missing or read.value is None:
            continue
        probes = _candidates(trace, read.path, list(check.facts))
        if not any((prov := trace.provenance.get(p)) is not None and prov.kind in _LOCATION_KINDS for p in probes):
            continue
        add(_walk(read.value, read.path.rsplit(".", 1)[-1], f"{read.path}, read by {check.id}", [_MAX_NODES]), probes)
    for probe in check.facts:  # a file the check's facts came from (an attestation, a JUnit report)
        prov = trace.provenance.get(probe)
        if prov is not None and prov.kind in _FILE_KINDS:
            for name in _param_files(prov):
                add(iter([_Raw(Location(name), f"facts.{probe} ({prov.kind}), read by {check.id}")]), [probe])
    return out.items


def row_location(resolver: Resolver, probes: list[str], site: Location, where: str) -> CodeLocation:
    """A `violations` row's declared file and line, resolved as the rows of the check's facts are."""
    root, repo = _root_for(resolver, probes)
    return resolver.resolve(_Raw(site, where), root, repo)


def _param_files(prov: Provenance) -> list[str]:
    value = prov.params.get("path", prov.params.get("paths"))
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [v for v in value if isinstance(v, str) and not any(c in v for c in "*?[")]
    return []


def failing_checks(phase: PhaseRecord) -> list[CheckRecord]:
    """The checks that explain a non-PASS phase: those that imposed a status, else the decisive ones."""
    imposed = [c for c in phase.checks() if c.outcome is not None and c.outcome != "PASS"]
    return imposed or [c for c in phase.checks() if is_decisive(c)]


def phase_locations(trace: Trace, phase: PhaseRecord, resolver: Resolver,
                    limit: int = MAX_LOCATIONS) -> list[CodeLocation]:
    out = _Collector(limit)
    for check in failing_checks(phase):
        for loc in check_locations(trace, check, resolver, limit):
            out.add(loc)
    return out.items
