"""PEP 440 versions through `packaging` (the library pip itself uses)."""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported when a function runs: compiling a rulebook (lint) never pays for packaging
    from packaging.specifiers import SpecifierSet
    from packaging.version import Version

from policyrun.language.functions.base import fail, show


@lru_cache(maxsize=1024)
def _parse(text: str) -> Version | None:
    from packaging.version import InvalidVersion, Version

    try:
        return Version(text)  # accepts a leading "v" and surrounding whitespace, as PEP 440 allows
    except InvalidVersion:
        return None


def _version(fn: str, text: str) -> Version:
    version = _parse(text)
    if version is None:
        fail(f"{fn}: '{text}' is not a PEP 440 version (such as 1.2, 0.26.0+cu128, 2.0rc1 or v0.27.0)")
    return version


def version_compare(a: str, b: str) -> int:
    va, vb = _version("version_compare", a), _version("version_compare", b)
    return (va > vb) - (va < vb)


def version_valid(text: str) -> bool:
    return _parse(text) is not None


def version_release(text: str) -> str:
    return ".".join(str(part) for part in _version("version_release", text).release)


@lru_cache(maxsize=256)
def _specifiers(spec: str) -> SpecifierSet | None:
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    try:
        return SpecifierSet(spec)
    except InvalidSpecifier:
        return None


def version_matches(text: str, spec: str) -> bool:
    version = _version("version_matches", text)
    specifiers = _specifiers(spec)
    if specifiers is None:
        fail(f"version_matches: '{spec}' is not a PEP 440 specifier set (such as '>=2.0,<3' or '==0.26.*')")
    # A concrete version is being checked, not a release chosen: pre-releases inside the range match.
    return specifiers.contains(version, prereleases=True)


def _release_part(fn: str, text: str, index: int) -> int:
    # A missing segment is 0 (PEP 440: `2` is `2.0.0`), so `'2'.version_minor()` is 0, not an error.
    release = _version(fn, text).release
    return release[index] if index < len(release) else 0


def version_major(text: str) -> int:
    return _release_part("version_major", text, 0)


def version_minor(text: str) -> int:
    return _release_part("version_minor", text, 1)


def version_patch(text: str) -> int:
    return _release_part("version_patch", text, 2)


def version_unique(versions: list[Any]) -> str | None:
    """The one version a list names (PEP 440 equality: `0.26` is `0.26.0`), else None: the
    current version of a project whose exact pins and lock resolution agree, and no guess when
    there are none or they disagree (a rulebook reports that from the list itself)."""
    found: list[tuple[Version, str]] = []
    for i, text in enumerate(versions):
        if type(text) is not str:
            fail(f"version_unique: item {i} is {show(text)}; expected a list of version strings")
        version = _version("version_unique", text)
        if not any(v == version for v, _ in found):
            found.append((version, text))
    return found[0][1] if len(found) == 1 else None
