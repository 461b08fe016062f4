"""Server batch pacing: the interval the policy derives, the pacer that hands out
dispatch times and the queue's fill honouring them (the record a run leaves is asserted
in tests/integration/test_simulated.py, on the same LoadGen run as the cap)."""

from __future__ import annotations

import collections
import queue
import time
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from suite.datasets.base import InMemoryDataset
from suite.errors import DatasetError
from suite.harness.sut.server_policy import (
    BatchCost,
    derive,
    derive_max_wait_s,
    dispatch_interval_s,
    tuned_max_wait_us,
)
from suite.harness.sut.server_queue import Pacer, Query, fill
from suite.scenarios import Scenario
from tests.unit.harness.sut.test_core import EchoBackend, make_sut, wait_for

H100 = BatchCost(4.5e-3, 0.08e-3)  # the resnet50-h100-fp16 profile's a + b x n


def test_tune_keeps_the_warmup_policy_where_it_would_cap_or_pace() -> None:
    """`suite tune` used to record a fixed wait for every backend, which turns the cap and
    the pacing off in every later run: on an accelerator that is the collapse issue 13
    describes. Now it leaves -1 (derive at warm-up) wherever the policy would act."""
    # ResNet-50 on the simulated H100 at 8,000 QPS, 4 workers, batch 256: paced and capped.
    assert tuned_max_wait_us(H100, 15e-3, 256, 4, 8000.0) == -1
    # A full batch over half the bound caps it even at a low rate.
    assert tuned_max_wait_us(BatchCost(0.5e-3, 0.05e-3), 10e-3, 256, 2, 100.0) == -1
    # A CPU backend (digits on onnxruntime: 20 us + 2.7 us a sample), neither capped nor
    # paced at 320k QPS: the fixed wait, as before.
    cpu = BatchCost(20e-6, 2.7e-6)
    assert tuned_max_wait_us(cpu, 10e-3, 256, 2, 320e3) == int(
        derive_max_wait_s(10e-3, cpu.latency_s(256)) * 1e6) > 0


def test_the_interval_lets_the_workers_keep_up_with_a_fifth_to_spare() -> None:
    # 8,600 QPS on 4 workers: fixed / (workers - rate x per_sample) = 4.5 / 3.312 ms.
    interval = dispatch_interval_s(H100, 15e-3, 4, 8600.0, cap=26)
    assert interval == pytest.approx(1.2 * 4.5e-3 / (4 - 8600 * 0.08e-3), rel=1e-9)
    batch = 8600 * interval  # samples a batch collects in one interval
    assert H100.latency_s(round(batch)) <= 4 * interval  # four workers keep up


def test_the_interval_is_bounded_by_the_latency_bound_and_the_cap() -> None:
    # A tight bound: the interval and its batch take at most 0.6 of it.
    tight = dispatch_interval_s(H100, 10e-3, 4, 8600.0, cap=256)
    assert tight == pytest.approx((0.6 * 10e-3 - 4.5e-3) / (1 + 8600 * 0.08e-3))
    # A small cap: the interval's batch stays within 0.8 of it.
    assert dispatch_interval_s(H100, 15e-3, 4, 8600.0, cap=8) == pytest.approx(0.8 * 8 / 8600)


def test_no_pacing_where_it_cannot_help() -> None:
    assert dispatch_interval_s(H100, 15e-3, 4, 60_000.0, cap=256) == 0.0  # needs every worker
    assert dispatch_interval_s(BatchCost(0.0, 2e-6), 10e-3, 2, 1e5, cap=256) == 0.0  # no fixed cost
    assert dispatch_interval_s(BatchCost(10e-6, 2e-6), 10e-3, 2, 1e5, cap=256) == 0.0  # < 50 us
    assert dispatch_interval_s(H100, 15e-3, 4, 0.0, cap=256) == 0.0  # no target rate
    assert dispatch_interval_s(H100, 0.0, 4, 8600.0, cap=256) == 0.0  # no bound


def test_derive_fits_the_fastest_warmup_calls_and_records_the_interval() -> None:
    # A preempted batch-1 call (9 ms) must not inflate the fixed cost.
    timings = {1: [4.58e-3, 9.0e-3, 4.6e-3], 256: [25.0e-3, 25.5e-3, 31.0e-3]}
    policy = derive(timings, 256, 15e-3, 4, 8600.0)
    assert policy.record["batch1_latency_us"] == pytest.approx(4580.0)
    assert policy.record["batch_latency_us"] == pytest.approx(25000.0)
    assert policy.interval_s > 0
    assert policy.record["dispatch_interval_us"] == pytest.approx(policy.interval_s * 1e6, abs=0.1)
    assert 1 <= policy.batch_cap <= 256


