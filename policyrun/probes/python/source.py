"""Python sources for the `python.*` probes: which files, read from a working tree or from a
revision's git objects, parsed with located syntax errors, and named as modules.

A revision is read without checking anything out: one `git ls-tree -r -z` lists it and one
long-lived `git cat-file --batch` process serves every blob asked for, however many files a
probe ends up reading (resolution reads upstream files on demand, so a one-shot batch would
need one git call per round of re-exports).
"""

from __future__ import annotations

import ast
import hashlib
import os
import shlex
import stat
import subprocess
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from collections import OrderedDict
from typing import IO, Any, TypeVar

from policyrun.probes.base import ProbeContext, ProbeError
from policyrun.probes._kit.bounded import kill_group
from policyrun.probes._kit.gitclient import GitRepo, git_executable, open_root, resolve_commits
from policyrun.probes._kit.gitenv import READ_ONLY_CONFIG
from policyrun.probes._kit.gitobjects import list_tree, ls_tree_command, object_missing
from policyrun.probes._kit.paths import PathFilter, walk_files

# ast.parse warns about invalid escape sequences (a SyntaxWarning on stderr from 3.12); upstream
# sources have some and they are not our report. catch_warnings swaps process-wide state, so
# concurrent probes take turns.
_WARNINGS_LOCK = threading.Lock()
_REGULAR_BLOB = {"100644", "100755"}  # symlinks (120000) and submodules (160000) are not sources
# Parsing costs time and memory in proportion to the source (an AST takes about 25 times its bytes;
# a 6 MB generated module took 28 s through the python.* probes, long enough to time out), so a
# larger file is not parsed. Like a file over search's bound, it is listed in the probe's
# `skipped` ({path, reason: too_large, size}); it is also a parse error for everything that needed
# it, so an import it would have resolved stays unresolved (fail closed). vLLM's largest module is
# 350 KB: 1 MiB leaves room for upstream growth and bounds one file's parse to about a second.
MAX_SOURCE_BYTES = 1024 * 1024


@dataclass(frozen=True)
class ParseError:
    file: str
    line: int
    column: int | None
    message: str
    size: int | None = None  # set when the file was not parsed because it is over MAX_SOURCE_BYTES

    def as_fact(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "column": self.column, "message": self.message}

    def skipped(self) -> dict[str, Any] | None:
        """The `skipped` entry of a file not parsed for its size (search's shape), else None."""
        return None if self.size is None else {"path": self.file, "reason": "too_large", "size": self.size}


def too_large(rel: str, size: int) -> ParseError:
    return ParseError(rel, 1, None, f"not parsed: {size} bytes, larger than the {MAX_SOURCE_BYTES} bytes policyrun "
                                    "parses in one Python file", size)


def skipped_facts(errors: Iterable[ParseError], **extra: Any) -> list[dict[str, Any]]:
    """The `skipped` list of a probe: its files not parsed for their size, each with `extra`."""
    return [{**entry, **extra} for e in errors if (entry := e.skipped()) is not None]


# Parsed modules and what probes compute from them, by (what, content hash, path), shared by every
# probe of a collection: the inventory, identity and impact probes read the same plugin files (at
# HEAD and in the working tree, which are usually identical), and parsing and walking the trees
# is most of their cost. Consumers never modify what they get.
# Each kind of entry is bounded by the source bytes behind it, least recently used out first.
# Syntax trees (kind "ast") take about 25 times their source in memory, so only the most recently
# used AST_MEMO_BYTES of source keep theirs: the probes keep summaries (resolve.ModuleInfo) and
# ask again for a tree when they need its nodes. Keeping every tree of the real afd-plugin
# planning audit (5.5 MB of source, 188 files) held 133 MB of trees to the end of the run.
_MEMO: dict[str, OrderedDict[tuple[str, str], tuple[Any, int]]] = {}
_MEMO_LOCK = threading.Lock()
_MEMO_MAX_BYTES = 32 * 1024 * 1024
AST_MEMO_BYTES = 1024 * 1024
_memo_bytes: dict[str, int] = {}
_COMPUTING: dict[tuple[str, str, str], threading.Event] = {}
T = TypeVar("T")


def memo_bound(what: str) -> int:
    return AST_MEMO_BYTES if what == "ast" else _MEMO_MAX_BYTES


