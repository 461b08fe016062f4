"""Live progress and early INVALID warnings (``suite.harness.progress``), without LoadGen.

Unit tests drive the estimator with a fake clock and made-up counters; the per-batch
rings are read through ``BatchTail``; the heartbeat carries the live figures, the
runner's relay hands them to a progress callback, and the progress line shows them.
The Server runs through the real CLI and LoadGen are in tests/integration/test_progress.py.
"""

from __future__ import annotations

import io
import json
import threading
from types import SimpleNamespace
from typing import Any

import pytest
from rich.console import Console
from rich.progress import Progress

from suite.cli.app import _Progress
from suite.harness import child, runner
from suite.harness.progress import (
    GROWTH_BEATS,
    MIN_P99_SAMPLES,
    LatencyHistogram,
    LiveEstimator,
    LiveSink,
    LiveStatus,
    describe,
)
from suite.harness.sut.batch_stats import RECENT, BatchStats, BatchTail

BEAT_S = 0.25


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def drive(estimator: LiveEstimator, clock: FakeClock, beats: int, issue_per_s: float,
          complete_per_s: float, service_s: float, batch: int = 1,
          start: tuple[int, int] = (0, 0)) -> tuple[LiveStatus, tuple[int, int]]:
    """``beats`` heartbeats of a SUT that is issued and completes at the given rates,
    each completed batch of ``batch`` samples taking ``service_s``."""
    issued, completed = start
    status = estimator.observe(completed, issued)
    for _ in range(beats):
        clock.now += BEAT_S
        issued += round(issue_per_s * BEAT_S)
        done = round(complete_per_s * BEAT_S)
        completed += done
        batches = done // batch
        status = estimator.observe(completed, issued, ([service_s] * batches, [batch] * batches))
    return status, (issued, completed)


def server(clock: FakeClock, bound_ms: float = 10.0) -> LiveEstimator:
    return LiveEstimator("server", bound_ms=bound_ms, target_qps=5000.0, clock=clock)


def test_the_histogram_quantile_errs_high_by_at_most_a_bucket() -> None:
    histogram = LatencyHistogram()
    assert histogram.quantile(0.99) is None
    histogram.add(0.001, 990)
    histogram.add(0.100, 10)
    p50, p99, p999 = (histogram.quantile(q) for q in (0.5, 0.99, 0.999))
    assert p50 is not None and 0.001 <= p50 <= 0.001 * 1.1
    assert p99 is not None and 0.001 <= p99 <= 0.001 * 1.1  # 990 of 1,000 at 1 ms
    assert p999 is not None and 0.100 <= p999 <= 0.100 * 1.1
    histogram.add(0.0, 1)  # below a microsecond: the first bucket, no math error
    assert histogram.total == 1001


def test_adding_many_at_once_counts_as_adding_each() -> None:
    seconds = [0.0, 3e-7, 1e-6, 0.00123, 0.0099, 0.0101, 0.5, 1e9]
    weights = [1, 2, 3, 4, 5, 6, 7, 8]
    one, many = LatencyHistogram(), LatencyHistogram()
    for value, weight in zip(seconds, weights, strict=True):
        one.add(value + 0.002, weight)
    many.add_many(seconds, weights, offset_s=0.002)
    many.add_many([], [])
    assert many.counts == one.counts and many.total == one.total == 36


def test_a_server_past_capacity_warns_of_its_backlog_and_its_p99() -> None:
    clock = FakeClock()
    estimator = server(clock)
    status, _ = drive(estimator, clock, GROWTH_BEATS + 2, 5000, 1000, 0.016, batch=16)
    kinds = [w["kind"] for w in estimator.warnings()]
    assert set(kinds) == {"backlog", "p99"}
    backlog = next(w for w in estimator.warnings() if w["kind"] == "backlog")
    assert "5,000/s" in backlog["message"] and "1,000/s" in backlog["message"]
    assert backlog["at_s"] == pytest.approx(GROWTH_BEATS * BEAT_S)
    assert status.rate == pytest.approx(1000) and status.backlog == 6000
    assert status.p99_ms is not None and status.p99_ms > 1000  # seconds behind the backlog
    assert any("backlog growing" in w for w in status.warnings)
    assert "WARNING:" in describe(status)


