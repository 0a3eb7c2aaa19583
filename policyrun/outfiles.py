"""Write output files so that no reader sees a half-written file or a mix of two runs.

Each file is written to a temporary file in the same folder and renamed over the target
(`os.replace`, atomic on POSIX): a reader sees the old file or the new one, never a torn one, and
a symlink at the target is replaced rather than written through. A set of files (trace.json and
its reports) is written under an exclusive lock on the folder (`flock` on the directory itself),
so two evaluations into one `--out` serialize: the folder ends up with one run's complete set.
`manifest.json`, written last, lists that set with sha256 digests; a file in the folder that it
does not list is left from an earlier run (policyrun never deletes files).

Text is encoded as UTF-8; a character UTF-8 cannot carry (a lone surrogate from a file name that
is not UTF-8) is written as a backslash escape, which inside a JSON string reads back as the same
character.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from policyrun.errors import Location, UsageError

MANIFEST = "manifest.json"
LOCK_WAIT_S = 120.0


def encode(text: str) -> bytes:
    return text.encode("utf-8", "backslashreplace")


def _fail(what: str, path: Path, exc: OSError, code: str, fix: str) -> UsageError:
    return UsageError(f"cannot write {what}: {exc.strerror or exc}; {fix}", code=code, location=Location(str(path)))


@contextmanager
def locked_folder(folder: Path, *, code: str, fix: str) -> Iterator[None]:
    """Create `folder` if needed and hold an exclusive lock on it (released on exit)."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except (FileExistsError, NotADirectoryError):
        raise UsageError(f"cannot write here: this path (or one above it) is a file, not a folder; {fix}",
                         code=code, location=Location(str(folder))) from None
    except OSError as exc:
        raise _fail("to this folder", folder, exc, code, fix) from None
    try:
        _lock(fd, folder, code)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def _lock(fd: int, folder: Path, code: str) -> None:
    try:
        import fcntl
    except ImportError:  # no flock (Windows): files are still replaced atomically, one by one
        return
    waited = 0.0
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if waited >= LOCK_WAIT_S:
                raise UsageError(f"another policyrun has been writing to this folder for {LOCK_WAIT_S:g} s; "
                                 "wait for it or choose another output folder", code=code,
                                 location=Location(str(folder))) from None
            time.sleep(0.05)
            waited += 0.05
        except OSError:  # a filesystem without flock: fall back to atomic replacement only
            return


def replace_file(path: Path, data: bytes) -> None:
    """Write `data` to `path` atomically (temporary file in the same folder, then rename)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_files(folder: Path, files: Mapping[str, str], *, code: str, fix: str,
                manifest: bool = False) -> list[Path]:
    """Write `{name: text}` into `folder` under its lock; with `manifest`, then `manifest.json`."""
    written: list[Path] = []
    digests: dict[str, str] = {}
    with locked_folder(folder, code=code, fix=fix):
        for name, text in files.items():
            data = encode(text)
            path = folder / name
            try:
                replace_file(path, data)
            except OSError as exc:
                raise _fail(name, path, exc, code, fix) from None
            written.append(path)
            digests[name] = hashlib.sha256(data).hexdigest()
        if manifest:
            doc = {"policyrun_manifest": 1, "files": dict(sorted(digests.items()))}
            try:
                replace_file(folder / MANIFEST, encode(json.dumps(doc, indent=2) + "\n"))
            except OSError as exc:
                raise _fail(MANIFEST, folder / MANIFEST, exc, code, fix) from None
    return written


def write_file(path: Path, text: str, *, code: str, fix: str) -> Path:
    """One file, atomically, under its folder's lock (so it never interleaves with a `--out` run)."""
    return write_files(path.parent, {path.name: text}, code=code, fix=fix)[0]
