"""Live progress of a running test, and early warnings that it is heading for INVALID.

The child's heartbeat thread calls ``LiveEstimator.observe`` once per beat with counters
the SUT already keeps (samples completed, ``issue_calls``) and the batches its workers
finished since the last beat (``sut.batch_stats.BatchTail``); nothing here runs on the hot
path. Each beat yields a ``LiveStatus``, sent to the parent as the heartbeat's ``live``
field and shown on the progress line.

Server figures are the SUT's view, not LoadGen's (whose per-query latencies exist only
at the end): a sample's latency is estimated as its batch's service time (gather to
completion, timed per batch) plus the queueing delay that a *sustained* backlog implies
(the smallest backlog of the last few beats over the completion rate, Little's law).
Warnings are evidence for the operator, recorded in ``status.json``; the verdict stays
LoadGen's, read from its detail log.
"""

from __future__ import annotations

import itertools
import math
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, runtime_checkable

#: Beats whose counters give the recent rates (2 s at the default 0.25 s heartbeat).

#: Called with (completed samples, expected samples or None, elapsed seconds). A callback
#: that is also a ``progress.LiveSink`` gets each beat's ``LiveStatus`` first.
ProgressCallback = Callable[[int, int | None, float], None]

WINDOW_BEATS = 8
#: A backlog must grow on this many consecutive beats before it is a warning; the
#: smallest backlog over as many beats is the sustained one that delays every sample.
GROWTH_BEATS = 4
#: ... and by at least this many samples over them (a few queries of jitter are not a trend).
MIN_GROWTH_SAMPLES = 32
#: Samples the latency estimate needs before its p99 means anything.
MIN_P99_SAMPLES = 200

# Histogram buckets: 8 per octave of microseconds, from 1 us to about 2^32 us (72 min).
_PER_OCTAVE = 8
_BUCKETS = 32 * _PER_OCTAVE


class LatencyHistogram:
    """Weighted latencies in log-spaced buckets (9% wide): bounded, whatever the run's
    length. Quantiles answer a bucket's upper edge, so they err high, never low."""

    def __init__(self) -> None:
        self.counts = [0] * _BUCKETS
        self.total = 0

    def add(self, seconds: float, weight: int = 1) -> None:
        us = seconds * 1e6
        index = int(math.log2(us) * _PER_OCTAVE) + 1 if us >= 1.0 else 0
        self.counts[min(index, _BUCKETS - 1)] += weight
        self.total += weight

    def add_many(self, seconds: Sequence[float], weights: Sequence[int],
                 offset_s: float = 0.0) -> None:
        """``add(seconds[k] + offset_s, weights[k])`` for every ``k``, in numpy: a beat may
        bring thousands of batches, and the heartbeat holds the GIL while it counts."""
        if not seconds:
            return
        import numpy as np  # lazy: the parent shows LiveStatus and never needs it

        us = (np.asarray(seconds, dtype=np.float64) + offset_s) * 1e6
        index = np.where(us >= 1.0, np.log2(np.maximum(us, 1.0)) * _PER_OCTAVE + 1, 0)
        index = np.minimum(index.astype(np.int64), _BUCKETS - 1)
        counts = np.bincount(index, weights=np.asarray(weights, dtype=np.float64),
                             minlength=_BUCKETS)
        for bucket in np.flatnonzero(counts).tolist():
            self.counts[bucket] += round(float(counts[bucket]))
        self.total += int(sum(weights))

    def quantile(self, q: float) -> float | None:
        """The ``q`` quantile in seconds, or None when empty."""
        if not self.total:
            return None
        rank = q * self.total
        seen = 0
        for index, count in enumerate(self.counts):
            seen += count
            if seen >= rank and count:
                return float(2.0 ** (index / _PER_OCTAVE) / 1e6)
        return float(2.0 ** ((_BUCKETS - 1) / _PER_OCTAVE) / 1e6)


