"""What a cold `lint` imports (issue 24, item 3): not evaluation, report templates or probe code.

Which modules, never how long: a time would depend on the machine; an import that comes back is
the regression these tests catch.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from policyrun.probes import declared
from policyrun.probes.registry import registry

ROOT = Path(__file__).resolve().parents[1]

_PROBE = """
import json, sys
from pathlib import Path
from policyrun.language.lint import lint_file
findings = lint_file(Path(sys.argv[1]))
json.dump({"findings": [f.render() for f in findings], "modules": sorted(sys.modules)}, sys.stdout)
"""


def _lint_in_child(rulebook: Path, cache: Path) -> dict[str, list[str]]:
    env = {**os.environ, "POLICYRUN_CACHE_DIR": str(cache), "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", _PROBE, str(rulebook)], env=env, capture_output=True, text=True,
                          check=True)
    return json.loads(proc.stdout)  # type: ignore[no-any-return]


def test_cold_lint_imports_no_evaluation_templates_or_probe_implementations(tmp_path: Path) -> None:
    out = _lint_in_child(ROOT / "rulebooks" / "gpu-node-preflight.yaml", tmp_path / "cache")
    assert out["findings"] == []
    modules = set(out["modules"])
    assert "policyrun.language.expr" in modules  # it did compile the expressions
    for name in ("jinja2", "packaging", "policyrun.evaluate.expreval", "policyrun.evaluate.derive",
                 "policyrun.evaluate.interpreter", "policyrun.evaluate.gating", "policyrun.evaluate.phase",
                 "policyrun.evaluate.templates", "policyrun.evaluate.settle",
                 "policyrun.language.guard", "policyrun.render.templating"):
        assert name not in modules, f"a cold lint imported {name}"
    probes = sorted(m for m in modules if m.startswith("policyrun.probes."))
    assert probes == ["policyrun.probes.base", "policyrun.probes.declared", "policyrun.probes.registry"]


def test_declarations_table_is_current() -> None:
    assert declared.TABLE.read_text(encoding="utf-8") == declared.table_text(), \
        "policyrun/probes/declarations.json drifted from the probes: run `python -m policyrun.schemas`"


def test_every_probe_source_is_in_the_fingerprint(tmp_path: Path) -> None:
    # The table is trusted while its fingerprint matches the sources: an edit to any probe module,
    # in whichever family folder it sits, must change the fingerprint (globbing only the top
    # folder once missed every file of the families).
    package = Path(declared.__file__).parent
    copy = tmp_path / "policyrun" / "probes"
    shutil.copytree(package, copy, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(package.parent / "limits.py", copy.parent / "limits.py")
    sources = sorted(copy.rglob("*.py"))
    assert {p.parent.name for p in sources} >= {"probes", "_kit", "repo", "python", "host", "gpu", "results"}
    before = declared.fingerprint(copy)
    assert before == declared.fingerprint()
    missed = []
    for path in [*sources, copy.parent / "limits.py"]:
        text = path.read_bytes()
        path.write_bytes(text + b"# edited\n")
        if declared.fingerprint(copy) == before:
            missed.append(str(path.relative_to(tmp_path)))
        path.write_bytes(text)
    assert missed == []


def test_table_matches_the_registry() -> None:
    declared.declarations.cache_clear()
    table = declared.declarations()
    kinds = registry()
    assert list(table) == list(kinds)
    for kind, probe in kinds.items():
        assert table[kind].params_schema == probe.params_schema
        assert table[kind].fact_schema == probe.fact_schema
        real = getattr(probe, "empty_value", None)
        assert (table[kind].empty_value is None) == (real is None)
        if real is not None:
            assert table[kind].empty_value({}) == real({})


def test_a_stale_table_is_never_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stale = json.loads(declared.TABLE.read_text(encoding="utf-8"))
    stale["kinds"]["git.repo"]["params_schema"] = {"type": "object", "properties": {}}
    stale["fingerprint"] = "0" * 64  # written before a probe was edited
    path = tmp_path / "declarations.json"
    path.write_text(json.dumps(stale), encoding="utf-8")
    monkeypatch.setattr(declared, "TABLE", path)
    declared.declarations.cache_clear()
    try:
        assert declared.declarations() is registry()
    finally:
        declared.declarations.cache_clear()
