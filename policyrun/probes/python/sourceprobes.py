"""The `python.*` source probes (imports, symbols, constants, patches, bindings), registered as one family."""

from __future__ import annotations

from typing import Any

from policyrun.probes.python.bindings import BindingsProbe
from policyrun.probes.python.constants import ConstantsProbe
from policyrun.probes.python.imports import ImportsProbe
from policyrun.probes.python.patches import PatchesProbe
from policyrun.probes.python.symbols import SymbolsProbe

PROBES: list[Any] = [ImportsProbe(), SymbolsProbe(), ConstantsProbe(), PatchesProbe(), BindingsProbe()]
