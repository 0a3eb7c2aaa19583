"""Bounded evaluation: every CEL expression gets a time limit and the evaluation a memory limit.

The CEL runtime holds the GIL while it evaluates, so nothing in-process can interrupt a runaway
expression (`'a'.replace('a', 'aa')` chained 29 times runs for a minute and takes 1.7 GB). So
`run_guarded` evaluates in a forked child that reports, through shared memory, which expression
it is in; the parent kills the child when one expression runs past the limit (or the child dies
of its memory limit), marks that expression, and evaluates again with it refused: its check is
UNKNOWN with a one-line reason naming the rulebook location, and every other check is decided
as usual. Evaluation is deterministic, so the rerun takes the same path up to that expression.

Where `fork` is unavailable (or POLICYRUN_UNGUARDED=1), evaluation runs in-process, bounded only
by the runtime's iteration budget and the function library's size limits.
"""

from __future__ import annotations

import gc
import mmap
import os
import pickle
import select
import signal
import struct
import time
import warnings
from collections.abc import Callable
from typing import Any, TypeVar

from policyrun.language import expr
from policyrun.errors import PolicyrunError

T = TypeVar("T")

EXPRESSION_SECONDS = 10.0  # wall-clock limit for one expression
MEMORY_BYTES = 4 << 30  # address space the evaluation may add (beyond what the process already maps)
MAX_RESTARTS = 16  # expressions refused in one evaluation before the evaluation itself is refused
_KEY_BYTES = 4000
_HEADER = struct.Struct("<QB")  # evaluation counter, inside-an-expression flag


class _ChildGuard:
    """Publishes the expression being evaluated to the parent; refuses the ones already marked."""

    def __init__(self, shared: mmap.mmap, refused: dict[str, str]) -> None:
        self.shared = shared
        self.refused = refused
        self.counter = 0
        self.keys: dict[str, bytes] = {}  # source → its length-prefixed key, encoded once

    def enter(self, source: str) -> str | None:
        # Runs around every expression: writes straight into the shared page, no temporaries.
        if self.refused:
            reason = self.refused.get(source)
            if reason is not None:
                return reason
        key = self.keys.get(source)
        if key is None:
            encoded = source.encode("utf-8", "replace")[:_KEY_BYTES]
            key = self.keys[source] = struct.pack("<I", len(encoded)) + encoded
        self.counter += 1
        self.shared[_HEADER.size:_HEADER.size + len(key)] = key
        _HEADER.pack_into(self.shared, 0, self.counter, 1)
        return None

    def leave(self) -> None:
        _HEADER.pack_into(self.shared, 0, self.counter, 0)


def _current(shared: mmap.mmap) -> tuple[int, bool, str]:
    counter, inside = _HEADER.unpack(shared[:_HEADER.size])
    (length,) = struct.unpack("<I", shared[_HEADER.size:_HEADER.size + 4])
    key = shared[_HEADER.size + 4:_HEADER.size + 4 + length].decode("utf-8", "replace")
    return counter, bool(inside), key


def expression_limit() -> float:
    """The per-expression time limit in seconds (POLICYRUN_EXPRESSION_SECONDS overrides it)."""
    return float(os.environ.get("POLICYRUN_EXPRESSION_SECONDS", EXPRESSION_SECONDS))


def evaluation_memory() -> int:
    """The memory an evaluation may add, in bytes (POLICYRUN_EVALUATION_MEMORY_MB overrides it)."""
    return int(os.environ.get("POLICYRUN_EVALUATION_MEMORY_MB", 0)) << 20 or MEMORY_BYTES


def guarded_available() -> bool:
    return hasattr(os, "fork") and os.environ.get("POLICYRUN_UNGUARDED") != "1"


def run_guarded(fn: Callable[[], T], *, seconds: float | None = None, memory: int | None = None,
                deadline_s: float | None = None) -> T:
    """Run `fn` (an evaluation) with the per-expression time limit and the memory limit.

    `deadline_s` bounds each attempt as a whole, inside expressions or not: collection forks the
    guarded child from a process whose other threads run probes, and a lock one of them held at
    the fork would otherwise hang the child outside any expression, where the per-expression limit
    does not watch. Past it the child is killed and PolicyrunError G004 raised.
    """
    if not guarded_available():
        return fn()
    limit_s = seconds if seconds is not None else expression_limit()
    limit_mem = memory if memory is not None else evaluation_memory()
    refused: dict[str, str] = {}
    for _ in range(MAX_RESTARTS + 1):
        outcome: tuple[Any, ...] = _attempt(fn, refused, limit_s, limit_mem, deadline_s)
        if outcome[0] == "ok":
            result: T = outcome[1]
            return result
        if outcome[0] == "raise":
            raise outcome[1]
        if outcome[0] == "deadline":
            raise PolicyrunError(f"the guarded computation ran past its deadline of {deadline_s:g}s and was stopped",
                                 code="G004")
        key, reason = str(outcome[1]), str(outcome[2])
        if not key or key in refused:
            raise PolicyrunError(f"the evaluation {reason} outside any expression; this is a policyrun defect, "
                                 "please report it", code="G001")
        refused[key] = reason
    raise PolicyrunError(f"more than {MAX_RESTARTS} expressions ran past their limits; fix the rulebook's "
                         "expressions (see the trace of a smaller case)", code="G002")