def memo(what: str, data: bytes, rel: str, compute: Callable[[], T], *, digest: str | None = None) -> T:
    """compute(), remembered for this file content at this path (LRU, shared across probes).

    Probes run at the same time ask for the same files (the constants probes at HEAD and in the
    working tree start together): one computes, the others wait for its result instead of doing
    the same work beside it under the one interpreter lock."""
    key = (digest or content_digest(data), rel)
    with _MEMO_LOCK:
        table = _MEMO.setdefault(what, OrderedDict())
        if key in table:
            table.move_to_end(key)
            hit: T = table[key][0]
            return hit
        running = _COMPUTING.get((what, *key))
        if running is None:
            _COMPUTING[(what, *key)] = threading.Event()
    if running is not None:
        running.wait()
        with _MEMO_LOCK:
            if key in table:
                done: T = table[key][0]
                return done
        return compute()  # the other computation failed (or was evicted already): do it here
    try:
        result = compute()
        with _MEMO_LOCK:
            table[key] = (result, len(data))
            _memo_bytes[what] = _memo_bytes.get(what, 0) + len(data)
            while _memo_bytes[what] > memo_bound(what) and len(table) > 1:
                _memo_bytes[what] -= table.popitem(last=False)[1][1]
    finally:
        with _MEMO_LOCK:
            _COMPUTING.pop((what, *key)).set()
    return result


def content_digest(data: bytes) -> str:
    """What the memo knows a file's content by (a caller asking often may keep it: `digest=`)."""
    return hashlib.sha1(data).hexdigest()


def parse_source(data: bytes, rel: str, *, remember: bool = True, digest: str | None = None) -> ast.Module | ParseError:
    """The module's AST, or where and why it does not parse (encoding cookies and BOMs honoured).
    Results are cached by content, so the same file parsed by several probes is parsed once
    (`remember=False`: by a caller that parses each file once and keeps no tree, like the parse
    helper). Every parse of a probe goes through here, so this is where the size bound holds."""
    if len(data) > MAX_SOURCE_BYTES:
        return too_large(rel, len(data))
    return memo("ast", data, rel, lambda: _parse(data, rel), digest=digest) if remember else _parse(data, rel)


def _parse(data: bytes, rel: str) -> ast.Module | ParseError:
    if b"\0" in data:
        return ParseError(rel, data[:data.index(b"\0")].count(b"\n") + 1, None,
                          "source contains a NUL byte (not Python text)")
    try:
        with _WARNINGS_LOCK, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ast.parse(data, filename=rel)
    except SyntaxError as exc:  # IndentationError and TabError included
        return ParseError(rel, exc.lineno or 1, exc.offset, exc.msg)
    except (ValueError, RecursionError, MemoryError) as exc:
        return ParseError(rel, 1, None, f"cannot parse: {type(exc).__name__}: {exc}")


def unparse(node: ast.AST) -> str:
    """ast.unparse, which recurses: an expression nested deeper than the interpreter's stack allows
    (legal for the parser) becomes a marker instead of a crash."""
    try:
        return ast.unparse(node)
    except RecursionError:
        return "<expression too deeply nested to print>"


def source_text(data: bytes) -> str:
    """Decoded text for source segments and quoted lines (ast offsets index this text's lines)."""
    return data.decode("utf-8", "replace").removeprefix("\ufeff")


