"""The guard paid once per run: one forked evaluation child serves every evaluation of a process.

`policyrun.language.guard.run_guarded` forks a child per call, which costs 5–25 ms (the fork, the child's
copy-on-write faults, its exit) whatever the evaluation's size. Here the child is forked once and
kept: each evaluation is a request on a pipe, and the child answers with the result. The isolation
is the guard's own, unchanged: the child publishes the expression it is in through shared memory,
the parent kills it when one expression runs past the time limit or the child dies of its memory
limit, and the evaluation is asked again of a fresh child with that expression refused.

Requests pass large objects (the rulebook, the facts) by reference, not by value: the child is a
fork, so it holds the very objects that were registered (`shared`) before it was forked. A request
naming an object the child does not hold forks a new child that does. Shared objects must not
change after they are passed (the rulebook and facts models are frozen).
"""

from __future__ import annotations

import atexit
import io
import mmap
import os
import pickle
import select
import signal
import struct
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from policyrun.language import expr

from policyrun.evaluate import expreval
from policyrun.errors import PolicyrunError
from policyrun.language.guard import (MAX_RESTARTS, _HEADER, _KEY_BYTES, _ChildGuard, _current, _limit_memory,
                             evaluation_memory, expression_limit, fork_frozen, guarded_available)

T = TypeVar("T")
_LENGTH = struct.Struct("<Q")
# A child serves this many requests, then a fresh one is forked: the memory limit is set from the
# child's address space at its fork, and a long-lived process (the MCP server) must not see it
# shrink as the child's heap grows over thousands of evaluations.
MAX_REQUESTS = 1000


class _Pickler(pickle.Pickler):
    def __init__(self, file: io.BytesIO, shared: dict[int, Any]) -> None:
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.shared = shared

    def persistent_id(self, obj: Any) -> int | None:
        return id(obj) if id(obj) in self.shared and self.shared[id(obj)] is obj else None


class _Unpickler(pickle.Unpickler):
    def __init__(self, file: io.BytesIO, shared: dict[int, Any]) -> None:
        super().__init__(file)
        self.shared = shared

    def persistent_load(self, pid: Any) -> Any:
        return self.shared[pid]


class _Worker:
    def __init__(self, shared: dict[int, Any], memory: int) -> None:
        self.shared = shared  # id → object, held so the ids stay valid while the child lives
        self.memory = memory
        self.owner = os.getpid()
        # What the evaluation reports each summarised value to (evaluate --out keeps them beside
        # the trace): the child has the hook it was forked with, so another hook needs another child.
        self.on_summary = expreval.on_summary
        self.requests = 0
        self.mem = mmap.mmap(-1, _HEADER.size + 4 + _KEY_BYTES)
        req_r, self.req_w = os.pipe()
        self.resp_r, resp_w = os.pipe()
        _widen(resp_w)
        pid = fork_frozen()
        if pid == 0:
            status = 0
            try:
                os.close(self.req_w)
                os.close(self.resp_r)
                _serve(req_r, resp_w, self.mem, shared, memory)
            except BaseException:  # noqa: BLE001 — never return into the parent's stack
                status = 70
            finally:
                os._exit(status)
        self.pid = pid
        os.close(req_r)
        os.close(resp_w)

    def holds(self, objects: Sequence[Any], memory: int) -> bool:
        return memory == self.memory and self.requests < MAX_REQUESTS \
            and all(self.shared.get(id(o)) is o for o in objects)

    def stop(self) -> None:
        for fd in (self.req_w, self.resp_r):
            try:
                os.close(fd)
            except OSError:
                pass
        if os.getpid() != self.owner or self.pid <= 0:
            return  # a forked copy of this process (the child is its parent's to stop), or reaped
        try:
            os.kill(self.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        # Reaped later: a large child takes milliseconds to tear down, which the next evaluation
        # need not wait for.
        _dying.append(self.pid)
        self.pid = -1


_dying: list[int] = []  # killed children not yet reaped


def _reap(block: bool = False) -> None:
    for pid in list(_dying):
        try:
            done, _ = os.waitpid(pid, 0 if block else os.WNOHANG)
        except ChildProcessError:
            done = pid
        if done:
            _dying.remove(pid)


def _widen(fd: int) -> None:
    """A pipe of 1 MiB where Linux allows it (64 KiB by default): the trace records of a thousand
    checks then pass in one write, not in many, each waiting for the other process to run."""
    try:
        import fcntl

        fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), 1 << 20)
    except (ImportError, OSError):
        pass


def _read_exact(fd: int, n: int) -> bytes | None:
    chunks, left = [], n
    while left:
        data = os.read(fd, min(left, 1 << 20))
        if not data:
            return None
        chunks.append(data)
        left -= len(data)
    return b"".join(chunks)


def _write_all(fd: int, payload: bytes) -> None:
    view = memoryview(_LENGTH.pack(len(payload)) + payload)
    while view:
        view = view[os.write(fd, view):]


