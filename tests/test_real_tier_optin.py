"""The real-corpus tier is opt-in for people and mandatory in CI (README: Testing)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _collect(*args: str, corpus: str | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    env.pop("POLICYRUN_CORPUS", None)
    if corpus is not None:
        env["POLICYRUN_CORPUS"] = corpus
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args], cwd=ROOT,
                          env=env, capture_output=True, text=True, timeout=600)


def _collected(out: str) -> set[str]:
    return {line.split("::")[0] for line in out.splitlines() if "::" in line}


def test_the_default_suite_leaves_the_real_tier_out_and_says_how_to_run_it() -> None:
    proc = _collect("--co", "-q")
    assert proc.returncode == 0, proc.stdout[-2000:]
    files = _collected(proc.stdout)
    assert files and not any(f.startswith("tests/real/") for f in files)
    header = _collect("--co", "tests/test_linescan.py").stdout
    assert "real-corpus tier (tests/real): not run; add --real to run it (README: Testing)" in header


def test_real_or_naming_the_tier_opts_in() -> None:
    assert any(f.startswith("tests/real/") for f in _collected(_collect("--co", "-q", "--real").stdout))
    named = _collected(_collect("--co", "-q", "tests/real/test_junit_real.py").stdout)
    assert named == {"tests/real/test_junit_real.py"}


def test_asked_for_without_a_corpus_the_tier_fails_naming_where_it_looked(tmp_path: Path) -> None:
    proc = _collect("-q", "tests/real/test_junit_real.py", corpus=str(tmp_path / "nowhere"))
    assert proc.returncode == 1
    assert "real corpus not found" in proc.stdout and str(tmp_path / "nowhere") in proc.stdout


def test_ci_checks_the_corpus_first_and_runs_the_readme_command_then_the_real_tier(tmp_path: Path) -> None:
    script = (ROOT / ".ci" / "run").read_text().splitlines()
    commands = [line.strip() for line in script if line.strip() and not line.lstrip().startswith("#")]
    assert commands.index(".ci/check-corpus") < min(i for i, c in enumerate(commands) if c.startswith(("pip", "python")))
    readme = (ROOT / "README.md").read_text()
    test_command = re.search(r"pip install '\.\[test\]' && (python -m pytest)\n", readme)
    assert test_command is not None
    at = commands.index(test_command.group(1))
    assert commands[at + 1] == "python -m pytest --real tests/real"
    env = {k: v for k, v in os.environ.items() if k != "POLICYRUN_CORPUS"}
    missing = subprocess.run([str(ROOT / ".ci" / "check-corpus")], env={**env, "POLICYRUN_CORPUS": str(tmp_path)},
                             capture_output=True, text=True)
    assert missing.returncode == 1
    assert f"the real corpus is missing from {tmp_path}: afd-plugin.bundle" in missing.stderr
