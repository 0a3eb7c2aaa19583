"""Builds this example's fake hosts and the merged cell from the real H200 node's snapshot.

`h200-real.json` is kept exactly as `policyrun collect gpu-cell-preflight --host-label h200-real`
wrote it on a lent H200 machine (device/collect.log). The two other hosts are fakes derived from
it, so the cell shows what AGREE and ROLES report when nodes differ: `fake-attn-0` agrees with the
real node, `fake-ffn-0` has another driver branch and another PyTorch build. Run from the
repository root: python examples/gpu-cell-h200/build.py
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REAL = HERE / "h200-real.json"


def fake_host(real: dict[str, Any], label: str, driver: str | None, torch: str | None) -> dict[str, Any]:
    snap: dict[str, Any] = json.loads(json.dumps(real))
    for fact in snap["facts"].values():
        fact["provenance"]["host"] = label
        fact["provenance"]["commands"] = ["(fake host, derived from h200-real by build.py)"]
    if driver:
        snap["facts"]["gpu"]["value"]["driver_version"] = driver
    if torch:
        snap["facts"]["stack"]["value"]["torch"]["version"] = torch
        snap["facts"]["stack"]["value"]["torch"]["cuda"] = "12.8"
    snap["hosts"] = {label: {"hostname": f"{label}.example", "collected_at": real["collected_at"]}}
    return snap


def main() -> None:
    real = json.loads(REAL.read_text())
    for label, driver, torch in (("fake-attn-0", None, None), ("fake-ffn-0", "570.86.15", "2.10.0+cu128")):
        snap = fake_host(real, label, driver, torch)
        (HERE / f"{label}.json").write_text(json.dumps(snap, indent=2, sort_keys=True) + "\n")
    # The cell: what `evaluate --facts h200-real.json --facts fake-attn-0.json --facts fake-ffn-0.json` merges.
    from policyrun.facts import load_facts, merge_facts

    names = ("h200-real.json", "fake-attn-0.json", "fake-ffn-0.json")
    cell = merge_facts((n, load_facts(HERE / n)) for n in names)
    (HERE / "cell.json").write_text(cell.to_json())


if __name__ == "__main__":
    main()
