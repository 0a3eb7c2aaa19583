from __future__ import annotations

import os

# Tests must not depend on the machine's git identity or on a terminal.
os.environ.setdefault("GIT_CONFIG_NOSYSTEM", "1")
os.environ.pop("FORCE_COLOR", None)
