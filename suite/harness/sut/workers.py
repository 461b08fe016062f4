"""Server workers as processes (``sut.worker_model = "processes"``).

With worker threads every batch's Python (taking queries, gathering, postprocessing,
completing) competes for one GIL with LoadGen's issue thread, which needs it for
every query; at high Server rates that hand-off, not the CPU, set the limit. Here the
workers are processes with their own interpreters, and the LoadGen process keeps only
what must happen in it: ``issue_queries`` and ``QuerySamplesComplete``.

* **The ring** (one shared-memory block): the issue callback appends each query's
  QSL indices at monotonically increasing positions (``head``) and keeps the LoadGen
  ids in a local array at the same positions. A worker claims the next batch by
  advancing ``tail`` under a shared lock, once ``max_batch_size`` samples wait or its
  adaptive wait (as the thread workers': up to ``max_wait_us``) has passed.
* **Samples**: LoadGen's ``load`` stages them in the LoadGen process; ``publish``
  copies the staged array and the index-to-slot map into a new shared block (one per
  loadable set, a *generation*), which the workers attach to before their next claim.
* **Completion**: a worker writes the batch's responses into the ring's response
  slots and sends ``(DONE, position, count)`` over one pipe (messages below
  ``PIPE_BUF`` are written atomically, so the workers share it); one completion thread
  in the LoadGen process completes the ids at those positions.
* **Backend state**: each worker builds its own backend from the run's config; what the
  LoadGen process's backend must share with them (``worker_share``: the simulated
  backend's devices, so that the workers queue on one node) goes in their start
  arguments and is attached before their warm-up (``attach_share``).
* **Nothing is lost**: every position in ``[low, head)`` is outstanding until its
  batch is done; ``drain`` completes every outstanding position with an empty response
  and stops the workers claiming, and a worker's failure or death drains the run.
* **Idle workers sleep**: a worker with nothing to claim polls for ``_HOT_S`` after its
  last batch, then declares itself asleep (``_SLEEPING``) and blocks on a semaphore.
  The issue callback reads that word with the lock it already holds and posts the
  semaphore only when a worker sleeps, so a busy run pays one read per query.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import threading
import time
from collections.abc import Callable
from multiprocessing import shared_memory
from typing import TYPE_CHECKING, Any

import numpy as np

from suite.harness.sut.batch_stats import BatchStats, merge
from suite.harness.sut.ring import (
    _BUSY,
    _DONE,
    _FAILED,
    _GEN,
    _HEAD,
    _MESSAGE,
    _QUIT,
    _READY,
    _SLEEPING,
    _STOP,
    _TAIL,
    _Layout,
    _segments,
    _staged_name,
)
from suite.harness.sut.ring import WorkerSpec as WorkerSpec
from suite.harness.sut.worker_loop import _worker_main

if TYPE_CHECKING:
    from suite.datasets.base import InMemoryDataset
    from suite.harness.loadgen import Completer


class ProcessWorkers:
    """The LoadGen-process side: the ring, the worker processes, the completion thread."""

    def __init__(self, spec: WorkerSpec, dataset: InMemoryDataset, completer: Completer,
                 workers: int, max_batch: int, on_failure: Callable[[str, str, int, str], None],
                 capacity: int = 1 << 20, share: Any = None) -> None:
        self.spec = spec
        self.dataset = dataset
        self.completer = completer
        self.workers = workers
        self.max_batch = max_batch
        self._on_failure = on_failure
        #: What the workers' backends share with the LoadGen process's (worker_share).
        self.share = share
        self.layout = _Layout(capacity, workers, completer.row_nbytes)
        self._ring = shared_memory.SharedMemory(create=True, size=self.layout.nbytes)
        self._ctrl, self._indices, self._responses = self.layout.views(
            self._ring.buf, completer.dtype)
        self._ctrl[:] = 0
        self._ids = np.zeros(capacity, dtype=np.uint64)
        self._context = multiprocessing.get_context("spawn")
        self._claim_lock = self._context.Lock()  # the workers' tail, and head's publication
        self._wake = self._context.Semaphore(0)  # posted once per sleeping worker woken
        # The control words as Python ints for the issue callback: a third of numpy's cost.
        ring_buf: Any = self._ring.buf
        self._words: memoryview = ring_buf[:8 * _BUSY].cast("q")
        self._reader, self._writer = self._context.Pipe(duplex=False)
        self._errors: Any = self._context.SimpleQueue()
        self._processes: list[Any] = []
        self._staged: list[shared_memory.SharedMemory] = []
        self._generation = 0
        # LoadGen-process state, under _lock: what is outstanding and whether drained.
        self._lock = threading.Lock()
        self._head = 0
        self._low = 0
        self._done: dict[int, int] = {}
        self._closed = False
        self._stopping = False
        self._completion: threading.Thread | None = None
        #: ``sizes[n]``: batches of ``n`` the workers completed (the completion thread's).
        self._sizes = [0] * (max_batch + 1)

    # -- lifecycle ---------------------------------------------------------------------

    def start(self, max_wait_s: float, timeout_s: float, interval_s: float = 0.0) -> None:
        """Start the workers and wait until each has built and warmed its backend;
        batches that are not full leave at least ``interval_s`` apart."""
        dataset = self.dataset
        for number in range(self.workers):
            process = self._context.Process(
                target=_worker_main, name=f"sut-worker-{number}", daemon=True,
                args=(self.spec, number, self._ring.name, self.layout,
                      (self._claim_lock, self._wake), self._writer, self._errors,
                      self.max_batch, max_wait_s, interval_s,
                      dataset.sample_shape, str(dataset.dtype), str(self.completer.dtype),
                      dataset.raw, self.share))
            process.start()
            self._processes.append(process)
        ready, deadline = 0, time.monotonic() + timeout_s
        while ready < self.workers:
            if not self._reader.poll(max(0.0, deadline - time.monotonic())):
                self._fail("worker_error", f"worker processes not ready after {timeout_s:g} s "
                           "(sut.watchdog_timeout_s)", "")
                break
            kind, _, _ = _MESSAGE.unpack(self._reader.recv_bytes())
            if kind == _READY:
                ready += 1
            elif kind == _FAILED:
                self._report_worker_failure()
                break
        self._completion = threading.Thread(target=self._complete_loop,
                                            name="sut-completion", daemon=True)
        self._completion.start()

    def stop(self) -> None:
        """Stop the workers (LoadGen has returned) and free the shared memory."""
        self._stopping = True
        self._ctrl[_STOP] = 1
        self._wake_all()
        for process in self._processes:
            process.join(timeout=1.0)
            if process.is_alive():  # a hung backend: nothing is waiting for it any more
                process.terminate()
        self._writer.send_bytes(_MESSAGE.pack(_QUIT, 0, 0))
        if self._completion is not None:
            self._completion.join(timeout=1.0)
        self._words.release()
        for block in [*self._staged, self._ring]:
            block.close()
            block.unlink()
        self._staged.clear()

    def abandon(self) -> None:
        """Kill the workers and free the shared memory now: the process is about to exit
        without LoadGen returning (a hung backend after a drain)."""
        self._stopping = True
        for process in self._processes:
            process.kill()
        for block in [*self._staged, self._ring]:
            with contextlib.suppress(OSError):
                block.unlink()

    def publish(self) -> None:
        """Share the samples the dataset just staged (LoadGen's ``load``) with the workers."""
        slots, loaded = self.dataset.staged()
        generation = self._generation + 1
        block = shared_memory.SharedMemory(name=_staged_name(self._ring.name, generation),
                                           create=True, size=16 + slots.nbytes + loaded.nbytes)
        np.ndarray((2,), np.int64, block.buf, 0)[:] = (len(slots), len(loaded))
        np.ndarray(slots.shape, np.int64, block.buf, 16)[:] = slots
        np.ndarray(loaded.shape, loaded.dtype, block.buf, 16 + slots.nbytes)[:] = loaded
        self._staged.append(block)
        self._ctrl[_GEN] = generation
        if len(self._staged) > 1:
            # Unlinked, the old samples live on only while a worker still maps them.
            old = self._staged.pop(0)
            old.close()
            old.unlink()
        self._generation = generation

    def batch_profile(self) -> dict[str, Any]:
        """The completed batches' sizes (the phases' seconds stay in the workers)."""
        stats = BatchStats(self.max_batch)
        stats.sizes = list(self._sizes)
        return merge([stats])

    # -- LoadGen's issue thread ----------------------------------------------------------

    def issue(self, ids: list[int], indices: list[int]) -> None:
        """Append a query to the ring; answered at once if drained or the ring is full."""
        n = len(ids)
        capacity = self.layout.capacity
        with self._lock:
            closed = self._closed
            full = not closed and self._head + n - self._low > capacity
            if not (closed or full):
                self._publish(ids, indices)
                return
        self.completer.complete_empty(ids)  # drained, or no room: answered at once
        if full:
            self._fail("harness_error", f"{capacity} samples outstanding: the workers fell "
                       "hopelessly behind the schedule; lower loadgen.target_qps", "")

    def _publish(self, ids: list[int], indices: list[int]) -> None:
        """Write a query at the head and advance it (the caller holds ``_lock``)."""
        head, n, capacity = self._head, len(ids), self.layout.capacity
        with self._claim_lock:  # the workers read the ring only while holding it
            begin = head % capacity
            if begin + n <= capacity:
                self._indices[begin:begin + n] = indices
                self._ids[begin:begin + n] = ids
            else:
                split = capacity - begin
                self._indices[begin:], self._indices[:n - split] = (
                    indices[:split], indices[split:])
                self._ids[begin:], self._ids[:n - split] = ids[:split], ids[split:]
            self._head = head + n
            words = self._words
            words[_HEAD] = head + n
            if sleeping := words[_SLEEPING]:
                # Wake one worker per batch now waiting: more would only find it taken.
                wake = min(sleeping, 1 + (head + n - words[_TAIL] - 1) // self.max_batch)
                words[_SLEEPING] = sleeping - wake
                for _ in range(wake):
                    self._wake.release()

    def _wake_all(self) -> None:
        """Wake every worker, asleep or about to be, to see ``_STOP``."""
        for _ in range(self.workers):
            self._wake.release()

    # -- completion ----------------------------------------------------------------------

    def _complete_loop(self) -> None:
        while True:
            try:
                kind, first, count = _MESSAGE.unpack(self._reader.recv_bytes())
            except (EOFError, OSError):
                return
            if kind == _DONE:
                self._sizes[count] += 1
                self._complete(first, count)
            elif kind == _FAILED:
                self._report_worker_failure()
            elif kind == _QUIT:
                return

    def _complete(self, first: int, count: int) -> None:
        # Read before marking the positions done: once done they may be reused.
        segments = _segments(first, count, self.layout.capacity)
        if len(segments) == 1:
            begin, end = segments[0]
            ids = self._ids[begin:end].tolist()
            responses = self._responses[begin:end].copy()
        else:
            ids = np.concatenate([self._ids[b:e] for b, e in segments]).tolist()
            responses = np.concatenate([self._responses[b:e] for b, e in segments])
        with self._lock:
            if self._closed:
                return  # the drain completed it
            self._done[first] = count
            while self._low in self._done:
                self._low += self._done.pop(self._low)
        self.completer.complete(ids, responses)

    def drain(self) -> None:
        """Complete every outstanding position empty; later queries are answered at once."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._ctrl[_STOP] = 1
            self._wake_all()
            outstanding: list[int] = []
            position = self._low
            for first in sorted(self._done):
                outstanding.extend(self._ids_at(position, first - position))
                position = first + self._done[first]
            outstanding.extend(self._ids_at(position, self._head - position))
            self._done.clear()
            self._low = self._head
        if outstanding:
            self.completer.complete_empty(outstanding)

    def _ids_at(self, first: int, count: int) -> list[int]:
        if count <= 0:
            return []
        return [qid for b, e in _segments(first, count, self.layout.capacity)
                for qid in self._ids[b:e].tolist()]

    # -- health --------------------------------------------------------------------------

    def oldest_busy_s(self) -> float:
        """How long the longest-running batch has been in a worker."""
        started = [int(v) for v in self._ctrl[_BUSY:] if v]
        return (time.monotonic_ns() - min(started)) / 1e9 if started else 0.0

    def check_alive(self) -> None:
        """Fail the run if a worker process died (a crash in the backend, an OOM kill)."""
        if self._stopping or self._closed:
            return
        for number, process in enumerate(self._processes):
            if process.exitcode is not None:
                self._fail("worker_error", f"worker process {number} exited with code "
                           f"{process.exitcode} during the run", "")
                return

    def _report_worker_failure(self) -> None:
        try:
            number, message, trace = self._errors.get()
        except (EOFError, OSError):
            number, message, trace = -1, "a worker process failed", ""
        self._fail("backend_error", f"worker process {number}: {message}", trace)

    def _fail(self, kind: str, message: str, trace: str) -> None:
        with self._lock:
            outstanding = self._head - self._low
        self._on_failure(kind, message, outstanding, trace)
