"""`policyrun diff`: what a rulebook change did to recorded verdicts.

Evaluate the old and the new rulebook against the same facts snapshot, then compare the two
traces: verdict, phase statuses (and their reason, blocker, next action), and per check the
result, the status it imposed, its expression and the values it read. Checks are matched by
(kind, id); phases by id. Different facts digests are reported, since then a change may come
from the facts rather than the rulebook.
"""

from __future__ import annotations

import json
from typing import Any

from policyrun.safetext import escape_controls, json_controls
from policyrun.render.view import format_read
from policyrun.trace.model import CheckRecord, PhaseRecord, Trace

_PHASE_FIELDS = ("reason", "blocker", "next_allowed_action")


def _pair(old: Any, new: Any) -> dict[str, Any] | None:
    return None if old == new else {"old": old, "new": new}


def _check_key(check: CheckRecord) -> tuple[str, str]:
    return (check.kind, check.id)


def _check_diff(old: CheckRecord | None, new: CheckRecord | None) -> dict[str, Any] | None:
    ref = new or old
    assert ref is not None
    entry: dict[str, Any] = {"kind": ref.kind, "id": ref.id}
    if old is None or new is None:
        entry["change"] = "added" if old is None else "removed"
        entry["result"] = ref.result
        entry["outcome"] = ref.outcome
        return entry
    fields = {
        "result": _pair(old.result, new.result),
        "outcome": _pair(old.outcome, new.outcome),
        "expression": _pair(old.expression, new.expression),
        "reads": _pair([format_read(r) for r in old.reads], [format_read(r) for r in new.reads]),
    }
    changed = {k: v for k, v in fields.items() if v is not None}
    if not changed:
        return None
    return {**entry, "change": "changed", **changed}


def _checks_diff(old: PhaseRecord | None, new: PhaseRecord | None) -> list[dict[str, Any]]:
    old_checks = {_check_key(c): c for c in (old.checks() if old else [])}
    new_checks = {_check_key(c): c for c in (new.checks() if new else [])}
    keys = list(new_checks) + [k for k in old_checks if k not in new_checks]
    out = []
    for key in keys:
        entry = _check_diff(old_checks.get(key), new_checks.get(key))
        if entry is not None:
            out.append(entry)
    return out


def _phase_diff(old: PhaseRecord | None, new: PhaseRecord | None) -> dict[str, Any] | None:
    ref = new or old
    assert ref is not None
    checks = _checks_diff(old, new)
    if old is None or new is None:
        return {"phase": ref.phase, "change": "added" if old is None else "removed", "status": ref.status,
                "checks": checks}
    fields = {f: p for f in _PHASE_FIELDS if (p := _pair(getattr(old, f), getattr(new, f))) is not None}
    status = _pair(old.status, new.status)
    if status is None and not fields and not checks:
        return None
    return {"phase": ref.phase, "change": "changed", "status": status, "fields": fields, "checks": checks}


def diff_traces(old: Trace, new: Trace) -> dict[str, Any]:
    """A JSON-ready description of every difference; `changed` is false when there is none."""
    old_phases = {p.phase: p for p in old.phases}
    new_phases = {p.phase: p for p in new.phases}
    ids = list(new_phases) + [p for p in old_phases if p not in new_phases]
    phases = [d for pid in ids if (d := _phase_diff(old_phases.get(pid), new_phases.get(pid))) is not None]
    verdict = _pair(old.verdict.id, new.verdict.id)
    exit_code = _pair(old.exit_code, new.exit_code)
    context = {
        "rulebook": {"old": f"{old.rulebook.name} {old.rulebook.version}", "new": f"{new.rulebook.name} "
                     f"{new.rulebook.version}"},
        "rulebook_sha256": {"old": old.rulebook.sha256, "new": new.rulebook.sha256},
        "facts_sha256": {"old": old.facts_sha256, "new": new.facts_sha256},
        "mode": {"old": old.mode, "new": new.mode},
    }
    return {"changed": bool(phases or verdict or exit_code), "verdict": verdict, "exit_code": exit_code,
            "context": context, "phases": phases}


def review_diff(approved: Trace, new: Trace) -> dict[str, Any]:
    """`report --against APPROVED`: the rulebook diff (statuses, checks, verdict) plus what an
    auditor re-approves beside it: the commits, the supplied evidence files and their sha256, and
    the exceptions."""
    from policyrun.trace.exceptions import trace_exceptions

    out = diff_traces(approved, new)
    out["inputs"] = _keyed_changes({k: json.dumps(v, ensure_ascii=False) for k, v in approved.inputs.items()},
                                   {k: json.dumps(v, ensure_ascii=False) for k, v in new.inputs.items()})
    out["commits"] = _keyed_changes(_commits(approved), _commits(new))
    out["evidence_files"] = _keyed_changes({f"{f.probe}: {f.path}": f.sha256 for f in approved.evidence_files},
                                           {f"{f.probe}: {f.path}": f.sha256 for f in new.evidence_files})
    out["exceptions"] = _keyed_changes({e.text(): "" for e in trace_exceptions(approved)},
                                       {e.text(): "" for e in trace_exceptions(new)})
    out["changed"] = bool(out["changed"] or out["inputs"] or out["commits"] or out["evidence_files"]
                          or out["exceptions"]
                          or approved.rulebook.sha256 != new.rulebook.sha256
                          or approved.facts_sha256 != new.facts_sha256)
    return out


