"""What each client process of the ``openai`` backend spent, as the run records it, and the
bench's figures derived from such a record (``bench/bench_endpoint.py``'s ``derive``).

No server and no LoadGen here: the SUT's client is a stand-in that counts, its completer
one that records; the real processes against a real endpoint are
``tests/integration/test_openai_client_records.py``'s. Never a speed figure.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from suite.harness.llm.endpoint_sut import EndpointSystemUnderTest
from suite.llm.endpoint.client import ClientSettings
from suite.llm.endpoint.workers import cpu_s, process_record

sys.path.insert(0, str(Path(__file__).resolve().parents[4] / "bench"))
from bench_endpoint import derive, split_per_event


class _Completer:
    def __init__(self) -> None:
        self.completed = 0
        self.done: list[int] = []

    def first_token(self, qid: int, token: int) -> None:
        pass

    def complete(self, items: Sequence[tuple[int, Sequence[int]]]) -> None:
        self.done += [qid for qid, _ in items]
        self.completed += len(items)

    def complete_empty(self, ids: Sequence[int]) -> None:
        self.completed += len(ids)


class _Client:
    """Counts like ``EndpointClient``: each submitted item is one request of 5 events."""

    def __init__(self) -> None:
        self.requests = self.chunks = 0
        self.resent = 1  # one request sent again after an idle close (http_pool)
        self.closed = self.cancelled = False
        self.finish_reasons = {"length": 4}
        self.reconciled: dict[str, int] = {}  # streams taken by the adapt rules (none here)

    def submit(self, items: Sequence[tuple[int, int, Sequence[int]]]) -> None:
        self.requests += len(items)
        self.chunks += 5 * len(items)

    def close(self) -> None:
        self.closed = True

    def cancel(self) -> None:
        self.cancelled = True


class _Tokenizer:
    def encode(self, text: str) -> list[int]:
        return [1]

    encode_text = encode

    def decode(self, ids: list[int]) -> str:
        return "x"


class _Dataset:
    def __init__(self) -> None:
        self.prompts = [[1, 2, 3], [4, 5], [6]]
        self.tokenizer = _Tokenizer()


def _sut() -> tuple[EndpointSystemUnderTest, _Completer]:
    completer = _Completer()
    sut = EndpointSystemUnderTest(ClientSettings(urls=("http://127.0.0.1:9",), model="m"),
                                  _Dataset(), completer,  # type: ignore[arg-type]
                                  report_first_token=False)
    sut.client = _Client()  # type: ignore[assignment]
    return sut, completer


def test_a_process_record_holds_its_own_cpu_and_counts() -> None:
    before = cpu_s()
    sum(i * i for i in range(200_000))  # some CPU, so the difference is not zero
    record = process_record("worker", before, 7, 35, index=1)
    assert record["pid"] == os.getpid() and record["role"] == "worker"
    assert record["requests"] == 7 and record["chunks"] == 35 and record["index"] == 1
    assert 0 < record["run_cpu_s"] <= record["cpu_s"]
    assert process_record("worker", None, 0, 0)["run_cpu_s"] == 0.0  # never handed a sample


def test_the_sut_fills_the_backend_records_run_when_it_stops() -> None:
    sut, completer = _sut()
    record: dict[str, Any] = {"name": "openai", "run": {"client_workers": 0}}
    sut.backend_record = record
    sut.issue([10, 11, 12, 13], [0, 1, 2, 0])  # sample 0 twice
    for qid in (10, 11, 12, 13):
        sut._done(qid, [5, 6], "engine")
    keys = list(record)
    sut.stop()
    assert list(record) == keys  # "run" replaced, no key added
    run = record["run"]
    assert run["samples_issued"] == 4 and run["samples_distinct"] == 3
    assert run["requests_resent"] == 1  # the client's count, recorded
    assert sut.batch_profile()["requests_resent"] == 1
    # counted in the run's error figures, with how the streams ended
    assert run["errors"] == sut.batch_profile()["errors"] == {"requests_failed": 0,
                                                              "requests_resent": 1}
    assert run["finish_reasons"] == {"length": 4}
    assert run["parent"]["requests"] == completer.completed == 4
    assert run["parent"]["streamed"] == 4 and run["parent"]["chunks"] == 20
    assert run["parent"]["run_cpu_s"] >= 0 and run["parent"]["pid"] == os.getpid()
    assert run["workers"] == [] and run["workers_reported"] == 0
    sut.stop()  # a second stop keeps the first record
    assert record["run"] is run


def test_a_sut_without_a_backend_record_stops_as_before() -> None:
    sut, _ = _sut()
    sut.issue([1], [0])
    sut.stop()
    assert sut.run_record()["samples_issued"] == 1


def _record(parent_cpu: float, workers: list[tuple[float, int, int]]) -> dict[str, Any]:
    return {"client_workers": len(workers), "workers_reported": len(workers),
            "parent": {"run_cpu_s": parent_cpu, "requests": sum(w[1] for w in workers),
                       "chunks": 0, "streamed": 0},
            "workers": [{"run_cpu_s": c, "requests": r, "chunks": e, "index": i}
                        for i, (c, r, e) in enumerate(workers)]}


def test_derive_gives_cpu_per_request_and_event_and_the_ceilings() -> None:
    # parent 10 us a request, each worker 100 us a request (20 us an event)
    figures = derive(_record(0.02, [(0.1, 1000, 5000), (0.1, 1000, 5000)]))
    assert figures["requests"] == 2000 and figures["events"] == 10000
    assert figures["parent"]["us_per_request"] == pytest.approx(10.0)
    assert figures["parent"]["us_per_event"] == pytest.approx(2.0)
    [w0, w1] = figures["workers"]
    assert w0["us_per_request"] == pytest.approx(100.0) == w1["us_per_request"]
    assert w0["us_per_event"] == pytest.approx(20.0)
    assert w0["ceiling_requests_per_s"] == pytest.approx(10_000)
    assert w0["ceiling_events_per_s"] == pytest.approx(50_000)
    assert figures["predicted_requests_per_s"] == {"1": pytest.approx(10_000),
                                                    "2": pytest.approx(20_000)}


def test_the_parent_caps_the_prediction() -> None:
    # parent 80 us a request: 12,500/s, under two workers' 20,000/s
    figures = derive(_record(0.16, [(0.1, 1000, 5000), (0.1, 1000, 5000)]))
    assert figures["predicted_requests_per_s"]["2"] == pytest.approx(12_500)
    assert figures["predicted_requests_per_s"]["1"] == pytest.approx(10_000)


def test_a_run_missing_a_workers_record_gives_no_figures() -> None:
    record = _record(0.02, [(0.1, 1000, 5000)])
    record["client_workers"] = 2  # one worker was killed at close and sent nothing
    with pytest.raises(SystemExit, match="1 of 2 client workers reported"):
        derive(record)


def test_in_process_client_has_no_worker_prediction() -> None:
    record = {"client_workers": 0, "workers": [],
              "parent": {"run_cpu_s": 0.05, "requests": 1000, "chunks": 5000,
                         "streamed": 1000}}
    figures = derive(record)
    assert figures["parent"]["us_per_request"] == pytest.approx(50.0)
    assert figures["parent"]["us_per_event"] == pytest.approx(10.0)
    assert "predicted_requests_per_s" not in figures


def test_the_split_into_a_part_per_request_and_a_part_per_event() -> None:
    # 40 us + 5 us an event: 65 us at 5 events, 365 us at 65
    small = {"us_per_request": 65.0, "requests": 10, "events": 50}
    large = {"us_per_request": 365.0, "requests": 10, "events": 650}
    split = split_per_event(small, large)
    assert split == {"us_per_request_alone": pytest.approx(40.0),
                     "us_per_event": pytest.approx(5.0)}
    assert split_per_event(small, small) is None


def test_the_live_estimate_counts_the_endpoint_suts_samples_not_its_calls() -> None:
    from suite.harness.progress import LiveEstimator, observe_sut
    from suite.harness.sut.batch_stats import BatchTail

    sut, _ = _sut()
    sut.issue([1, 2, 3], [0, 1, 2])  # one call, three samples (Offline issues them at once)
    live = observe_sut(LiveEstimator("Server", bound_ms=None, target_qps=10.0), sut,
                       BatchTail())
    assert sut.issue_calls == 1 and sut.issued_samples == 3
    assert live.backlog == 3  # nothing completed yet
    sut.stop()


def test_a_failure_stops_what_is_queued_and_a_dead_client_fails_the_run() -> None:
    sut, completer = _sut()
    sut.issue([10, 11], [0, 1])
    sut._error(10, "http://h/v1/completions: sample 0 (query 10): HTTP 429: busy")
    assert sut.client.cancelled  # type: ignore[attr-defined]  # nothing queued is sent
    assert completer.completed == 2 and completer.done == []  # both answered empty
    assert sut.run_record()["errors"]["requests_failed"] == 1
    idle, _ = _sut()  # a client process died holding no sample: still the run's failure
    idle._error(-1, "endpoint client process 0 (pid 1) died (exit code -9)")
    assert idle.failures and idle.draining.is_set()
