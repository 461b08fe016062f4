"""The system under test: LoadGen's ``issue_queries`` to backend batches to completions.

One dispatch strategy per scenario:

* SingleStream, MultiStream: ``INLINE``: the query (1 or N samples) is one batch,
  predicted on LoadGen's issue thread; a hand-off would only add latency.
* Offline: ``SPLIT``: ``workers`` threads carve the one big query into ``max_batch_size``
  batches as they go (the backend releases the GIL).
* Server: ``DYNAMIC``: each arriving query (one sample, or several when LoadGen
  coalesces overdue ones) goes on a queue; a worker takes the first, then adds more
  until ``max_batch_size`` samples or its current wait have passed, splitting a query
  that does not fit; the wait adapts to the load between 0 and ``max_wait_us``. With
  ``sut.worker_model = "processes"`` the same policy runs in worker processes
  (``workers``), and only issuing and completing stay in this process.

Every issued sample is on the Server queue or in the ``InflightTable`` until completed, so
nothing can leave LoadGen waiting: ``drain`` completes what is outstanding with empty
responses and closes the table. A failing batch is completed, counted in ``FailureLog``
and ends the run as failed.
"""

from __future__ import annotations

import collections
import contextlib
import queue
import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

import numpy as np

from suite.backends.base import BackendBase
from suite.config.model import SutConfig
from suite.datasets.base import InMemoryDataset
from suite.errors import BackendError, ConfigError
from suite.harness.loadgen import Completer
from suite.harness.sut.batch_stats import BatchStats, merge
from suite.harness.sut.dispatch import DISPATCH, Dispatch
from suite.harness.sut.failures import FailureLog
from suite.harness.sut.inflight import InflightTable, Item
from suite.harness.sut.inline import inline_issue
from suite.harness.sut.server import server_worker
from suite.harness.sut.server_policy import derive, derive_max_wait_s
from suite.harness.sut.server_queue import Pacer, Query, next_query
from suite.harness.sut.watchdog import watch
from suite.harness.sut.workers import ProcessWorkers, WorkerSpec
from suite.postprocess import Postprocess
from suite.scenarios import Scenario

__all__ = ["DISPATCH", "Dispatch", "FailureLog", "SystemUnderTest", "derive_max_wait_s"]


