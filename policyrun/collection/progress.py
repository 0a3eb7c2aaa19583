"""What the terminal shows while probes run: nothing, one line per probe, or a live bar.

Separate from the scheduler, which only calls the `Progress` protocol: library callers pass
`QuietProgress`, the CLI `make_progress`, and Rich is imported only when a terminal shows the bar.
"""

from __future__ import annotations

import os
import sys
from typing import Any, Protocol, TextIO

from policyrun.facts import Fact


class Progress(Protocol):
    """What the scheduler tells a display: how many probes, each one's start and fact, the end."""

    def begin(self, total: int) -> None: ...
    def started(self, probe_id: str) -> None: ...
    def finished(self, probe_id: str, fact: Fact) -> None: ...
    def end(self) -> None: ...


def _outcome(fact: Fact) -> tuple[bool, str]:
    dur = fact.provenance.duration_s
    timing = f" {dur:.2f}s" if dur is not None else ""
    if fact.error is None:
        return True, f"ok{timing}"
    return False, f"error {fact.error.code}{timing}: {fact.error.message}"


class QuietProgress:
    """For library callers that want facts and nothing on the terminal."""

    def begin(self, total: int) -> None:
        pass

    def started(self, probe_id: str) -> None:
        pass

    def finished(self, probe_id: str, fact: Fact) -> None:
        pass

    def end(self) -> None:
        pass


class LineProgress(QuietProgress):
    """One line per finished probe: quiet enough for CI logs."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def finished(self, probe_id: str, fact: Fact) -> None:
        from policyrun.errors import terminal_text

        print(terminal_text(f"collect: {probe_id} {_outcome(fact)[1]}"), file=self.stream, flush=True)


class RichProgress:
    """A live bar naming the probes in flight; finished probes scroll above it."""

    def __init__(self, stream: TextIO) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

        self.bar = Progress(SpinnerColumn(), TextColumn("collect"), BarColumn(), MofNCompleteColumn(),
                            TimeElapsedColumn(), TextColumn("{task.description}"),
                            console=Console(file=stream), transient=True)
        self.running: list[str] = []
        self.task: Any = None

    def begin(self, total: int) -> None:
        self.task = self.bar.add_task("", total=total)
        self.bar.start()

    def _show(self) -> None:
        self.bar.update(self.task, description=", ".join(self.running[:4]) + (" …" if len(self.running) > 4 else ""))

    def started(self, probe_id: str) -> None:
        self.running.append(probe_id)
        self._show()

    def finished(self, probe_id: str, fact: Fact) -> None:
        if probe_id in self.running:
            self.running.remove(probe_id)
        ok, text = _outcome(fact)
        from rich.markup import escape

        self.bar.console.print(f"[{'green' if ok else 'red'}]{'✓' if ok else '✗'}[/] {escape(probe_id)} "
                               f"{escape(text)}", highlight=False)
        self.bar.advance(self.task)
        self._show()

    def end(self) -> None:
        self.bar.stop()


def make_progress(stream: TextIO | None = None) -> Progress:
    """A live display on a terminal; plain lines when not a TTY or under CI."""
    stream = stream or sys.stderr
    if stream.isatty() and not os.environ.get("CI"):
        return RichProgress(stream)
    return LineProgress(stream)
