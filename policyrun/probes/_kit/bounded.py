"""Bounded access to what probes inspect: files beneath a root, and child processes.

The repositories under audit and the interpreters they run in are not trusted. A file is read
only when it is a regular file reached without following a symbolic link (each path component
is opened with O_NOFOLLOW beneath the root; a device, FIFO or socket is never opened) and only
up to a byte cap. A child process runs in its own process group, with a neutral working
directory and a sanitised environment chosen by its caller; at the deadline, or when its output
passes a cap, the whole group is killed, so grandchildren holding a pipe cannot outlive it.
"""

from __future__ import annotations

import errno
import os
import selectors
import signal
import stat
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

# What a child interpreter or compiler may see of policyrun's environment. PATH, HOME and the
# locale make a program behave as on the command line; LD_LIBRARY_PATH and the CUDA/NVIDIA device
# variables are what CUDA discovery reads (libcuda / libcudart found outside the default linker
# paths, which devices are visible and in which order). Nothing else is passed: no PYTHON* (a
# PYTHONPATH or PYTHONSTARTUP could run code), no LD_PRELOAD, no tokens.
CHILD_ENV_NAMES = frozenset({
    "PATH", "HOME", "LANG", "LANGUAGE", "TZ", "TMPDIR", "USER", "LOGNAME", "LD_LIBRARY_PATH",
    "CUDA_HOME", "CUDA_PATH", "CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER",
    "NVIDIA_VISIBLE_DEVICES", "NVIDIA_DRIVER_CAPABILITIES",
})
CHILD_ENV_PREFIXES = ("LC_",)

MAX_STDOUT = 1 << 30  # a child printing more is killed: nothing policyrun runs needs that much
MAX_STDERR = 1 << 20  # the tail is kept (error messages are at the end)
_CHUNK = 1 << 16


def child_env(env: Mapping[str, str], **extra: str) -> dict[str, str]:
    """`env` reduced to the allow-list, plus `extra`."""
    kept = {k: v for k, v in env.items() if k in CHILD_ENV_NAMES or k.startswith(CHILD_ENV_PREFIXES)}
    kept.update(extra)
    return kept


def display_path(raw: bytes | str) -> str:
    """A file name as JSON-safe text: bytes that are not UTF-8 are written `\\xNN`."""
    if isinstance(raw, str) and raw.isascii():  # nearly every path: already what the decode would give
        return raw
    data = os.fsencode(raw) if isinstance(raw, str) else raw
    return data.decode("utf-8", "backslashreplace")


# --- files --------------------------------------------------------------------------------------

SYMLINK, SPECIAL, DIRECTORY, TOO_LARGE, MISSING = "symlink", "special", "directory", "too_large", "missing"
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


@dataclass(frozen=True)
class Skipped:
    """A path that was not read, and why (`symlink`, `special`, `directory`, `too_large`, `missing`)."""

    reason: str
    size: int | None = None


def _kind(st: os.stat_result) -> str | None:
    if stat.S_ISREG(st.st_mode):
        return None
    if stat.S_ISLNK(st.st_mode):
        return SYMLINK
    return DIRECTORY if stat.S_ISDIR(st.st_mode) else SPECIAL


def _open_dir(name: bytes, dir_fd: int) -> int | Skipped:
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno not in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):
            raise
    try:  # tell a symlinked directory from a component that is missing or a file
        st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return Skipped(MISSING)
    return Skipped(SYMLINK if stat.S_ISLNK(st.st_mode) else MISSING)


def read_beneath(root_fd: int, rel: bytes, max_bytes: int) -> bytes | Skipped:
    """The bytes of `rel` (a `/`-separated path below the directory `root_fd`), or why it was not read.

    Raises OSError when the file exists but cannot be read (permissions, I/O errors).
    """
    parts = rel.split(b"/")
    if any(p in (b"", b".", b"..") for p in parts):
        return Skipped(MISSING)  # git never lists such paths; nothing outside the root is reachable
    opened: list[int] = []
    try:
        dir_fd = root_fd
        for part in parts[:-1]:
            got = _open_dir(part, dir_fd)
            if isinstance(got, Skipped):
                return got
            opened.append(got)
            dir_fd = got
        try:
            st = os.stat(parts[-1], dir_fd=dir_fd, follow_symlinks=False)
        except (FileNotFoundError, NotADirectoryError):
            return Skipped(MISSING)
        kind = _kind(st)
        if kind is not None:  # never opened: opening a device can have effects of its own
            return Skipped(kind)
        if st.st_size > max_bytes:
            return Skipped(TOO_LARGE, st.st_size)
        fd = os.open(parts[-1], _FILE_FLAGS, dir_fd=dir_fd)
        with open(fd, "rb", closefd=True) as f:
            again = os.fstat(f.fileno())
            if (again.st_ino, again.st_dev) != (st.st_ino, st.st_dev) or not stat.S_ISREG(again.st_mode):
                return Skipped(SPECIAL)  # swapped between the two looks
            data = f.read(max_bytes + 1)
        if len(data) > max_bytes:
            return Skipped(TOO_LARGE, max(again.st_size, len(data)))
        return data
    finally:
        for fd in opened:
            os.close(fd)


