"""The LoadGen-process side of Server worker processes: the ring's bookkeeping, and
worker processes refused outside Server.

The ring's tests start no process, so what the ring owes LoadGen can be asserted exactly
above a recording completer. Idle worker processes are in
tests/integration/test_process_workers.py; the workers run through the real LoadGen in
tests/integration/test_integration.py and test_faults.py.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from suite.config.loader import SutConfig
from suite.errors import ConfigError
from suite.harness.sut.core import SystemUnderTest
from suite.harness.sut.workers import ProcessWorkers, WorkerSpec
from suite.models import load_card
from suite.paths import find_paths
from suite.postprocess import make_postprocess
from suite.scenarios import Scenario
from tests.unit.harness.sut.test_core import ArrayDataset, EchoBackend, RecordingCompleter

Failure = tuple[str, str, int, str]


@pytest.fixture
def ring() -> Iterator[tuple[ProcessWorkers, RecordingCompleter, list[Failure]]]:
    dataset = ArrayDataset(16)
    dataset.load(list(range(16)))
    completer = RecordingCompleter()
    failures: list[Failure] = []
    pool = ProcessWorkers(WorkerSpec(Path("."), None), dataset,  # type: ignore[arg-type]
                          completer, workers=1, max_batch=4,  # type: ignore[arg-type]
                          on_failure=lambda *f: failures.append(f), capacity=8)
    yield pool, completer, failures
    pool.stop()


def _finish(pool: ProcessWorkers, first: int, responses: list[int]) -> None:
    """What a worker does: write the batch's responses, then report it done."""
    for k, value in enumerate(responses):
        pool._responses[(first + k) % pool.layout.capacity] = value
    pool._complete(first, len(responses))


def test_batches_done_out_of_order_are_completed_with_their_own_responses(ring: Any) -> None:
    pool, completer, failures = ring
    pool.issue([101, 102], [5, 6])
    pool.issue([103, 104, 105], [7, 8, 9])
    assert pool._indices[:5].tolist() == [5, 6, 7, 8, 9]
    assert int(pool._ctrl[0]) == 5  # head, as the workers read it
    _finish(pool, 2, [70, 80, 90])  # the second batch finishes first
    assert completer.batches == [[103, 104, 105]]
    assert completer.values == {103: 70, 104: 80, 105: 90}
    assert pool._low == 0  # positions 0-1 are still outstanding
    _finish(pool, 0, [50, 60])
    assert pool._low == 5 and not pool._done
    assert completer.values[101] == 50 and not completer.empty and not failures


def test_drain_completes_exactly_the_gaps_and_answers_later_queries_at_once(
        ring: Any) -> None:
    pool, completer, _ = ring
    pool.issue([1, 2], [0, 1])
    pool.issue([3, 4, 5], [2, 3, 4])
    pool.issue([6], [5])
    _finish(pool, 2, [0, 0, 0])  # 3, 4, 5 done; 1, 2 and 6 are with the workers
    pool.drain()
    assert sorted(completer.empty) == [1, 2, 6]
    assert int(pool._ctrl[2]) == 1  # the workers stop claiming
    _finish(pool, 0, [0, 0])  # a worker reports a batch the drain already answered
    assert completer.completed == 6  # ... and it is not completed twice
    pool.issue([7], [6])
    assert completer.empty[-1] == 7 and completer.completed == 7


def test_the_ring_wraps_and_refuses_to_overwrite_outstanding_samples(ring: Any) -> None:
    pool, completer, failures = ring
    pool.issue([1, 2, 3, 4, 5, 6], [0, 1, 2, 3, 4, 5])
    _finish(pool, 0, [1, 1, 1, 1, 1, 1])
    pool.issue([7, 8, 9, 10, 11], [10, 11, 12, 13, 14])  # positions 6..10 wrap at 8
    assert pool._indices[6:8].tolist() == [10, 11]
    assert pool._indices[:3].tolist() == [12, 13, 14]
    _finish(pool, 6, [2, 3, 4, 5, 6])
    assert completer.batches[-1] == [7, 8, 9, 10, 11]
    assert [completer.values[i] for i in (7, 11)] == [2, 6]
    pool.issue(list(range(20, 28)), list(range(8)))  # 8 outstanding: the ring is full
    pool.issue([30], [0])  # no room: answered empty, and the run fails
    assert completer.empty == [30]
    [(kind, message, outstanding, _)] = failures
    assert kind == "harness_error" and "8 samples outstanding" in message
    assert outstanding == 8


def test_the_issuer_wakes_one_sleeping_worker_per_batch_waiting(ring: Any) -> None:
    pool, completer, _ = ring  # max_batch 4; nothing started, so nobody takes a post
    pool.issue([1], [0])  # no worker asleep: no post, and the issue path only reads
    assert not pool._wake.acquire(block=False)
    pool._ctrl[5] = 3  # three workers declared asleep
    pool.issue([2, 3, 4, 5], [1, 2, 3, 4])  # 5 samples waiting: two batches' worth
    assert int(pool._ctrl[5]) == 1
    assert pool._wake.acquire(block=False) and pool._wake.acquire(block=False)
    assert not pool._wake.acquire(block=False)
    pool.issue([6], [5])  # one more sample: the last sleeper is woken too
    assert int(pool._ctrl[5]) == 0 and pool._wake.acquire(block=False)
    assert not completer.empty


def test_published_samples_are_what_a_worker_gathers() -> None:
    dataset = ArrayDataset(16)
    dataset.load([9, 3, 3, 12])
    pool = ProcessWorkers(WorkerSpec(Path("."), None), dataset,  # type: ignore[arg-type]
                          RecordingCompleter(), 1, 4,  # type: ignore[arg-type]
                          lambda *f: None, capacity=8)
    try:
        pool.publish()
        from suite.harness.sut.worker_loop import _Staged

        staged = _Staged(pool._ring.name, dataset.sample_shape, dataset.dtype)
        view = staged.current(1)
        batch = view.gather(np.array([12, 9]), dataset.new_buffer(4))
        assert batch[:, 0, 0, 0].tolist() == [12.0, 9.0]
        dataset.load([1])  # the next loadable set is a new generation
        pool.publish()
        assert staged.current(2).gather(np.array([1]), dataset.new_buffer(4))[0, 0, 0, 0] == 1
        staged.close()
    finally:
        pool.stop()


@pytest.mark.parametrize("scenario", [Scenario.OFFLINE, Scenario.SINGLE_STREAM])
def test_worker_processes_are_refused_outside_server(scenario: Scenario) -> None:
    card = load_card(find_paths(), "digits")
    postprocess, _ = make_postprocess(card)
    with pytest.raises(ConfigError, match=r"sut\.worker_model"):
        SystemUnderTest(EchoBackend(), ArrayDataset(4), postprocess,
                        RecordingCompleter(), scenario,  # type: ignore[arg-type]
                        SutConfig(worker_model="processes"))

