"""Files policyrun does not own are YAML 1.2 (core schema); its own files keep YAML 1.1's strictness.

A GitHub Actions workflow's `on:` key was a boolean to PyYAML (YAML 1.1), so `file.read` refused
every workflow with Y002. Data files are now read as the tools that write them read them, with the
same bounds (alias bombs, nesting, number length, tags, duplicate keys) as policy files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from policyrun.errors import RulebookError
from policyrun.probes.base import ProbeContext, ProbeError
from policyrun.probes.repo.files import ReadProbe
from policyrun.probes.results.resultsfile import ResultsProbe
from policyrun.yamlsource import load_yaml_text

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(("text", "expected"), [
    ("on", "on"), ("yes", "yes"), ("No", "No"), ("off", "off"), ("y", "y"),
    ("true", True), ("FALSE", False), ("~", None), ("null", None), ("", None),
    ("0o17", 15), ("017", 17), ("0x1F", 31), ("-12", -12), ("+3", 3),
    ("1e3", 1000.0), ("1.5", 1.5), (".5", 0.5), ("-.inf", float("-inf")),
    ("1_000", "1_000"), ("12:30", "12:30"), ("2024-01-01", "2024-01-01"), ("0b101", "0b101"),
])
def test_data_files_use_the_yaml_1_2_core_schema(text: str, expected: Any) -> None:
    got = load_yaml_text(f"v: {text}\n", "x.yaml", data=True)[0]["v"]
    assert got == expected and type(got) is type(expected)


def test_policy_files_keep_yaml_1_1(tmp_path: Path) -> None:
    assert load_yaml_text("a: yes\nb: 017\n", "rb.yaml")[0] == {"a": True, "b": 15}
    with pytest.raises(RulebookError) as info:
        load_yaml_text("on: push\n", "rb.yaml")
    assert info.value.code == "Y002"  # a rulebook author quotes the key; nothing is guessed


def _read(tmp_path: Path, text: str, name: str = "doc.yaml") -> Any:
    (tmp_path / name).write_text(text)
    return ReadProbe().run({"path": name}, ProbeContext(base_dir=tmp_path, timeout_s=10)).value


def test_file_read_parses_this_repositorys_own_workflow() -> None:
    doc = ReadProbe().run({"path": ".github/workflows/policyrun.yml"},
                          ProbeContext(base_dir=ROOT, timeout_s=10)).value
    assert "on" in doc and True not in doc and "jobs" in doc


@pytest.mark.parametrize(("text", "code", "words"), [
    ("".join(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}" if i else "x"] * 11) + "]\n" for i in range(7)),
     "Y005", "alias"),
    ("v: " + "[" * 300 + "]" * 300 + "\n", "Y008", "nest deeper"),
    (f"v: {'9' * 5000}\n", "Y009", "5,000 characters"),
    (f"v: 0x{'f' * 5000}\n", "Y009", "characters"),
    ("v: !!python/object:os.system x\n", "Y003", "not allowed"),
    ("on: a\non: b\n", "Y001", "duplicate key 'on'"),
    ("true: 1\n", "Y002", "keys must be strings"),
])
def test_the_bounds_hold_for_data_files(tmp_path: Path, text: str, code: str, words: str) -> None:
    with pytest.raises(ProbeError) as info:
        _read(tmp_path, text)
    assert info.value.code == "file.parse_error" and code in info.value.message and words in info.value.message


def test_results_files_are_data_too(tmp_path: Path) -> None:
    (tmp_path / "bench.yaml").write_text("on: nightly\nwarm: yes\nthroughput: 1e3\n")
    value = ResultsProbe().run({"path": "bench.yaml"}, ProbeContext(base_dir=tmp_path, timeout_s=10)).value
    assert value is not None and "nightly" in str(value) and "True" not in str(value)


def test_attestations_are_data_too(tmp_path: Path) -> None:
    from policyrun.probes.repo.files import AttestationProbe

    (tmp_path / "review.yaml").write_text("approved: yes\non: 2026-12-01\n")
    schema = {"type": "object", "required": ["approved", "on"],
              "properties": {"approved": {"type": "string"}, "on": {"type": "string"}}}
    value = AttestationProbe().run({"path": "review.yaml", "schema": schema},
                                   ProbeContext(base_dir=tmp_path, timeout_s=10)).value
    assert value["document"] == {"approved": "yes", "on": "2026-12-01"}
