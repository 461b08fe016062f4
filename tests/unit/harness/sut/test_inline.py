"""SingleStream's shortest path (suite/harness/sut/inline.py ``inline_issue``): the lock-free
inline registration, the class index written into the completion payload, and the output
contract's per-batch fast path.

``QuerySamplesComplete`` is replaced by a recorder that reads each response's bytes
from its address, as LoadGen does: the layer below the completer, faked only here
(the real LoadGen runs these paths in tests/integration/test_integration.py).
"""

from __future__ import annotations

import ctypes
import threading
from typing import Any

import numpy as np
import pytest

from suite.config.model import SutConfig
from suite.errors import BackendError
from suite.harness import loadgen
from suite.harness.loadgen import Completer
from suite.harness.output_contract import OutputContract
from suite.harness.sut.core import SystemUnderTest
from suite.harness.sut.inflight import InflightTable
from suite.models import ModelCard, load_card
from suite.paths import find_paths
from suite.postprocess import index_writer, make_postprocess
from suite.scenarios import Scenario
from tests.unit.harness.sut.test_core import ArrayDataset, EchoBackend


@pytest.fixture(scope="module")
def digits() -> ModelCard:
    return load_card(find_paths(), "digits")


class Recorded:
    """What LoadGen would read: each response's id and its payload bytes."""

    def __init__(self) -> None:
        self.responses: list[tuple[int, bytes]] = []

    def __call__(self, responses: list[Any], response_cb: Any = None) -> None:
        for r in responses:
            self.responses.append((r.id, ctypes.string_at(r.data, r.size)))


@pytest.fixture()
def recorded(monkeypatch: pytest.MonkeyPatch) -> Recorded:
    recorder = Recorded()
    monkeypatch.setattr(loadgen.lg, "QuerySamplesComplete", recorder)
    return recorder


@pytest.mark.parametrize(("dtype", "offset"), [("int32", 0), ("int32", -1), ("int64", -1)])
def test_the_index_slot_sends_the_response_dtypes_bytes(
        digits: ModelCard, recorded: Recorded, dtype: str, offset: int) -> None:
    card = digits.model_copy(update={"postprocess": digits.postprocess.model_copy(
        update={"response_dtype": dtype, "label_offset": offset})})
    postprocess, response_dtype = make_postprocess(card)
    write = index_writer(postprocess)
    single = Completer(response_dtype).single_index()
    assert write is not None and single is not None
    slot, complete_one = single
    for qid, cls in ((7, 0), (8, 9), (9, 3)):
        scores = np.zeros((1, 10), np.float32)
        scores[0, cls] = 1.0
        write(scores, slot)
        complete_one(qid)
        # the same bytes the general path (postprocess, then Completer.complete) sends
        assert recorded.responses[-1] == (qid, postprocess(scores).tobytes())
        assert np.frombuffer(recorded.responses[-1][1], dtype)[0] == cls + offset


def test_no_index_slot_for_a_float_response(digits: ModelCard) -> None:
    card = digits.model_copy(update={"postprocess": digits.postprocess.model_copy(
        update={"response_dtype": "float32"})})
    postprocess, response_dtype = make_postprocess(card)
    assert index_writer(postprocess) is None
    assert Completer(response_dtype).single_index() is None


def make_single_stream(digits: ModelCard, backend: EchoBackend,
                       **config: Any) -> tuple[SystemUnderTest, Completer]:
    backend.load(digits, 1)
    dataset = ArrayDataset(16)
    dataset.load(list(range(16)))
    postprocess, dtype = make_postprocess(digits)
    completer = Completer(dtype)
    sut = SystemUnderTest(backend, dataset, postprocess, completer, Scenario.SINGLE_STREAM,
                          SutConfig(warmup_batches=0, max_batch_size=1, **config),
                          contract=OutputContract("echo", digits))
    return sut, completer


def test_single_stream_completes_each_query_with_its_class(
        digits: ModelCard, recorded: Recorded) -> None:
    sut, completer = make_single_stream(digits, EchoBackend())
    sut.start()
    for qid, index in ((100, 3), (101, 12), (102, 5)):
        sut.issue([qid], [index])
    sut.stop()
    assert [(qid, int(np.frombuffer(data, np.int32)[0])) for qid, data in recorded.responses] \
        == [(100, 3), (101, 2), (102, 5)]
    assert completer.completed == 3 and sut.issued_samples == 3 and not sut.failures


