"""The SUT's dispatch, batching and failure handling, above a fake completer.

LoadGen itself is exercised in tests/integration (test_integration.py, test_faults.py);
here the completion layer is a recorder so that batching decisions can be asserted exactly.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from suite.backends.null import NullBackend
from suite.config.model import SutConfig
from suite.datasets.base import InMemoryDataset
from suite.errors import DatasetError
from suite.harness.sut.core import InflightTable, SystemUnderTest
from suite.models import load_card
from suite.paths import find_paths
from suite.postprocess import make_postprocess
from suite.scenarios import Scenario


class RecordingCompleter:
    """Stands in for ``suite.harness.loadgen.Completer``: records what would be completed."""

    dtype = np.dtype(np.int32)
    row_nbytes = 4

    def __init__(self) -> None:
        self.completed = 0
        self.batches: list[list[int]] = []
        self.values: dict[int, int] = {}
        self.empty: list[int] = []
        self.lock = threading.Lock()

    def complete(self, ids: Sequence[int], responses: Any) -> None:
        with self.lock:
            assert len(ids) == len(responses)
            self.batches.append(list(ids))
            self.values.update(zip(ids, (int(v) for v in responses), strict=True))
            self.completed += len(ids)

    def complete_empty(self, ids: Sequence[int]) -> None:
        with self.lock:
            self.empty.extend(ids)
            self.completed += len(ids)


class ArrayDataset(InMemoryDataset):
    name = "array"

    def __init__(self, n: int) -> None:
        super().__init__(np.arange(n, dtype=np.int64) % 10, (1, 8, 8), np.dtype(np.float32))
        self.images = np.stack([np.full((1, 8, 8), i, np.float32) for i in range(n)])

    def _read(self, indices: Any) -> Any:
        return self.images[indices]


class EchoBackend(NullBackend):
    """Logits whose argmax is the sample's first pixel mod 10; optional fault."""

    def __init__(self, fail_on: int = -1, delay: float = 0.0) -> None:
        super().__init__()
        self.calls, self.fail_on, self.delay = 0, fail_on, delay
        self.batch_sizes: list[int] = []

    def predict(self, batch: Any) -> Any:
        self.calls += 1
        self.batch_sizes.append(len(batch))
        if self.calls == self.fail_on:
            raise RuntimeError("boom")
        if self.delay:
            time.sleep(self.delay)
        logits = np.zeros((len(batch), 10), np.float32)
        logits[np.arange(len(batch)), batch[:, 0, 0, 0].astype(int) % 10] = 1.0
        return logits


def make_sut(scenario: Scenario, backend: EchoBackend, n: int = 64,
             **config: Any) -> tuple[SystemUnderTest, RecordingCompleter]:
    card = load_card(find_paths(), "digits")
    backend.load(card, config.get("max_batch_size", 64))
    dataset = ArrayDataset(n)
    dataset.load(list(range(n)))
    postprocess, _ = make_postprocess(card)
    completer = RecordingCompleter()
    sut = SystemUnderTest(backend, dataset, postprocess, completer,  # type: ignore[arg-type]
                          scenario, SutConfig(warmup_batches=0, **config))
    return sut, completer


def wait_for(predicate: Any, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.005)


def test_inline_completes_each_query_with_its_own_predictions() -> None:
    sut, done = make_sut(Scenario.MULTI_STREAM, EchoBackend(), max_batch_size=8)
    sut.start()
    sut.issue([101, 102, 103], [7, 8, 9])
    sut.stop()
    assert done.batches == [[101, 102, 103]]
    assert done.values == {101: 7, 102: 8, 103: 9}


def test_offline_splits_into_max_batch_chunks_and_completes_everything() -> None:
    backend = EchoBackend()
    sut, done = make_sut(Scenario.OFFLINE, backend, n=64, max_batch_size=16, workers=2)
    sut.start()
    ids, indices = list(range(1000, 1100)), [i % 64 for i in range(100)]
    sut.issue(ids, indices)
    wait_for(lambda: done.completed == 100)
    sut.stop()
    assert sorted(qid for batch in done.batches for qid in batch) == ids
    assert max(backend.batch_sizes) == 16
    assert all(done.values[qid] == idx % 10 for qid, idx in zip(ids, indices, strict=True))


def test_server_batches_waiting_queries_up_to_the_max() -> None:
    backend = EchoBackend(delay=0.05)
    sut, done = make_sut(Scenario.SERVER, backend, max_batch_size=4, max_wait_us=20_000,
                         workers=1)
    sut.start()
    for qid in range(10):
        sut.issue([qid + 1], [qid])
    wait_for(lambda: done.completed == 10)
    sut.stop()
    assert max(backend.batch_sizes) == 4  # merged, never above the max
    assert len(backend.batch_sizes) < 10
    assert done.values == {qid + 1: qid % 10 for qid in range(10)}


