"""Version constraints read from packaging files, each a `Pin` with its specifier set and kind.

pyproject.toml (PEP 621, PEP 735 dependency groups, build-system, uv and Poetry tables), setup.py's
literal `install_requires`/`extras_require` (with `ast`, never run), requirements and constraints
files, and uv/poetry/pdm lock files. Kept apart from the probe kinds (repo/pins.py): these parse
one file's text each, know nothing of trees, revisions or facts, and are where a new file format
would be added.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import PurePosixPath
from typing import Any

from policyrun.probes.base import ProbeError


_REQUIREMENT = re.compile(r"""^\s*(?P<name>[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)\s*
                              (?:\[[^\]]*\])?\s*(?P<spec>[^;]*?)\s*(?:;.*)?$""", re.VERBOSE)
_EXACT = re.compile(r"^===?\s*([^\s,*]+)$")
_BARE_VERSION = re.compile(r"^v?\d[\w.+!-]*$")  # Poetry: "1.2.3" means ==1.2.3


def normalize(name: str) -> str:
    """PEP 503 name normalisation: `Foo_Bar.baz` and `foo-bar-baz` are the same package."""
    return re.sub(r"[-_.]+", "-", name).lower()


def exact_version(spec: str) -> str | None:
    """The version a specifier pins exactly (`==1.2`, `===1.2`, `1.2` for Poetry), else None."""
    spec = spec.strip().strip("()").strip()
    if _BARE_VERSION.match(spec):
        return spec
    for clause in spec.split(","):
        m = _EXACT.match(clause.strip())
        if m:
            return m.group(1)
    return None


def _poetry_range(op: str, version: str) -> str | None:
    """Poetry's caret and tilde as PEP 440 (python-poetry.org/docs/dependency-specification):
    `^0.24` is `>=0.24,<0.25`, `^1.2.3` is `>=1.2.3,<2.0.0`, `~1.2` is `>=1.2,<1.3`."""
    try:
        parts = [int(p) for p in version.split(".")]
    except ValueError:
        return None
    if op == "^":
        first = next((i for i, n in enumerate(parts) if n != 0), len(parts) - 1)
        upper = parts[:first] + [parts[first] + 1]
    else:
        upper = parts[:1] + [parts[1] + 1] if len(parts) > 1 else [parts[0] + 1]
    return f">={version},<{'.'.join(map(str, upper))}"


_POETRY = re.compile(r"^([\^~])\s*(\d+(?:\.\d+)*)$")


def specifier_set(spec: str) -> str | None:
    """The constraint as a PEP 440 specifier set (clauses sorted, comma-joined, as the `requirement`
    function writes them; '' for none), or None when it is not one (a git or path source)."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    spec = spec.strip().strip("()").strip()
    if spec == "*":  # Poetry: any version
        return ""
    if re.match(r"^\d[\w.+!-]*(?:\.\*)?$", spec):
        spec = "==" + spec  # Poetry: "1.2.3" means ==1.2.3, "1.2.*" ==1.2.*
    elif (m := _POETRY.match(spec)) is not None:
        spec = _poetry_range(m.group(1), m.group(2)) or spec
    try:
        return ",".join(sorted(str(s) for s in SpecifierSet(spec)))
    except InvalidSpecifier:
        return None


def pinned_version(spec_set: str | None) -> str | None:
    """The one version an `==`/`===` clause names (no wildcard), else None."""
    from packaging.specifiers import SpecifierSet

    if not spec_set:
        return None
    named = {s.version for s in SpecifierSet(spec_set) if s.operator in ("==", "===") and "*" not in s.version}
    return named.pop() if len(named) == 1 else None


@dataclass
class Pin:
    file: str
    line: int | None
    specifier: str
    section: str | None
    locked: bool = False  # lock files record the resolved version itself
    raw: str | None = None  # the constraint as written (the requirement string, or the line)

    def as_value(self) -> dict[str, Any]:
        version = self.specifier if self.locked else exact_version(self.specifier)
        spec_set = f"=={self.specifier}" if self.locked else specifier_set(self.specifier)
        exact = None if self.locked else pinned_version(spec_set)
        kind = ("lock" if self.locked else "other" if spec_set is None else "unpinned" if spec_set == ""
                else "exact" if exact is not None else "range")
        return {"file": self.file, "line": self.line, "specifier": self.specifier, "version": version,
                "section": self.section, "raw": self.raw if self.raw is not None else self.specifier,
                "specifier_set": spec_set, "exact": exact, "kind": kind}


