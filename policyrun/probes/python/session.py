"""One child per target interpreter per collection, shared by the probes that inspect it.

`python.stack` and `python.modules` each ran a child of the interpreter under inspection, and each
child imported torch: on a GPU node that import is seconds, and two of them ran side by side. A
collection now holds one `Interpreters` (ProbeContext.interpreters): the first probe that asks an
interpreter starts `_session_script.py` there, and every later request with the same interpreter
and environment is answered by that process, one at a time, so torch is imported once.

Each probe keeps its own failure modes: a request has its own deadline (a probe waiting for the
child while another probe's request runs spends its own budget waiting), and a child that crashes
or is killed at a deadline fails the request that was running; the next request starts a fresh
child. A child is reused only while every import it attempted succeeded (`keep`), so a failed or
half-finished import never changes what a later probe sees. The child runs exactly as the one-shot
children do (`bounded`): isolated `-I -B`, a fresh empty working directory, the allow-listed
environment, its own process group, killed when the collection ends.
Without a collection (a probe run on its own), `run_script` runs the script one-shot as before.
"""

from __future__ import annotations

import json
import os
import selectors
import shlex
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from policyrun.probes._kit.bounded import (MAX_STDERR, ChildOutputTooLarge, ChildResult, ChildTimeout, exited, kill_group,
                                      run_child)

ISOLATED = ("-I", "-B")  # isolated mode (implies -E, -s and, from 3.11, -P); no .pyc written anywhere


def script_label(filename: str) -> str:
    """How a fact's commands name a child script (`-c <label>`: its text is passed, not a path).
    The label is where the scripts lived before the probes were grouped into families (they sit
    beside this module now); it is kept so the commands facts and traces record read the same
    across that move, and so a shared child knows each script by the same name."""
    return f"policyrun/probes/{filename}"


@cache
def script_text(filename: str) -> str:
    """The source of a child script beside this module, passed to the target interpreter with -c."""
    return resources.files("policyrun.probes.python").joinpath(filename).read_text(encoding="utf-8")


SESSION_NAME = script_label("_session_script.py")


def session_script() -> str:
    return script_text("_session_script.py")


@dataclass(frozen=True)
class Answer:
    result: ChildResult  # stdout: the script's one JSON line; stderr: what the child printed meanwhile
    args: dict[str, Any]  # the arguments the script was given
    command: str  # what provenance records


class _Child:
    """One session child; `lock` is held for the whole of a request."""

    def __init__(self, exe: str, env: Mapping[str, str]) -> None:
        self.exe = exe
        self.env = dict(env)
        self.lock = threading.Lock()
        self.proc: subprocess.Popen[bytes] | None = None
        self.cwd: tempfile.TemporaryDirectory[str] | None = None
        self.stderr = bytearray()
        self.stderr_lock = threading.Lock()
        self.drain: threading.Thread | None = None
        self.started = 0

    def alive(self) -> bool:
        return self.proc is not None and not exited(self.proc)

    def start(self) -> None:
        self.stop()
        self.cwd = tempfile.TemporaryDirectory(prefix="policyrun-python-")
        self.proc = subprocess.Popen([self.exe, *ISOLATED, "-c", session_script()], cwd=self.cwd.name, env=self.env,
                                     start_new_session=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)
        self.started += 1
        self.drain = threading.Thread(target=self._drain, args=(self.proc,), daemon=True,
                                      name="policyrun-python-stderr")
        self.drain.start()

    def _drain(self, proc: subprocess.Popen[bytes]) -> None:
        """Read stderr as it comes (torch warns a lot: a full pipe would stall the child), keeping the tail."""
        assert proc.stderr is not None
        fd = proc.stderr.fileno()
        while True:
            try:
                chunk = os.read(fd, 1 << 16)
            except OSError:  # closed under us by stop()
                return
            if not chunk:
                return
            with self.stderr_lock:
                self.stderr += chunk
                del self.stderr[:-MAX_STDERR]

    def stop(self) -> None:
        if self.proc is not None:
            kill_group(self.proc.pid)
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                pass
            for stream in (self.proc.stdin, self.proc.stdout):
                if stream is not None:
                    stream.close()
            if self.drain is not None:
                self.drain.join(timeout=1)
            if self.proc.stderr is not None:
                self.proc.stderr.close()
            self.proc = None
        if self.cwd is not None:
            self.cwd.cleanup()
            self.cwd = None

    def ask(self, name: str, script: str, args: Mapping[str, Any], deadline: float, max_stdout: int) -> ChildResult:
        """One request; the caller holds `lock`. Raises ChildTimeout / ChildOutputTooLarge (child
        killed) or OSError (it could not be started)."""
        if not self.alive():
            self.start()
        proc = self.proc
        assert proc is not None and proc.stdin is not None and proc.stdout is not None
        with self.stderr_lock:
            self.stderr.clear()
        request = (json.dumps({"name": name, "script": script, "args": dict(args)}) + "\n").encode("utf-8")
        try:
            proc.stdin.write(request)
            proc.stdin.flush()
        except BrokenPipeError:
            pass  # it died at start-up: what it printed is read below
        out = bytearray()
        fd = proc.stdout.fileno()
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while b"\n" not in out:
                left = deadline - time.monotonic()
                if left <= 0:
                    self.stop()
                    raise ChildTimeout
                if not sel.select(timeout=left):
                    continue
                chunk = os.read(fd, 1 << 16)
                if not chunk:  # it ended without answering: a crash, an exit, a killed import
                    return self._ended(bytes(out))
                out += chunk
                if len(out) > max_stdout:
                    self.stop()
                    raise ChildOutputTooLarge
        line, _, rest = bytes(out).partition(b"\n")
        if rest:  # more than one answer to one request: not the script talking; never reuse it
            self.stop()
        with self.stderr_lock:
            err = bytes(self.stderr)
        return ChildResult(0, line + b"\n", err)

    def _ended(self, out: bytes) -> ChildResult:
        assert self.proc is not None
        try:
            code = self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            code = -9
        if self.drain is not None:
            self.drain.join(timeout=1)
        with self.stderr_lock:
            err = bytes(self.stderr)
        self.stop()
        return ChildResult(code if code != 0 or b"\n" in out else 1, out, err)


