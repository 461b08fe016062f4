"""Where a run's batches spent their time: sizes and per-phase seconds, per worker.

Each SUT worker owns one ``BatchStats`` and is its only writer, so the hot path takes
no lock (two ``perf_counter`` calls and a few additions per batch); ``merge`` sums
them when the test is over, for ``status.json``. This is the evidence a Server run
that misses its bound is explained by: whether batches grew with the backlog
(the size histogram), and whether the time went to gathering inputs, to the
backend, or to completing.

Each worker also keeps its last ``RECENT`` batches' service times (gather to completion)
and sizes in a ring: two slot writes and a counter per batch. The child's heartbeat
thread reads what is new since its last beat through a ``BatchTail`` (the live p99
estimate, ``progress``); the worker never waits on it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

#: Batches each worker keeps for the live estimate (a power of two: the slot is a mask).
RECENT = 4096
_SLOT = RECENT - 1


class BatchStats:
    """One worker's batches (see the module docstring)."""

    __slots__ = ("complete_s", "count", "gather_s", "predict_s", "recent_n", "recent_s",
                 "sizes")

    def __init__(self, max_batch: int) -> None:
        #: ``sizes[n]``: batches of ``n`` samples.
        self.sizes = [0] * (max_batch + 1)
        self.gather_s = 0.0
        self.predict_s = 0.0
        self.complete_s = 0.0
        #: Batches added; batch ``k``'s service seconds and size are in slot ``k % RECENT``.
        self.count = 0
        self.recent_s = [0.0] * RECENT
        self.recent_n = [0] * RECENT

    def add(self, n: int, gather_s: float, predict_s: float, complete_s: float) -> None:
        self.sizes[n] += 1
        self.gather_s += gather_s
        self.predict_s += predict_s
        self.complete_s += complete_s
        count = self.count
        self.recent_s[count & _SLOT] = gather_s + predict_s + complete_s
        self.recent_n[count & _SLOT] = n
        self.count = count + 1  # last: a reader that sees the count finds the slot written


class BatchTail:
    """The heartbeat's cursor over the workers' rings: each call to ``new`` returns the
    batches added since the previous one, as (service seconds, samples) in two lists.
    It copies slices, not items: the heartbeat holds the GIL that the workers and
    LoadGen's issue thread need, so a Python loop over thousands of batches would be
    felt in the Server tail.

    When a worker lapped its ring between two calls, the older batches are lost and the
    latest ``RECENT - SLACK`` stand for them (a sample of the interval, not all of it);
    the slack keeps clear of the slots the worker may be overwriting during the read.
    """

    SLACK = 64

    def __init__(self) -> None:
        self._seen: dict[int, int] = {}

    def new(self, stats: Iterable[BatchStats]) -> tuple[list[float], list[int]]:
        durations: list[float] = []
        sizes: list[int] = []
        for worker in list(stats):
            end = worker.count
            start = max(self._seen.get(id(worker), 0), end - (RECENT - self.SLACK))
            self._seen[id(worker)] = end
            if start >= end:
                continue
            first, last = start & _SLOT, end & _SLOT
            # The ring's slots in order: one slice, or two when the range wraps.
            pieces = [(first, last)] if first < last else [(first, RECENT), (0, last)]
            for low, high in pieces:
                durations += worker.recent_s[low:high]
                sizes += worker.recent_n[low:high]
        return durations, sizes


def merge(stats: Iterable[BatchStats]) -> dict[str, Any]:
    """The workers' stats as one record: batch count, samples, mean size, a histogram
    of sizes (power-of-two bins, ``"17-32": count``) and seconds per phase."""
    stats = list(stats)
    if not stats:
        return {}
    sizes = [sum(column) for column in zip(*(s.sizes for s in stats), strict=True)]
    batches = sum(sizes)
    samples = sum(n * count for n, count in enumerate(sizes))
    bins: dict[str, int] = {}
    for n, count in enumerate(sizes):
        if count:
            high = 1 << (n - 1).bit_length()
            low = high // 2 + 1 if high > 1 else 1
            key = f"{low}-{high}" if low < high else str(high)
            bins[key] = bins.get(key, 0) + count
    return {
        "batches": batches,
        "samples": samples,
        "mean_size": round(samples / batches, 2) if batches else 0.0,
        "size_histogram": bins,
        "gather_s": round(sum(s.gather_s for s in stats), 4),
        "predict_s": round(sum(s.predict_s for s in stats), 4),
        "complete_s": round(sum(s.complete_s for s in stats), 4),
    }