@dataclass
class Unreadable:
    """A constraint policyrun will not guess at: setup.py computing its requirements at run time."""
    file: str
    line: int | None
    reason: str

    def as_value(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "reason": self.reason}


class _LineFinder:
    """Approximate source lines for values tomllib returns without positions."""

    def __init__(self, text: str) -> None:
        self.lines = text.splitlines()
        self.used: set[int] = set()

    def find(self, pattern: re.Pattern[str]) -> int | None:
        for i, line in enumerate(self.lines):
            if i not in self.used and pattern.search(line):
                self.used.add(i)
                return i + 1
        return None

    def quoted(self, text: str) -> int | None:
        return self.find(re.compile(f"[\"']{re.escape(text)}[\"']"))

    def key(self, name: str) -> int | None:
        return self.find(re.compile(rf"^\s*[\"']?{re.escape(name)}[\"']?\s*="))


def _load_toml(text: str, rel: str) -> tuple[dict[str, Any], str]:
    import tomllib

    try:
        return tomllib.loads(text), text
    except ValueError as exc:  # TOMLDecodeError, and Python's refusal of integers over 4,300 digits
        raise ProbeError("file.parse_error", f"{rel}: invalid TOML: {exc}") from None


def _requirement_pins(strings: Any, section: str, want: str, rel: str, finder: _LineFinder) -> Iterator[Pin]:
    for item in strings if isinstance(strings, list) else []:
        if isinstance(item, str) and (m := _REQUIREMENT.match(item)) and normalize(m.group("name")) == want:
            yield Pin(rel, finder.quoted(item), m.group("spec").strip(), section, raw=item)


def _poetry_pins(table: Any, section: str, want: str, rel: str, finder: _LineFinder) -> Iterator[Pin]:
    for name, constraint in (table.items() if isinstance(table, dict) else []):
        if normalize(name) != want:
            continue
        line = finder.key(name)
        raw = finder.lines[line - 1].strip() if line else None
        for c in constraint if isinstance(constraint, list) else [constraint]:
            if isinstance(c, str):
                yield Pin(rel, line, c, section, raw=raw)
            elif isinstance(c, dict):
                spec = c.get("version") or " ".join(f"{k}={c[k]}" for k in ("git", "tag", "rev", "path", "url")
                                                    if k in c)
                yield Pin(rel, line, str(spec), section, raw=raw)


def pyproject_pins(text: str, rel: str, want: str) -> Iterator[Pin]:
    doc, text = _load_toml(text, rel)
    finder = _LineFinder(text)
    project = doc.get("project", {})
    yield from _requirement_pins(doc.get("build-system", {}).get("requires"), "build-system.requires", want,
                                 rel, finder)
    yield from _requirement_pins(project.get("dependencies"), "project.dependencies", want, rel, finder)
    for extra, reqs in project.get("optional-dependencies", {}).items():
        yield from _requirement_pins(reqs, f"project.optional-dependencies.{extra}", want, rel, finder)
    for group, reqs in doc.get("dependency-groups", {}).items():
        yield from _requirement_pins(reqs, f"dependency-groups.{group}", want, rel, finder)
    uv = doc.get("tool", {}).get("uv", {})
    for key in ("constraint-dependencies", "override-dependencies", "dev-dependencies"):
        yield from _requirement_pins(uv.get(key), f"tool.uv.{key}", want, rel, finder)
    poetry = doc.get("tool", {}).get("poetry", {})
    yield from _poetry_pins(poetry.get("dependencies"), "tool.poetry.dependencies", want, rel, finder)
    yield from _poetry_pins(poetry.get("dev-dependencies"), "tool.poetry.dev-dependencies", want, rel, finder)
    for group, table in poetry.get("group", {}).items():
        yield from _poetry_pins(table.get("dependencies"), f"tool.poetry.group.{group}.dependencies", want, rel,
                                finder)


