"""The CEL function library policy authors call: joins, grouping, sets, paths, versions, regexes.

Every function is declared once in `LIBRARY` with its CEL signature(s), its complexity and an
example; `declarations()` turns the table into the CEL runtime's declarations, and
docs/functions.md is checked against it by the tests. Functions receive and return plain Python
values (lists, dicts, str, int, float, bool, None), as the CEL binding converts them.

Errors: a function raises `FunctionError`; the message reaches the trace as an evaluation error.
`unknown("reason")` raises with the UNKNOWN_MARKER prefix, which the interpreter reports as an
UNKNOWN result carrying the reason (never as PASS, never as an evaluation error). A result that
would exceed the documented bounds raises with LIMIT_MARKER.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

UNKNOWN_MARKER = "policyrun.unknown: "
LIMIT_MARKER = "policyrun.limit: "


class FunctionError(ValueError):
    """A library function refused its arguments (the message names the function)."""


@dataclass(frozen=True)
class Overload:
    params: tuple[str, ...]  # CEL type names: "list", "map", "string", "int", "double", "bool", "dyn"
    result: str
    member: bool = False  # callable as `x.f(...)` (receiver is params[0]) as well as `f(x, ...)`


@dataclass(frozen=True)
class Function:
    name: str
    overloads: tuple[Overload, ...]
    impl: Callable[..., Any]
    doc: str
    complexity: str
    example: str


LIBRARY: tuple[Function, ...] = ()


def declarations() -> list[Any]:
    """The library as `cel.FunctionDecl`s for `cel.NewEnv(functions=...)`."""
    from cel_expr_python import cel

    types = {"list": cel.Type.List(cel.Type.DYN), "map": cel.Type.Map(cel.Type.DYN, cel.Type.DYN),
             "string": cel.Type.STRING, "int": cel.Type.INT, "double": cel.Type.DOUBLE,
             "bool": cel.Type.BOOL, "dyn": cel.Type.DYN}
    decls = []
    for fn in LIBRARY:
        overloads = []
        for ov in fn.overloads:
            sig = "_".join(ov.params)
            overloads.append(cel.Overload(f"{fn.name}_{sig}", types[ov.result], [types[p] for p in ov.params],
                                          impl=fn.impl))
            if ov.member:
                overloads.append(cel.Overload(f"{fn.name}_member_{sig}", types[ov.result],
                                              [types[p] for p in ov.params], is_member=True, impl=fn.impl))
        decls.append(cel.FunctionDecl(fn.name, overloads))
    return decls
