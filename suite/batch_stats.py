"""Where a run's batches spent their time: sizes and per-phase seconds, per worker.

Each SUT worker owns one ``BatchStats`` and is its only writer, so the hot path takes
no lock (two ``perf_counter`` calls and a few additions per batch); ``merge`` sums
them when the test is over, for ``status.json``. This is the evidence a Server run
that misses its bound is explained by: whether batches grew with the backlog
(the size histogram), and whether the time went to gathering inputs, to the
backend, or to completing.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


class BatchStats:
    """One worker's batches (see the module docstring)."""

    __slots__ = ("complete_s", "gather_s", "predict_s", "sizes")

    def __init__(self, max_batch: int) -> None:
        #: ``sizes[n]``: batches of ``n`` samples.
        self.sizes = [0] * (max_batch + 1)
        self.gather_s = 0.0
        self.predict_s = 0.0
        self.complete_s = 0.0

    def add(self, n: int, gather_s: float, predict_s: float, complete_s: float) -> None:
        self.sizes[n] += 1
        self.gather_s += gather_s
        self.predict_s += predict_s
        self.complete_s += complete_s


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