def requirements_pins(text: str, rel: str, want: str) -> Iterator[Pin]:
    logical: list[tuple[int, str]] = []
    start, buf = 0, ""
    for number, raw in enumerate(text.splitlines(), start=1):
        if not buf:
            start = number
        if raw.endswith("\\"):
            buf += raw[:-1] + " "
            continue
        logical.append((start, buf + raw))
        buf = ""
    for number, line in logical:
        line = re.split(r"(?:^|\s)#", line, maxsplit=1)[0]
        line = re.split(r"\s--?\w", line, maxsplit=1)[0].strip()  # trailing options such as --hash=...
        if not line or line.startswith("-"):
            continue
        m = _REQUIREMENT.match(line)
        if m and normalize(m.group("name")) == want:
            yield Pin(rel, number, m.group("spec").strip(), None, raw=line)


def lock_pins(text: str, rel: str, want: str) -> Iterator[Pin]:
    doc, text = _load_toml(text, rel)
    finder = _LineFinder(text)
    requirements: list[Pin] = []
    for package in doc.get("package", []):
        name = package.get("name", "")
        if normalize(name) == want and "version" in package:
            line = finder.find(re.compile(rf"^\s*name\s*=\s*[\"']{re.escape(name)}[\"']"))
            yield Pin(rel, line, str(package["version"]), "package", locked=True,
                      raw=f"{name} {package['version']}")
        requirements.extend(_lock_requirements(package, want, rel, text))
    yield from requirements


def _lock_requirements(package: Any, want: str, rel: str, text: str) -> Iterator[Pin]:
    """The requirement specifiers a lock file copies from the project's metadata (uv.lock's
    `[package.metadata] requires-dist` and `requires-dev`): a pin bumped in pyproject.toml without
    regenerating the lock leaves the old one here."""
    metadata = package.get("metadata") if isinstance(package, dict) else None
    if not isinstance(metadata, dict):
        return
    groups: list[tuple[str, Any]] = [("requires-dist", metadata.get("requires-dist"))]
    dev = metadata.get("requires-dev")
    groups += [(f"requires-dev.{g}", reqs) for g, reqs in (dev.items() if isinstance(dev, dict) else [])]
    finder = _LineFinder(text)
    for section, reqs in groups:
        for req in reqs if isinstance(reqs, list) else []:
            if not (isinstance(req, dict) and normalize(str(req.get("name", ""))) == want and "specifier" in req):
                continue
            name = re.escape(str(req["name"]))
            line = finder.find(re.compile(rf"\{{[^}}]*\bname\s*=\s*[\"']{name}[\"'][^}}]*\bspecifier\s*="))
            yield Pin(rel, line, str(req["specifier"]), f"package.metadata.{section} ({package.get('name', '?')})",
                      raw=finder.lines[line - 1].strip() if line else None)


def setup_py_pins(text: str, rel: str, want: str, present: frozenset[str] = frozenset()) -> Iterator[Pin | Unreadable]:
    """`install_requires` and `extras_require` of every `setup(...)` call, read with `ast`: a list,
    tuple or string literal (a dict literal of them for extras). A computed value is recorded as
    unreadable at its line, never evaluated: setup.py is code, and policyrun does not run it. The
    one computed value that is not unreadable is a requirements file read back (see
    `_reads_requirements_file`): `present`, the files this probe reads, already holds its lines."""
    try:
        tree = ast.parse(text, filename=rel)
    except (SyntaxError, ValueError, MemoryError, RecursionError) as exc:
        yield Unreadable(rel, getattr(exc, "lineno", None), f"not valid Python ({type(exc).__name__})")
        return
    for call in ast.walk(tree):
        if not (isinstance(call, ast.Call) and _called_name(call.func) == "setup"):
            continue
        for kw in call.keywords:
            if kw.arg is None:
                yield Unreadable(rel, kw.value.lineno, "setup(**...) passes keywords policyrun cannot read")
            elif kw.arg == "install_requires":
                if _reads_requirements_file(kw.value, tree, rel, want, present) is None:
                    yield from _setup_requirements(kw.value, "setup.install_requires", want, rel)
            elif kw.arg == "extras_require":
                if not isinstance(kw.value, ast.Dict):
                    yield Unreadable(rel, kw.value.lineno, "extras_require is computed, not a dict literal")
                    continue
                for key, value in zip(kw.value.keys, kw.value.values):
                    if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
                        yield Unreadable(rel, value.lineno, "an extras_require key is computed, not a string")
                        continue
                    yield from _setup_requirements(value, f"setup.extras_require.{key.value}", want, rel)


