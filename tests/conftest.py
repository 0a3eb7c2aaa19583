from __future__ import annotations

import os
from pathlib import Path

import pytest

# Tests must not depend on the machine's git identity or on a terminal.
os.environ.setdefault("GIT_CONFIG_NOSYSTEM", "1")
os.environ.pop("FORCE_COLOR", None)

# The lint cache goes to a per-run folder, never the user's ~/.cache (tests/test_lintcache.py
# covers the cache itself).
if "POLICYRUN_CACHE_DIR" not in os.environ:
    import tempfile

    os.environ["POLICYRUN_CACHE_DIR"] = tempfile.mkdtemp(prefix="policyrun-test-cache-")


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
    if collection_path == REAL_TIER and not _real_tier_wanted(config):
        return True
    return None


def pytest_report_header(config: pytest.Config) -> str:
    if _real_tier_wanted(config):
        return "real-corpus tier (tests/real): on"
    return "real-corpus tier (tests/real): not run; add --real to run it (README: Testing)"
