"""The `python.*` source probes (imports, symbols, constants, patches, bindings), registered as one family."""

from __future__ import annotations

from typing import Any

from policyrun.probes.pybindings import BindingsProbe
from policyrun.probes.pyconstants import ConstantsProbe
from policyrun.probes.pyimports import ImportsProbe
from policyrun.probes.pypatches import PatchesProbe
from policyrun.probes.pysymbols import SymbolsProbe

PROBES: list[Any] = [ImportsProbe(), SymbolsProbe(), ConstantsProbe(), PatchesProbe(), BindingsProbe()]
