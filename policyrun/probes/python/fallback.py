"""Version-compatibility fallbacks: the imports a plugin writes twice so that it runs on two
releases of its upstream.

Two forms are recognised. A `try:` whose handlers catch ImportError or ModuleNotFoundError (alone
or in a tuple): its body is branch 0 and each such handler the next branch; a handler that holds
another such `try:` continues the same chain (the usual `try A / except: try B / except: give up`),
so the whole chain is one group. An `if`/`elif`/`else` whose tests are version tests: each arm is
a branch. A version test is a comparison in which a name, attribute or called function matches
the version pattern (by default anything named like `version`: `__version__`, `VERSION`,
`sys.version_info`, `Version(...)`, `packaging.version.parse(...)`), or a bare call of such a
function (`if vllm_version_at_least("0.27"):`).

A group is identified by `file:line` of its outermost `try`/`if`; an import belongs to the innermost
group around it. Resolving the branches against releases is the imports probe's job (python/imports.py).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass

DEFAULT_VERSION_PATTERN = r"(?i)version"
_IMPORT_ERRORS = frozenset({"ImportError", "ModuleNotFoundError"})


@dataclass(frozen=True)
class Branch:
    group: str  # `file:line` of the outermost try/if of the chain
    index: int  # 0 the try body (or the first `if` arm), then each handler (or arm) in order
    line: int  # first line of the branch's body
    guard: str  # try | version

    def as_fact(self) -> dict[str, object]:
        return {"group": self.group, "branch": self.index, "guard": self.guard}


def fallback_branches(tree: ast.Module, file: str,
                      pattern: re.Pattern[str] | None = None) -> dict[int, Branch]:
    """id() of every import statement inside a fallback → its innermost branch."""
    out: dict[int, Branch] = {}
    _walk(tree.body, None, file, pattern or re.compile(DEFAULT_VERSION_PATTERN), out)
    return out


def _walk(body: list[ast.stmt], current: Branch | None, file: str, pattern: re.Pattern[str],
          out: dict[int, Branch]) -> None:
    for stmt in body:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            if current is not None:
                out[id(stmt)] = current
        elif isinstance(stmt, (ast.Try, ast.TryStar)) and any(_catches_import(h) for h in stmt.handlers):
            _try_chain(stmt, f"{file}:{stmt.lineno}", [0], file, pattern, out, current)
        elif isinstance(stmt, ast.If) and is_version_test(stmt.test, pattern):
            _if_chain(stmt, f"{file}:{stmt.lineno}", file, pattern, out)
        else:
            for nested in _bodies(stmt):
                _walk(nested, current, file, pattern, out)


def _try_chain(stmt: ast.Try | ast.TryStar, group: str, counter: list[int], file: str, pattern: re.Pattern[str],
               out: dict[int, Branch], outer: Branch | None) -> None:
    first = _next(group, counter, stmt.body, "try")
    _walk(stmt.body, first, file, pattern, out)
    _walk(stmt.orelse, first, file, pattern, out)  # runs only when the body imported
    for handler in stmt.handlers:
        if not _catches_import(handler):
            _walk(handler.body, outer, file, pattern, out)
            continue
        # The handler's own branch is numbered when its first statement outside the chain comes,
        # so `except ImportError: try B ... ; use(B)` numbers B's `try` 1, as written.
        branch: Branch | None = None
        for inner in handler.body:
            if isinstance(inner, (ast.Try, ast.TryStar)) and any(_catches_import(h) for h in inner.handlers):
                _try_chain(inner, group, counter, file, pattern, out, outer)
                continue
            if branch is None:
                branch = _next(group, counter, [inner], "try")
            _walk([inner], branch, file, pattern, out)
    _walk(stmt.finalbody, outer, file, pattern, out)


def _if_chain(stmt: ast.If, group: str, file: str, pattern: re.Pattern[str], out: dict[int, Branch]) -> None:
    counter = [0]
    arm: ast.If | None = stmt
    while arm is not None:
        _walk(arm.body, _next(group, counter, arm.body, "version"), file, pattern, out)
        rest = arm.orelse
        if len(rest) == 1 and isinstance(rest[0], ast.If) and is_version_test(rest[0].test, pattern):
            arm = rest[0]  # `elif` of another version test: the same chain
            continue
        if rest:
            _walk(rest, _next(group, counter, rest, "version"), file, pattern, out)
        arm = None


def _next(group: str, counter: list[int], body: list[ast.stmt], guard: str) -> Branch:
    branch = Branch(group, counter[0], body[0].lineno if body else 0, guard)
    counter[0] += 1
    return branch


def _bodies(stmt: ast.stmt) -> Iterator[list[ast.stmt]]:
    for name in ("body", "orelse", "finalbody"):
        nested = getattr(stmt, name, None)
        if isinstance(nested, list) and nested:
            yield nested
    for handler in getattr(stmt, "handlers", ()):
        yield handler.body
    for case in getattr(stmt, "cases", ()):
        yield case.body


def _catches_import(handler: ast.ExceptHandler) -> bool:
    kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return any(_last_name(k) in _IMPORT_ERRORS for k in kinds if k is not None)


def _last_name(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


def is_version_test(test: ast.expr, pattern: re.Pattern[str]) -> bool:
    """A comparison naming a version, or a bare call of a version function (see the module doc)."""
    while isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        test = test.operand
    if isinstance(test, ast.BoolOp):
        return any(is_version_test(v, pattern) for v in test.values)
    if isinstance(test, ast.Call):
        name = _last_name(test.func)
        return name is not None and pattern.search(name) is not None
    if isinstance(test, ast.Compare):
        return any(pattern.search(n) for node in ast.walk(test)
                   if isinstance(node, ast.expr) and (n := _last_name(node)) is not None)
    return False