def test_server_splits_a_coalesced_query_larger_than_a_batch() -> None:
    # With loadgen.coalesce_queries LoadGen hands over every overdue query in one call,
    # which can exceed max_batch_size: the batches stay within it and nothing is lost.
    backend = EchoBackend()
    sut, done = make_sut(Scenario.SERVER, backend, max_batch_size=4, max_wait_us=0, workers=1)
    sut.start()
    sut.issue(list(range(100, 110)), list(range(10)))
    sut.issue([200, 201, 202], [3, 4, 5])
    wait_for(lambda: done.completed == 13)
    sut.stop()
    assert max(backend.batch_sizes) == 4
    assert sorted(qid for batch in done.batches for qid in batch) == [
        *range(100, 110), 200, 201, 202]
    assert done.values == {**{100 + i: i for i in range(10)}, 200: 3, 201: 4, 202: 5}
    assert sut.issue_calls == 2


def test_a_failing_batch_is_completed_counted_and_drains_the_rest() -> None:
    backend = EchoBackend(fail_on=2)
    sut, done = make_sut(Scenario.OFFLINE, backend, max_batch_size=10, workers=1)
    sut.start()
    sut.issue(list(range(1, 51)), list(range(50)))
    wait_for(lambda: done.completed == 50)
    sut.issue([99], [0])  # after the failure: answered at once, no prediction
    sut.stop()
    assert sut.failures.failures[0]["kind"] == "backend_error"
    assert "boom" in sut.failures.failures[0]["message"]
    assert sut.failures.failed_samples == 10
    assert 99 in done.empty
    completed = [qid for batch in done.batches for qid in batch] + done.empty
    assert sorted(completed) == [*range(1, 51), 99]  # each id exactly once


def test_watchdog_drains_a_hung_backend() -> None:
    release = threading.Event()

    class Hang(EchoBackend):
        def predict(self, batch: Any) -> Any:
            release.wait()
            return super().predict(batch)

    sut, done = make_sut(Scenario.OFFLINE, Hang(), max_batch_size=8, workers=1,
                         watchdog_timeout_s=0.2)
    sut.start()
    sut.issue(list(range(1, 17)), list(range(16)))
    wait_for(lambda: done.completed == 16)
    assert sut.failures.failures[0]["kind"] == "watchdog_timeout"
    release.set()  # the late answer must not complete anything twice
    time.sleep(0.1)
    sut.stop()
    assert sorted(done.empty) == list(range(1, 17)) and done.batches == []