def test_paced_workers_do_not_hold_queries_behind_each_other() -> None:
    # Four idle workers, batches 0.3 s apart, queries a few ms apart: only the worker
    # forming a batch takes queries, so the first leaves at once and the next three
    # leave together at the next time. (Were every idle worker to take one, each would
    # hold its query for one more interval: [[1], [2], [3], [4]] over 0.9 s.)
    sut, done = make_sut(Scenario.SERVER, EchoBackend(), max_batch_size=8, workers=4)
    sut.interval_s = 0.3
    sut.start()
    sut.issue([1], [1])
    wait_for(lambda: done.completed == 1)
    for qid in (2, 3, 4):
        sut.issue([qid], [qid])
        time.sleep(0.01)  # long enough for an idle worker to take it
    wait_for(lambda: done.completed == 4)
    sut.stop()
    assert done.batches == [[1], [2, 3, 4]]


def test_a_paced_worker_with_the_rest_of_a_cut_query_needs_no_turn() -> None:
    # One coalesced query of 10 samples, batches of at most 4: the worker that takes it
    # carries the other 6 and must send them while another worker holds the turn,
    # waiting for new queries that never come (the end of a run).
    sut, done = make_sut(Scenario.SERVER, EchoBackend(), max_batch_size=4, workers=2)
    sut.interval_s = 0.01
    sut.start()
    sut.issue(list(range(10)), list(range(10)))
    wait_for(lambda: done.completed == 10)
    sut.stop()
    assert sorted(len(batch) for batch in done.batches) == [2, 4, 4]


def test_the_pacer_spaces_reservations_and_is_immediate_after_idle() -> None:
    pacer = Pacer(0.002)
    first = pacer.reserve(10.0)
    assert first == 10.0
    assert pacer.reserve(10.0) == pytest.approx(10.002)
    assert pacer.reserve(10.0005) == pytest.approx(10.004)
    assert pacer.reserve(20.0) == 20.0  # idle since: no wait


def test_fill_holds_a_batch_until_its_dispatch_time_and_collects_meanwhile() -> None:
    source: queue.SimpleQueue[Query | None] = queue.SimpleQueue()
    pacer = Pacer(0.02)
    pacer.reserve(time.perf_counter())  # another worker's batch just left
    source.put(([2], [2]))
    queries: list[Query] = [([1], [1])]
    start = time.perf_counter()
    count, stopping = fill(source, queries, collections.deque(), 0.0, 8,
                           collections.deque(maxlen=4), pacer)
    assert time.perf_counter() - start >= 0.015  # waited for its slot despite wait 0
    assert (count, stopping) == (2, False)
    # Without a pacer, a zero wait sends what is there at once.
    source.put(([4], [4]))
    queries = [([3], [3])]
    assert fill(source, queries, collections.deque(), 0.0, 8, collections.deque())[0] == 2


def test_a_full_batch_does_not_wait_for_its_slot() -> None:
    source: queue.SimpleQueue[Query | None] = queue.SimpleQueue()
    pacer = Pacer(10.0)
    pacer.reserve(time.perf_counter())
    start = time.perf_counter()
    count, _ = fill(source, [([1, 2, 3, 4], [1, 2, 3, 4])], collections.deque(), 0.0, 4,
                    collections.deque(), pacer)
    assert count == 4 and time.perf_counter() - start < 5.0


def test_gather_copies_the_right_samples_and_refuses_unloaded_ones() -> None:
    data = np.arange(6 * 3, dtype=np.uint8).reshape(6, 3)

    class Rows(InMemoryDataset):
        name = "rows"

        def _read(self, indices: npt.NDArray[np.int64]) -> npt.NDArray[Any]:
            return data[indices]

    dataset = Rows(np.zeros(6, dtype=np.int64), (3,), np.dtype(np.uint8))
    dataset.load([4, 1, 5])
    out = np.zeros((4, 3), dtype=np.uint8)
    batch = dataset.gather(np.asarray([5, 1], dtype=np.int64), out)
    assert np.array_equal(batch, data[[5, 1]])
    with pytest.raises(DatasetError, match="not loaded"):
        dataset.gather(np.asarray([1, 2], dtype=np.int64), out)
