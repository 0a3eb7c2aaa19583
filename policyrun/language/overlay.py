"""Overlays: a rulebook that `extends` another and changes only what differs.

An overlay is a rulebook file with `extends: <shipped name or path>`: a bare name is always a
shipped rulebook; a path (`./base`, `dir/base.yaml`, a `.yaml` suffix) is relative to the
overlay. It is merged onto its base as data, before validation, by these rules:

- `name`, `version`, `description`, `report`: the overlay's replace the base's (`name` is
  required: a trace must say which policy ran);
- `references`: appended;
- `vars`, `schemas`, `probes`, `derive`: by id, an overlay entry adds or replaces the whole entry;
- `inputs`: by name, an overlay entry's fields replace those fields (so `{default: x}` changes only
  the default);
- `modes`: by name, fields replace fields, `permissions` merge by permission;
- `phases`: by id; an unknown id adds a phase at the end. For a known phase, fields replace fields,
  `next` merges by status, and `preconditions`, `stop_when` and `evidence` merge by check id (add
  or replace); `disable: [{id, reason}]` removes a check — only with a reason, which the phase
  records (and the trace shows);
- `verdicts`: by id, add or replace (new ones go first: the first verdict that holds wins).

A base may itself extend another (at most 8 levels; a cycle is an error). Every node keeps the
position of the file that wrote it, so lint locates each finding in its own file; the loaded
rulebook lists the chain (name, path, sha256), base first.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from policyrun.errors import Location, RulebookError
from policyrun.yamlsource import NodePath, SourceMap

MAX_DEPTH = 8
_REPLACE = ("policyrun", "name", "version", "description", "report")
_BY_ID_MAPS = ("vars", "schemas", "probes", "derive")
_CHECK_LISTS = ("preconditions", "stop_when", "evidence")


@dataclass(frozen=True)
class Origin:
    smap: SourceMap
    path: NodePath


@dataclass(frozen=True)
class Layer:
    """One file of a chain, as the trace records it."""

    name: str
    path: str  # as displayed
    sha256: str
    file: str = ""  # where it is on disk


class _Styles:
    def __init__(self, layered: LayeredSourceMap) -> None:
        self.layered = layered

    def get(self, path: NodePath, default: Any = None) -> Any:
        smap, orig = self.layered.origin(path)
        return smap.styles.get(orig, default)

    def __contains__(self, path: object) -> bool:
        if not isinstance(path, tuple):
            return False
        smap, orig = self.layered.origin(path)
        return orig in smap.styles


class LayeredSourceMap(SourceMap):
    """Positions in a merged document: each node resolves to the file (and node) that wrote it."""

    def __init__(self, top: SourceMap, origins: dict[NodePath, Origin]) -> None:
        super().__init__(top.file, text=top.text)
        self.top = top
        self.origins = origins
        self.styles = _Styles(self)  # type: ignore[assignment]

    def origin(self, path: NodePath) -> tuple[SourceMap, NodePath]:
        p = tuple(path)
        for n in range(len(p), -1, -1):
            found = self.origins.get(p[:n])
            if found is not None:
                return found.smap, (*found.path, *p[n:])
        return self.top, p

    def locate(self, path: NodePath, *, key: bool = False) -> Location:
        smap, orig = self.origin(path)
        return smap.locate(orig, key=key)

    def locate_in_scalar(self, path: NodePath, line: int, column: int) -> Location:
        smap, orig = self.origin(path)
        return smap.locate_in_scalar(orig, line, column)


@dataclass
class _Doc:
    data: dict[str, Any]
    origins: dict[NodePath, Origin] = field(default_factory=dict)

    def origin_of(self, path: NodePath) -> Origin:
        """Where the node at `path` of this document was written."""
        p = tuple(path)
        for n in range(len(p), -1, -1):
            found = self.origins.get(p[:n])
            if found is not None:
                return Origin(found.smap, (*found.path, *p[n:]))
        raise AssertionError(f"no origin for {path}")  # every document has a root origin


def load_layered(path: Path, display: str, data: dict[str, Any], smap: SourceMap,
                 seen: tuple[str, ...] = ()) -> tuple[dict[str, Any], SourceMap, list[Layer]]:
    """The document with its `extends` chain merged in, its positions, and the chain (base first).
    A document without `extends` comes back unchanged."""
    text = smap.text
    own = Layer(str(data.get("name", "")), display, hashlib.sha256(text.encode()).hexdigest(), str(path))
    if "extends" not in data:
        return data, smap, [own]
    ref = data["extends"]
    where = smap.locate(("extends",))
    if not isinstance(ref, str) or not ref.strip():
        raise RulebookError("`extends` names the rulebook this one adapts: a shipped name or a path relative "
                            "to this file", code="O001", location=where)
    if not isinstance(data.get("name"), str):
        raise RulebookError("an overlay needs its own `name` (the trace says which policy ran)",
                            code="O006", location=smap.locate((), key=False))
    if len(seen) >= MAX_DEPTH:
        raise RulebookError(f"`extends` chains more than {MAX_DEPTH} rulebooks; flatten the chain", code="O002",
                            location=where)
    base_path = _resolve(path, ref, where)
    key = str(base_path.resolve())
    if key in seen or key == str(path.resolve()):
        raise RulebookError(f"`extends` makes a cycle through {ref!r}", code="O002", location=where)
    from policyrun.language.locate import display_name
    from policyrun.language.rulebooktext import NotARulebook, not_a_rulebook, read_rulebook

    base_display = display_name(base_path)
    try:
        _, base_data, base_smap = read_rulebook(base_path, base_display)
    except NotARulebook:  # located at the `extends:` that named it
        raise not_a_rulebook(base_display, where, code="O001", what=f"`extends: {ref}`") from None
    merged_base, merged_smap, chain = load_layered(base_path, base_display, base_data, base_smap,
                                                   (*seen, str(path.resolve())))
    base_doc = _Doc(merged_base, merged_smap.origins if isinstance(merged_smap, LayeredSourceMap)
                    else {(): Origin(merged_smap, ())})
    merged = _merge(base_doc, data, smap)
    return merged.data, LayeredSourceMap(smap, merged.origins), [*chain, own]


def _resolve(overlay: Path, ref: str, where: Location) -> Path:
    """`extends:` follows the rule for rulebook arguments (policyrun.language.locate): a path form is a file
    relative to this overlay; a name is a shipped rulebook, never a file that happens to be here."""
    from policyrun.language.locate import is_path_form, shipped_or_hint

    if is_path_form(ref):
        candidate = overlay.parent / ref
        if candidate.is_file():
            return candidate
        from policyrun.didyoumean import path_hint

        raise RulebookError(f"`extends: {ref}` is not a file (a path is relative to this rulebook)"
                            f"{path_hint(ref, overlay.parent)}", code="O001", location=where)
    found = shipped_or_hint(ref, overlay.parent)
    if isinstance(found, Path):
        return found
    raise RulebookError(f"`extends: {ref}` is not a shipped rulebook{found}", code="O001",
                        location=where)


def _merge(base: _Doc, over: dict[str, Any], smap: SourceMap) -> _Doc:
    out = _Doc(dict(base.data), dict(base.origins))

    def mine(path: NodePath) -> Origin:
        return Origin(smap, path)

    for key, value in over.items():
        if key == "extends":
            out.data[key] = value
            _take(out, (key,), mine((key,)))
            continue
        if key in _REPLACE or key not in ("references", "inputs", "modes", "phases", "verdicts", *_BY_ID_MAPS):
            out.data[key] = value  # unknown keys pass through: validation reports them here
            _take(out, (key,), mine((key,)))
        elif key == "references":
            items = list(out.data.get(key, []))
            for i, ref in enumerate(value if isinstance(value, list) else []):
                if ref not in items:
                    items.append(ref)
                    _take(out, (key, len(items) - 1), mine((key, i)))
            out.data[key] = items
        elif key in _BY_ID_MAPS:
            merged = dict(out.data.get(key) or {})
            if key not in out.data:
                _take(out, (key,), mine((key,)))
            for ident, entry in (value or {}).items():
                merged[ident] = entry
                _take(out, (key, ident), mine((key, ident)))
            out.data[key] = merged
        elif key in ("inputs", "modes"):
            merged = dict(out.data.get(key) or {})
            if key not in out.data:
                _take(out, (key,), mine((key,)))
            for name, entry in (value or {}).items():
                if name in merged and isinstance(entry, dict) and isinstance(merged[name], dict):
                    combined = dict(merged[name])
                    for field_name, field_value in entry.items():
                        if field_name == "permissions" and isinstance(field_value, dict) \
                                and isinstance(combined.get(field_name), dict):
                            combined[field_name] = {**combined[field_name], **field_value}
                            for perm in field_value:
                                _take(out, (key, name, field_name, perm), mine((key, name, field_name, perm)))
                        else:
                            combined[field_name] = field_value
                            _take(out, (key, name, field_name), mine((key, name, field_name)))
                    merged[name] = combined
                else:
                    merged[name] = entry
                    _take(out, (key, name), mine((key, name)))
            out.data[key] = merged
        elif key == "phases":
            _merge_phases(out, value, smap)
        elif key == "verdicts":
            _merge_verdicts(out, value, smap)
    return out


def _take(doc: _Doc, path: NodePath, origin: Origin) -> None:
    """The subtree at `path` now comes from `origin`: forget what described the old one."""
    for stale in [p for p in doc.origins if p[:len(path)] == path and len(p) > len(path)]:
        del doc.origins[stale]
    doc.origins[path] = origin


def _merge_phases(out: _Doc, value: Any, smap: SourceMap) -> None:
    for j, over in enumerate(value if isinstance(value, list) else []):
        if isinstance(over, dict) and "renames" in over:
            _rename_phase(out, over, j, smap)
    phases = list(out.data.get("phases") or [])
    index = {p.get("id"): i for i, p in enumerate(phases) if isinstance(p, dict)}
    for j, over in enumerate(value if isinstance(value, list) else []):
        if isinstance(over, dict) and "renames" in over:
            over = {k: v for k, v in over.items() if k != "renames"}
        if not isinstance(over, dict) or over.get("id") not in index:
            phases.append(over)
            _take(out, ("phases", len(phases) - 1), Origin(smap, ("phases", j)))
            continue
        i = index[over["id"]]
        merged = dict(phases[i])
        for field_name, field_value in over.items():
            here: NodePath = ("phases", i, field_name)
            src: NodePath = ("phases", j, field_name)
            if field_name == "next" and isinstance(field_value, dict) and isinstance(merged.get("next"), dict):
                merged["next"] = {**merged["next"], **field_value}
                for status in field_value:
                    _take(out, (*here, status), Origin(smap, (*src, status)))
            elif field_name in _CHECK_LISTS:
                merged[field_name] = _merge_checks(out, merged.get(field_name) or [], field_value, here, src, smap)
            elif field_name == "disable":
                continue
            else:
                merged[field_name] = field_value
                _take(out, here, Origin(smap, src))
        if "disable" in over:
            _disable(out, merged, over["disable"], i, j, smap)
        phases[i] = merged
    out.data["phases"] = phases


def _rename_phase(out: _Doc, over: dict[str, Any], j: int, smap: SourceMap) -> None:
    """`{id: NEW, renames: OLD}`: the base's phase OLD is called NEW from here on. Every reference
    follows — mode phase lists and waivers, `requires`, and `phases.OLD` in expressions — so a
    trace, a waiver and a test file use the one name this rulebook's readers know."""
    old, new = over["renames"], over.get("id")
    where = smap.locate(("phases", j, "renames"))
    phases = list(out.data.get("phases") or [])
    ids: list[str] = [p["id"] for p in phases if isinstance(p, dict) and isinstance(p.get("id"), str)]
    if not isinstance(old, str) or not isinstance(new, str) or not new:
        raise RulebookError("rename a base phase as `{id: <new id>, renames: <the base's phase id>}`",
                            code="O004", location=where)
    if old not in ids:
        from policyrun.didyoumean import hint

        known = hint(old, ids) or f"; its phases: {', '.join(ids) or 'none'}"
        raise RulebookError(f"the base has no phase {old!r} to rename{known}", code="O004", location=where)
    if new != old and new in ids:
        raise RulebookError(f"cannot rename phase {old!r} to {new!r}: the base already has a phase {new!r}",
                            code="O004", location=smap.locate(("phases", j, "id")))
    pattern = re.compile(r"(\bphases\s*\.\s*)" + re.escape(old) + r"\b|(\bphases\s*\[\s*['\"])"
                         + re.escape(old) + r"(['\"]\s*\])")

    def text(value: Any) -> Any:
        if isinstance(value, str):
            return pattern.sub(lambda m: (m.group(1) or m.group(2)) + new + (m.group(3) or ""), value)
        if isinstance(value, list):
            return [text(v) for v in value]
        if isinstance(value, dict):
            return {k: text(v) for k, v in value.items()}
        return value

    for i, phase in enumerate(phases):
        if not isinstance(phase, dict):
            continue
        renamed = {k: text(v) for k, v in phase.items()}
        if phase.get("id") == old:
            renamed["id"] = new
            out.origins[("phases", i, "id")] = Origin(smap, ("phases", j, "id"))
        if isinstance(renamed.get("requires"), list):
            renamed["requires"] = [new if r == old else r for r in renamed["requires"]]
        phases[i] = renamed
    out.data["phases"] = phases
    if "verdicts" in out.data:
        out.data["verdicts"] = text(out.data["verdicts"])
    modes = out.data.get("modes")
    if isinstance(modes, dict):
        modes = out.data["modes"] = dict(modes)  # the base's data is never changed in place
        for name, mode in list(modes.items()):
            if not isinstance(mode, dict):
                continue
            mode = dict(mode)
            if isinstance(mode.get("phases"), list):
                mode["phases"] = [_renamed_entry(e, old, new) for e in mode["phases"]]
            if isinstance(mode.get("waivers"), list):
                mode["waivers"] = [new if w == old else w for w in mode["waivers"]]
            modes[name] = mode
    report = out.data.get("report")
    if isinstance(report, dict) and isinstance(report.get("hardware_phases"), list):
        out.data["report"] = {**report, "hardware_phases": [new if p == old else p
                                                            for p in report["hardware_phases"]]}