class Interpreters:
    """The interpreter children of one collection, by interpreter and environment."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._children: dict[tuple[str, tuple[tuple[str, str], ...]], _Child] = {}
        self._closed = False

    def child(self, exe: str, env: Mapping[str, str]) -> _Child:
        key = (exe, tuple(sorted(env.items())))
        with self._lock:
            if self._closed:
                raise RuntimeError("the collection's interpreter children are closed")
            found = self._children.get(key)
            if found is None:
                found = self._children[key] = _Child(exe, env)
            return found

    def started(self) -> int:
        """How many children were started (for tests: one per interpreter when nothing failed)."""
        with self._lock:
            return sum(c.started for c in self._children.values())

    def close(self) -> None:
        """End every child (the collection is over). A child busy with a request is killed too."""
        with self._lock:
            self._closed = True
            children = list(self._children.values())
        for child in children:
            if child.lock.acquire(timeout=0):
                child.stop()
                child.lock.release()
            elif child.proc is not None:
                kill_group(child.proc.pid)


def run_script(interpreters: Interpreters | None, exe: str, env: Mapping[str, str], name: str, script: str,
               make_args: Callable[[float], dict[str, Any]], *, timeout_s: float, max_stdout: int,
               keep: Callable[[bytes], bool]) -> Answer:
    """Run `script` (`name`: its script_label) in `exe` with the arguments `make_args(seconds
    left)` gives: in the collection's shared child when there is one, else one-shot. Raises
    ChildTimeout when the deadline passes (waiting for the shared child included),
    ChildOutputTooLarge, or OSError. `keep(stdout)` says whether the shared child may answer more."""
    deadline = time.monotonic() + max(timeout_s, 0.0)
    if interpreters is None:
        args = make_args(timeout_s)
        text = json.dumps(args)
        with tempfile.TemporaryDirectory(prefix="policyrun-python-") as cwd:
            result = run_child([exe, *ISOLATED, "-c", script, text], cwd=cwd, env=env, timeout_s=timeout_s,
                               max_stdout=max_stdout)
        return Answer(result, args, f"{shlex.quote(exe)} {' '.join(ISOLATED)} -c <{name}> {shlex.quote(text)}")
    child = interpreters.child(exe, env)
    if not child.lock.acquire(timeout=max(deadline - time.monotonic(), 0.0)):
        raise ChildTimeout  # the shared child was busy for the whole of this probe's budget
    try:
        args = make_args(deadline - time.monotonic())
        result = child.ask(name, script, args, deadline, max_stdout)
        if result.returncode == 0 and not keep(result.stdout):
            child.stop()
    finally:
        child.lock.release()
    shown = json.dumps({"script": f"<{name}>", "args": args})
    return Answer(result, args, f"{shlex.quote(exe)} {' '.join(ISOLATED)} -c <{SESSION_NAME}> <<< {shlex.quote(shown)}")
