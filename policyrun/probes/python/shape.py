"""What a function's callers and readers depend on, as comparable values: its parameter shape
(names, kinds, defaults; annotations left out) and a hash of its code (normalised AST, docstrings
left out). python.symbols gives them for upstream definitions, python.patches for the plugin's
replacements, so "the replacement still matches the target" and "the upstream body changed" are
string comparisons in a rulebook."""

from __future__ import annotations

import ast
import copy
import hashlib

from policyrun.probes.python.source import unparse

_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


def shape(node: ast.AST | None) -> str | None:
    """`(self, x, y=1, *args, z, **kw)`: the parameters a call binds, without annotations (a
    plugin that writes `"VllmConfig"` where upstream writes `VllmConfig` still matches)."""
    if not isinstance(node, _FUNCS):
        return None
    args = copy.copy(node.args)
    strip = [ast.arg(arg=a.arg) for a in args.posonlyargs], [ast.arg(arg=a.arg) for a in args.args], \
        [ast.arg(arg=a.arg) for a in args.kwonlyargs]
    args.posonlyargs, args.args, args.kwonlyargs = strip
    args.vararg = ast.arg(arg=args.vararg.arg) if args.vararg else None
    args.kwarg = ast.arg(arg=args.kwarg.arg) if args.kwarg else None
    return f"({unparse(args)})"


def forwards(node: ast.AST | None) -> bool:
    """A forwarding wrapper `(self, *args, **kwargs)` binds whatever upstream passes: at most one
    leading positional (self or cls), then `*args` and `**kwargs`, nothing keyword-only."""
    if not isinstance(node, _FUNCS):
        return False
    a = node.args
    return a.vararg is not None and a.kwarg is not None and not a.kwonlyargs \
        and len(a.posonlyargs) + len(a.args) <= 1


def code_hash(node: ast.AST | None) -> str | None:
    """sha256 (first 16 hex) of the definition's AST without docstrings (nor any bare string
    statement); comments, spacing and line numbers never reach the AST, so only a change in what
    the code does changes it. Serialised by hand, without copying the tree (the trees are shared
    through the parse cache); absent fields (None, []) are left out, so a Python whose AST adds an
    empty field (3.12's `type_params`) gives the same hash."""
    if node is None:
        return None
    out: list[str] = []
    try:
        _serialise(node, out)
    except RecursionError:  # a pathologically deep expression: the same text, without recursion
        out = []
        _serialise_iteratively(node, out)
    return hashlib.sha256("".join(out).encode("utf-8", "surrogatepass")).hexdigest()[:16]


def _serialise(node: ast.AST, out: list[str]) -> None:
    kind = type(node)
    out.append(kind.__name__)
    out.append("(")
    for name in kind._fields:
        value = getattr(node, name, None)
        if value is None or value == []:
            continue
        out.append(name)
        out.append("=")
        if type(value) is list:
            out.append("[")
            for item in value:
                if isinstance(item, ast.AST):
                    if _is_doc(item):
                        continue
                    _serialise(item, out)
                else:
                    out.append(repr(item))
                out.append(",")
            out.append("]")
        elif isinstance(value, ast.AST):
            _serialise(value, out)
        else:
            out.append(repr(value))
        out.append(",")
    out.append(")")


def _serialise_iteratively(node: ast.AST, out: list[str]) -> None:
    """_serialise with an explicit stack (same output)."""
    stack: list[object] = [node]
    while stack:
        item = stack.pop()
        if isinstance(item, _Raw):
            out.append(item.text)
            continue
        if not isinstance(item, ast.AST):
            out.append(repr(item))
            continue
        kind = type(item)
        out += [kind.__name__, "("]
        todo: list[object] = []
        for name in kind._fields:
            value = getattr(item, name, None)
            if value is None or value == []:
                continue
            todo.append(_Raw(name + "="))
            if type(value) is list:
                todo.append(_Raw("["))
                for sub in value:
                    if not (isinstance(sub, ast.AST) and _is_doc(sub)):
                        todo += [sub, _Raw(",")]
                todo.append(_Raw("]"))
            else:
                todo.append(value)
            todo.append(_Raw(","))
        todo.append(_Raw(")"))
        stack.extend(reversed(todo))


class _Raw:
    """Punctuation of the serialisation (never confused with a string in the code)."""
    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        self.text = text


def _is_doc(stmt: ast.AST) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)
