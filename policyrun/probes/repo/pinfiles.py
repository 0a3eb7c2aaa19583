"""Version pins: where a package's version is constrained, and module-level constants.

`pins.package` reads pyproject.toml (PEP 621, PEP 735 dependency groups, build-system, uv and
Poetry tables), setup.py's literal `install_requires`/`extras_require` (with `ast`, never run),
requirements/constraints files and uv/poetry/pdm lock files. Each constraint is also read as a
PEP 440 specifier set with `packaging` and given a kind (`exact`, `range`, `lock`, `unpinned`,
`other`), so a rulebook can tell a pin from a range from a lock's resolution without parsing text.
`pins.constant` reads a constant from Python source with `ast`; the module is never imported, so
nothing runs.
"""

from __future__ import annotations

import ast
import fnmatch
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import partial
from pathlib import Path, PurePosixPath
from typing import Any

from policyrun.probes.base import ProbeContext, ProbeError, ProbeResult
from policyrun.probes.repo.files import DOCUMENT_BYTES, read_file
from policyrun.probes._kit.gitclient import rev_param

DEFAULT_FILES = ("pyproject.toml", "setup.py", "requirements*.txt", "requirements/*.txt", "constraints*.txt",
                 "uv.lock", "poetry.lock", "pdm.lock")

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


def _reader(name: str, present: frozenset[str] = frozenset()) -> Any:
    if name == "pyproject.toml":
        return pyproject_pins
    if name == "setup.py":
        return partial(setup_py_pins, present=frozenset(p for p in present if p.endswith((".txt", ".in"))))
    if name.endswith(".lock"):
        return lock_pins
    if name.endswith((".txt", ".in")):
        return requirements_pins
    return None


