"""The real-corpus tier: the real afd-plugin history, the real vLLM 0.26.0/0.27.0 sources and a
real JUnit file, cloned into temporary directories (the bundles are never written to).

The corpus lives in `../shared/corpus` beside the checkout (CI included); POLICYRUN_CORPUS
overrides the location. When it is absent these tests fail, naming where it was expected: a
real-data tier that skips silently would let the flagship drift back to fixtures.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
CORPUS_ENV = "POLICYRUN_CORPUS"


def corpus_dir() -> Path:
    return Path(os.environ.get(CORPUS_ENV) or ROOT.parent / "shared" / "corpus")


def _git(*args: str, cwd: Path | None = None, extra_env: dict[str, str] | None = None) -> str:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(GIT_CONFIG_NOSYSTEM="1", GIT_CONFIG_GLOBAL=os.devnull, GIT_TERMINAL_PROMPT="0")
    env.update(extra_env or {})
    proc = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {proc.stderr.strip()}")
    return proc.stdout


@pytest.fixture(scope="session")
def corpus() -> Path:
    where = corpus_dir()
    needed = ["afd-plugin.bundle", "vllm-0.26.0-0.27.0.bundle", "bart-plugin.bundle", "afd-plugin-unit-junit.xml"]
    missing = [n for n in needed if not (where / n).is_file()]
    if missing:
        pytest.fail(f"real corpus not found: expected {', '.join(missing)} in {where} (the shared corpus "
                    f"beside the checkout); set {CORPUS_ENV}=DIR to point elsewhere", pytrace=False)
    return where


@pytest.fixture(scope="session")
def corpus_clones(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One clone of each bundle per test session (read-only by convention: tests that change a
    repository copy it first with `copy_repo`)."""
    base = tmp_path_factory.mktemp("corpus")
    _git("clone", "-q", str(corpus / "afd-plugin.bundle"), str(base / "afd-plugin"))
    _git("clone", "-q", str(corpus / "vllm-0.26.0-0.27.0.bundle"), str(base / "vllm"))
    _git("fetch", "-q", "--tags", cwd=base / "vllm")
    return base


@pytest.fixture(scope="session")
def bart_repo(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One clone of the bart-plugin bundle per test session (read-only, as corpus_clones; copy it
    with `copy_repo` to change it)."""
    repo = tmp_path_factory.mktemp("bart") / "bart-plugin"
    _git("clone", "-q", str(corpus / "bart-plugin.bundle"), str(repo))
    return repo


@pytest.fixture(scope="session")
def afd_repo(corpus_clones: Path) -> Path:
    """The real afd-plugin checkout at its tip (pins vllm==0.26.0, 13 patched files)."""
    return corpus_clones / "afd-plugin"


@pytest.fixture(scope="session")
def vllm_repo(corpus_clones: Path) -> Path:
    """vLLM release sources: annotated tags v0.26.0 and v0.27.0."""
    return corpus_clones / "vllm"


@pytest.fixture(scope="session")
def afd_unit_junit(corpus: Path) -> Path:
    """The plugin's real unit-suite JUnit XML (202 tests, 1 failure, 45 skips, 15 collection skips)."""
    return corpus / "afd-plugin-unit-junit.xml"


def copy_repo(src: Path, dest: Path) -> Path:
    """A private copy of a clone, for tests that edit files."""
    shutil.copytree(src, dest, symlinks=True)
    return dest


def git(repo: Path, *args: str) -> str:
    """Plain git plumbing for computing ground truth independently of policyrun."""
    return _git(*args, cwd=repo)


@pytest.fixture(scope="session")
def upgraded_afd(corpus: Path, afd_repo: Path, vllm_repo: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The plugin tip upgraded to vLLM v0.27.0 by the corpus's seven real commits, its claims
    refreshed, with the corpus's attestations re-addressed to this clone's vLLM commits and passing
    GPU evidence for its HEAD (`tests.real.upgrade.Upgrade`; read-only by convention: copy the
    repository with `copy_repo` before editing it)."""
    from tests.real.upgrade import build_upgrade

    return build_upgrade(afd_repo, vllm_repo, corpus, tmp_path_factory.mktemp("upgrade"))
