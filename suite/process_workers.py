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
import struct
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing import shared_memory
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from .batch_stats import BatchStats, merge

if TYPE_CHECKING:
    from .backends.base import RawInput
    from .config import RunConfig
    from .datasets.base import InMemoryDataset
    from .loadgen import Completer

# Control words at the start of the ring block (int64 each).
_HEAD, _TAIL, _STOP, _GEN = 0, 1, 2, 3
# Monotonic ns before which no worker claims a batch that is not full: Server batches
# leave ``interval_s`` apart (see server_policy.dispatch_interval_s); 0 when not paced.
_NEXT = 4
# Workers blocked on the wake-up semaphore, declared and woken under the claim lock:
# a worker declares only after seeing an empty ring, and the issuer reads it after
# advancing head, so no query is left with every worker asleep.
_SLEEPING = 5
_BUSY = 8  # _BUSY + n: monotonic ns at which worker n claimed its batch, 0 when idle
# Messages on the shared pipe: (kind, a, b) as three int64.
_READY, _DONE, _FAILED, _QUIT = 1, 2, 3, 4
_MESSAGE = struct.Struct("qqq")
# How often an idle worker looks for work (the thread workers' poll, same reason).
_POLL_S = 100e-6
# How long an idle worker keeps polling before it sleeps: long enough that a busy run's
# workers rarely sleep (at 2,000 QPS with 2 workers 1% of queries needed a wake-up, 12%
# with 2 ms), short enough that idle workers cost next to nothing (two polling workers
# took a quarter of a core; one polls ~5 ms after each batch at low rates).
_HOT_S = 5e-3


@dataclass(frozen=True)
class WorkerSpec:
    """What a worker process needs to build the same backend as the LoadGen process."""

    home: Path
    config: RunConfig


@dataclass(frozen=True)
class _Layout:
    """Where the ring block keeps what; the same arithmetic in every process."""

    capacity: int
    workers: int
    row_nbytes: int

    @property
    def indices_offset(self) -> int:
        return 8 * (_BUSY + self.workers)

    @property
    def responses_offset(self) -> int:
        return self.indices_offset + 8 * self.capacity

    @property
    def nbytes(self) -> int:
        return self.responses_offset + self.row_nbytes * self.capacity

    def views(self, buf: Any, dtype: np.dtype[Any]
              ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[Any]]:
        ctrl = np.ndarray((_BUSY + self.workers,), np.int64, buf, 0)
        indices = np.ndarray((self.capacity,), np.int64, buf, self.indices_offset)
        responses = np.ndarray((self.capacity,), dtype, buf, self.responses_offset)
        return ctrl, indices, responses


def _segments(start: int, count: int, capacity: int) -> list[tuple[int, int]]:
    """Ring slices ``(begin, end)`` covering ``count`` positions from ``start``."""
    begin = start % capacity
    if begin + count <= capacity:
        return [(begin, begin + count)]
    return [(begin, capacity), (0, begin + count - capacity)]


class ProcessWorkers:
    """The LoadGen-process side: the ring, the worker processes, the completion thread."""

    def __init__(self, spec: WorkerSpec, dataset: InMemoryDataset, completer: Completer,
                 workers: int, max_batch: int, on_failure: Callable[[str, str, int, str], None],
                 capacity: int = 1 << 20) -> None:
        self.spec = spec
        self.dataset = dataset
        self.completer = completer
        self.workers = workers
        self.max_batch = max_batch
        self._on_failure = on_failure
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
                      dataset.raw))
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


def _staged_name(ring_name: str, generation: int) -> str:
    return f"{ring_name}_g{generation}"


# -- the worker process ----------------------------------------------------------------

def _worker_main(spec: WorkerSpec, number: int, ring_name: str, layout: _Layout,
                 locks: tuple[Any, Any], writer: Any, errors: Any, max_batch: int,
                 max_wait_s: float, interval_s: float, sample_shape: tuple[int, ...],
                 sample_dtype: str, response_dtype: str, raw: RawInput | None) -> None:
    """Build the backend, then claim, predict and hand back batches until stopped."""
    _die_with_parent()
    try:
        _serve(spec, number, ring_name, layout, locks, writer, max_batch,
               (max_wait_s, interval_s), sample_shape, np.dtype(sample_dtype),
               np.dtype(response_dtype), raw)
    except BaseException as exc:
        errors.put((number, repr(exc), traceback.format_exc()))
        writer.send_bytes(_MESSAGE.pack(_FAILED, number, 0))


def _die_with_parent() -> None:
    """Ask Linux to kill this worker when the LoadGen process dies, however it dies: a
    worker hung in a backend call would otherwise outlive it and hold its memory."""
    import ctypes
    import ctypes.util
    import os
    import signal
    import sys

    if sys.platform != "linux":
        return  # elsewhere the LoadGen process's own exit paths stop the workers
    pr_set_pdeathsig = 1
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    libc.prctl(pr_set_pdeathsig, signal.SIGKILL)
    if os.getppid() == 1:  # the parent died before the request took effect
        os._exit(1)


