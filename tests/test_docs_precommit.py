"""The installation promises in the docs hold: the README's pre-commit config works as written (a
`repo: local` hook running the installed policyrun), and every revision or version the docs name
exists (a tag of this repository, the version in pyproject.toml)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from functools import cache
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def _local_config() -> str:
    text = README.read_text(encoding="utf-8")
    at = text.index("<!-- The block below is tested by tests/test_docs_precommit.py")
    block = re.search(r"```yaml\n(.*?)```", text[at:], re.S)
    assert block is not None
    return block.group(1)


def _tags() -> set[str] | None:
    """This repository's tags; None when it is not a git checkout (an unpacked sdist)."""
    proc = subprocess.run(["git", "-C", str(ROOT), "tag", "--list"], capture_output=True, text=True)
    return set(proc.stdout.split()) if proc.returncode == 0 else None


def unknown_revisions(text: str, tags: set[str]) -> list[str]:
    """Every pre-commit `rev:` a page names that is not a tag here. A placeholder (`vX.Y.Z`,
    `<the tag>`) names no revision and passes."""
    found = []
    for m in re.finditer(r"\brev:\s*['\"]?([^\s'\"`,}]+)", text):
        rev = m.group(1)
        concrete = re.fullmatch(r"v?\d+(\.\d+)*([.-]?\w+)?|[0-9a-f]{7,40}", rev)
        if concrete and rev not in tags:
            found.append(f"line {text.count(chr(10), 0, m.start()) + 1}: rev: {rev}")
    return found


def _precommit_revs(page: Path) -> str:
    """What a page says about pre-commit: YAML blocks with a `repo:` entry, and paragraphs that
    mention pre-commit. (A probe's `rev:` parameter elsewhere is a revision of the user's
    repository, not of policyrun.)"""
    text = page.read_text(encoding="utf-8")
    blocks = [b for b in re.findall(r"```ya?ml\n(.*?)```", text, re.S) if re.search(r"^\s*-?\s*repo:", b, re.M)]
    prose = re.sub(r"```.*?```", "", text, flags=re.S).split("\n\n")
    return "\n".join([*blocks, *(p for p in prose if "pre-commit" in p)])


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_pre_commit_revision_the_docs_name_exists(page: Path) -> None:
    tags = _tags()
    if tags is None:
        pytest.skip("not a git checkout: no tags to check against")
    assert not unknown_revisions(_precommit_revs(page), tags), (
        f"{page.relative_to(ROOT)} names a pre-commit rev: that is not a tag of this repository (git tag --list)")


def test_a_revision_that_does_not_exist_is_caught() -> None:
    """What the README showed before: `rev: v0.1.0`, which was never tagged."""
    old = "- repo: https://example.invalid/policyrun.git\n  rev: v0.1.0\n  hooks: []\n"
    assert unknown_revisions(old, set()) == ["line 2: rev: v0.1.0"]
    assert unknown_revisions(old, {"v0.1.0"}) == []
    assert unknown_revisions("pre-commit users pin the tag (`rev: vX.Y.Z`)", set()) == []


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_policyrun_version_the_docs_name_is_the_project_version(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    named = re.findall(r"policyrun(?:==|-|\s+v?)(\d+\.\d+\.\d+)\b", text)
    assert all(v == VERSION for v in named), f"{page.relative_to(ROOT)} names policyrun {named}; it is {VERSION}"


def test_the_readme_config_is_valid_pre_commit_config(tmp_path: Path) -> None:
    clientlib = pytest.importorskip("pre_commit.clientlib", reason="pre-commit is not installed (pip install pre-commit)")
    path = tmp_path / ".pre-commit-config.yaml"
    path.write_text(_local_config())
    config = clientlib.load_config(str(path))
    [repo] = config["repos"]
    assert repo["repo"] == "local" and "rev" not in repo


def test_the_readme_hooks_are_the_shipped_hooks() -> None:
    """The local hooks do what .pre-commit-hooks.yaml's do, with the installed policyrun."""
    [repo] = yaml.safe_load(_local_config())["repos"]
    shipped = {h["id"]: h for h in yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())}
    local = {h["id"]: h for h in repo["hooks"]}
    assert list(local) == list(shipped)
    for hook_id, hook in local.items():
        assert hook["language"] == "system"
        for key in ("name", "entry", "files", "exclude", "pass_filenames"):
            assert hook.get(key) == shipped[hook_id].get(key), f"{hook_id}: {key}"