def test_a_comfortable_server_raises_nothing_and_reports_its_figures() -> None:
    clock = FakeClock()
    estimator = server(clock)
    status, _ = drive(estimator, clock, 40, 1000, 1000, 0.001)
    assert estimator.warnings() == [] and status.warnings == ()
    assert status.p99_ms is not None and 1.0 <= status.p99_ms <= 1.1
    assert status.rate == pytest.approx(1000) and status.backlog == 0
    line = describe(status)
    assert "1,000 of 5,000 QPS" in line and "p99 est. 1.0 ms (bound 10)" in line
    assert "WARNING" not in line


def test_a_small_or_passing_backlog_is_not_a_trend() -> None:
    clock = FakeClock()
    estimator = server(clock, bound_ms=1000.0)
    # growing on every beat, but by 5 samples a beat: queueing jitter, not a trend
    drive(estimator, clock, 3 * GROWTH_BEATS, 1020, 1000, 0.001)
    # a burst that grows on fewer beats than GROWTH_BEATS, then drains
    _, counts = drive(estimator, clock, GROWTH_BEATS - 1, 3000, 1000, 0.001)
    drive(estimator, clock, 8, 1000, 3000, 0.001, start=counts)
    assert estimator.warnings() == []


def test_a_warning_stays_recorded_after_the_backlog_drains() -> None:
    clock = FakeClock()
    estimator = server(clock, bound_ms=1e6)  # only the backlog can warn
    _, counts = drive(estimator, clock, GROWTH_BEATS + 1, 3000, 1000, 0.001)
    status, _ = drive(estimator, clock, 20, 0, 2000, 0.001, start=counts)
    assert status.backlog == 0
    [record] = estimator.warnings()
    assert record["kind"] == "backlog" and record["latest"]
    assert status.warnings  # still on the progress line


def test_p99_needs_enough_samples_before_it_speaks() -> None:
    clock = FakeClock()
    estimator = server(clock)
    status = estimator.observe(0, 0)
    clock.now += BEAT_S
    status = estimator.observe(MIN_P99_SAMPLES - 1, MIN_P99_SAMPLES - 1,
                               ([0.5], [MIN_P99_SAMPLES - 1]))
    assert status.p99_ms is None and estimator.warnings() == []
    clock.now += BEAT_S
    status = estimator.observe(MIN_P99_SAMPLES, MIN_P99_SAMPLES, ([0.5], [1]))
    assert status.p99_ms is not None and [w["kind"] for w in estimator.warnings()] == ["p99"]


def test_offline_reports_samples_per_second_and_never_a_server_warning() -> None:
    clock = FakeClock()
    estimator = LiveEstimator("offline", clock=clock)
    # One issued query of all samples: issued - completed means nothing for Offline.
    status, _ = drive(estimator, clock, 12, 0, 4000, 0.5, batch=50, start=(1, 0))
    assert status.rate == pytest.approx(4000) and status.p99_ms is None
    assert status.backlog == 0 and estimator.warnings() == []
    assert describe(status) == "4,000 samples/s"


def test_live_status_survives_the_pipe_and_a_malformed_one_is_ignored() -> None:
    status = LiveStatus("server", 10, 1.5, 6.7, 3, 100.0, 2.5, 10.0, ("backlog growing",))
    assert LiveStatus.from_json(json.loads(json.dumps(status.to_json()))) == status
    assert LiveStatus.from_json({"scenario": "server", "bogus": 1}) is None


def test_the_tail_returns_each_batch_once_and_survives_a_lapped_ring() -> None:
    a, b = BatchStats(8), BatchStats(8)
    tail = BatchTail()
    a.add(4, 0.001, 0.002, 0.001)
    b.add(8, 0.0, 0.01, 0.0)
    assert tail.new([a, b]) == ([pytest.approx(0.004), 0.01], [4, 8])
    assert tail.new([a, b]) == ([], [])
    for n in range(1, RECENT * 2 + 1):
        a.add(1 + n % 8, 0.0, n * 1e-6, 0.0)
    durations, sizes = tail.new([a, b])
    # the newest stand for the lapped ones, in order across the ring's wrap
    expected = range(RECENT * 2 - (RECENT - BatchTail.SLACK) + 1, RECENT * 2 + 1)
    assert durations == [pytest.approx(n * 1e-6) for n in expected]
    assert sizes == [1 + n % 8 for n in expected]
    assert sum(a.sizes) == RECENT * 2 + 1  # the totals for status.json are all there
    a.add(3, 0.0, 0.5, 0.0)  # the next call starts where this one ended
    assert tail.new([a]) == ([0.5], [3])


