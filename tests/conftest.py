from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from tests.afdfixtures import FixtureRepos, PluginRepo, VllmRepo
    from tests.gitfixtures import GitRepo

# Tests must not depend on the machine's git identity or on a terminal.
os.environ.setdefault("GIT_CONFIG_NOSYSTEM", "1")
os.environ.pop("FORCE_COLOR", None)

# The lint cache goes to a per-run folder, never the user's ~/.cache (tests/test_lintcache.py
# covers the cache itself).
if "POLICYRUN_CACHE_DIR" not in os.environ:
    import tempfile

    os.environ["POLICYRUN_CACHE_DIR"] = tempfile.mkdtemp(prefix="policyrun-test-cache-")


# tests/data holds fixture sources, not tests: the fixture plugin has a tests/unit/test_version.py
# of its own that must never be collected here (tests/data/README.md), not even when the folder is named.
DATA = Path(__file__).resolve().parent / "data"


# The real-corpus tier (tests/real) needs ../shared/corpus, which a fresh clone does not have: it
# runs only when asked for, with --real or by naming a path inside tests/real. CI always asks
# (.ci/run), and there a missing corpus fails loudly (tests/real/conftest.py).
REAL_TIER = Path(__file__).resolve().parent / "real"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--real", action="store_true", default=False,
                     help="run the real-corpus tier (tests/real) against ../shared/corpus, or the folder "
                          "POLICYRUN_CORPUS names; it fails when the corpus is absent (README: Testing)")


def _real_tier_wanted(config: pytest.Config) -> bool:
    if config.getoption("real"):
        return True
    for arg in config.args:
        named = Path(config.invocation_params.dir, arg.split("::")[0]).resolve()
        if named == REAL_TIER or REAL_TIER in named.parents:
            return True
    return False


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    if collection_path == DATA or DATA in collection_path.parents:
        return True
    if collection_path == REAL_TIER and not _real_tier_wanted(config):
        return True
    return None


def pytest_report_header(config: pytest.Config) -> str:
    if _real_tier_wanted(config):
        return "real-corpus tier (tests/real): on"
    return "real-corpus tier (tests/real): not run; add --real to run it (README: Testing)"


# --- the flagship's fixture repositories (tests/afdfixtures.py), built once per session -----------
# The shared repositories are read-only: a test that changes one (an edit, a variant commit) takes
# its own copy, afd_repos.copy_plugin(tmp_path / "afd-plugin", ...). Each shared one is checked at
# the end of the session, so a test that changed it anyway fails loudly.

@pytest.fixture(scope="session")
def afd_repos(tmp_path_factory: pytest.TempPathFactory) -> FixtureRepos:
    from tests.afdfixtures import FixtureRepos

    return FixtureRepos(tmp_path_factory.mktemp("afd-repos"))


def _left_alone(path: Path, head: str) -> None:
    from tests.afdfixtures import changes_to

    changed = changes_to(path, head)
    assert changed is None, (f"a test changed the shared fixture repository {path}: {changed}\n"
                             "take a copy instead (afd_repos.copy_plugin / copy_vllm)")


@pytest.fixture(scope="session")
def afd_upstream(afd_repos: FixtureRepos) -> Iterator[VllmRepo]:
    """The upstream vLLM: tags v0.26.1 and v0.27.0, main one commit past the target."""
    repo = afd_repos.vllm()
    yield repo
    _left_alone(repo.path, repo.main_sha)


@pytest.fixture(scope="session")
def afd_plugin(afd_repos: FixtureRepos) -> Iterator[PluginRepo]:
    """The plugin at its pre-upgrade base commit."""
    repo = afd_repos.plugin()
    yield repo
    _left_alone(repo.path, repo.head_sha)


@pytest.fixture(scope="session")
def afd_upgraded(afd_repos: FixtureRepos) -> Iterator[PluginRepo]:
    """The plugin with the implementation commits and the new lesson."""
    repo = afd_repos.plugin(post=True)
    yield repo
    _left_alone(repo.path, repo.head_sha)


# --- gitfixtures.history_repo, built once per session ----------------------------------------------

@pytest.fixture(scope="session")
def _history_built(tmp_path_factory: pytest.TempPathFactory) -> GitRepo:
    from tests.gitfixtures import history_repo

    return history_repo(tmp_path_factory.mktemp("history") / "repo")


@pytest.fixture()
def history(_history_built: GitRepo, tmp_path: Path) -> GitRepo:
    """The test's own copy of history_repo() (tests/gitfixtures.py) in tmp_path/repo."""
    from tests.gitfixtures import copy_of

    return copy_of(_history_built, tmp_path / "repo")
