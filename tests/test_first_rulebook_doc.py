"""docs/first-rulebook.md stays true: its rulebook fragments are part of the finished files in
examples/first-rulebook/, its first rulebook lints clean, its test suite and waivers file are
valid, and the outputs it shows are what the commands print."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from policyrun.cli import main

ROOT = Path(__file__).resolve().parent.parent
DOC = (ROOT / "docs" / "first-rulebook.md").read_text()
EXAMPLE = ROOT / "examples" / "first-rulebook"
BLOCKS = re.findall(r"```yaml\n(.*?)```", DOC, re.S)


def _subset(part: Any, whole: Any, where: str) -> None:
    """`part` is contained in `whole`: mappings key by key, lists of `id`ed items by id."""
    if isinstance(part, dict):
        assert isinstance(whole, dict), where
        for key, value in part.items():
            assert key in whole, f"{where}.{key} is not in the finished file"
            _subset(value, whole[key], f"{where}.{key}")
    elif isinstance(part, list) and part and all(isinstance(i, dict) and "id" in i for i in part):
        by_id = {i["id"]: i for i in whole}
        for item in part:
            assert item["id"] in by_id, f"{where}: no item {item['id']!r} in the finished file"
            _subset(item, by_id[item["id"]], f"{where}[{item['id']}]")
    else:
        assert part == whole, f"{where}: the doc says {part!r}, the finished file {whole!r}"


@pytest.mark.parametrize("name", ["e2e-gate.yaml", "team-b.yaml"])
def test_fragments_are_part_of_the_finished_file(name: str) -> None:
    whole = yaml.safe_load((EXAMPLE / name).read_text())
    fragments = [b for b in BLOCKS if b.startswith(f"# {name}\n")]
    assert fragments, f"the doc shows no fragment of {name}"
    for block in fragments:
        _subset(yaml.safe_load(block), whole, name)


def test_the_first_rulebook_lints_clean(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    [first] = [b for b in BLOCKS if b.startswith("policyrun: 1\nname: e2e-gate\n")]
    (tmp_path / "e2e-gate.yaml").write_text(first)
    assert main(["lint", str(tmp_path / "e2e-gate.yaml")]) == 0
    (tmp_path / "e2e-gate.yaml").write_text(first.replace("facts.pytest_cli.stdout.head.startsWith",
                                                          "facts.pytest_cli.stdot.head.startsWith"))
    assert main(["lint", str(tmp_path / "e2e-gate.yaml")]) == 1
    assert "L028 facts.pytest_cli has no field 'stdot'; did you mean 'stdout'?" in capsys.readouterr().out


def test_the_test_case_shown_passes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    [suite] = [b for b in BLOCKS if b.startswith("policyrun_test: 1\n")]
    for name in ("e2e-gate.yaml", "laptop.facts.json"):
        shutil.copy(EXAMPLE / name, tmp_path / name)
    (tmp_path / "doc.test.yaml").write_text(suite)
    assert main(["test", str(tmp_path / "doc.test.yaml")]) == 0
    assert "1 passed, 0 failed" in capsys.readouterr().out


def test_the_waivers_file_shown_is_the_shipped_one() -> None:
    [shown] = [b for b in BLOCKS if b.startswith("policyrun_waivers: 1\n")]
    assert yaml.safe_load(shown) == yaml.safe_load((EXAMPLE / "waivers.yaml").read_text())


@pytest.mark.parametrize("mode, extra, exit_code, line", [
    ("preflight", [], 2, "verdict: incomplete — BACKEND is BLOCKED: tier single needs 1 GPU(s); NVML does not answer "
                      "(nvml.library_not_found) (exit 2)"),
    ("preflight", [], 2, "MODELS   WARN     HF_HUB_OFFLINE is not 1: a model missing at run time would be"),
    ("review", [], 2, "MODELS   SKIPPED  gated by BACKEND=BLOCKED"),
    # The H200 runner's facts (real, from bench/device_first_rulebook.sh).
    ("preflight@h200", [], 0, "verdict: ready — runner ready: cuda backend, 1 GPU(s) (exit 0)"),
    ("review@h200", [], 1, "verdict: incomplete — RESULTS is FAIL: skipped without a documented reason: "
                        "tests.e2e.test_parallel::test_prefix_cache[Qwen3-0.6B] (flaky on this runner, skipping for "
                        "now) (exit 1)"),
    ("review@h200", ["--waivers", "../waivers.yaml", "--as-of", "2027-01-15"], 0,
     "RESULTS  WARN    3 of 6 tests skipped    none: mode review is complete (after reading its warnings)"),
])
def test_the_outputs_shown_are_printed(mode: str, extra: list[str], exit_code: int, line: str, tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(EXAMPLE / "runner")
    monkeypatch.setenv("COLUMNS", "160")
    assert line in DOC
    mode, _, machine = mode.partition("@")
    code = main(["evaluate", "../e2e-gate.yaml", "--mode", mode, "--facts", f"../{machine or 'laptop'}.facts.json",
                 "--out", str(tmp_path), *extra])
    assert code == exit_code
    assert line in capsys.readouterr().out


def test_eval_prints_the_unexplained_skip(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(EXAMPLE / "runner")
    assert main(["eval", "derived.unexplained_skips.map(s, s.id)", "--rulebook", "../e2e-gate.yaml",
                 "--mode", "review", "--facts", "../laptop.facts.json"]) == 0
    assert capsys.readouterr().out == '[\n  "tests.e2e.test_parallel::test_prefix_cache[Qwen3-0.6B]"\n]\n'


# --- building the rulebook step by step, as the page tells the reader to -----------------------------

def _is_id_list(value: Any) -> bool:
    return isinstance(value, list) and bool(value) and all(isinstance(i, dict) and "id" in i for i in value)


def _add(base: Any, part: Any) -> Any:
    """The page's rule: a fragment's keys go into the file; a list item whose id is there is that
    item; a new item goes where the fragment shows it (before the next item it lists that the file
    has, else at the end)."""
    if isinstance(base, dict) and isinstance(part, dict):
        return {**base, **{k: _add(base[k], v) if k in base else v for k, v in part.items()}}
    if _is_id_list(base) and _is_id_list(part):
        out = list(base)
        for n, item in enumerate(part):
            ids = [i["id"] for i in out]
            if item["id"] in ids:
                at = ids.index(item["id"])
                out[at] = _add(out[at], item)
                continue
            later = [i["id"] for i in part[n + 1:] if i["id"] in ids]
            out.insert(ids.index(later[0]) if later else len(out), item)
        return out
    return part


def _states() -> list[tuple[str, dict[str, Any]]]:
    """The rulebook after step 1 and after each `# e2e-gate.yaml` block, with the heading it is under."""
    states: list[tuple[str, dict[str, Any]]] = []
    for m in re.finditer(r"```yaml\n(.*?)```", DOC, re.S):
        block = m.group(1)
        heading = re.findall(r"^## (.*)$", DOC[:m.start()], re.M)[-1]
        if block.startswith("policyrun: 1\nname: e2e-gate\n"):
            states.append((heading, yaml.safe_load(block)))
        elif block.startswith("# e2e-gate.yaml\n"):
            states.append((heading, _add(states[-1][1], yaml.safe_load(block))))
    return states


def test_each_step_of_the_walkthrough_lints_without_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    states = _states()
    assert len(states) >= 7
    for n, (heading, state) in enumerate(states):
        path = tmp_path / f"step{n}" / "e2e-gate.yaml"
        path.parent.mkdir()
        path.write_text(yaml.safe_dump(state, sort_keys=False))
        code = main(["lint", str(path)])
        out = "".join(capsys.readouterr())
        assert code == 0 and "0 error(s)" in out, f"after the block {n} ({heading}):\n{out}"


def test_the_steps_end_at_the_finished_rulebook() -> None:
    assert _states()[-1][1] == yaml.safe_load((EXAMPLE / "e2e-gate.yaml").read_text())


def test_a_step_that_reads_an_undeclared_input_fails_lint(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The defect this guards against: step 3 read inputs.python before any step declared it."""
    _, after_step_3 = next(s for s in _states() if "python" in s[1].get("inputs", {}))
    broken = {**after_step_3, "inputs": {k: v for k, v in after_step_3["inputs"].items() if k != "python"}}
    (tmp_path / "e2e-gate.yaml").write_text(yaml.safe_dump(broken, sort_keys=False))
    assert main(["lint", str(tmp_path / "e2e-gate.yaml")]) == 1
    assert "L001 reads undeclared input 'python'" in capsys.readouterr().out