class PackagePinsProbe:
    kind = "pins.package"
    summary = ("Every place a package's version is constrained: pyproject, setup.py, requirements, uv/poetry/pdm "
               "lock files; each as a PEP 440 specifier set with its kind (exact, range, lock).")
    params_schema: Mapping[str, Any] = {
        "type": "object",
        "properties": {
            "package": {"type": "string", "minLength": 1, "description": "Distribution name (any spelling)."},
            "root": {"type": "string", "default": ".", "description": "Directory the file globs start from."},
            "files": {"type": "array", "items": {"type": "string"},
                      "description": "Globs (pathlib syntax, `**` recursive) relative to root; default: "
                                     + ", ".join(DEFAULT_FILES) + "."},
            "rev": rev_param("Read the files as they are at this revision (git objects; nothing is checked "
                              "out). Default: the working tree."),
        },
        "required": ["package"],
        "additionalProperties": False,
    }
    fact_schema: Mapping[str, Any] = {
        "type": "object",
        "properties": {
            "package": {"type": "string"},
            "sources": {"type": "array", "description": "One entry per constraint, by file and line.",
                        "items": {"type": "object", "properties": {
                            "file": {"type": "string", "description": "Relative to root."},
                            "line": {"type": ["integer", "null"]},
                            "specifier": {"type": "string", "description": "As written, e.g. `==0.6.3`, `>=0.6`."},
                            "version": {"type": ["string", "null"], "description": "The exact version, when pinned."},
                            "section": {"type": ["string", "null"], "description": "e.g. project.dependencies."},
                            "raw": {"type": "string", "description": "As written: the requirement string "
                                    "(`vllm>=0.24.0`), the requirements line, or `name version` for a lock."},
                            "specifier_set": {"type": ["string", "null"], "description": "The constraint as a "
                                              "PEP 440 specifier set, clauses sorted (`<0.28,>=0.26`; Poetry's "
                                              "`^`/`~` translated; '' for none; null when not one, e.g. git)."},
                            "exact": {"type": ["string", "null"], "description": "The one version an `==`/`===` "
                                      "clause names (no wildcard), else null (also for a lock)."},
                            "kind": {"enum": ["exact", "range", "lock", "unpinned", "other"], "description":
                                     "exact: `==`/`===` one version; range: any other specifier; lock: the "
                                     "version a lock file resolves; unpinned: no specifier; other: not PEP 440."}}}},
            "distinct": {"type": "array", "items": {"type": "string"}, "description": "Sorted exact versions."},
            "pinned": {"type": "array", "items": {"type": "string"},
                       "description": "Sorted distinct `exact` versions of the sources (locks excluded)."},
            "locked": {"type": "array", "items": {"type": "string"},
                       "description": "Sorted distinct versions lock files resolve for the package."},
            "unreadable": {"type": "array", "description": "Constraints policyrun will not guess at (setup.py "
                           "computing them at run time), never evaluated.",
                           "items": {"type": "object", "properties": {
                               "file": {"type": "string"}, "line": {"type": ["integer", "null"]},
                               "reason": {"type": "string"}}}},
            "files": {"type": "array", "items": {"type": "string"}, "description": "Files read."},
        },
    }

    def side_effects(self, params: Mapping[str, Any]) -> frozenset[str]:
        return frozenset()

    def run(self, params: Mapping[str, Any], ctx: ProbeContext) -> ProbeResult:
        if params.get("rev") is not None:
            return self._at_revision(params, ctx)
        root = ctx.resolve(params.get("root", "."))
        if not root.is_dir():
            raise ProbeError("file.not_found", f"{root} is not a directory; check the root parameter")
        want = normalize(params["package"])
        files = sorted({p for g in params.get("files", DEFAULT_FILES) for p in root.glob(g) if p.is_file()},
                       key=lambda p: p.as_posix())
        inside = root.resolve()
        for path in files:
            if not path.resolve().is_relative_to(inside):
                raise ProbeError("file.unreadable", f"{path.relative_to(root).as_posix()} is a symbolic link leading "
                                                    f"outside {root}; policyrun does not follow links out of the root")
        pins: list[Pin | Unreadable] = []
        present = frozenset(p.relative_to(root).as_posix() for p in files)
        for path in files:
            reader = _reader(path.name, present)
            if reader is None:
                raise ProbeError("params.invalid", f"{path.name}: not a pyproject.toml, setup.py, requirements "
                                                   "(*.txt, *.in) or lock file; narrow the files globs")
            rel = path.relative_to(root).as_posix()
            try:
                pins.extend(reader(read_file(path, rel).decode("utf-8"), rel, want))
            except (OSError, UnicodeDecodeError) as exc:
                raise ProbeError("file.unreadable", f"{rel}: {exc}") from None
        value = _value(params["package"], pins, [p.relative_to(root).as_posix() for p in files])
        return ProbeResult(value=value, sources=[f"{root / s['file']}:{s['line']}" if s["line"] else
                                                 str(root / s["file"]) for s in value["sources"]])

    def _at_revision(self, params: Mapping[str, Any], ctx: ProbeContext) -> ProbeResult:
        """The same files as git objects of `rev` (listed with ls-tree, read with cat-file): the
        baseline lock file of an upgrade, compared with the working tree's."""
        from policyrun.probes.python.source import open_tree

        want = normalize(params["package"])
        globs = params.get("files", DEFAULT_FILES)
        pins: list[Pin | Unreadable] = []
        with open_tree(params.get("root", "."), params["rev"], ctx) as tree:
            files = [rel for rel in tree.paths if any(glob_match(rel, g) for g in globs)]
            for rel in files:
                reader = _reader(PurePosixPath(rel).name, frozenset(files))
                if reader is None:
                    raise ProbeError("params.invalid", f"{rel}: not a pyproject.toml, setup.py, requirements "
                                                       "(*.txt, *.in) or lock file; narrow the files globs")
                # The tree's own read() caps Python sources at 1 MiB; a lock file gets the 16 MiB every
                # document probe allows, refused from its size in the listing before it is read.
                size = tree.sizes.get(rel, 0)
                if size is None:  # absent from a partial clone's object store: never fetched
                    from policyrun.probes._kit.gitobjects import object_missing

                    assert tree.repo is not None and tree.rev_sha is not None
                    raise object_missing(tree.repo, tree.prefix + rel, params["rev"], tree.rev_sha, tree.blobs[rel])
                if size > DOCUMENT_BYTES:
                    raise ProbeError("file.too_large", f"{rel} at {params['rev']} is {size} bytes, over the "
                                                       f"{DOCUMENT_BYTES}-byte limit for files policyrun parses")
                assert tree.reader is not None  # a revision is read through git cat-file
                data = tree.reader.read(tree.blobs[rel])
                if data is None:
                    raise ProbeError("file.unreadable", f"{rel} at {params['rev']} cannot be read")
                try:
                    pins.extend(reader(data.decode("utf-8"), rel, want))
                except UnicodeDecodeError as exc:
                    raise ProbeError("file.unreadable", f"{rel} at {params['rev']}: {exc}") from None
            value = _value(params["package"], pins, files)
            assert tree.repo is not None and tree.rev_sha is not None  # a revision is read from a repository
            return ProbeResult(value=value, commands=tree.repo.commands, repo_path=str(tree.repo.root),
                               repo_head=tree.repo.head(),
                               sources=[f"{tree.root / s['file']}@{tree.rev_sha}" for s in value["sources"]])