def fork_frozen() -> int:
    """os.fork() for an evaluation child: 0 in the child, its pid in the parent.

    Frozen objects are skipped by the cyclic collector, so the child's collections do not write to
    (and so copy) every page of the facts and the rulebook it shares with the parent. Python 3.12+
    warns when a process with threads forks (collection's probes run on threads); the child only
    evaluates expressions and exits through os._exit, and its deadline covers a lock another thread
    held at the fork.
    """
    gc.freeze()
    pid = -1
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            pid = os.fork()
    finally:
        if pid != 0:  # the parent (or a fork that failed) collects its own objects again
            gc.unfreeze()
    return pid


def _attempt(fn: Callable[[], Any], refused: dict[str, str], limit_s: float,
             limit_mem: int, deadline_s: float | None = None) -> tuple[str, Any] | tuple[str, str, str]:
    shared = mmap.mmap(-1, _HEADER.size + 4 + _KEY_BYTES)
    read_fd, write_fd = os.pipe()
    pid = fork_frozen()
    if pid == 0:  # the child: evaluate, send the result, exit without running parent cleanups
        os.close(read_fd)
        status = 0
        try:
            _limit_memory(limit_mem)
            expr.set_guard(_ChildGuard(shared, refused))
            try:
                payload = pickle.dumps(("ok", fn()), protocol=pickle.HIGHEST_PROTOCOL)
            except MemoryError:
                payload = pickle.dumps(("memory",), protocol=pickle.HIGHEST_PROTOCOL)
            except BaseException as exc:  # noqa: BLE001 — handed to the parent to raise there
                try:
                    payload = pickle.dumps(("raise", exc), protocol=pickle.HIGHEST_PROTOCOL)
                except Exception:  # an exception that cannot be pickled: its text is enough
                    payload = pickle.dumps(("raise", RuntimeError(f"{type(exc).__name__}: {exc}")))
            view = memoryview(payload)
            while view:
                written = os.write(write_fd, view)
                view = view[written:]
        except BaseException:  # noqa: BLE001 — never let the child return into the parent's stack
            status = 70
        finally:
            os._exit(status)
    os.close(write_fd)
    chunks: list[bytes] = []
    last_counter, since = -1, time.monotonic()
    ends = since + deadline_s if deadline_s is not None else None
    killed_for: tuple[str, str] | None = None
    past_deadline = False
    try:
        while True:
            ready, _, _ = select.select([read_fd], [], [], 0.05)
            if ready:
                data = os.read(read_fd, 1 << 20)
                if not data:
                    break
                chunks.append(data)
                continue
            counter, inside, key = _current(shared)
            now = time.monotonic()
            if ends is not None and now > ends:
                past_deadline = True
                os.kill(pid, signal.SIGKILL)
                break
            if counter != last_counter or not inside:
                last_counter, since = counter, now
            elif now - since > limit_s:
                killed_for = (key, f"ran past the per-expression time limit of {limit_s:g}s")
                os.kill(pid, signal.SIGKILL)
                break
    finally:
        os.close(read_fd)
        _, wait_status = os.waitpid(pid, 0)
    if past_deadline:
        return ("deadline", None)
    if killed_for is not None:
        return ("limit", *killed_for)
    if chunks:
        result = pickle.loads(b"".join(chunks))
        if result[0] == "memory":
            # Blame the last expression entered even if it has returned: converting its result is
            # where a huge value is allocated.
            return ("limit", _current(shared)[2], f"exceeded the evaluation memory limit of {limit_mem >> 20} MiB")
        return result  # type: ignore[no-any-return]
    how = (f"signal {os.WTERMSIG(wait_status)}" if os.WIFSIGNALED(wait_status)
           else f"status {os.WEXITSTATUS(wait_status)}")
    # The runtime aborts (SIGABRT) when an allocation fails under the memory limit.
    return ("limit", _current(shared)[2], f"exceeded the evaluation memory limit of {limit_mem >> 20} MiB "
                                          f"(the evaluation ended with {how})")


def _limit_memory(extra: int) -> None:
    try:
        import resource
    except ImportError:  # not on this platform: the time limit still holds
        return
    current = _address_space()
    if current is None:
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    target = current + extra
    if hard != resource.RLIM_INFINITY:
        target = min(target, hard)
    resource.setrlimit(resource.RLIMIT_AS, (target, hard))


def _address_space() -> int | None:
    try:
        with open("/proc/self/statm") as f:
            pages = int(f.read().split()[0])
        return pages * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None