def _git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def _pre_commit(repo: Path, home: Path) -> subprocess.CompletedProcess[str]:
    shim = home / "bin" / "policyrun"
    if not shim.exists():  # this checkout's policyrun, as an installed console script would run it
        shim.parent.mkdir(parents=True)
        shim.write_text(f"#!{sys.executable}\nfrom policyrun.cli import entry\nentry()\n")
        shim.chmod(0o755)
    env = {**os.environ, "PRE_COMMIT_HOME": str(home / "cache"), "PYTHONPATH": str(ROOT),
           "PATH": f"{shim.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run([sys.executable, "-m", "pre_commit", "run", "--all-files", "--color", "never"], cwd=repo,
                          env=env, capture_output=True, text=True, timeout=300)


def test_the_readme_config_runs_the_hooks_with_pre_commit(tmp_path: Path) -> None:
    pytest.importorskip("pre_commit", reason="pre-commit is not installed (pip install pre-commit)")
    repo = tmp_path / "repo"
    example = ROOT / "examples" / "first-rulebook"
    (repo / "rulebooks").mkdir(parents=True)
    for name in ("e2e-gate.yaml", "e2e-gate.test.yaml", "laptop.facts.json", "waivers.yaml"):
        shutil.copy(example / name, repo / "rulebooks" / name)
    (repo / ".pre-commit-config.yaml").write_text(_local_config())
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    proc = _pre_commit(repo, tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert re.search(r"^policyrun lint\.+Passed$", proc.stdout, re.M), proc.stdout
    assert re.search(r"^policyrun test\.+Passed$", proc.stdout, re.M), proc.stdout

    rulebook = repo / "rulebooks" / "e2e-gate.yaml"
    rulebook.write_text(rulebook.read_text().replace("facts.pytest_cli.stdout.head", "facts.pytest_cli.stdot.head"))
    _git(repo, "add", "-A")
    proc = _pre_commit(repo, tmp_path)
    assert proc.returncode == 1
    assert re.search(r"^policyrun lint\.+Failed$", proc.stdout, re.M), proc.stdout
    assert "rulebooks/e2e-gate.yaml:112:32: L028 facts.pytest_cli has no field 'stdot'" in proc.stdout


@cache
def _shipped_versions() -> dict[str, str]:
    found = {}
    for path in sorted((ROOT / "rulebooks").glob("*.yaml")):
        data = yaml.safe_load(path.read_text())
        if isinstance(data, dict) and "version" in data and "policyrun" in data:
            found[data["name"]] = str(data["version"])
    return found


def rulebook_versions_named(text: str, name: str) -> list[str]:
    """Versions a page gives a rulebook: `NAME 2.0.0`, `NAME.yaml` (version 2.0.0), (NAME 2.0.0)."""
    pattern = rf"\b{re.escape(name)}(?:\.yaml)?`?\s*\(?(?:version\s+)?v?(\d+\.\d+(?:\.\d+)?)\b"
    return re.findall(pattern, text)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_shipped_rulebook_version_the_docs_name_is_current(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    stale = [f"{name} {v} (it is {version})" for name, version in _shipped_versions().items()
             for v in rulebook_versions_named(text, name) if v != version]
    assert not stale, f"{page.relative_to(ROOT)} names stale rulebook versions: {stale}"


def test_a_stale_rulebook_version_is_caught() -> None:
    """What docs/reports.md showed before: an explain header from rulebook version 1.0."""
    assert _shipped_versions()["upgrade-gpu-version"] != "1.0"
    assert rulebook_versions_named("upgrade-gpu-version 1.0 · mode final-validation", "upgrade-gpu-version") == ["1.0"]
    assert rulebook_versions_named("`rulebooks/upgrade-gpu-version.yaml` (version 2.0.0) turns", "upgrade-gpu-version") == [
        "2.0.0"]


def extras_named(text: str) -> set[str]:
    """The extras a page installs: `pip install '.[test]'`, `policyrun[mcp]`, `[test,sign]`."""
    groups = re.findall(r"(?:policyrun|(?<![\w\]])\.)\[([a-z][a-z0-9-]*(?:,\s*[a-z][a-z0-9-]*)*)\]", text)
    return {extra.strip() for group in groups for extra in group.split(",")}


def test_every_extra_the_docs_install_exists() -> None:
    declared = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    named = {extra: page.relative_to(ROOT) for page in PAGES for extra in extras_named(page.read_text(encoding="utf-8"))}
    assert named, "the docs install no extra: the pattern is broken"
    assert {e: str(p) for e, p in named.items() if e not in declared} == {}
    assert extras_named("pip install 'policyrun[gpu]' or '.[test,sign]'") == {"gpu", "test", "sign"}