def _value(package: str, pins: list[Pin | Unreadable], files: list[str]) -> dict[str, Any]:
    sources = [p.as_value() for p in pins if isinstance(p, Pin)]
    return {"package": package, "sources": sources, "files": files,
            "distinct": sorted({s["version"] for s in sources if s["version"]}),
            "pinned": sorted({s["exact"] for s in sources if s["exact"]}),
            "locked": sorted({s["version"] for s in sources if s["kind"] == "lock"}),
            "unreadable": [p.as_value() for p in pins if isinstance(p, Unreadable)]}


def glob_match(rel: str, pattern: str) -> bool:
    """Whether a `/`-separated relative path matches a pathlib glob (`*` within one segment, `**`
    any number of segments), as `root.glob(pattern)` would have found it in a working tree."""
    def match(parts: list[str], pats: list[str]) -> bool:
        if not pats:
            return not parts
        if pats[0] == "**":
            return any(match(parts[i:], pats[1:]) for i in range(len(parts) + 1))
        return bool(parts) and fnmatch.fnmatchcase(parts[0], pats[0]) and match(parts[1:], pats[1:])

    return match(rel.split("/"), [p for p in pattern.split("/") if p not in ("", ".")])


def _jsonable(value: Any) -> Any:
    if isinstance(value, (tuple, list)):
        return [_jsonable(v) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted(_jsonable(v) for v in value)
    if isinstance(value, dict) and all(isinstance(k, str) for k in value):
        return {k: _jsonable(v) for k, v in value.items()}
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    raise TypeError(type(value).__name__)


class ConstantProbe:
    kind = "pins.constant"
    summary = "A module-level constant (e.g. TARGET_VLLM_VERSION) read from Python source with ast, never imported."
    params_schema: Mapping[str, Any] = {
        "type": "object",
        "properties": {
            "file": {"type": "string", "minLength": 1, "description": "Python source file."},
            "name": {"type": "string", "pattern": r"^[A-Za-z_][A-Za-z0-9_]*$", "description": "Constant name."},
            "rev": rev_param("Read the file as it is at this revision (git objects). Default: the working tree."),
        },
        "required": ["file", "name"],
        "additionalProperties": False,
    }
    fact_schema: Mapping[str, Any] = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "value": {"description": "The literal (tuples become lists)."},
                       "line": {"type": "integer"}, "file": {"type": "string"}},
    }

    def side_effects(self, params: Mapping[str, Any]) -> frozenset[str]:
        return frozenset()

    def run(self, params: Mapping[str, Any], ctx: ProbeContext) -> ProbeResult:
        path, name = ctx.resolve(params["file"]), params["name"]
        rev = params.get("rev")
        at = None
        if rev is not None:
            from policyrun.probes._kit.revfiles import read_file_at

            at = read_file_at(params["file"], rev, ctx, limit=DOCUMENT_BYTES, param="file")
        try:
            source = (at.data if at else read_file(path, str(path), param="file")).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ProbeError("file.unreadable", f"{path}: {exc}") from None
        try:
            tree = ast.parse(source, filename=str(path))
        except SyntaxError as exc:
            raise ProbeError("file.parse_error", f"{path}:{exc.lineno}:{exc.offset}: {exc.msg}") from None
        node = _last_assignment(tree, name)
        if node is None:
            raise ProbeError("pins.not_found", f"{path} has no module-level assignment to {name}")
        try:
            value = _jsonable(ast.literal_eval(node))
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            raise ProbeError("pins.not_literal", f"{name} at {path}:{node.lineno} is computed, not a literal; "
                                                 "policyrun reads source and never runs it") from None
        if at is not None:
            return ProbeResult(value={"name": name, "value": value, "line": node.lineno, "file": str(path)},
                               sources=[f"{at.source}:{node.lineno}"], commands=at.repo.commands,
                               repo_path=str(at.repo.root), repo_head=at.repo.head())
        return ProbeResult(value={"name": name, "value": value, "line": node.lineno, "file": str(path)},
                           sources=[f"{path}:{node.lineno}"])


def _last_assignment(tree: ast.Module, name: str) -> ast.expr | None:
    """The value of the last top-level `NAME = ...` (what an import would leave)."""
    found: ast.expr | None = None
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in stmt.targets):
            found = stmt.value
        elif (isinstance(stmt, ast.AnnAssign) and stmt.value is not None and isinstance(stmt.target, ast.Name)
              and stmt.target.id == name):
            found = stmt.value
    return found


PROBES: list[Any] = [PackagePinsProbe(), ConstantProbe()]
