from __future__ import annotations

import os

# Tests must not depend on the machine's git identity or on a terminal.
os.environ.setdefault("GIT_CONFIG_NOSYSTEM", "1")
os.environ.pop("FORCE_COLOR", None)

# The lint cache goes to a per-run folder, never the user's ~/.cache (tests/test_lintcache.py
# covers the cache itself).
if "POLICYRUN_CACHE_DIR" not in os.environ:
    import tempfile

    os.environ["POLICYRUN_CACHE_DIR"] = tempfile.mkdtemp(prefix="policyrun-test-cache-")
