"""Version pins: where a package's version is constrained, and module-level constants.

`pins.package` reads pyproject.toml (PEP 621, PEP 735 dependency groups, build-system, uv and
Poetry tables), setup.py's literal `install_requires`/`extras_require` (with `ast`, never run),
requirements/constraints files and uv/poetry/pdm lock files. Each constraint is also read as a
PEP 440 specifier set with `packaging` and given a kind (`exact`, `range`, `lock`, `unpinned`,
`other`), so a rulebook can tell a pin from a range from a lock's resolution without parsing text.
`pins.constant` reads a constant from Python source with `ast`; the module is never imported, so
nothing runs.

The files' formats are read by repo/pinfiles.py; this module holds the two kinds: which files
(in the working tree or at a revision), and the fact they give.
"""

from __future__ import annotations

import ast
import fnmatch
from collections.abc import Mapping
from pathlib import PurePosixPath
from typing import Any

from policyrun.probes.base import ProbeContext, ProbeError, ProbeResult
from policyrun.probes.repo.files import DOCUMENT_BYTES, read_file
from policyrun.probes.repo.pinfiles import Pin, Unreadable, normalize, reader_for
from policyrun.probes._kit.gitclient import rev_param

DEFAULT_FILES = ("pyproject.toml", "setup.py", "requirements*.txt", "requirements/*.txt", "constraints*.txt",
                 "uv.lock", "poetry.lock", "pdm.lock")


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
            reader = reader_for(path.name, present)
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
                reader = reader_for(PurePosixPath(rel).name, frozenset(files))
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
