"""Compare two trees of traces on what a rewrite of a rulebook must not change (issue 23, item 3).

    python bench/compare_traces.py BEFORE_DIR AFTER_DIR

Every trace (a JSON file with `phases` and `verdict`) under BEFORE_DIR is paired with the file at the same relative path under
AFTER_DIR. For each pair it compares, per phase: the status, the blocker, every blocker
(`blockers`), the messages of the checks that imposed a status, and the next allowed action; the
verdict (id and summary) and exit code; and the value (or error) of every derived value both
traces have. Expressions, locations, hashes, reads and the derived values only one side has may
differ (a rewrite states predicates differently); the last are listed, not counted as changes.
With --checks it also compares every check of every phase by kind, id, result and outcome, in
order (for a change that must keep the checks themselves, such as a new trace format). Either
tree may hold traces of format 1 or 2 (read as format 2: policyrun.trace.model.upgrade_format1).
Prints one line per difference and a summary; exit 1 when anything differs, 0 otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from policyrun.trace.model import upgrade_format1
from policyrun.trace.records import phase_checks


def _phases(trace: dict[str, Any], checks: bool = False) -> dict[str, dict[str, Any]]:
    out = {}
    for p in trace["phases"]:
        recorded = list(phase_checks(p))
        imposed = sorted(c["message"] or "" for c in recorded if c.get("outcome") is not None)
        out[p["phase"]] = {"status": p["status"], "blocker": p["blocker"], "blockers": p.get("blockers", []),
                           "messages": imposed, "next_allowed_action": p["next_allowed_action"]}
        if checks:
            out[p["phase"]]["checks"] = [(c["kind"], c["id"], c["result"], c.get("outcome")) for c in recorded]
    return out


def _derived(trace: dict[str, Any]) -> dict[str, Any]:
    return {d["id"]: {"value": d.get("value"), "error": d.get("error")} for d in trace.get("derived", [])}


def compare(before: dict[str, Any], after: dict[str, Any], checks: bool = False) -> tuple[list[str], list[str]]:
    """(differences, notes) between two traces (of either format)."""
    diffs: list[str] = []
    notes: list[str] = []
    before, after = upgrade_format1(before), upgrade_format1(after)
    a, b = _phases(before, checks), _phases(after, checks)
    if list(a) != list(b):
        diffs.append(f"phases differ: {list(a)} != {list(b)}")
    for pid in a.keys() & b.keys():
        for key, value in a[pid].items():
            if b[pid][key] != value:
                diffs.append(f"{pid}.{key}: {value!r} != {b[pid][key]!r}")
    for key in ("id", "summary"):
        if before["verdict"].get(key) != after["verdict"].get(key):
            diffs.append(f"verdict.{key}: {before['verdict'].get(key)!r} != {after['verdict'].get(key)!r}")
    if before.get("exit_code") != after.get("exit_code"):
        diffs.append(f"exit_code: {before.get('exit_code')} != {after.get('exit_code')}")
    da, db = _derived(before), _derived(after)
    for did in sorted(da.keys() & db.keys()):
        if da[did] != db[did]:
            diffs.append(f"derived.{did}: {da[did]!r} != {db[did]!r}")
    if only := sorted(da.keys() - db.keys()):
        notes.append(f"derived only before: {', '.join(only)}")
    if only := sorted(db.keys() - da.keys()):
        notes.append(f"derived only after: {', '.join(only)}")
    return diffs, notes


def _is_trace(path: Path) -> bool:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and "phases" in data and "verdict" in data


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    parser.add_argument("--checks", action="store_true", help="compare every check's kind, id, result and outcome")
    args = parser.parse_args(argv)
    pairs = sorted(p.relative_to(args.before) for p in args.before.rglob("*.json") if _is_trace(p))
    changed = 0
    for rel in pairs:
        other = args.after / rel
        if not other.is_file():
            print(f"{rel}: missing in {args.after}")
            changed += 1
            continue
        diffs, notes = compare(json.loads((args.before / rel).read_text()), json.loads(other.read_text()),
                               args.checks)
        for line in diffs:
            print(f"{rel}: {line}")
        for line in notes:
            print(f"{rel}: note: {line}")
        changed += bool(diffs)
        phases = len(json.loads(other.read_text())["phases"])
        print(f"{rel}: {'DIFFERENT' if diffs else 'same'} ({phases} phases)")
    print(f"{len(pairs)} trace(s) compared, {changed} different")
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main())