class BlobReader:
    """One `git cat-file --batch` process, asked for one object at a time.

    Requests go one by one (write a name, read its answer) so the pipes never fill both ways;
    a timer kills the process at the probe's deadline, which ends any read with EOF.
    """

    def __init__(self, repo: GitRepo) -> None:
        self.repo = repo
        self.proc: subprocess.Popen[bytes] | None = None
        self.timer: threading.Timer | None = None
        self.shown = ""

    def note(self) -> None:
        """Name the command in the probe's provenance, once: a blob whose summary another probe (or
        an earlier collection in this process) already made is still content read from git, and
        provenance must not depend on which probe happened to read it first."""
        if not self.shown:
            self.shown = f"git -C {self.repo.root} cat-file --batch"
            self.repo.commands.append(self.shown)

    def _start(self) -> subprocess.Popen[bytes]:
        self.note()
        remaining = self.repo.deadline - time.monotonic()
        if remaining <= 0:
            raise self.repo.timeout(self.shown)
        try:
            # Its own process group, so the deadline kills whatever git started with it too.
            proc = subprocess.Popen([git_executable(), *READ_ONLY_CONFIG, "cat-file", "--batch"],
                                    cwd=self.repo.root, env=self.repo.env, stdin=subprocess.PIPE,
                                    stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, start_new_session=True)
        except OSError as exc:
            raise ProbeError("git.not_installed", f"cannot run git: {exc.strerror}; install git or put it on PATH",
                             commands=self.repo.commands) from None
        self.timer = threading.Timer(remaining, kill_group, args=(proc.pid,))
        self.timer.daemon = True
        self.timer.start()
        self.proc = proc
        return proc

    def read(self, name: str) -> bytes | None:
        """The blob's bytes, or None when git has no such object."""
        proc = self.proc or self._start()
        stdin, stdout = _pipes(proc)
        try:
            stdin.write(name.encode("utf-8", "surrogateescape") + b"\n")
            stdin.flush()
            header = stdout.readline()
        except (BrokenPipeError, ValueError):
            header = b""
        if not header:
            raise self._died()
        parts = header.split()
        if parts[-1] == b"missing" or len(parts) != 3:
            return None
        size = int(parts[2])
        data = stdout.read(size + 1)  # the object and its trailing LF
        if len(data) != size + 1:
            raise self._died()
        return data[:size] if parts[1] == b"blob" else None

    def _died(self) -> ProbeError:
        if time.monotonic() >= self.repo.deadline:
            return self.repo.timeout(self.shown)
        return ProbeError("git.failed", f"`{self.shown}` stopped answering; run it by hand to see why",
                          commands=self.repo.commands)

    def close(self) -> None:
        if self.timer:
            self.timer.cancel()
        if self.proc:
            if self.proc.stdin:
                try:
                    self.proc.stdin.close()
                except OSError:
                    pass
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                kill_group(self.proc.pid)
                self.proc.wait()
            if self.proc.stdout:
                self.proc.stdout.close()
            self.proc = None


def _pipes(proc: subprocess.Popen[bytes]) -> tuple[IO[bytes], IO[bytes]]:
    assert proc.stdin is not None and proc.stdout is not None  # both were opened as PIPE
    return proc.stdin, proc.stdout


@dataclass
class SourceTree:
    """Every file under `root`, as of `rev` (git objects) or as of now (the working tree).

    `paths` are relative to `root`, sorted. Inside a repository only tracked files count (as
    `git ls-files` lists them); outside one every file under root does (`.git` skipped).
    """

    root: Path
    rev: str | None
    rev_sha: str | None
    repo: GitRepo | None
    paths: list[str]
    blobs: dict[str, str] = field(default_factory=dict)  # path -> blob sha, for a revision
    sizes: dict[str, int | None] = field(default_factory=dict)  # path -> bytes (None: absent), for a revision
    reader: BlobReader | None = None
    deadline: float = 0.0
    timeout_s: float = 0.0
    listing: tuple[str, str, str] | None = None  # (repository, commit, prefix) of a revision's listing
    prefix: str = ""  # the root's path in the repository, `/`-terminated (for messages)

    def key(self, rel: str) -> str:
        """What identifies the content: the blob sha at a revision (shared by unchanged files)."""
        return f"blob:{self.blobs[rel]}" if self.rev_sha else f"file:{self.root / rel}"

    def read(self, rel: str) -> bytes | int | None:
        """The file's bytes; its size when over MAX_SOURCE_BYTES; None when it cannot be read."""
        if time.monotonic() > self.deadline:
            raise ProbeError("probe.timeout", f"reading Python sources under {self.root} took longer than the "
                                              f"probe's {self.timeout_s:g}s; raise the probe's timeout_s")
        if self.rev_sha:
            assert self.reader is not None and self.repo is not None
            size = self.sizes.get(rel, 0)
            if size is not None and size > MAX_SOURCE_BYTES:
                return size
            # An absent blob is never asked for (in a partial clone git would try to fetch it), and
            # a file the probe needs is never taken for one that is not there.
            data = None if size is None else self.reader.read(self.blobs[rel])
            if data is None:
                raise object_missing(self.repo, self.prefix + rel, self.rev, self.rev_sha, self.blobs[rel])
            return data
        return read_regular(self.root / rel)

    def load(self, rel: str) -> tuple[bytes, ast.Module | ParseError] | None:
        """(bytes, AST or why not) of a file; None when it vanished or is not a regular file."""
        data = self.read(rel)
        if data is None:
            return None
        if isinstance(data, int):
            return b"", too_large(rel, data)
        return data, parse_source(data, rel)

    def select(self, keep: PathFilter) -> list[str]:
        return keep.select(self.paths)

    def where(self) -> str:
        return f"{self.root} at {self.rev}" if self.rev else str(self.root)

    def __enter__(self) -> SourceTree:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self.reader:
            self.reader.close()


