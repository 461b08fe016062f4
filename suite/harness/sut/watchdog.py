"""The SUT's watchdog: a batch the backend never answers, or Server queries that no
worker takes, fail the run (outstanding samples are completed empty) instead of
leaving LoadGen waiting forever."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from suite.harness.sut.dispatch import SutParts


def watch(sut: SutParts, watch_queue: bool) -> None:
    """Run until the SUT stops (its own thread); drain the SUT on a stall.

    ``watch_queue``: Server queries wait in the SUT's queue for a worker thread (a
    stall there fails the run too)."""
    timeout = sut.config.watchdog_timeout_s
    # Since when queries have waited in the Server queue with no batch begun.
    queued_since, begun = -1.0, sut.batches_begun
    while not sut.stopping.wait(min(1.0, timeout / 4)):
        age = sut.inflight.oldest_age()
        if sut.processes is not None:
            sut.processes.check_alive()
            age = max(age, sut.processes.oldest_busy_s())
        stalled = ""
        if age > timeout:
            stalled = f"the backend did not answer a batch within {timeout:g} s"
        elif watch_queue:
            if not sut.query_queue.qsize() or sut.batches_begun != begun:
                queued_since, begun = -1.0, sut.batches_begun
            elif queued_since < 0:
                queued_since = time.monotonic()
            elif time.monotonic() - queued_since > timeout:
                stalled = f"queries waited {timeout:g} s with no worker taking them"
        if stalled and not sut.draining.is_set():
            sut.failures.record("watchdog_timeout", f"{stalled} (sut.watchdog_timeout_s); "
                                 "outstanding samples were completed empty")
            sut.drain()