def _reads_requirements_file(node: ast.expr, tree: ast.Module, rel: str, want: str,
                             present: frozenset[str]) -> str | None:
    """The requirements file a computed `install_requires` reads, when that is all it can be: the
    common `install_requires=read_requirements()` whose function (defined in setup.py) or call
    names, with string literals only, a path to a `*.txt`/`*.in` file this probe reads itself.
    Its constraints are then that file's, found there with their lines. Fail-closed: None (so the
    value stays unreadable) when the path is not spelled by literals, names no file read here,
    the code joins or grows lists (it may add a requirement no literal shows), or it states a
    requirement on `want` itself (which a file read would not show)."""
    scopes: list[ast.AST] = [node]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        scopes += [d for d in tree.body if isinstance(d, ast.FunctionDef) and d.name == node.func.id]
    literals = [n.value for scope in scopes  # in source order: `a / "dir" / "f.txt"` nests the last part outermost
                for n in sorted((n for n in ast.walk(scope) if isinstance(n, ast.Constant)),
                                key=lambda n: (n.lineno, n.col_offset))
                if isinstance(n.value, str)]
    # Lists joined or grown (`read() + [REQ]`, `+=`, `.append(x)`) may add what no literal shows.
    if any(isinstance(n, ast.AugAssign) or (isinstance(n, ast.BinOp) and isinstance(n.op, ast.Add))
           or (isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
               and n.func.attr in ("append", "extend", "insert"))
           for scope in scopes for n in ast.walk(scope)):
        return None
    # A literal naming the package itself (`"vllm==" + v`, a filter on "vllm") may change what the file says.
    if any((m := _REQUIREMENT.match(s.split("#", 1)[0].strip())) is not None and normalize(m.group("name")) == want
           for s in literals):
        return None
    base = PurePosixPath(rel).parent
    named: set[str] = set()
    for end, leaf in enumerate(literals):
        if not leaf.endswith((".txt", ".in")):
            continue
        # `Path(__file__).parent / "requirements" / "core.txt"`, `os.path.join("requirements", "core.txt")`,
        # `"requirements/core.txt"`: the literals just before the file name are its directories.
        for start in range(end, -1, -1):
            parts = [p.strip("/") for p in literals[start:end + 1]]
            if not all(parts) or any(p in ("..", "") or any(c in p for c in " #\n") for p in parts):
                break
            candidate = (base / "/".join(parts)).as_posix()
            if candidate in present:
                named.add(candidate)
    return named.pop() if len(named) == 1 else None


def _called_name(func: ast.expr) -> str | None:
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else None


def _setup_requirements(node: ast.expr, section: str, want: str, rel: str) -> Iterator[Pin | Unreadable]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):  # setuptools takes lines of text too
        # A string spanning lines ("""...""") has one requirement a line; "a\nb" sits on one line.
        spans = node.end_lineno is not None and node.end_lineno > node.lineno
        items = [(node.lineno + (i if spans else 0), line) for i, line in enumerate(node.value.splitlines())]
    elif isinstance(node, (ast.List, ast.Tuple)) and all(isinstance(e, ast.Constant) and isinstance(e.value, str)
                                                         for e in node.elts):
        items = [(e.lineno, e.value) for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
    else:
        yield Unreadable(rel, node.lineno, f"{section.removeprefix('setup.')} is computed, not a literal list "
                                           "of strings; policyrun reads setup.py and never runs it")
        return
    for line, item in items:
        item = item.split("#", 1)[0].strip()
        if (m := _REQUIREMENT.match(item)) is not None and normalize(m.group("name")) == want:
            yield Pin(rel, line, m.group("spec").strip(), section, raw=item)


def reader_for(name: str, present: frozenset[str] = frozenset()) -> Any:
    if name == "pyproject.toml":
        return pyproject_pins
    if name == "setup.py":
        return partial(setup_py_pins, present=frozenset(p for p in present if p.endswith((".txt", ".in"))))
    if name.endswith(".lock"):
        return lock_pins
    if name.endswith((".txt", ".in")):
        return requirements_pins
    return None