def _serve(spec: WorkerSpec, number: int, ring_name: str, layout: _Layout,
           locks: tuple[Any, Any], writer: Any, max_batch: int, waits: tuple[float, float],
           sample_shape: tuple[int, ...],
           sample_dtype: np.dtype[Any], response_dtype: np.dtype[Any],
           raw: RawInput | None) -> None:
    from .child import load_model
    from .errors import BackendError
    from .output_contract import OutputContract
    from .postprocess import make_postprocess

    claim_lock, wake = locks  # the claim lock; the semaphore a sleeping worker waits on
    card, backend, _ = load_model(spec.home, spec.config)
    if raw is not None and not backend.accept_raw_input(raw):
        raise BackendError("the backend took the raw input form in the LoadGen process "
                           "but refused it in a worker process")
    postprocess, _ = make_postprocess(card)
    check = OutputContract(spec.config.backend, card).check
    ring = shared_memory.SharedMemory(name=ring_name)
    ctrl, indices, responses = layout.views(ring.buf, response_dtype)
    staged = _Staged(ring_name, sample_shape, sample_dtype)
    buffer = backend.input_buffer(max_batch, sample_shape, str(sample_dtype))
    if buffer is None:
        buffer = np.empty((max_batch, *sample_shape), dtype=sample_dtype)
    buffer.fill(0)  # the warm-up predicts from it: uninitialised memory can hold NaN
    for _ in range(max(1, spec.config.sut.warmup_batches)):
        for size in sorted({1, max_batch}):
            backend.predict(buffer[:size])
    send, pack = writer.send_bytes, _MESSAGE.pack
    send(pack(_READY, number, 0))
    busy = _BUSY + number
    max_wait_s, interval_s = waits  # the adaptive wait's ceiling; the pacing interval
    interval_ns = int(interval_s * 1e9)
    wait, deadline = max_wait_s, -1.0
    active = time.perf_counter()  # the last batch or wake-up: polled until _HOT_S after
    while not ctrl[_STOP]:
        # Look without the lock (LoadGen's issue thread takes it for every query); claim
        # with it.
        waiting = int(ctrl[_HEAD]) - int(ctrl[_TAIL])
        take = 0
        if not waiting:
            deadline = -1.0
            if time.perf_counter() - active > _HOT_S:
                _sleep(ctrl, claim_lock, wake)
                active = time.perf_counter()
                continue
        else:
            now = time.perf_counter()
            if deadline < 0:
                deadline = now + wait
            full = waiting >= max_batch
            if full or (now >= deadline and
                        (not interval_ns or time.monotonic_ns() >= int(ctrl[_NEXT]))):
                with claim_lock:
                    tail = int(ctrl[_TAIL])
                    take = min(int(ctrl[_HEAD]) - tail, max_batch)
                    if take > 0:
                        ctrl[_TAIL] = tail + take
                        ctrl[busy] = stamp = time.monotonic_ns()
                        if interval_ns:
                            ctrl[_NEXT] = stamp + interval_ns
        if take <= 0:
            time.sleep(_POLL_S)
            continue
        deadline = -1.0
        # The same adaptation as the thread workers: wait less at light load.
        if 2 * take >= max_batch:
            wait = min(max_wait_s, max(2 * wait, 50e-6))
        else:
            wait = wait / 2 if wait > 20e-6 else 0.0
        segments = _segments(tail, take, layout.capacity)
        qsl = indices[segments[0][0]:segments[0][1]] if len(segments) == 1 else \
            np.concatenate([indices[b:e] for b, e in segments])
        outputs = backend.predict(staged.current(int(ctrl[_GEN])).gather(qsl, buffer))
        check(outputs, take)
        outputs = postprocess(outputs)
        done = 0
        for b, e in segments:
            responses[b:e] = outputs[done:done + e - b]
            done += e - b
        ctrl[busy] = 0
        send(pack(_DONE, tail, take))
        active = time.perf_counter()
    del ctrl, indices, responses
    staged.close()
    ring.close()


def _sleep(ctrl: npt.NDArray[np.int64], claim_lock: Any, wake: Any) -> None:
    """Block until the issuer (or a stop) wakes this worker, unless work or a stop came
    in first: declared under the claim lock, which the issuer holds to advance head and
    read ``_SLEEPING``, so either this sees the new head or the issuer sees it asleep."""
    with claim_lock:
        if ctrl[_HEAD] != ctrl[_TAIL] or ctrl[_STOP]:
            return
        ctrl[_SLEEPING] += 1
    wake.acquire()


class _Staged:
    """The worker's view of the samples of the current generation."""

    def __init__(self, ring_name: str, shape: tuple[int, ...], dtype: np.dtype[Any]) -> None:
        self.ring_name, self.shape, self.dtype = ring_name, shape, dtype
        self.generation = 0
        self.block: shared_memory.SharedMemory | None = None
        self.dataset: Any = None

    def current(self, generation: int) -> Any:
        if generation != self.generation:
            from .datasets.base import InMemoryDataset

            self.close()
            block = shared_memory.SharedMemory(name=_staged_name(self.ring_name, generation))
            total, count = (int(v) for v in np.ndarray((2,), np.int64, block.buf, 0))
            slots = np.ndarray((total,), np.int64, block.buf, 16)
            loaded = np.ndarray((count, *self.shape), self.dtype, block.buf, 16 + 8 * total)
            dataset = InMemoryDataset(np.zeros(total, np.int64), self.shape, self.dtype)
            dataset.attach(slots, loaded)
            self.block, self.dataset, self.generation = block, dataset, generation
        return self.dataset

    def close(self) -> None:
        self.dataset = None
        if self.block is not None:
            with contextlib.suppress(BufferError):  # a view still alive: unmapped at exit
                self.block.close()
            self.block = None
