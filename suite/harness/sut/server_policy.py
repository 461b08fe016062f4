"""How a Server SUT batches on this backend: the batch cap and the wait, from warm-up.

At warm-up the SUT times batch 1 and its largest batch through the run's own input
path; ``derive`` fits them as ``fixed + per_sample x n`` (``BatchCost``) and derives
the largest batch a worker may form and how long a batch may wait for more queries,
from the latency bound, the workers and the target rate, and how far apart batches
leave (``dispatch_interval_s``). ``suite tune`` uses the same rule for the wait.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class BatchCost:
    """A backend's batch latency as ``fixed_s + per_sample_s * n``, fitted at warm-up
    from the fastest warm-up calls at batch 1 and at ``max_batch_size``."""

    fixed_s: float
    per_sample_s: float

    @classmethod
    def fit(cls, n1: int, t1: float, n2: int, t2: float) -> BatchCost:
        per_sample = max(0.0, (t2 - t1) / (n2 - n1)) if n2 > n1 else 0.0
        return cls(max(0.0, t1 - per_sample * n1), per_sample)

    def latency_s(self, n: int) -> float:
        return self.fixed_s + self.per_sample_s * n

    def batch_cap(self, bound_s: float, max_batch: int, workers: int = 1,
                  rate: float = 0.0) -> int:
        """The largest Server batch to form, 1 to ``max_batch``.

        A query waits for a worker (up to one batch) and then runs in its own batch, so
        a batch that takes more than half the bound puts its queries at risk, and a
        backlog must not grow batches past that: on an accelerator whose full batch
        takes longer than the bound (ResNet-50 at 256 on one GPU, 25 ms against 15)
        that growth turned a passing rate into seconds of queueing, and larger batches
        also queue longer for a shared device's compute. But a cap below what
        ``workers`` need to carry ``rate`` (with a quarter in reserve) would starve the
        run outright, so the cap is never below that.
        """
        if self.per_sample_s <= 0:
            return max_batch
        safe = int((bound_s / 2 - self.fixed_s) / self.per_sample_s)
        needed = 0
        per_worker = 1.25 * rate / max(workers, 1)  # samples/s each worker must carry
        if per_worker > 0:
            if per_worker * self.per_sample_s >= 1:
                needed = max_batch  # not even full batches keep up: as large as allowed
            else:  # n / (fixed + per_sample * n) >= per_worker
                needed = math.ceil(per_worker * self.fixed_s /
                                   (1 - per_worker * self.per_sample_s))
        return max(1, min(max_batch, max(safe, needed)))


def derive_max_wait_s(bound_s: float, batch_s: float) -> float:
    """How long a Server batch may wait for more queries, from the latency bound and the
    measured latency of a full batch.

    A query's latency is at most its wait, the batch ahead of it and its own batch, plus
    the scheduling jitter of a busy machine; a quarter of what is left after two batches
    keeps the p99 well inside the bound while still filling batches at high rates.
    """
    return max(0.0, (bound_s - 2 * batch_s) / 4)


def dispatch_interval_s(cost: BatchCost, bound_s: float, workers: int, rate: float,
                        cap: int) -> float:
    """How far apart Server batches leave, across all workers: 0 for no pacing.

    Workers that each take whatever is queued the moment they are free bunch up: two
    free at once, one takes the backlog, the other a single query, and then no worker
    is free for most of a batch's time, so a query can wait nearly a whole batch before
    its own batch starts. On an accelerator whose fixed cost is most of a batch (4.5 ms
    of ResNet-50's 5 ms at batch 1 on an H100) that wait is what sends p99 past the
    bound. Spacing dispatches evenly bounds the wait by the interval: batches of
    ``rate x interval`` leave every ``interval``, and ``workers`` keep up when
    ``fixed + per_sample x rate x interval <= workers x interval``, that is when the
    interval is at least ``fixed / (workers - rate x per_sample)``. A fifth more than
    that leaves the workers slack; the interval is kept short enough that it and its
    batch take at most 0.6 of the bound, and that its batch stays within 0.8 of the
    cap. Where no interval qualifies (the rate needs every worker all the time), or it
    would be under 50 us (a CPU backend with no fixed cost), batches are not paced.
    """
    if rate <= 0 or bound_s <= 0 or cost.fixed_s <= 0:
        return 0.0
    per_s = rate  # samples arriving per second
    slack = workers - per_s * cost.per_sample_s
    if slack <= 0:
        return 0.0
    interval = 1.2 * cost.fixed_s / slack
    longest = (0.6 * bound_s - cost.fixed_s) / (1 + per_s * cost.per_sample_s)
    interval = min(interval, longest, 0.8 * cap / per_s)
    return interval if interval >= 50e-6 else 0.0


def tuned_max_wait_us(cost: BatchCost, bound_s: float, batch: int, workers: int,
                      rate: float) -> int:
    """What ``suite tune`` records as ``sut.max_wait_us`` for Server at ``batch``.

    A fixed wait (a quarter of the bound less two batches) where the warm-up policy
    would neither cap the batch nor pace it: a CPU backend, whose calls cost per sample.
    Else -1, so that each run derives the cap, the wait and the pacing at warm-up for its
    own target rate: a fixed wait turns both off, and without them an accelerator's
    Server collapses (ResNet-50 on the simulated H100: p99 1.2 s at 5,000 QPS without the
    cap, batches up to 256, against 31 ms with it).
    """
    cap = cost.batch_cap(bound_s, batch, workers, rate)
    if cap < batch or dispatch_interval_s(cost, bound_s, workers, rate, cap) > 0:
        return -1
    return int(derive_max_wait_s(bound_s, cost.latency_s(batch)) * 1e6)


@dataclass(frozen=True)
class ServerPolicy:
    """What ``derive`` decided for a Server run, and the record for ``status.json``."""

    batch_cap: int
    max_wait_s: float
    interval_s: float
    record: dict[str, float]


def derive(timings: dict[int, list[float]], largest: int, bound_s: float, workers: int,
           rate: float) -> ServerPolicy:
    """The Server policy from warm-up ``timings`` (seconds per call at batch 1 and at
    ``largest``)."""
    # The fastest call, not the median: warm-up on a busy machine meets the same
    # preemptions as the run, and a batch-1 figure inflated by them shrank the cap.
    best = {n: min(t) for n, t in timings.items()}
    cost = BatchCost.fit(1, best[1], largest, best[largest])
    cap = cost.batch_cap(bound_s, largest, workers, rate) if bound_s else largest
    batch_s = cost.latency_s(cap)
    wait_s = derive_max_wait_s(bound_s, batch_s)
    interval_s = dispatch_interval_s(cost, bound_s, workers, rate, cap)
    return ServerPolicy(cap, wait_s, interval_s, {
        "batch_latency_us": round(best[largest] * 1e6, 1),
        "batch1_latency_us": round(best[1] * 1e6, 1),
        "batch_cap": cap,
        "capped_batch_latency_us": round(batch_s * 1e6, 1),
        "max_wait_us": round(wait_s * 1e6, 1),
        "dispatch_interval_us": round(interval_s * 1e6, 1)})
