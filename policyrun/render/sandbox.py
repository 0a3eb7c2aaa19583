"""A Jinja2 sandbox that is also bounded in time and memory.

Jinja's `SandboxedEnvironment` keeps a template away from Python internals but lets it run forever
(`{% for i in range(100000) %}{% for j in range(100000) %}`) or build a string of any size
(`'x' * 10**10`). A rulebook can ship templates, so report rendering gets three bounds
(policyrun.limits): a wall-clock deadline, the size of any one string, list or integer a template
builds, and the size of the report itself.

How: every loop iterates through a checkpoint (the parsed template's `for` iterables are wrapped),
and so does every call, attribute lookup and the output stream; the operators and filters that
make values bigger (`*`, `**`, `%`, `+`, `~`, `format`, `center`, `indent`, `replace`, `join`,
`sum`, `tojson`, str methods such as `ljust`) check the size of their result before building it.
Lists and dicts cannot be mutated in place (`ImmutableSandboxedEnvironment`), so nothing grows
without passing a check.
"""

from __future__ import annotations

import math
import re
import string
import time
from collections.abc import Callable, Iterator
from typing import Any

from jinja2 import TemplateError, nodes, pass_environment, pass_eval_context
from jinja2.compiler import CodeGenerator, Frame
from jinja2.filters import FILTERS
from jinja2.runtime import Context
from jinja2.sandbox import ImmutableSandboxedEnvironment
from jinja2.utils import Namespace

from policyrun import limits


class TemplateLimit(TemplateError):
    """A template went over one of policyrun's bounds (R008)."""


_PERCENT_SPEC = re.compile(r"%(?:\([^)]*\))?[#0\- +]*(\*|\d+)?(?:\.(\*|\d+))?[hlL]?[a-zA-Z%]")
_DIGITS = re.compile(r"\d+")


class _BoundedCodeGenerator(CodeGenerator):
    def visit_Concat(self, node: nodes.Concat, frame: Frame) -> None:
        # `a ~ b ~ c`: size-check the joined string (Jinja joins it with str_join/markup_join).
        self.write("environment.checked_value(")
        super().visit_Concat(node, frame)
        self.write(")")


