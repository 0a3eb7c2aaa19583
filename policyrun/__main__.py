from __future__ import annotations

from policyrun.cli import main

raise SystemExit(main())