def read_regular(path: Path, max_bytes: int) -> bytes | Skipped:
    """A named file's bytes (symbolic links followed: the caller named it), never a device or FIFO."""
    try:
        st = path.stat()
    except (FileNotFoundError, NotADirectoryError):
        return Skipped(MISSING)
    kind = _kind(st)
    if kind is not None:
        return Skipped(kind)
    if st.st_size > max_bytes:
        return Skipped(TOO_LARGE, st.st_size)
    fd = os.open(path, _FILE_FLAGS & ~os.O_NOFOLLOW)
    with open(fd, "rb", closefd=True) as f:
        again = os.fstat(f.fileno())
        if not stat.S_ISREG(again.st_mode):
            return Skipped(SPECIAL)
        data = f.read(max_bytes + 1)
    if len(data) > max_bytes:
        return Skipped(TOO_LARGE, len(data))
    return data


# --- child processes ----------------------------------------------------------------------------

class ChildTimeout(Exception):
    """The child (or something it started) was still running at the deadline; the group was killed."""


class ChildOutputTooLarge(Exception):
    """The child printed more than its caller allows; the group was killed."""


@dataclass(frozen=True)
class ChildResult:
    returncode: int
    stdout: bytes
    stderr: bytes


def kill_group(pgid: int) -> None:
    """SIGKILL a process group (a child started with its own session), if anything is left in it."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def exited(proc: subprocess.Popen[bytes]) -> bool:
    """Whether the child has exited; without reaping it where the OS allows (its pid then keeps
    naming the process group until policyrun has killed what is left in it)."""
    waitid = getattr(os, "waitid", None)
    if waitid is None:  # macOS before Python 3.13
        return proc.poll() is not None
    try:
        return waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def run_child(argv: Sequence[str], *, cwd: str | Path, env: Mapping[str, str], timeout_s: float,
              stdin: bytes | None = None, max_stdout: int = MAX_STDOUT,
              max_stderr: int = MAX_STDERR) -> ChildResult:
    """Run `argv` in a new session; raise ChildTimeout / ChildOutputTooLarge (group killed) or OSError."""
    deadline = time.monotonic() + max(timeout_s, 0.0)
    proc = subprocess.Popen(list(argv), cwd=cwd, env=dict(env), start_new_session=True,
                            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        out, err = _pump(proc, stdin, deadline, max_stdout, max_stderr)
        remaining = deadline - time.monotonic()
        try:
            proc.wait(timeout=max(remaining, 0.001))
        except subprocess.TimeoutExpired:
            raise ChildTimeout from None
    finally:
        kill_group(proc.pid)  # whatever the child left running in its group goes too
        proc.wait()
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            if pipe is not None:
                pipe.close()
    return ChildResult(proc.returncode, out, err)


def _pump(proc: subprocess.Popen[bytes], stdin: bytes | None, deadline: float, max_stdout: int,
          max_stderr: int) -> tuple[bytes, bytes]:
    assert proc.stdout is not None and proc.stderr is not None
    out, err = bytearray(), bytearray()
    buffers = {proc.stdout.fileno(): out, proc.stderr.fileno(): err}
    sel = selectors.DefaultSelector()
    with sel:
        for fd in buffers:
            sel.register(fd, selectors.EVENT_READ)
        view, offset = memoryview(stdin or b""), 0
        if proc.stdin is not None:
            os.set_blocking(proc.stdin.fileno(), False)
            sel.register(proc.stdin.fileno(), selectors.EVENT_WRITE)
        grace: float | None = None  # once the child has exited: how long its pipes may stay open
        while sel.get_map():
            now = time.monotonic()
            if grace is not None and now > grace:
                break  # something that left the process group holds the pipes: what the child wrote is read
            remaining = deadline - now
            if remaining <= 0:
                raise ChildTimeout
            events = sel.select(min(remaining, 0.2))
            if not events and grace is None and exited(proc):
                kill_group(proc.pid)  # the child is gone; a grandchild still holds the pipes
                grace = time.monotonic() + 1.0
            for key, _ in events:
                fd = int(key.fd)
                if fd in buffers:
                    data = os.read(fd, _CHUNK)
                    if not data:
                        sel.unregister(fd)
                        continue
                    buf = buffers[fd]
                    buf += data
                    if buf is out and len(out) > max_stdout:
                        raise ChildOutputTooLarge
                    if buf is err and len(err) > max_stderr:
                        del err[: len(err) - max_stderr]
                    continue
                try:
                    offset += os.write(fd, view[offset:offset + _CHUNK])
                except BlockingIOError:
                    continue
                except BrokenPipeError:
                    offset = len(view)
                if offset >= len(view):
                    sel.unregister(fd)
                    assert proc.stdin is not None
                    proc.stdin.close()
    return bytes(out), bytes(err)