def beats_of(sut: Any, estimator: LiveEstimator, beats: int) -> tuple[child._State, list[Any]]:
    """``beats`` heartbeats of a running test, as the parent would read them."""
    state = child._State()
    state.sut, state.running, state.live = sut, True, estimator
    lines: list[Any] = []
    done = threading.Event()

    def write(line: str) -> None:
        lines.append(json.loads(line))
        if len(lines) == beats - 1:
            done.set()  # the heartbeat sends one last beat and returns

    out = SimpleNamespace(write=write, flush=lambda: None)
    child._heartbeat(out, state, 0.0, done)  # type: ignore[arg-type]
    assert len(lines) == beats
    return state, lines


def fake_sut(completed: int, issued: Any) -> Any:
    """The counters the heartbeat reads, and one worker's batch ring."""
    stats = BatchStats(8)
    stats.add(2, 0.0, 0.001, 0.0)
    return SimpleNamespace(completer=SimpleNamespace(completed=completed), issue_calls=issued,
                           draining=threading.Event(), failures=[], worker_stats=[stats])


def test_the_heartbeat_carries_the_live_figures() -> None:
    estimator = LiveEstimator("server", bound_ms=10.0, target_qps=100.0)
    _, lines = beats_of(fake_sut(2, 2), estimator, 2)
    status = LiveStatus.from_json(lines[-1]["live"])
    assert status is not None and status.completed == 2 and status.backlog == 0
    assert estimator.histogram.total == 2  # the worker's batch, read once


def test_a_broken_estimate_stops_but_never_silences_the_heartbeat() -> None:
    state, lines = beats_of(fake_sut(5, "not a count"), LiveEstimator("server"), 2)
    assert "live_error" in lines[0] and "live" not in lines[0]
    assert state.live is None and lines[1]["completed"] == 5  # still beating


class Sink:
    """A progress callback that takes live figures (``LiveSink``), recording the order."""

    def __init__(self) -> None:
        self.calls: list[Any] = []

    def live(self, status: LiveStatus) -> None:
        self.calls.append(status)

    def __call__(self, completed: int, expected: int | None, elapsed: float) -> None:
        self.calls.append(completed)


def test_the_relay_hands_live_figures_to_a_sink_before_the_beat() -> None:
    status = LiveStatus("server", 40, 1.0, 40.0, warnings=("backlog growing",))
    lines = [json.dumps({"stage": "running", "setup": False, "completed": 40,
                         "elapsed_s": 1.0, "live": status.to_json()}) + "\n",
             json.dumps({"stage": "running", "setup": False, "completed": 50,
                         "elapsed_s": 1.2, "live": {"nonsense": True}}) + "\n"]
    sink = Sink()
    assert isinstance(sink, LiveSink)
    watch = runner._Watch(last_beat=0.0)
    runner._relay(iter(lines), watch, 100, sink, None)
    assert sink.calls == [status, 40, 50]
    assert watch.live is None  # the malformed one replaced it: no stale figures
    plain: list[int] = []  # a plain callback still gets its three arguments
    runner._relay(iter(lines), runner._Watch(last_beat=0.0), 100,
                  lambda done, expected, elapsed: plain.append(done), None)
    assert plain == [40, 50]


def test_the_progress_line_shows_the_figures_and_the_warning() -> None:
    console = Console(file=io.StringIO(), width=300, force_terminal=False)
    with Progress(console=console) as progress:
        bar = _Progress(progress, "digits server simulated performance")
        bar(10, 100, 1.0)
        [task] = progress.tasks
        assert task.description.endswith("10 samples/s")  # no live figures yet
        bar.live(LiveStatus("server", 50, 2.0, 900.0, 120, 5000.0, 250.0, 10.0,
                            ("p99 estimate above the 10 ms bound",)))
        bar(50, 100, 2.0)
        [task] = progress.tasks
    assert "900 of 5,000 QPS" in task.description
    assert "SUT-side p99 est. 250.0 ms (bound 10)" in task.description
    assert "WARNING:[/] p99 estimate above the 10 ms bound" in task.description