@dataclass(frozen=True)
class LiveStatus:
    """One beat's view of a running test (the heartbeat's ``live`` field)."""

    scenario: str
    completed: int
    elapsed_s: float
    #: Samples completed per second over the last few beats (Server: the achieved QPS).
    rate: float
    #: Server: samples issued by LoadGen and not yet completed.
    backlog: int = 0
    target_qps: float | None = None
    #: Server: the SUT-side p99 estimate so far (see the module docstring), or None.
    p99_ms: float | None = None
    bound_ms: float | None = None
    #: The warnings raised so far, one line each (the latest last).
    warnings: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {key: list(value) if isinstance(value, tuple) else value
                for key, value in asdict(self).items()}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> LiveStatus | None:
        """The status a heartbeat carried, or None when it carried none or a malformed one."""
        try:
            return cls(**{**data, "warnings": tuple(str(w) for w in data.get("warnings", ()))})
        except TypeError:
            return None


@runtime_checkable
class LiveSink(Protocol):
    """A progress callback that also takes each beat's ``LiveStatus`` (the runner calls
    ``live`` just before the callback itself, on the relay thread)."""

    def live(self, status: LiveStatus) -> None: ...


@dataclass
class RunWarning:
    """A warning as ``status.json`` records it: its kind, the message with the figures
    when it was first raised and at its latest beat, and when (seconds into the run)."""

    kind: str
    message: str
    at_s: float
    #: A few words for the progress line (the latest figures).
    headline: str
    latest: str = ""

    def record(self) -> dict[str, Any]:
        return {"kind": self.kind, "message": self.message, "at_s": self.at_s,
                "latest": self.latest or self.message}


@dataclass
class _Beat:
    t: float
    completed: int
    issued: int
    backlog: int


@dataclass
class LiveEstimator:
    """Folds the heartbeats of one test into ``LiveStatus`` values and warnings.

    ``clock`` is injectable for tests; ``observe`` is called from one thread only.
    """

    scenario: str
    bound_ms: float | None = None
    target_qps: float | None = None
    clock: Callable[[], float] = time.monotonic
    histogram: LatencyHistogram = field(default_factory=LatencyHistogram)
    _beats: deque[_Beat] = field(default_factory=lambda: deque(maxlen=WINDOW_BEATS + 1))
    _start: float | None = None
    _warnings: dict[str, RunWarning] = field(default_factory=dict)

    @property
    def server(self) -> bool:
        return self.scenario.lower() == "server"

    def warnings(self) -> list[dict[str, Any]]:
        """The warnings raised so far, for ``status.json`` (first raised first)."""
        return [w.record() for w in list(self._warnings.values())]

    def observe(self, completed: int, issued: int,
                batches: tuple[Sequence[float], Sequence[int]] = ((), ())) -> LiveStatus:
        """One beat: ``completed`` samples, ``issued`` queries (Server), and the batches
        finished since the last beat as (service seconds, samples) lists."""
        now = self.clock()
        if self._start is None:
            self._start = now
        backlog = max(issued - completed, 0) if self.server else 0
        self._beats.append(_Beat(now, completed, issued, backlog))
        rate = self._rate(lambda b: b.completed)
        p99_ms: float | None = None
        if self.server:
            wait = self._queue_delay(rate)
            if wait is not None:
                self.histogram.add_many(*batches, offset_s=wait)
            if self.histogram.total >= MIN_P99_SAMPLES:
                p99 = self.histogram.quantile(0.99)
                p99_ms = None if p99 is None else round(p99 * 1e3, 3)
            self._check_backlog(now, rate)
            self._check_p99(now, p99_ms)
        return LiveStatus(
            scenario=self.scenario, completed=completed, elapsed_s=round(now - self._start, 3),
            rate=round(rate, 1), backlog=backlog,
            target_qps=self.target_qps if self.server else None, p99_ms=p99_ms,
            bound_ms=self.bound_ms if self.server else None,
            warnings=tuple(w.headline for w in self._warnings.values()))

    def _rate(self, count: Callable[[_Beat], int]) -> float:
        """Per second over the window (zero until two beats)."""
        first, last = self._beats[0], self._beats[-1]
        span = last.t - first.t
        return (count(last) - count(first)) / span if span > 0 else 0.0

    def _queue_delay(self, rate: float) -> float | None:
        """Seconds a sample waits behind the sustained backlog; None while unknown
        (no completions in the window, with samples waiting)."""
        recent = list(self._beats)[-GROWTH_BEATS:]
        sustained = min(b.backlog for b in recent)
        if not sustained:
            return 0.0
        return sustained / rate if rate > 0 else None

    def _check_backlog(self, now: float, rate: float) -> None:
        recent = list(self._beats)[-(GROWTH_BEATS + 1):]
        if len(recent) <= GROWTH_BEATS:
            return
        growing = all(b.backlog > a.backlog for a, b in itertools.pairwise(recent))
        grew = recent[-1].backlog - recent[0].backlog
        if not (growing and grew >= MIN_GROWTH_SAMPLES):
            return
        arriving = self._rate(lambda b: b.issued)
        target = f" (target {self.target_qps:,.0f} QPS)" if self.target_qps else ""
        self._raise(
            "backlog", now,
            f"Server backlog growing: {recent[-1].backlog:,} samples issued and not completed, "
            f"+{grew:,} over the last {GROWTH_BEATS} heartbeats; LoadGen issues "
            f"{arriving:,.0f}/s{target}, the SUT completes {rate:,.0f}/s",
            f"backlog growing ({arriving:,.0f}/s in, {rate:,.0f}/s out)")

    def _check_p99(self, now: float, p99_ms: float | None) -> None:
        if p99_ms is None or not self.bound_ms or p99_ms <= self.bound_ms:
            return
        self._raise("p99", now,
                    f"SUT-side p99 estimate {p99_ms:,.1f} ms is above the {self.bound_ms:g} ms "
                    "latency bound (LoadGen's own figure decides)",
                    f"p99 estimate above the {self.bound_ms:g} ms bound")

    def _raise(self, kind: str, now: float, message: str, headline: str) -> None:
        assert self._start is not None
        known = self._warnings.get(kind)
        if known is None:
            self._warnings[kind] = RunWarning(kind, message, round(now - self._start, 3),
                                              headline)
        else:
            known.latest, known.headline = message, headline