class BoundedEnvironment(ImmutableSandboxedEnvironment):
    code_generator_class = _BoundedCodeGenerator
    intercepted_binops = frozenset({"*", "**", "%", "+"})

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.deadline = math.inf
        self.globals["range"] = self.bounded_range
        self.globals["namespace"] = _BoundedNamespace
        self.globals.pop("lipsum", None)  # generates text of any requested size
        self.filters.update(
            policyrun_bounded_iter=self.bounded_iter, center=self._center, indent=self._indent,
            replace=self._replace, join=self._join, format=self._format, sum=self._sum,
            tojson=self._tojson)

    # --- time ------------------------------------------------------------------------------------
    def start_clock(self) -> None:
        self.deadline = time.monotonic() + limits.TEMPLATE_SECONDS

    def checkpoint(self) -> None:
        if time.monotonic() > self.deadline:
            raise TemplateLimit(f"rendering took longer than {limits.TEMPLATE_SECONDS:g} seconds; "
                                "simplify the template's loops")

    def bounded_iter(self, value: Any) -> Iterator[Any]:
        for item in value:
            self.checkpoint()
            yield item

    def bounded_range(self, *args: int) -> range:
        self.checkpoint()
        rng = range(*args)
        if len(rng) > limits.TEMPLATE_RANGE:
            raise TemplateLimit(f"range() of {len(rng)} items is over the limit of {limits.TEMPLATE_RANGE}")
        return rng

    # --- size ------------------------------------------------------------------------------------
    def checked_value(self, value: Any) -> Any:
        check_size(value)
        return value

    def call_binop(self, context: Context, operator: str, left: Any, right: Any) -> Any:
        self.checkpoint()
        if operator == "*":
            for seq, n in ((left, right), (right, left)):
                if isinstance(seq, (str, list, tuple)) and isinstance(n, int):
                    _check_length(weight(seq) * max(n, 0), seq)
            if isinstance(left, int) and isinstance(right, int):
                _check_bits(abs(left).bit_length() + abs(right).bit_length())
        elif operator == "**" and isinstance(left, int) and isinstance(right, int) and right > 0:
            _check_bits(abs(left).bit_length() * right if abs(left) > 1 else 1)
        elif operator == "+" and isinstance(left, (str, list, tuple)) and isinstance(right, (str, list, tuple)):
            _check_length(weight(left) + weight(right), left)
        elif operator == "%" and isinstance(left, str):
            check_percent_format(left)
            _check_length(len(left) + weight(right), left)
        return self.checked_value(self.binop_table[operator](left, right))

    def call(__self, __context: Context, __obj: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N805
        __self.checkpoint()
        if isinstance(getattr(__obj, "__self__", None), str):
            _check_str_method(__obj.__self__, __obj.__name__, args, kwargs)
        result = super().call(__context, __obj, *args, **kwargs)
        if isinstance(result, (str, list, tuple)) and len(result) > limits.TEMPLATE_OUTPUT_CHARS:
            raise TemplateLimit(f"a call produced {len(result)} characters, over the report limit of "
                                f"{limits.TEMPLATE_OUTPUT_CHARS}")
        return result

    def getattr(self, obj: Any, attribute: str) -> Any:
        self.checkpoint()
        return super().getattr(obj, attribute)

    def getitem(self, obj: Any, argument: Any) -> Any:
        self.checkpoint()
        return super().getitem(obj, argument)

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        wrapped = super().wrap_str_format(value)
        if wrapped is None:
            return None
        template_text = value.__self__
        inner = wrapped

        def checked(*args: Any, **kwargs: Any) -> str:
            check_brace_format(template_text)
            result = inner(*args, **kwargs)
            check_size(result)
            return result

        return checked

    def _parse(self, source: str, name: str | None, filename: str | None) -> nodes.Template:
        tree = super()._parse(source, name, filename)
        for loop in tree.find_all(nodes.For):
            loop.iter = nodes.Filter(loop.iter, "policyrun_bounded_iter", [], [], None, None, lineno=loop.lineno)
        return tree

    # --- filters that can make values bigger -------------------------------------------------
    def _center(self, value: Any, width: int = 80) -> str:
        _check_length(int(width), value)
        return self.checked_value(FILTERS["center"](value, width))  # type: ignore[no-any-return]

    def _indent(self, s: Any, width: int | str = 4, first: bool = False, blank: bool = False) -> Any:
        pad = len(width) if isinstance(width, str) else int(width)
        text = str(s)
        _check_length(len(text) + pad * (text.count("\n") + 1), text)
        return FILTERS["indent"](s, width, first, blank)

    @pass_eval_context
    def _replace(self, eval_ctx: Any, s: Any, old: Any, new: Any, count: int | None = None) -> Any:
        text, old_s, new_s = str(s), str(old), str(new)
        hits = text.count(old_s) if old_s else len(text) + 1
        if count is not None and count >= 0:
            hits = min(hits, count)
        _check_length(len(text) + hits * max(len(new_s) - len(old_s), 0), text)
        return FILTERS["replace"](eval_ctx, s, old, new, count)

    @pass_eval_context
    def _join(self, eval_ctx: Any, value: Any, d: str = "", attribute: Any = None) -> Any:
        items = list(value)
        total = len(str(d)) * max(len(items) - 1, 0)
        for item in items:
            self.checkpoint()
            total += len(item) if isinstance(item, str) else len(str(item))
            _check_length(total, "")
        return FILTERS["join"](eval_ctx, items, d, attribute)

    def _format(self, value: Any, *args: Any, **kwargs: Any) -> str:
        check_percent_format(str(value))
        return self.checked_value(FILTERS["format"](value, *args, **kwargs))  # type: ignore[no-any-return]

    @pass_environment
    def _sum(self, environment: Any, iterable: Any, attribute: Any = None, start: Any = 0) -> Any:
        items = list(iterable)
        if isinstance(start, (str, list, tuple)):
            _check_length(len(start) + sum(len(i) if isinstance(i, (str, list, tuple)) else 0 for i in items), start)
        return self.checked_value(FILTERS["sum"](environment, items, attribute, start))

    @pass_eval_context
    def _tojson(self, eval_ctx: Any, value: Any, indent: int | None = None) -> Any:
        if indent is not None and int(indent) > 64:
            raise TemplateLimit(f"tojson indent {indent} is over the limit of 64")
        return self.checked_value(FILTERS["tojson"](eval_ctx, value, indent))


class _BoundedNamespace(Namespace):
    """`namespace()` whose attributes are size-checked when set (`{% set ns.x = ns.x ~ ns.x %}`)."""

    def __setitem__(self, name: str, value: Any) -> None:
        check_size(value)
        super().__setitem__(name, value)


def check_size(value: Any) -> None:
    if isinstance(value, (str, list, tuple, dict)):
        _check_length(weight(value), value)
    elif isinstance(value, int) and not isinstance(value, bool):
        _check_bits(abs(value).bit_length())


def weight(value: Any) -> int:
    """About how many characters `value` prints as: lengths of strings plus one per item, through
    nested lists and dicts (a list of 1,000 references to one long string weighs 1,000 strings).
    Stops counting just past the bound; shared values are measured once."""
    cap = limits.TEMPLATE_VALUE_ITEMS
    memo: dict[int, int] = {}

    def measure(item: Any) -> int:
        if isinstance(item, str):
            return len(item)
        if not isinstance(item, (list, tuple, dict)):
            return 1
        key = id(item)
        if key not in memo:
            total = len(item)
            for child in (item.items() if isinstance(item, dict) else item):
                total += measure(child)
                if total > cap:
                    break
            memo[key] = total
        return memo[key]

    return measure(value)


def _check_length(n: int, like: Any) -> None:
    if n > limits.TEMPLATE_VALUE_ITEMS:
        unit = "characters" if isinstance(like, str) else "items"
        raise TemplateLimit(f"a value of {n} {unit} is over the limit of {limits.TEMPLATE_VALUE_ITEMS} {unit} "
                            "for one string or list in a template")


def _check_bits(bits: int) -> None:
    if bits > limits.TEMPLATE_INT_BITS:
        raise TemplateLimit(f"an integer of about {int(bits * 0.30103)} digits is over the limit of "
                            f"{int(limits.TEMPLATE_INT_BITS * 0.30103)} digits")


def check_percent_format(fmt: str) -> None:
    """`'%99999999d' % x` would allocate the width before anything else could stop it."""
    for m in _PERCENT_SPEC.finditer(fmt):
        for part in (m.group(1), m.group(2)):
            if part == "*":
                raise TemplateLimit("`*` widths in % formatting are not allowed in report templates")
            if part:
                _check_length(int(part), "")


def check_brace_format(fmt: str) -> None:
    """The same for `'{:>99999999}'.format(x)`; nested fields in a spec are refused outright."""
    for _, _, spec, _ in string.Formatter().parse(fmt):
        if spec and "{" in spec:
            raise TemplateLimit("nested fields in a format spec are not allowed in report templates")
        for digits in _DIGITS.findall(spec or ""):
            _check_length(int(digits), "")


_GROWING_METHODS = frozenset({"ljust", "rjust", "center", "zfill"})


def _check_str_method(text: str, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    if name in ("translate", "encode"):
        raise TemplateLimit(f"str.{name}() is not allowed in report templates")
    if name in _GROWING_METHODS and args and isinstance(args[0], int):
        _check_length(args[0], text)
    elif name == "expandtabs":
        size = args[0] if args else kwargs.get("tabsize", 8)
        _check_length(len(text) * max(int(size), 1), text)
    elif name == "replace" and len(args) >= 2:
        old, new = str(args[0]), str(args[1])
        hits = text.count(old) if old else len(text) + 1
        _check_length(len(text) + hits * max(len(new) - len(old), 0), text)
    elif name == "join" and args:
        items = list(args[0]) if not isinstance(args[0], (list, tuple)) else args[0]
        _check_length(sum(len(i) if isinstance(i, str) else 0 for i in items) + len(text) * len(items), text)


def render_bounded(env: BoundedEnvironment, template: Any, variables: dict[str, Any]) -> str:
    """Stream the template, stopping at the deadline or when the output reaches its bound."""
    env.start_clock()
    parts: list[str] = []
    size = 0
    for chunk in template.generate(**variables):
        size += len(chunk)
        if size > limits.TEMPLATE_OUTPUT_CHARS:
            raise TemplateLimit(f"the report is over the output limit of {limits.TEMPLATE_OUTPUT_CHARS} "
                                "characters; render less (or fewer rows)")
        env.checkpoint()
        parts.append(chunk)
    return "".join(parts)
