"""The CEL function library policy authors call: joins, grouping, sets, paths, versions, regexes.

Every function is declared once in `LIBRARY` (library.py) with its CEL signature(s), its
complexity and an example with its result; `declarations()` turns the table into the CEL
runtime's declarations, and docs/functions.md is checked against it by the tests. Functions
receive and return plain Python values (lists, dicts, str, int, float, bool, None), as the CEL
binding converts them.

Errors: a function raises `FunctionError`, whose message starts with the function's name and
reaches the trace as an evaluation error. `unknown("reason")` raises with the UNKNOWN_MARKER
prefix, which the interpreter reports as an UNKNOWN result carrying the reason. A result that
would exceed MAX_ITEMS or MAX_STRING_BYTES raises with LIMIT_MARKER.
"""

from __future__ import annotations

from policyrun.language.functions.base import (LIMIT_MARKER, MAX_ITEMS, MAX_STRING_BYTES, UNKNOWN_MARKER, FunctionError,
                                      LimitError)
from policyrun.language.functions.library import LIBRARY, Function, Overload, declarations

__all__ = ["LIBRARY", "LIMIT_MARKER", "MAX_ITEMS", "MAX_STRING_BYTES", "UNKNOWN_MARKER", "Function",
           "FunctionError", "LimitError", "Overload", "declarations"]


def import_runtime() -> None:
    """Import what the library's functions import only when first called (`packaging`), so that
    compiling a rulebook (lint) never pays for it. Evaluation calls this once, in the parent: each
    guarded child is a fork and would otherwise import it again on every evaluation."""
    import packaging.requirements
    import packaging.specifiers
    import packaging.utils
    import packaging.version  # noqa: F401