def open_tree(root_param: str, rev: str | None, ctx: ProbeContext, *, what: str = "root") -> SourceTree:
    """The tree at `root_param` (a directory), at `rev` when given. `what` names the parameter in errors."""
    root, repo = open_root(root_param, rev, ctx, what=what)
    deadline = time.monotonic() + ctx.timeout_s
    if repo is None:
        paths = [rel for rel, _ in walk_files(root, PathFilter([], []))]
        return SourceTree(root, None, None, None, paths, deadline=deadline, timeout_s=ctx.timeout_s)
    if rev is None:
        out = repo.run(["ls-files", "-z", "--cached"], cwd=root).stdout
        paths = sorted(set(p for p in out.decode("utf-8", "surrogateescape").split("\0") if p))
        return SourceTree(root, None, None, repo, paths, deadline=deadline, timeout_s=ctx.timeout_s)
    (sha,) = resolve_commits(repo, [rev])
    prefix = "" if root == repo.root else root.relative_to(repo.root).as_posix() + "/"
    key = (str(repo.common_dir), sha, prefix)
    shown = len(repo.commands)
    paths, blobs, sizes = _remember(_LISTINGS, key, lambda: _list_revision(repo, sha, prefix))
    if len(repo.commands) == shown:  # listed by another probe: provenance still names the command
        repo.commands.append(shlex.join(["git", "-C", str(repo.root), *ls_tree_command(repo, sha)]))
    return SourceTree(root, rev, sha, repo, paths, blobs, sizes, BlobReader(repo), deadline=deadline,
                      timeout_s=ctx.timeout_s, listing=key, prefix=prefix)


# A commit's file list never changes: the probes reading one revision (imports, symbols, at two
# revisions each) list it, and name its modules, once. Values are shared and never modified.
_Listing = tuple[list[str], dict[str, str], dict[str, int | None]]
_LISTINGS: OrderedDict[tuple[str, ...], _Listing] = OrderedDict()
_NAMERS: OrderedDict[tuple[str, ...], ModuleNamer] = OrderedDict()
_REMEMBER_LOCK = threading.Lock()
_REMEMBER_MAX = 64  # revisions (or revision and source roots) per table


def _remember(table: OrderedDict[tuple[str, ...], T], key: tuple[str, ...], compute: Callable[[], T]) -> T:
    with _REMEMBER_LOCK:
        if key in table:
            return table[key]
    value = compute()
    with _REMEMBER_LOCK:
        table[key] = value
        while len(table) > _REMEMBER_MAX:
            table.popitem(last=False)
    return value


def _list_revision(repo: GitRepo, sha: str, prefix: str) -> _Listing:
    blobs: dict[str, str] = {}
    sizes: dict[str, int | None] = {}
    for entry in list_tree(repo, sha):
        if entry.mode in _REGULAR_BLOB and entry.path.startswith(prefix):
            rel = entry.path[len(prefix):]
            blobs[rel] = entry.oid
            sizes[rel] = entry.size
    return sorted(blobs), blobs, sizes


def namer_for(tree: SourceTree, source_roots: Iterable[str]) -> ModuleNamer:
    """The ModuleNamer of a tree; shared by the probes reading the same revision."""
    roots = tuple(source_roots)
    if tree.listing is None:
        return ModuleNamer(roots, tree.paths)
    return _remember(_NAMERS, (*tree.listing, *roots), lambda: ModuleNamer(roots, tree.paths))


def read_regular(path: Path) -> bytes | int | None:
    """A regular file's bytes (its size when over MAX_SOURCE_BYTES); None for anything else.

    Symlinks are not followed (a tracked link to /dev/zero must not be read) and a FIFO is not
    waited on: the file is opened with O_NOFOLLOW | O_NONBLOCK and checked with fstat.
    """
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except OSError:  # vanished, a symlink, unreadable
        return None
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            return None
        if st.st_size > MAX_SOURCE_BYTES:
            return st.st_size
        data = f.read(MAX_SOURCE_BYTES + 1)
    return len(data) if len(data) > MAX_SOURCE_BYTES else data


