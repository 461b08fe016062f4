"""The Server queue's batch filling: what a worker thread does between taking its
first query and predicting.

LoadGen's issue thread puts each query (one sample, or several when LoadGen coalesced
overdue ones) on a ``SimpleQueue`` untouched; a worker takes the first and ``fill``
adds queued ones until the batch is full or its wait has passed, so batches grow with
the backlog. A query that does not fit is cut, and its rest starts later batches.
Where the policy paces batches (``server_policy.dispatch_interval_s``), a ``Pacer``
gives each batch the time it may leave, an interval after the one before it, and only
the worker holding ``Pacer.forming`` takes queries.
"""

from __future__ import annotations

import collections
import queue
import threading
import time

# A query as LoadGen issued it: (LoadGen ids, QSL indices).
Query = tuple[list[int], list[int]]

# How often a worker looks for more queries while its batch is open.
_POLL_S = 100e-6


def next_query(source: queue.SimpleQueue[Query | None]) -> Query | None:
    """Block for the next item, waking every 50 ms to look again.

    Defensive: a run once kept its last sample queued for 60 s (until the watchdog)
    while a worker waited in an untimed ``get``; a timed wait rechecks the queue.
    """
    while True:
        try:
            return source.get(timeout=0.05)
        except queue.Empty:
            continue


class Pacer:
    """Hands out the times at which Server batches may leave, ``interval_s`` apart
    across all worker threads. A worker asks once it holds its batch's first query, so
    every time handed out belongs to a batch."""

    def __init__(self, interval_s: float) -> None:
        self.interval_s = interval_s
        self._next = 0.0
        self._lock = threading.Lock()
        #: Held by the worker forming a batch, from its first query until the batch
        #: leaves. Without it every idle worker took a query and reserved a later time,
        #: so with three idle a query could wait two intervals more than the queue
        #: required, behind batches that left before its own.
        self.forming = threading.Lock()

    def reserve(self, now: float) -> float:
        """The earliest time (``perf_counter``) at which this batch may leave."""
        with self._lock:
            at = max(now, self._next)
            self._next = at + self.interval_s
        return at


def fill(source: queue.SimpleQueue[Query | None], queries: list[Query],
         carry: collections.deque[Query], wait: float, max_batch: int,
         waits: collections.deque[float], pacer: Pacer | None = None) -> tuple[int, bool]:
    """Add queries from ``source`` to ``queries`` (one, to start) until ``max_batch``
    samples or ``wait`` seconds, or until the time ``pacer`` gives, whichever is later;
    a query that does not fit is cut and its rest goes to ``carry``. Returns the batch's
    sample count and whether the stop signal (None) was taken. ``waits`` records each
    wait used (bounded; for tests and diagnosis)."""
    if len(queries[0][0]) > max_batch:  # a coalesced query: the rest starts later batches
        queries[0] = cut(queries[0], max_batch, max_batch, carry)
    count = len(queries[0][0])
    now = time.perf_counter()
    deadline = now + wait
    if pacer is not None and count < max_batch:
        deadline = max(deadline, pacer.reserve(now))
    waits.append(deadline - now)
    while count < max_batch and not carry:
        try:
            nxt = source.get_nowait()
        except queue.Empty:
            remaining = deadline - time.perf_counter()
            if remaining <= 0:
                return count, False
            # Poll, not a blocking get per query: each blocking get hands the
            # GIL to the issue thread and back once per arriving query.
            time.sleep(min(remaining, _POLL_S))
            continue
        if nxt is None:
            return count, True
        if count + len(nxt[0]) > max_batch:  # fill the batch, carry the rest
            nxt = cut(nxt, max_batch - count, max_batch, carry)
        queries.append(nxt)
        count += len(nxt[0])
    return count, False


def cut(query: Query, size: int, piece: int, rest: collections.deque[Query]) -> Query:
    """The first ``size`` samples of ``query``; the rest is appended to ``rest`` in
    pieces of at most ``piece`` samples."""
    ids, indices = query
    for start in range(size, len(ids), piece):
        rest.append((ids[start:start + piece], indices[start:start + piece]))
    return ids[:size], indices[:size]