def _renamed_entry(entry: Any, old: str, new: str) -> Any:
    if entry == old:
        return new
    if isinstance(entry, dict) and entry.get("phase") == old:
        return {**entry, "phase": new}
    return entry


def _check_id(check: Any, kind: str) -> Any:
    if isinstance(check, dict):
        return check.get("id")
    return None if kind != "preconditions" else None


def _merge_checks(out: _Doc, base: list[Any], over: Any, here: NodePath, src: NodePath, smap: SourceMap) -> list[Any]:
    kind = str(here[-1])
    origins = [out.origin_of((*here, k)) for k in range(len(base))]
    items = list(base)
    ids = {_check_id(c, kind): k for k, c in enumerate(items) if _check_id(c, kind)}
    for m, check in enumerate(over if isinstance(over, list) else []):
        ident = _check_id(check, kind)
        if ident is not None and ident in ids:
            items[ids[ident]] = check
            origins[ids[ident]] = Origin(smap, (*src, m))
        else:
            items.append(check)
            origins.append(Origin(smap, (*src, m)))
    _take(out, here, out.origin_of(here) if base else Origin(smap, src))
    for k, origin in enumerate(origins):
        out.origins[(*here, k)] = origin
    return items


def _disable(out: _Doc, phase: dict[str, Any], entries: Any, i: int, j: int, smap: SourceMap) -> None:
    """Remove the checks an overlay disables; the phase keeps `disabled` (id, reason) for the trace."""
    disabled = list(phase.get("disabled") or [])
    for m, entry in enumerate(entries if isinstance(entries, list) else []):
        where = smap.locate(("phases", j, "disable", m))
        if not isinstance(entry, dict) or not isinstance(entry.get("id"), str) \
                or not isinstance(entry.get("reason"), str) or not entry["reason"].strip():
            raise RulebookError("disable a check as `{id: <check id>, reason: <why this policy does not apply>}`; "
                                "a check is never disabled without a reason", code="O003", location=where)
        found = False
        for kind in _CHECK_LISTS:
            checks = phase.get(kind) or []
            for k, check in enumerate(checks):
                if _check_id(check, kind) == entry["id"]:
                    origins = [out.origin_of(("phases", i, kind, n)) for n in range(len(checks))]
                    del checks[k], origins[k]
                    phase[kind] = checks
                    _take(out, ("phases", i, kind), out.origin_of(("phases", i, kind)))
                    for n, origin in enumerate(origins):
                        out.origins[("phases", i, kind, n)] = origin
                    found = True
                    break
            if found:
                break
        if not found:
            from policyrun.didyoumean import hint

            ids = [cid for kind in _CHECK_LISTS for c in phase.get(kind) or []
                   if isinstance(cid := _check_id(c, kind), str)]
            known = hint(entry["id"], ids) or f"; its checks: {', '.join(ids) or 'none'}"
            raise RulebookError(f"phase {phase.get('id')} has no check {entry['id']!r} to disable{known}",
                                code="O003", location=where)
        disabled.append({"id": entry["id"], "reason": entry["reason"]})
        out.origins[("phases", i, "disabled", len(disabled) - 1)] = Origin(smap, ("phases", j, "disable", m))
    phase["disabled"] = disabled


def _merge_verdicts(out: _Doc, value: Any, smap: SourceMap) -> None:
    verdicts = list(out.data.get("verdicts") or [])
    origins = [out.origin_of(("verdicts", k)) for k in range(len(verdicts))]
    ids = {v.get("id"): k for k, v in enumerate(verdicts) if isinstance(v, dict)}
    new: list[Any] = []
    new_origins: list[Origin] = []
    for m, verdict in enumerate(value if isinstance(value, list) else []):
        ident = verdict.get("id") if isinstance(verdict, dict) else None
        if ident in ids:
            verdicts[ids[ident]] = verdict
            origins[ids[ident]] = Origin(smap, ("verdicts", m))
        else:
            new.append(verdict)
            new_origins.append(Origin(smap, ("verdicts", m)))
    merged = new + verdicts
    all_origins = new_origins + origins
    _take(out, ("verdicts",), out.origin_of(("verdicts",)) if "verdicts" in out.data else Origin(smap, ("verdicts",)))
    for k, origin in enumerate(all_origins):
        out.origins[("verdicts", k)] = origin
    out.data["verdicts"] = merged