def warming_up(completed: int, elapsed_s: float) -> bool:
    """No rate to show yet: nothing completed, or a single beat (a rate needs two)."""
    return completed == 0 or elapsed_s <= 0


def describe(status: LiveStatus) -> str:
    """The progress line's figures for one beat (without the test's label); "warming up"
    until there is a rate, never a misleading 0 samples/s."""
    if warming_up(status.completed, status.elapsed_s):
        # a test done within one beat (an accuracy pass) has a count but no rate
        text = f"{status.completed:,} samples" if status.completed else "warming up"
        if status.backlog:
            text += f", {status.backlog:,} waiting"
    elif status.scenario.lower() != "server":
        text = f"{status.rate:,.0f} samples/s"
    else:
        target = f" of {status.target_qps:,.0f}" if status.target_qps else ""
        text = f"{status.rate:,.0f}{target} QPS"
        if status.p99_ms is not None:
            bound = f" (bound {status.bound_ms:g})" if status.bound_ms else ""
            text += f", SUT-side p99 est. {status.p99_ms:,.1f} ms{bound}"
        if status.backlog:
            text += f", {status.backlog:,} waiting"
    if status.warnings:
        text += f"  WARNING: {status.warnings[-1]}"
    return text


def observe_sut(estimator: LiveEstimator, sut: Any, tail: Any) -> LiveStatus:
    """One beat of a running SUT (``sut.core.SystemUnderTest`` or the LLM SUT) through
    ``tail`` (``sut.batch_stats.BatchTail``)."""
    # Issued before completed: a backlog read the other way round could count samples
    # completed after the issue count was taken. Samples, not ``issue_calls``: with
    # LoadGen's coalescing (an overloaded Server) one call carries many samples. Worker
    # processes and the LLM SUTs keep no per-batch records here (``worker_stats``): their
    # estimate has rates and backlog only.
    issued: int = getattr(sut, "issued_samples", sut.issue_calls)
    completed: int = sut.completer.completed
    return estimator.observe(completed, issued, tail.new(getattr(sut, "worker_stats", [])))
