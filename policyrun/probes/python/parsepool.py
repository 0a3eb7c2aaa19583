"""Upstream modules summarised in a helper process, beside the probe that resolves imports.

Resolving a plugin's imports parses the upstream modules they lead to (about a hundred files of
vLLM at two releases for the afd-plugin), and parsing holds the interpreter lock: in one process
it was the tail of a planning audit, with the machine's other cores idle. When a resolver knows
which files it will read, it hands their bytes to one helper process that summarises them from
the far end of the list while the resolver works from the near end. A file the resolver needs is
then taken from the helper when it is done, waited for when the helper is on it, and parsed in
process when the helper has not reached it: each file is parsed once before the two meet.

Summaries are what import resolution reads — bindings, `__all__`, star imports, lazy maps —
without syntax trees (probes that need nodes, such as python.symbols, parse in process). The
helper is an isolated interpreter (`python -I`, run from `/`, with this process's module path)
speaking pickle over its pipes (it is our own child, given only bytes policyrun read from git),
started in its own session and killed with its group at the probe's deadline or when the probe
ends. Anything going wrong with it — it cannot start, dies, answers garbage — only means the
resolver parses in process, as without it.

It is started on machines with at least MIN_CPUS cores and for at least MIN_JOBS files. With two
cores the other one is already busy during a planning audit (git, `pip check` in python.stack),
and a helper there made the real afd-plugin audit slower (2.39 s against 2.26 s). Set
`POLICYRUN_PARSE_HELPER=0` to turn it off anywhere (e.g. where starting processes is not
allowed), `1` to use it whatever the core count.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import threading
import time
from typing import IO, Any

from policyrun.probes._kit.bounded import kill_group

MIN_JOBS = 16  # below this, starting the helper (~0.1 s) costs more than the parsing it saves
MIN_CPUS = 4
HANDOFF_WAIT_S = 5.0  # the longest the resolver waits for the file the helper is on
Job = tuple[str, bytes, str, str, str]  # (key, source bytes, path, module, package)


def enabled() -> bool:
    setting = os.environ.get("POLICYRUN_PARSE_HELPER", "")
    if setting in ("0", "1"):
        return setting == "1"
    return len(os.sched_getaffinity(0)) >= MIN_CPUS if hasattr(os, "sched_getaffinity") else \
        (os.cpu_count() or 1) >= MIN_CPUS


class SummaryHelper:
    """One helper process summarising `jobs` in reverse order; see the module docstring."""

    def __init__(self, jobs: list[Job], deadline: float) -> None:
        self.index = {key: i for i, (key, *_rest) in enumerate(jobs)}
        self.results: dict[int, Any] = {}
        self.next = len(jobs) - 1  # the job the helper is on: it answers from the last one down
        self.alive = True
        self.cond = threading.Condition()
        self.deadline = deadline
        # Isolated (-I): the interpreter puts neither the working directory — the repository being
        # inspected, whose `ast.py` or `policyrun/` must never be imported — nor PYTHON* variables
        # on its path. It gets this process's path instead, less the working directory (`''`), so
        # it imports what this process did from where it did; if that fails, the probe parses itself.
        path = [p for p in sys.path if p]
        bootstrap = f"import sys; sys.path[:] = {path!r}; from policyrun.probes.python.parseworker import main; main()"
        self.proc = subprocess.Popen([sys.executable, "-I", "-c", bootstrap], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, cwd="/",
                                     start_new_session=True)
        self.timer = threading.Timer(max(0.0, deadline - time.monotonic()), kill_group, args=(self.proc.pid,))
        self.timer.daemon = True
        self.timer.start()
        payload = pickle.dumps([job[1:] for job in jobs], protocol=pickle.HIGHEST_PROTOCOL)
        threading.Thread(target=self._send, args=(payload,), daemon=True, name="parse-helper-send").start()
        threading.Thread(target=self._receive, daemon=True, name="parse-helper-receive").start()

    def _send(self, payload: bytes) -> None:
        stdin = self.proc.stdin
        assert stdin is not None
        try:
            stdin.write(payload)
            stdin.close()
        except (OSError, ValueError):  # the helper died; _receive notices
            pass

    def _receive(self) -> None:
        stdout: IO[bytes] | None = self.proc.stdout
        assert stdout is not None
        try:
            while True:
                i, summary = pickle.load(stdout)
                with self.cond:
                    self.results[i] = summary
                    self.next = i - 1
                    self.cond.notify_all()
        except Exception:  # noqa: BLE001 — EOF, a killed helper or garbage: the resolver parses itself
            with self.cond:
                self.alive = False
                self.cond.notify_all()

    def get(self, key: str) -> Any | None:
        """The helper's summary of `key` (a ModuleInfo without tree), or None: parse it yourself."""
        i = self.index.get(key)
        if i is None:
            return None
        with self.cond:
            # Wait only for a helper that has answered before and is on this very file, and not for
            # long: one that never answered may be stuck starting, and the file is parsed here
            # just as well (any wait only saves doing the same work twice).
            give_up = min(self.deadline, time.monotonic() + HANDOFF_WAIT_S)
            while i not in self.results and self.alive and self.results and i == self.next:
                remaining = give_up - time.monotonic()
                if remaining <= 0:
                    break
                self.cond.wait(remaining)
            summary = self.results.get(i)
            return None if isinstance(summary, BaseException) else summary

    def close(self) -> None:
        self.timer.cancel()
        kill_group(self.proc.pid)
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass
