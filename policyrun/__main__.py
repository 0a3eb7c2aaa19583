from __future__ import annotations

from policyrun.cli import entry

entry()