def test_a_server_worker_thread_that_stops_fails_the_run_instead_of_stranding_queries(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # A bug outside predict (here: registering a batch) once would end the worker thread
    # silently, and the queries behind it would wait forever.
    sut, done = make_sut(Scenario.SERVER, EchoBackend(), max_batch_size=4, max_wait_us=0,
                         workers=1)

    def broken_add(ids: list[int]) -> int | None:
        raise KeyError("bug")

    monkeypatch.setattr(sut.inflight, "add", broken_add)
    sut.start()
    sut.issue([1, 2], [0, 1])
    wait_for(lambda: bool(sut.failures))
    sut.issue([3], [2])  # after the failure: answered at once
    wait_for(lambda: done.completed == 3)
    sut.stop()
    failure = sut.failures.failures[0]
    assert failure["kind"] == "harness_error"
    assert "sut-worker-0 stopped" in failure["message"] and "bug" in failure["message"]
    assert done.empty == [1, 2, 3] and done.batches == []  # the held ones too, once each


def test_watchdog_drains_server_queries_no_worker_takes() -> None:
    release = threading.Event()
    sut, done = make_sut(Scenario.SERVER, EchoBackend(), max_batch_size=4, max_wait_us=0,
                         workers=1, watchdog_timeout_s=0.2)
    sut._dynamic_worker = release.wait  # type: ignore[method-assign,assignment]  # stuck
    sut.start()
    sut.issue([1, 2], [0, 1])
    sut.issue([3], [2])
    wait_for(lambda: done.completed == 3)
    assert sut.failures.failures[0]["kind"] == "watchdog_timeout"
    assert "no worker taking them" in sut.failures.failures[0]["message"]
    assert sorted(done.empty) == [1, 2, 3] and done.batches == []
    release.set()
    sut.stop()


def test_offline_span_is_carved_in_order_and_a_drain_returns_the_uncarved_rest() -> None:
    table = InflightTable()
    assert table.add_span(list(range(10)), list(range(100, 110)))
    first = table.take(4)
    assert first is not None and first[1:] == ([0, 1, 2, 3], [100, 101, 102, 103])
    second = table.take(4)
    assert second is not None and table.claim(second[0])  # completed normally
    # The drain gets the carved-but-unclaimed batch and the uncarved rest, once each.
    assert sorted(table.claim_all()) == [0, 1, 2, 3, 8, 9]
    assert table.take(4) is None and not table.claim(first[0])


def test_a_drained_table_refuses_new_work_so_the_caller_completes_it() -> None:
    table = InflightTable()
    table.claim_all()
    assert table.add([1]) is None
    assert not table.add_span([2, 3], [0, 1])
    assert table.take(8) is None


def test_a_query_issued_after_a_drain_is_completed_empty_not_lost() -> None:
    for scenario in (Scenario.OFFLINE, Scenario.SERVER, Scenario.SINGLE_STREAM):
        backend = EchoBackend()
        sut, done = make_sut(scenario, backend, max_batch_size=8, workers=1)
        sut.start()
        sut.drain()
        ids = [7] if scenario is Scenario.SINGLE_STREAM else [7, 8]
        sut.issue(ids, list(range(len(ids))))
        sut.stop()
        assert sorted(done.empty) == ids and backend.calls == 0, scenario


def test_server_wait_is_derived_from_the_bound_and_the_batch_latency() -> None:
    backend = EchoBackend(delay=0.002)
    sut, _ = make_sut(Scenario.SERVER, backend, max_batch_size=8, max_wait_us=-1, workers=1)
    sut._latency_bound_ms = 10.0
    sut.config = sut.config.model_copy(update={"warmup_batches": 3})
    sut.warmup()
    assert sut.derived["batch_latency_us"] >= 2000  # the backend sleeps 2 ms per batch
    # The wait leaves room for two batches of the cap's size (the fit's latency there).
    batch_us = sut.derived["capped_batch_latency_us"]
    assert batch_us >= 2000
    assert sut.derived["max_wait_us"] == pytest.approx((10_000 - 2 * batch_us) / 4, abs=1)
    assert sut.max_wait_s == pytest.approx(sut.derived["max_wait_us"] / 1e6, abs=1e-6)


class SharedWarmBackend(EchoBackend):
    """Like CPU onnxruntime: one warm-up serves every worker thread."""

    @property
    def warm_per_thread(self) -> bool:
        return False


@pytest.mark.parametrize(("scenario", "sizes"), [
    (Scenario.OFFLINE, [1, 1]),  # full batches all test long: a cold first one costs ~0
    (Scenario.SERVER, [1, 8, 1, 8]),  # batch latencies derive the policy
    (Scenario.SINGLE_STREAM, [1, 8, 1, 8]),
])
def test_the_warm_up_predicts_the_largest_batch_except_in_offline(
        scenario: Scenario, sizes: list[int]) -> None:
    backend = SharedWarmBackend()
    sut, _ = make_sut(scenario, backend, max_batch_size=8, workers=1)
    sut.config = sut.config.model_copy(update={"warmup_batches": 2})
    sut.warmup()
    assert backend.batch_sizes == sizes


def test_server_wait_collapses_at_light_load_and_grows_under_load() -> None:
    sut, done = make_sut(Scenario.SERVER, EchoBackend(), max_batch_size=4, max_wait_us=2000,
                         workers=1)
    sut.start()
    for qid in range(12):  # sparse: one query at a time, far apart
        sut.issue([qid + 1], [qid])
        wait_for(lambda qid=qid: done.completed == qid + 1)
        time.sleep(0.01)
    assert sut.waits[0] == pytest.approx(0.002)
    assert sut.waits[-1] == 0.0  # halved after every lone query, then none at all
    backend = EchoBackend(delay=0.02)
    sut.backend = backend
    for qid in range(100, 140):  # a burst: batches fill, so the wait grows again
        sut.issue([qid], [qid % 64])
    wait_for(lambda: done.completed == 52)
    sut.stop()
    assert max(list(sut.waits)[12:]) > 0.0 and max(backend.batch_sizes) == 4


@pytest.mark.parametrize("scenario", list(Scenario))
def test_every_scenario_has_a_dispatch(scenario: Scenario) -> None:
    from suite.harness.sut.core import DISPATCH

    assert scenario in DISPATCH


def test_samples_staged_in_loadgen_order_gather_without_a_copy_when_consecutive() -> None:
    # LoadGen's Offline query is the loaded set repeated in load order.
    dataset = ArrayDataset(20)
    order = [7, 3, 11, 3, 0, 19, 5]  # duplicates allowed
    dataset.load(order)
    out = dataset.new_buffer(8)
    run = dataset.gather(np.array([3, 11, 0, 19]), out)
    assert np.shares_memory(run, dataset._loaded) and not np.shares_memory(run, out)
    assert [int(x) for x in run[:, 0, 0, 0]] == [3, 11, 0, 19]
    wrapped = dataset.gather(np.array([19, 5, 7, 3]), out)  # across the end of one pass
    assert np.shares_memory(wrapped, out)
    assert [int(x) for x in wrapped[:, 0, 0, 0]] == [19, 5, 7, 3]
    shuffled = dataset.gather(np.array([11, 7, 5]), out)
    assert [int(x) for x in shuffled[:, 0, 0, 0]] == [11, 7, 5]
    with pytest.raises(DatasetError, match="not loaded"):
        dataset.sample(4)