def test_single_stream_contract_breach_fails_the_query_once(
        digits: ModelCard, recorded: Recorded) -> None:
    class TwoRows(EchoBackend):
        def predict(self, batch: Any) -> Any:
            return np.zeros((2, 10), np.float32)  # two rows for one sample

    sut, _ = make_single_stream(digits, TwoRows())
    sut.start()
    sut.issue([100], [3])
    sut.issue([101], [4])  # after the drain: answered at once, empty
    sut.stop()
    assert sut.failures.failures[0]["kind"] == "backend_error"
    assert "broke the output contract" in sut.failures.failures[0]["message"]
    assert sorted(qid for qid, _ in recorded.responses) == [100, 101]


def test_a_watchdog_drain_during_a_single_stream_predict_completes_it_once(
        digits: ModelCard, recorded: Recorded) -> None:
    release = threading.Event()

    class Hang(EchoBackend):
        def predict(self, batch: Any) -> Any:
            release.wait(10)
            return super().predict(batch)

    sut, _ = make_single_stream(digits, Hang(), watchdog_timeout_s=0.2)
    sut.start()
    issuing = threading.Thread(target=sut.issue, args=([100], [3]))
    issuing.start()
    deadline = threading.Event()
    while not recorded.responses and not deadline.wait(0.01):
        pass
    assert recorded.responses == [(100, b"\0\0\0\0")]  # the drain answered it, empty
    release.set()  # the late prediction must not complete it a second time
    issuing.join(5)
    sut.stop()
    assert recorded.responses == [(100, b"\0\0\0\0")]
    assert sut.failures.failures[0]["kind"] == "watchdog_timeout"


def test_inline_hold_and_a_racing_drain_complete_every_id_exactly_once() -> None:
    for _ in range(20):
        table = InflightTable()
        hold, release = table.inline()
        answered: list[int] = []
        go = threading.Event()

        def issue_thread(hold: Any = hold, release: Any = release,
                         answered: list[int] = answered, go: threading.Event = go) -> None:
            go.wait()
            for qid in range(5000):
                token = hold([qid])
                if token is None or release(token):  # refused, or ours: we answer it
                    answered.append(qid)

        thread = threading.Thread(target=issue_thread)
        thread.start()
        go.set()
        drained = table.claim_all()
        thread.join()
        assert sorted(answered + drained) == list(range(5000))


def test_a_drained_table_refuses_an_inline_hold() -> None:
    table = InflightTable()
    hold, release = table.inline()
    token = hold([1])
    assert token is not None and table.oldest_age() >= 0.0
    assert table.claim_all() == [1]
    assert release(token) is False  # the drain answered it
    assert hold([2]) is None and table.claim_all() == []


def test_a_shape_that_passed_still_fails_for_another_row_count(digits: ModelCard) -> None:
    contract = OutputContract("echo", digits)
    contract.check(np.zeros((1, 10), np.float32), 1)
    with pytest.raises(BackendError, match=r"shape \(1, 10\) for a batch of 2"):
        contract.check(np.zeros((1, 10), np.float32), 2)
    contract.check(np.zeros((2, 10), np.float32), 2)
    with pytest.raises(BackendError, match="dtype int64"):
        contract.check(np.zeros((2, 10), np.int64), 2)


def test_a_subclass_that_overrides_predict_keeps_it(digits: ModelCard) -> None:
    # The onnxruntime backend binds predict as a closure at load; a subclass's own
    # predict (the steady and fault backends of the tests, a vendor's wrapper) must win.
    from suite.backends.onnxruntime import OnnxRuntimeBackend

    calls: list[int] = []

    class Counting(OnnxRuntimeBackend):
        def predict(self, batch: Any) -> Any:
            calls.append(len(batch))
            return super().predict(batch)

    plain, counting = OnnxRuntimeBackend(), Counting()
    plain.load(digits, 4)
    counting.load(digits, 4)
    batch = np.zeros((2, *digits.input.sample_shape), dtype=np.float32)
    assert "predict" in vars(plain)  # the bound fast path
    assert np.array_equal(counting.predict(batch), plain.predict(batch))
    assert calls == [2]
