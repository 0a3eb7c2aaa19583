"""Adapting the flagship to another plugin is a short overlay: the real afd-plugin with its
conventions renamed (constant, patch markers, comment labels) fails the shipped rulebook and
passes the overlay that states the new conventions."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from policyrun.cli import main
from tests.real.conftest import copy_repo, git

# The shipped example overlay (examples/flagship-overlay/), run as a user would run it.
OVERLAY = Path(__file__).resolve().parents[2] / "examples" / "flagship-overlay" / "other-plugin-upgrade.yaml"


def _renamed(afd: Path, dest: Path) -> Path:
    repo = copy_repo(afd, dest)
    for path in git(repo, "ls-files", "*.py").split("\n"):
        if not path:
            continue
        file = repo / path
        text = file.read_text()
        new = text.replace("TARGET_VLLM_VERSION", "PLUGIN_VLLM_VERSION")
        new = re.sub(r"#\s*###\s*PATCH START", "# >>> AFD-PATCH", new)
        new = re.sub(r"#\s*###\s*PATCH END", "# <<< AFD-PATCH", new)
        new = new.replace("# Patch reason:", "# Why:").replace("# Patch functionality:", "# What:")
        if new != text:
            file.write_text(new)
    git(repo, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-qam", "rename conventions")
    return repo


def _evaluate(repo: Path, vllm: Path, rulebook: str, out: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    monkeypatch.chdir(repo)
    main(["evaluate", rulebook, "--mode", "planning-audit", "--set", f"vllm_src={vllm}", "--set",
          "target_ref=v0.27.0", "--out", str(out), "-q"])
    return json.loads((out / "trace.json").read_text())


def test_overlay_adapts_the_flagship(afd_repo: Path, vllm_repo: Path, tmp_path: Path,
                                     monkeypatch: pytest.MonkeyPatch) -> None:
    repo = _renamed(afd_repo, tmp_path / "other")
    overlay = OVERLAY
    shipped = _evaluate(repo, vllm_repo, "upgrade-gpu-version", tmp_path / "o1", monkeypatch)
    inventory = {p["phase"]: p for p in shipped["phases"]}["INVENTORY_AFD_CONTRACTS"]
    assert inventory["status"] == "FAIL"  # no constant, no runtime check under the shipped conventions
    adapted = _evaluate(repo, vllm_repo, str(overlay), tmp_path / "o2", monkeypatch)
    statuses = {p["phase"]: p["status"] for p in adapted["phases"]}
    assert statuses["FREEZE_IDENTITY"] == "PASS"
    assert statuses["INVENTORY_AFD_CONTRACTS"] == "PASS"
    assert statuses["DIFF_VLLM"] == "PASS"
    rows = next(d for d in adapted["derived"] if d["id"] == "patch_inventory")["value"]
    assert sum(r["starts"] for r in rows) == 50 and sum(r["ends"] for r in rows) == 50
    # the flagship is itself an overlay of the generic rulebook: the chain names all three, base first
    assert [c["name"] for c in adapted["rulebook"]["chain"]] == ["upgrade-vllm-plugin", "upgrade-gpu-version",
                                                                 "other-plugin-upgrade"]