def as_list(value: Any) -> list[str]:
    return [value] if isinstance(value, str) else list(value or [])


# --- module names -------------------------------------------------------------------------------

class ModuleNamer:
    """Maps files to dotted module names and back, given the source roots (`.`, `src`, ...)."""

    def __init__(self, source_roots: Iterable[str], paths: Iterable[str]) -> None:
        roots = []
        for r in source_roots:
            norm = r.strip().strip("/")
            roots.append("" if norm in ("", ".") else norm.removeprefix("./") + "/")
        self.roots = sorted(set(roots), key=len, reverse=True)  # the deepest root claims a file
        self.files = {p for p in paths if p.endswith(".py")}
        self.dirs: set[str] = set()
        for p in self.files:  # every ancestor directory; a known one's ancestors are known too
            cut = p.rfind("/")
            while cut > 0 and (d := p[:cut]) not in self.dirs:
                self.dirs.add(d)
                cut = p.rfind("/", 0, cut)

    def module_of(self, rel: str) -> tuple[str, bool]:
        """(module name, is a package) of a .py file; a file outside every root is named from `.`."""
        root = next((r for r in self.roots if rel.startswith(r)), "")
        parts = rel[len(root):].removesuffix(".py").split("/")
        if parts[-1] == "__init__":
            return ".".join(parts[:-1]), True
        return ".".join(parts), False

    def package_of(self, rel: str) -> str:
        module, is_package = self.module_of(rel)
        return module if is_package else module.rpartition(".")[0]

    def file_of(self, module: str) -> tuple[bool, str | None]:
        """(exists, file): a package's `__init__.py`, else `module.py`, else a namespace package
        (a directory of sources without `__init__.py`: exists, no file) — the import system's order."""
        if not module or not all(part.isidentifier() for part in module.split(".")):
            return False, None
        rel = module.replace(".", "/")
        for root in self.roots:
            for candidate in (f"{root}{rel}/__init__.py", f"{root}{rel}.py"):
                if candidate in self.files:
                    return True, candidate
        return any(f"{root}{rel}" in self.dirs for root in self.roots), None


def absolute_module(module: str | None, level: int, package: str) -> str | None:
    """`from ..a import b` in package `p.q.r` → `p.q.a`; None when it climbs above the top."""
    if level == 0:
        return module
    parts = package.split(".") if package else []
    if level > len(parts):
        return None
    base = parts[:len(parts) - level + 1]
    return ".".join(base + ([module] if module else []))


def import_binds(alias: ast.alias) -> tuple[str, str]:
    """(name, module) an `import` binds: `import a.b as c` binds c to a.b, `import a.b` binds a to a."""
    if alias.asname:
        return alias.asname, alias.name
    top = alias.name.split(".")[0]
    return top, top


def relative_text(module: str | None, level: int) -> str:
    return "." * level + (module or "")


def schema_list(description: str, **extra: Any) -> dict[str, Any]:
    return {"type": ["string", "array"], "items": {"type": "string"}, "description": description, **extra}


def object_schema(description: str, props: Mapping[str, Any], *, nullable: bool = False) -> dict[str, Any]:
    return {"type": ["object", "null"] if nullable else "object", "description": description,
            "properties": dict(props)}


SKIPPED_SCHEMA: dict[str, Any] = {
    "type": "array", "description": f"Python files not parsed because they are larger than {MAX_SOURCE_BYTES} "
                                    "bytes (also in the parse errors: what needed them is unknown).",
    "items": object_schema("A file not parsed.", {
        "path": {"type": "string", "description": "Path relative to the tree's root."},
        "reason": {"type": "string", "description": "`too_large`."},
        "size": {"type": "integer", "description": "Bytes."}})}

PARSE_ERROR_SCHEMA = object_schema("A file that is not valid Python.", {
    "file": {"type": "string", "description": "Path relative to the scanned root."},
    "line": {"type": "integer", "description": "1-based line of the error."},
    "column": {"type": ["integer", "null"], "description": "1-based column, when Python gives one."},
    "message": {"type": "string", "description": "Python's message (e.g. `invalid syntax`)."},
})