class SystemUnderTest:
    """See the module docstring. Thread-safe; create one per LoadGen test."""

    def __init__(
        self,
        backend: BackendBase,
        dataset: InMemoryDataset,
        postprocess: Postprocess,
        completer: Completer,
        scenario: Scenario,
        config: SutConfig,
        on_drain: Callable[[], None] = lambda: None,
        latency_bound_ms: float | None = None,
        worker_spec: WorkerSpec | None = None,
        target_qps: float = 0.0,
        contract: Callable[[Any, int], None] | None = None,
    ) -> None:
        self.backend = backend
        self.dataset = dataset
        self.postprocess = postprocess
        self.completer = completer
        self.config = config
        self.dispatch = DISPATCH[scenario]
        self.failures = FailureLog()
        self.inflight = InflightTable()
        self.draining = threading.Event()
        self._on_drain = on_drain
        self.query_queue: queue.SimpleQueue[Query | None] = queue.SimpleQueue()
        self._threads: list[threading.Thread] = []
        #: "raw" when the backend took the dataset's raw form (normalising on its
        #: device), else "model": staged samples are the model's inputs.
        self.input_form = "raw" if dataset.offer_raw(backend.accept_raw_input) else "model"
        self.inline_buffer = self.new_buffer()
        #: One per worker thread, written only by it (``batch_profile`` sums them).
        self._stats: list[BatchStats] = []
        self.stopping = threading.Event()
        self._latency_bound_ms = latency_bound_ms
        self._target_qps = target_qps
        #: Checks each batch's outputs (``OutputContract.check``): one row per sample,
        #: the card's shape and dtype; a breach fails the batch, so the run.
        self.check_outputs = contract if contract is not None else _unchecked
        self.max_wait_s = max(config.max_wait_us, 0) / 1e6
        #: The largest Server batch: ``max_batch_size``, or less where a batch that large
        #: could not meet the latency bound (derived at warm-up; see ``server_policy``).
        self.batch_cap = config.max_batch_size
        self.interval_s = 0.0  # how far apart Server batches leave (warm-up; 0: unpaced)
        self.pacer: Pacer | None = None
        self.derived: dict[str, float] = {}  # derived at warm-up (status.json records it)
        #: ``issue_queries`` calls: fewer than samples when LoadGen coalesced queries.
        self.issue_calls = 0
        #: Samples issued (the live progress's backlog; only the issue thread writes it).
        self.issued_samples = 0
        #: The wait of each Server batch (bounded: for tests and diagnosis).
        self.waits: collections.deque[float] = collections.deque(maxlen=1000)
        #: Server batches begun by workers (the watchdog only looks whether it moves).
        self.batches_begun = 0
        if self.dispatch is Dispatch.INLINE:
            self.issue = inline_issue(self)  # type: ignore[method-assign,assignment]
        #: Server workers as processes (``sut.worker_model``), made by ``start``.
        self.processes: ProcessWorkers | None = None
        self._worker_spec = worker_spec
        if config.worker_model == "processes":
            if self.dispatch is not Dispatch.DYNAMIC:
                raise ConfigError(
                    f"sut.worker_model = 'processes' is implemented for Server only, not "
                    f"{scenario.value}", hint="set sut.worker_model = 'threads' for it")
            if worker_spec is None:
                raise ValueError("worker processes need a WorkerSpec to build their backend")

    # -- lifecycle -------------------------------------------------------------------

    def new_buffer(self) -> Any:
        """A worker's gather buffer: the backend's own (page-locked for a device copy)."""
        size = self.config.max_batch_size
        buffer = self.backend.input_buffer(size, self.dataset.sample_shape,
                                           str(self.dataset.dtype))
        return buffer if buffer is not None else self.dataset.new_buffer(size)

    def batch_profile(self) -> dict[str, Any]:
        """This test's batches (sizes, seconds per phase) and input staging (status.json)."""
        if self.processes is not None:
            return {"input_form": self.input_form, **self.processes.batch_profile()}
        return {"input_form": self.input_form, **merge(self._stats)}

    def warmup(self) -> None:
        """Predict zero batches of 1 and the largest size (Offline: 1) before LoadGen starts,
        timed; for Server with ``max_wait_us`` = -1, derive the largest batch that can meet
        the bound and the wait. Skipped where worker threads warm the same sizes at start."""
        derive_policy = self.dispatch is Dispatch.DYNAMIC and self.config.max_wait_us < 0
        if not derive_policy and self.dispatch is not Dispatch.INLINE and (
                self.config.worker_model == "threads" and self.backend.warm_per_thread):
            return
        largest = self.config.max_batch_size
        # Offline runs full batches for the whole test: a cold first one costs it next to
        # nothing (CPU onnxruntime ResNet-50: within 2 % of later ones), warming one costs a
        # batch (0.55 s). Batch 1 pays the lazy set-up (thread pools, kernels) out of it.
        sizes = (1,) if self.dispatch is Dispatch.SPLIT else (1, largest)
        timings: dict[int, list[float]] = {size: [] for size in sizes}
        (buffer := self.inline_buffer).fill(0)  # the backend's own: the run's input path
        # A copy into the buffer stands for the gather (a large part of a Server batch).
        source = np.zeros_like(buffer) if self.dispatch is Dispatch.DYNAMIC else buffer
        for _ in range(self.config.warmup_batches):
            for size in timings:
                start = time.perf_counter()
                if source is not buffer:
                    np.copyto(buffer[:size], source[:size])
                self.backend.predict(buffer[:size])
                timings[size].append(time.perf_counter() - start)
        del source
        if derive_policy and timings[1]:
            bound_s = (self._latency_bound_ms or 0.0) / 1e3
            policy = derive(timings, largest, bound_s, self.config.workers, self._target_qps)
            self.batch_cap, self.max_wait_s = policy.batch_cap, policy.max_wait_s
            self.interval_s = policy.interval_s if self.config.pace_batches else 0.0
            self.derived = {**policy.record, "dispatch_interval_us":
                            round(self.interval_s * 1e6, 1)}

    def start(self) -> None:
        """Start the worker threads (none for INLINE) and the watchdog.

        Each worker predicts a warm-up batch on its own thread before LoadGen starts:
        frameworks keep per-thread state (torch.compile's guards, thread pools) whose
        first use is slow and must not land inside the measured run.
        """
        # One pacer spaces all worker threads' batches (server_policy.dispatch_interval_s).
        self.pacer = Pacer(self.interval_s) if self.interval_s > 0 else None
        if self.config.worker_model == "processes" and self._worker_spec is not None:
            self._start_processes(self._worker_spec)
        elif self.dispatch is not Dispatch.INLINE:
            target = self._split_worker if self.dispatch is Dispatch.SPLIT else self._dynamic_worker
            ready = threading.Barrier(self.config.workers + 1)
            for n in range(self.config.workers):
                thread = threading.Thread(target=self._warm_then, args=(target, ready),
                                          name=f"sut-worker-{n}", daemon=True)
                thread.start()
                self._threads.append(thread)
            limit = max(60.0, self.config.watchdog_timeout_s)
            try:
                ready.wait(timeout=limit)
            except threading.BrokenBarrierError:  # a worker's first call hung (or failed)
                raise BackendError(f"the workers' first backend calls did not all return "
                                   f"within {limit:g} s: the backend hangs") from None
        self.backend.begin_record()  # every warm-up call is behind us
        watch_queue = self.dispatch is Dispatch.DYNAMIC and self.processes is None
        watchdog = threading.Thread(target=watch, args=(self, watch_queue),
                                    name="sut-watchdog", daemon=True)
        watchdog.start()

    def _start_processes(self, spec: WorkerSpec) -> None:
        pool = self.processes = ProcessWorkers(
            spec, self.dataset, self.completer, self.config.workers,
            self.batch_cap, self._worker_failed, share=self.backend.worker_share())
        pool.start(self.max_wait_s, timeout_s=max(60.0, self.config.watchdog_timeout_s),
                   interval_s=self.interval_s)
        pool_issue = pool.issue

        def issue(ids: list[int], indices: list[int]) -> None:
            self.issue_calls += 1
            self.issued_samples += len(ids)
            try:
                pool_issue(ids, indices)
            except Exception as exc:  # a bug here must not leave LoadGen waiting
                self.fail("harness_error", f"issue_queries failed: {exc!r}", len(ids))

        self.issue = issue  # type: ignore[method-assign]

    def abandon(self) -> None:
        """Stop worker processes at once: the process exits without LoadGen returning."""
        if self.processes is not None:
            self.processes.abandon()

    def _worker_failed(self, kind: str, message: str, samples: int, trace: str) -> None:
        self.failures.record(kind, message, samples, trace)
        self.drain()

    def stop(self) -> None:
        """Stop the workers (after LoadGen returned) without waiting on a hung backend."""
        self.stopping.set()
        if self.processes is not None:
            self.processes.stop()
        for _ in self._threads:
            self.query_queue.put(None)
        for thread in self._threads:
            thread.join(timeout=1.0)

    # -- LoadGen callbacks (must never raise) ----------------------------------------

    def issue(self, ids: list[int], indices: list[int]) -> None:
        """Server and Offline; for INLINE dispatch ``__init__`` replaces it with
        ``inline.inline_issue``'s closure."""
        self.issue_calls += 1  # only LoadGen's issue thread writes it
        self.issued_samples += len(ids)
        try:
            if self.dispatch is Dispatch.DYNAMIC:
                # Not registered here but by the worker, once per batch: at high rates
                # LoadGen's issue thread, which holds the GIL for every query, is the
                # Server bottleneck. A drain empties the queue, so a query put after
                # one began is answered here.
                self.query_queue.put((ids, indices))
                if self.draining.is_set():
                    self._drain_queue()
                return
            if self.dispatch is Dispatch.SPLIT:
                if not self.inflight.add_span(ids, indices):
                    self.completer.complete_empty(ids)  # drained: answer at once
                    return
                for _ in self._threads:
                    self.query_queue.put(_WAKE)
                return
        except Exception as exc:  # a bug here must not leave LoadGen waiting
            # Only registering or queueing can fail here; drain completes what was
            # registered (completing an id twice would crash LoadGen).
            self.fail("harness_error", f"issue_queries failed: {exc!r}", len(ids))

    def flush(self) -> None:
        """Nothing is held back: workers batch only within ``max_wait_us``."""

    def load(self, indices: list[int]) -> None:
        try:
            self.dataset.load(indices)
            if self.processes is not None:
                self.processes.publish()
        except Exception as exc:
            self.fail("dataset_error", f"loading samples failed: {exc!r}", 0)

    def unload(self, indices: list[int]) -> None:
        try:
            self.dataset.unload(indices)
        except Exception as exc:
            self.fail("dataset_error", f"unloading samples failed: {exc!r}", 0)

    # -- failure handling ------------------------------------------------------------

    def fail(self, kind: str, message: str, samples: int) -> None:
        """Record a failure and drain: the run is over, LoadGen must not hang."""
        self.failures.record(kind, message, samples, traceback.format_exc())
        self.drain()

    def drain(self) -> None:
        """Complete everything outstanding now and every later query at once."""
        first = not self.draining.is_set()
        self.draining.set()
        ids = self.inflight.claim_all()
        if ids:
            self.completer.complete_empty(ids)
        if self.processes is not None:
            self.processes.drain()
        self._drain_queue()
        if first:
            self._on_drain()

    def _drain_queue(self) -> None:
        """Complete every query still queued for a Server worker (part of a drain)."""
        stops = 0
        while True:
            try:
                query = self.query_queue.get_nowait()
            except queue.Empty:
                break
            if query is None:
                stops += 1
            elif query[0]:  # Offline's wake-ups carry no ids
                self.completer.complete_empty(query[0])
        for _ in range(stops):  # the workers' stop signals stay for them
            self.query_queue.put(None)

    # -- work ------------------------------------------------------------------------

    def run_batch(self, item: Item, buffer: Any, stats: BatchStats) -> None:
        """Predict one registered batch and complete it, unless a drain claimed it first."""
        token, ids, indices = item
        try:
            if self.draining.is_set():
                return  # the drain completed it
            start = time.perf_counter()
            batch = (self.dataset.sample(indices[0]) if len(indices) == 1 else
                     self.dataset.gather(np.asarray(indices, dtype=np.int64), buffer))
            gathered = time.perf_counter()
            outputs = self.backend.predict(batch)
            self.check_outputs(outputs, len(indices))
            responses = self.postprocess(outputs)
        except Exception as exc:
            self.batch_failed(exc, len(ids))
            return
        predicted = time.perf_counter()
        if self.inflight.claim(token):  # not drained (watchdog) while we predicted
            self.completer.complete(ids, responses)
        stats.add(len(ids), gathered - start, predicted - gathered,
                  time.perf_counter() - predicted)

    def batch_failed(self, exc: Exception, samples: int) -> None:
        self.failures.record("backend_error", f"predict failed: {exc!r}", samples,
                             traceback.format_exc())
        self.drain()

    def _warm_then(self, work: Callable[[], None], ready: threading.Barrier) -> None:
        try:
            if self.config.warmup_batches and self.backend.warm_per_thread:
                for size in sorted({1, self.config.max_batch_size}):
                    self.backend.predict(np.zeros_like(self.inline_buffer[:size]))
        except Exception as exc:  # the measured run would fail the same way: say so now
            self.failures.record("backend_error", f"warm-up predict failed: {exc!r}", 0,
                                 traceback.format_exc())
        finally:
            with contextlib.suppress(threading.BrokenBarrierError):
                ready.wait()
        try:
            work()
        except BaseException as exc:  # a vanished worker would leave its queries waiting
            self.failures.record(
                "harness_error", f"worker thread {threading.current_thread().name} stopped: "
                f"{exc!r}", 0, traceback.format_exc())
            self.drain()

    @property
    def worker_stats(self) -> list[BatchStats]:
        """The worker threads' batch records (read by the live progress; none for
        worker processes, whose phases stay in the workers)."""
        return list(self._stats)

    def new_stats(self) -> BatchStats:
        stats = BatchStats(self.config.max_batch_size)
        self._stats.append(stats)  # list.append is atomic: workers start concurrently
        return stats

    def _split_worker(self) -> None:
        size = self.config.max_batch_size
        buffer, stats = self.new_buffer(), self.new_stats()
        while True:
            item = self.inflight.take(size)
            if item is not None:
                self.run_batch(item, buffer, stats)
            elif next_query(self.query_queue) is None:  # nothing to carve: wait or stop
                return

    def _dynamic_worker(self) -> None:
        server_worker(self)  # server.py: the Server worker loop


def _unchecked(outputs: Any, n: int) -> None:
    """No output contract (a SUT built without a model card, in unit tests)."""


# Wakes the Offline workers: a span is waiting in the inflight table.
_WAKE: Query = ([], [])