def _serve(req_r: int, resp_w: int, mem: mmap.mmap, shared: dict[int, Any], memory: int) -> None:
    """The child: answer requests until the parent closes the pipe (it exited or replaced us)."""
    _limit_memory(memory)
    guard = _ChildGuard(mem, {})
    expr.set_guard(guard)
    while True:
        head = _read_exact(req_r, _LENGTH.size)
        if head is None:
            return
        body = _read_exact(req_r, _LENGTH.unpack(head)[0])
        if body is None:
            return
        fatal = False
        try:
            fn, args, refused = _Unpickler(io.BytesIO(body), shared).load()
            guard.refused = refused
            payload = pickle.dumps(("ok", fn(*args)), protocol=pickle.HIGHEST_PROTOCOL)
        except MemoryError:
            payload, fatal = pickle.dumps(("memory",)), True
        except BaseException as exc:  # noqa: BLE001 — handed to the parent to raise there
            try:
                payload = pickle.dumps(("raise", exc), protocol=pickle.HIGHEST_PROTOCOL)
            except Exception:  # an exception that cannot be pickled: its text is enough
                payload = pickle.dumps(("raise", RuntimeError(f"{type(exc).__name__}: {exc}")))
        _write_all(resp_w, payload)
        if fatal:  # after a MemoryError the child's state is not to be trusted with another request
            return


_worker: _Worker | None = None


_lock = threading.Lock()  # one request at a time on the child's pipes


def _stop_worker() -> None:
    global _worker
    if _worker is not None:
        _worker.stop()
        _worker = None


def _at_exit() -> None:
    _stop_worker()
    _reap(block=True)


atexit.register(_at_exit)


def _worker_for(shared: Sequence[Any], memory: int) -> _Worker:
    global _worker
    if _worker is not None and (_worker.owner != os.getpid() or not _worker.holds(shared, memory)
                                or _worker.on_summary is not expreval.on_summary):
        _stop_worker()
    if _dying:
        _reap()
    if _worker is None:
        _worker = _Worker({id(o): o for o in shared}, memory)
    return _worker


def run_shared(fn: Callable[..., T], *args: Any, shared: Sequence[Any] = ()) -> T:
    """`fn(*args)` under the guard (as `policyrun.language.guard.run_guarded`) in this process's evaluation
    child. `fn` is a module-level function; `args` travel by pickle, except the `shared` objects
    (and anything inside `args` that is one of them), which the child already holds."""
    if not guarded_available():
        return fn(*args)
    with _lock:
        return _run_shared(fn, args, shared)


def _run_shared(fn: Callable[..., T], args: tuple[Any, ...], shared: Sequence[Any]) -> T:
    limit_s = expression_limit()
    memory = evaluation_memory()
    refused: dict[str, str] = {}
    for _ in range(MAX_RESTARTS + 1):
        worker = _worker_for(shared, memory)
        outcome = _ask(worker, fn, args, refused, limit_s)
        if outcome[0] == "ok":
            result: T = outcome[1]
            return result
        if outcome[0] == "raise":
            raise outcome[1]
        _stop_worker()  # killed, or out of memory: the next attempt gets a fresh child
        key, reason = str(outcome[1]), str(outcome[2])
        if not key or key in refused:
            raise PolicyrunError(f"the evaluation {reason} outside any expression; this is a policyrun defect, "
                                 "please report it", code="G001")
        refused[key] = reason
    raise PolicyrunError(f"more than {MAX_RESTARTS} expressions ran past their limits; fix the rulebook's "
                         "expressions (see the trace of a smaller case)", code="G002")


def _ask(worker: _Worker, fn: Callable[..., Any], args: tuple[Any, ...], refused: dict[str, str],
         limit_s: float) -> tuple[Any, ...]:
    worker.requests += 1
    buf = io.BytesIO()
    _Pickler(buf, worker.shared).dump((fn, args, refused))
    # Clear the key of the last request so a child dying before its first expression is not
    # blamed on an expression of an earlier evaluation.
    worker.mem[:_HEADER.size + 4] = _HEADER.pack(0, 0) + struct.pack("<I", 0)
    try:
        _write_all(worker.req_w, buf.getvalue())
    except BrokenPipeError:  # the child is gone: treated as its death while evaluating
        return _died(worker)
    chunks: list[bytes] = []
    expected: int | None = None
    received = 0
    last_counter, since = -1, time.monotonic()
    while expected is None or received < expected:
        ready, _, _ = select.select([worker.resp_r], [], [], 0.05)
        if ready:
            data = os.read(worker.resp_r, 1 << 20)
            if not data:
                return _died(worker)
            chunks.append(data)
            received += len(data)
            if expected is None and received >= _LENGTH.size:
                joined = b"".join(chunks)
                expected = _LENGTH.size + _LENGTH.unpack(joined[:_LENGTH.size])[0]
                chunks = [joined]
            continue
        counter, inside, key = _current(worker.mem)
        now = time.monotonic()
        if counter != last_counter or not inside:
            last_counter, since = counter, now
        elif now - since > limit_s:
            os.kill(worker.pid, signal.SIGKILL)
            return ("limit", key, f"ran past the per-expression time limit of {limit_s:g}s")
    result: tuple[Any, ...] = pickle.loads(b"".join(chunks)[_LENGTH.size:])
    if result[0] == "memory":
        # Blame the last expression entered even if it has returned: converting its result is
        # where a huge value is allocated.
        return ("limit", _current(worker.mem)[2],
                f"exceeded the evaluation memory limit of {worker.memory >> 20} MiB")
    return result


def _died(worker: _Worker) -> tuple[Any, ...]:
    try:
        _, wait_status = os.waitpid(worker.pid, 0)
    except ChildProcessError:
        wait_status = 0
    how = (f"signal {os.WTERMSIG(wait_status)}" if os.WIFSIGNALED(wait_status)
           else f"status {os.WEXITSTATUS(wait_status)}")
    worker.pid = -1  # reaped: stop() must not wait for it again
    # The runtime aborts (SIGABRT) when an allocation fails under the memory limit.
    return ("limit", _current(worker.mem)[2], f"exceeded the evaluation memory limit of {worker.memory >> 20} MiB "
                                              f"(the evaluation ended with {how})")