def _commits(trace: Trace) -> dict[str, str]:
    """Repository path -> the HEAD(s) probes recorded there (several when the repository moved
    between probes, or probes read it at different revisions)."""
    heads: dict[str, set[str]] = {}
    for prov in trace.provenance.values():
        if prov.repo is not None and prov.repo.head:
            heads.setdefault(prov.repo.path, set()).add(prov.repo.head)
    return {path: ", ".join(sorted(h)) for path, h in heads.items()}


def _keyed_changes(old: dict[str, str], new: dict[str, str]) -> list[dict[str, Any]]:
    """[{key, change: added|removed|changed, old, new}] for every key whose value differs."""
    out: list[dict[str, Any]] = []
    for key in [*new, *(k for k in old if k not in new)]:
        if old.get(key) != new.get(key):
            change = "added" if key not in old else "removed" if key not in new else "changed"
            out.append({"key": key, "change": change, "old": old.get(key), "new": new.get(key)})
    return out


def _keyed_lines(title: str, changes: list[dict[str, Any]]) -> list[str]:
    if not changes:
        return []
    lines = [title]
    for c in changes:
        if c["change"] == "added":
            lines.append(f"  + {c['key']}" + (f" {c['new']}" if c["new"] else ""))
        elif c["change"] == "removed":
            lines.append(f"  - {c['key']}" + (f" (was {c['old']})" if c["old"] else ""))
        else:
            lines.append(f"  ~ {c['key']}: {c['old']} -> {c['new']}")
    return lines


def _arrow(pair: dict[str, Any]) -> str:
    old, new = ("none" if v is None else v for v in (pair["old"], pair["new"]))
    return f"{old} -> {new}"


def _same_or_changed(label: str, pair: dict[str, Any]) -> str:
    if pair["old"] == pair["new"]:
        return f"{label}: {pair['new']} (same)"
    return f"{label}: {_arrow(pair)}"


def _check_text(c: dict[str, Any]) -> list[str]:
    name = f"{c['kind']} {c['id']}"
    if c["change"] == "added":
        return [f"    + {name}: {c['result']}" + (f" -> {c['outcome']}" if c["outcome"] else "")]
    if c["change"] == "removed":
        return [f"    - {name} (removed; was {c['result']})"]
    lines = [f"    ~ {name}"]
    for field in ("result", "outcome", "expression"):
        if field in c:
            lines.append(f"        {field}: {_arrow(c[field])}")
    if "reads" in c:
        lines.append("        reads were: " + ("; ".join(c["reads"]["old"]) or "nothing"))
        lines.append("        reads now:  " + ("; ".join(c["reads"]["new"]) or "nothing"))
    return lines


def render_diff_text(diff: dict[str, Any]) -> str:
    ctx = diff["context"]
    lines = [_same_or_changed("rulebook", ctx["rulebook"]), _same_or_changed("rulebook sha256", ctx["rulebook_sha256"]),
             _same_or_changed("facts sha256", ctx["facts_sha256"]), _same_or_changed("mode", ctx["mode"])]
    if ctx["facts_sha256"]["old"] != ctx["facts_sha256"]["new"]:
        lines.append("note: the traces were evaluated on different facts, so a change may come from the facts "
                     "rather than the rulebook; evaluate both against one snapshot (--facts) to compare rules")
    lines.append("")
    if diff["verdict"] or diff["exit_code"]:
        v = diff["verdict"] or {"old": "(same)", "new": "(same)"}
        e = diff["exit_code"] or {"old": "same", "new": "same"}
        lines.append(f"verdict: {v['old']} (exit {e['old']}) -> {v['new']} (exit {e['new']})")
    for p in diff["phases"]:
        if p["change"] == "added":
            lines.append(f"+ {p['phase']}: {p['status']} (added)")
        elif p["change"] == "removed":
            lines.append(f"- {p['phase']} (removed; was {p['status']})")
        else:
            status = _arrow(p["status"]) if p["status"] else "status unchanged"
            lines.append(f"~ {p['phase']}: {status}")
            for field, pair in p["fields"].items():
                lines.append(f"    {field}: {json.dumps(pair['old'], ensure_ascii=False)} -> "
                             f"{json.dumps(pair['new'], ensure_ascii=False)}")
        for c in p["checks"]:
            lines += _check_text(c)
    extra = [*_keyed_lines("inputs:", diff.get("inputs", [])),
             *_keyed_lines("commits:", diff.get("commits", [])),
             *_keyed_lines("evidence files (sha256):", diff.get("evidence_files", [])),
             *_keyed_lines("exceptions:", diff.get("exceptions", []))]
    if extra:
        lines += ([""] if lines[-1] else []) + extra
    if not diff["changed"]:
        lines.append("No change: same verdict, phase statuses and check results."
                     + (" Same inputs, commits, evidence files and exceptions." if "commits" in diff else ""))
    else:
        n_checks = sum(len(p["checks"]) for p in diff["phases"])
        lines += ["", f"{len(diff['phases'])} phase(s) and {n_checks} check(s) differ."]
        if "commits" in diff:
            lines[-1] += (f" {len(diff['inputs'])} input(s), {len(diff['commits'])} commit(s), "
                          f"{len(diff['evidence_files'])} evidence file(s) and {len(diff['exceptions'])} "
                          "exception(s) changed.")
    return escape_controls("\n".join(lines) + "\n")


def render_diff_json(diff: dict[str, Any]) -> str:
    return json_controls(json.dumps(diff, indent=2, ensure_ascii=False) + "\n")
