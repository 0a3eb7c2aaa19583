"""The collector pause is counted across threads: it comes back when the last pauser leaves."""

from __future__ import annotations

import gc
import threading

from policyrun.gcpause import gc_paused


def test_overlapping_pauses_on_two_threads_keep_it_off_until_both_leave() -> None:
    assert gc.isenabled()
    entered, release = threading.Event(), threading.Event()

    def other() -> None:
        with gc_paused():
            entered.set()
            release.wait(5)

    t = threading.Thread(target=other)
    with gc_paused():
        t.start()
        assert entered.wait(5)
    assert not gc.isenabled()  # the other thread is still inside its pause
    release.set()
    t.join(5)
    assert gc.isenabled()


def test_a_collector_that_was_off_stays_off() -> None:
    gc.disable()
    try:
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()
