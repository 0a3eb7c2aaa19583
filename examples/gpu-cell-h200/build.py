"""Builds this example's snapshots: the real H200 node's facts, labelled, and two host-labelled fake nodes.

The real node's `gpu` and `stack` facts are those `policyrun collect gpu-node-preflight` wrote on a
lent H200 machine (examples/gpu-node-preflight-h200/facts.json); its `modules` and `netenv` were not
collected there, so they are absent (the cell is BLOCKED on them, as it should be). The two other
hosts are fakes derived from it: `fake-attn-0` agrees, `fake-ffn-0` has another driver branch and
another PyTorch build. Run from the repository root: python examples/gpu-cell-h200/build.py
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REAL = HERE.parent / "gpu-node-preflight-h200" / "facts.json"


def host_snapshot(label: str, facts: dict[str, Any], hostname: str, collected_at: str) -> dict[str, Any]:
    for fact in facts.values():
        fact["provenance"]["host"] = label
    return {"policyrun_facts": 1, "rulebook": "gpu-cell-preflight", "mode": "preflight", "collected_at": collected_at,
            "hosts": {label: {"hostname": hostname, "collected_at": collected_at}}, "facts": facts}


def main() -> None:
    real = json.loads(REAL.read_text())
    picked = {pid: real["facts"][pid] for pid in ("gpu", "stack")}
    out = host_snapshot("h200-real", json.loads(json.dumps(picked)), "h200-lent-node", real["collected_at"])
    (HERE / "h200-real.json").write_text(json.dumps(out, indent=2, sort_keys=True) + "\n")
    for label, driver, torch in (("fake-attn-0", None, None), ("fake-ffn-0", "570.86.15", "2.10.0+cu128")):
        facts = json.loads(json.dumps(picked))
        for fact in facts.values():
            fact["provenance"]["commands"] = ["(fake host, derived from h200-real by build.py)"]
        if driver:
            facts["gpu"]["value"]["driver_version"] = driver
            facts["stack"]["value"]["torch"]["version"] = torch
            facts["stack"]["value"]["torch"]["cuda"] = "12.8"
        snap = host_snapshot(label, facts, f"{label}.example", real["collected_at"])
        (HERE / f"{label}.json").write_text(json.dumps(snap, indent=2, sort_keys=True) + "\n")
    # The cell: what `evaluate --facts h200-real.json --facts fake-attn-0.json --facts fake-ffn-0.json` merges.
    from policyrun.facts import load_facts, merge_facts

    names = ("h200-real.json", "fake-attn-0.json", "fake-ffn-0.json")
    cell = merge_facts((n, load_facts(HERE / n)) for n in names)
    (HERE / "cell.json").write_text(cell.to_json())


if __name__ == "__main__":
    main()
