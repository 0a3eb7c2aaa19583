"""PEP 508 requirements and PEP 503 names through `packaging` (the library pip itself uses)."""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported when a function runs: compiling a rulebook (lint) never pays for packaging
    from packaging.requirements import Requirement

from policyrun.language.functions.base import fail, show


def normalize_name(name: str) -> str:
    from packaging.utils import canonicalize_name

    return str(canonicalize_name(name))


@lru_cache(maxsize=1024)
def _parse(text: str) -> Requirement | str:
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        return Requirement(text)
    except InvalidRequirement as exc:
        return str(exc).splitlines()[0]


def _as_map(fn: str, text: str, where: str = "") -> dict[str, Any]:
    req = _parse(text)
    if isinstance(req, str):
        fail(f"{fn}: {where}'{text}' is not a PEP 508 requirement (such as \"vllm[audio]>=0.26,<0.28; "
             f"python_version >= '3.10'\"): {req}")
    return {"name": req.name, "normalized_name": normalize_name(req.name),
            # Sorted so two spellings of one set (`<2,>=1` and `>=1,<2`) compare equal.
            "specifier": ",".join(sorted(str(s) for s in req.specifier)),
            "extras": sorted(req.extras), "marker": str(req.marker) if req.marker is not None else None,
            "url": req.url}


def requirement(text: str) -> dict[str, Any]:
    return _as_map("requirement", text)


def requirements(texts: list[Any]) -> list[dict[str, Any]]:
    out = []
    for i, text in enumerate(texts):
        if type(text) is not str:
            fail(f"requirements: item {i} is {show(text)}; expected a list of requirement strings")
        out.append(_as_map("requirements", text, f"item {i}, "))
    return out
