"""A revision's tree and blobs, read when the object store may lack some of them.

A partial clone (`--filter=blob:none`, `blob:limit=...`, a sparse checkout of one) or a damaged
store holds trees whose entries name blobs it does not have. Asked for such a blob, git fetches
it from the promisor remote; policyrun allows no transport, so the fetch fails and git before
2.44 (no `GIT_NO_LAZY_FETCH`) then *dies*, whatever it was doing: `git ls-tree -l` wanting one
size, `git cat-file --batch` in the middle of a stream. So every probe reading a revision goes
through here:

- `list_tree` lists a revision without reading a blob. In a partial clone it first learns which
  objects the revision lacks (`git rev-list --objects --no-walk --missing=print`, which never
  fetches) and asks sizes only of the others; in any other repository one `ls-tree -l` does,
  and a damaged store's absent blob shows there as size `BAD`. An absent blob is an entry with
  `size` None.
- `read_blobs` reads only present blobs (one `git cat-file --batch`).
- `object_missing` is the error for a file a probe needs whose blob is absent: the path, the
  revision, the blob, and what to do (policyrun never fetches).

A blob no probe reads (a binary outside every include, a file of another revision) costs
nothing, so a partial clone audits exactly as a full one wherever the blobs read are present.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from policyrun.probes.base import ProbeError

if TYPE_CHECKING:  # gitclient.py uses this module: the repository type is only named here
    from policyrun.probes._kit.gitclient import GitRepo

_LS_TREE = ("ls-tree", "-r", "-z")


@dataclass(frozen=True)
class TreeEntry:
    path: str  # as git lists it (relative to the directory listed), decoded with surrogateescape
    mode: str
    kind: str  # blob, commit (a submodule), tree
    oid: str
    size: int | None  # bytes of a blob; None for a blob the store lacks, and for a submodule

    @property
    def regular(self) -> bool:
        """A file's content (not a symbolic link, not a submodule)."""
        return self.kind == "blob" and self.mode != "120000"


def ls_tree_command(repo: GitRepo, commit: str, cwd: Path | None = None, path_filter: str | None = None) -> list[str]:
    """The listing command as run (for provenance of a listing another probe made)."""
    return [*_LS_TREE, *([] if repo.partial_clone else ["-l"]), *(["--full-tree"] if cwd is None else []), commit,
            *(["--", path_filter] if path_filter else [])]


def list_tree(repo: GitRepo, commit: str, cwd: Path | None = None, *,
              path_filter: str | None = None) -> list[TreeEntry]:
    """Every entry of `commit`'s tree (only `path_filter` and what is below it, when given): the
    subtree of `cwd`, paths relative to it, or the whole tree when `cwd` is None. Never reads a
    blob, so never fetches and never dies on an absent one."""
    args = ls_tree_command(repo, commit, cwd, path_filter)
    listing = repo.run(args, cwd=cwd).stdout.decode("utf-8", "surrogateescape")
    entries = []
    for record in listing.split("\0"):
        meta, _, path = record.partition("\t")
        fields = meta.split()  # mode, type, object[, size]
        if len(fields) < 3:
            continue
        size = int(fields[3]) if len(fields) == 4 and fields[3].isdigit() else None  # `BAD`: absent; `-`: no blob
        entries.append(TreeEntry(path, fields[0], fields[1], fields[2], size))
    if not repo.partial_clone:
        return entries
    absent = absent_objects(repo, commit)
    sizes = _sizes(repo, {e.oid for e in entries if e.kind == "blob" and e.oid not in absent})
    return [TreeEntry(e.path, e.mode, e.kind, e.oid, sizes.get(e.oid)) for e in entries]


def absent_objects(repo: GitRepo, commit: str) -> frozenset[str]:
    """Objects reachable from `commit`'s tree that this partial clone lacks (nothing is fetched)."""
    out = repo.run(["rev-list", "--objects", "--no-walk", "--missing=print", commit, "--"]).stdout
    return frozenset(line[1:] for line in out.decode("ascii", "replace").split("\n") if line.startswith("?"))


def _sizes(repo: GitRepo, oids: Iterable[str]) -> dict[str, int]:
    wanted = sorted(oids)
    if not wanted:
        return {}
    out = repo.run(["cat-file", "--batch-check"], stdin="".join(f"{oid}\n" for oid in wanted).encode()).stdout
    sizes = {}
    for line in out.decode("ascii", "replace").splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] == "blob" and parts[2].isdigit():
            sizes[parts[0]] = int(parts[2])
    return sizes


def read_blobs(repo: GitRepo, entries: Iterable[TreeEntry]) -> dict[str, bytes]:
    """oid → bytes of the present blobs among `entries` (one `git cat-file --batch`). A blob
    absent from the store is left out, never asked for: in a partial clone asking would fetch."""
    wanted = sorted({e.oid for e in entries if e.size is not None})
    if not wanted:
        return {}
    out = repo.run(["cat-file", "--batch"], stdin="".join(f"{oid}\n" for oid in wanted).encode()).stdout
    blobs: dict[str, bytes] = {}
    pos = 0
    for oid in wanted:
        header_end = out.index(b"\n", pos)
        parts = out[pos:header_end].split()
        pos = header_end + 1
        if len(parts) != 3:  # `<oid> missing`: gone since the listing (a damaged store)
            continue
        size = int(parts[2])
        blobs[oid] = out[pos:pos + size]
        pos += size + 1  # the object and its trailing LF
    return blobs


def object_missing(repo: GitRepo, path: str, rev: str | None, commit: str, oid: str) -> ProbeError:
    """A file the probe needs whose blob this repository's object store lacks."""
    at = f"{rev} ({commit[:12]})" if rev and rev != commit else commit[:12]
    if repo.partial_clone:
        why = (f"{repo.root} is a partial clone that does not have it, and policyrun never fetches; fetch it "
               f"there (`git -C {repo.root} cat-file -e {oid}` fetches that blob) or audit a full clone")
    else:
        why = (f"the object store of {repo.root} lacks it (damaged, or objects were removed: `git fsck` "
               "lists what is lost); audit a complete clone")
    return ObjectMissing(oid, f"{path} at {at} (blob {oid[:12]}) cannot be read: {why}", repo.commands)


class ObjectMissing(ProbeError):
    """`git.object_missing`: an object the store lacks; `oid` names it so a caller can say which file it is."""

    def __init__(self, oid: str, message: str, commands: list[str]) -> None:
        super().__init__("git.object_missing", message, commands=commands)
        self.oid = oid


def locate_missing(repo: GitRepo, exc: ObjectMissing, revs: dict[str, str]) -> ProbeError:
    """`exc` (from a git command that died on an absent object) naming the file: the first of
    `revs` (commit → revision as given) whose tree holds the object. Run only on that failure."""
    for commit, rev in revs.items():
        for entry in list_tree(repo, commit):
            if entry.oid == exc.oid:
                return object_missing(repo, entry.path, rev, commit, exc.oid)
    return exc
