"""The worker side of Server worker processes (``workers``): build the backend,
then claim batches from the ring, predict, write the responses back and say so on the
pipe; sleep on the wake-up semaphore when idle; die with the LoadGen process."""

from __future__ import annotations

import contextlib
import time
import traceback
from multiprocessing import shared_memory
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from suite.harness.sut.ring import (
    _BUSY,
    _DONE,
    _FAILED,
    _GEN,
    _HEAD,
    _HOT_S,
    _MESSAGE,
    _NEXT,
    _POLL_S,
    _READY,
    _SLEEPING,
    _STOP,
    _TAIL,
    WorkerSpec,
    _Layout,
    _segments,
    _staged_name,
)

if TYPE_CHECKING:
    from suite.backends.base import RawInput


def _worker_main(spec: WorkerSpec, number: int, ring_name: str, layout: _Layout,
                 locks: tuple[Any, Any], writer: Any, errors: Any, max_batch: int,
                 max_wait_s: float, interval_s: float, sample_shape: tuple[int, ...],
                 sample_dtype: str, response_dtype: str, raw: RawInput | None,
                 share: Any = None) -> None:
    """Build the backend, then claim, predict and hand back batches until stopped.
    ``share``: the LoadGen process's backend's ``worker_share``, if any."""
    _die_with_parent()
    try:
        _serve(spec, number, ring_name, layout, locks, writer, max_batch,
               (max_wait_s, interval_s), sample_shape, np.dtype(sample_dtype),
               np.dtype(response_dtype), raw, share)
    except BaseException as exc:
        errors.put((number, repr(exc), traceback.format_exc()))
        writer.send_bytes(_MESSAGE.pack(_FAILED, number, 0))


def _die_with_parent() -> None:
    """Ask Linux to kill this worker when the LoadGen process dies, however it dies: a
    worker hung in a backend call would otherwise outlive it and hold its memory."""
    import ctypes
    import os
    import signal
    import sys

    if sys.platform != "linux":
        return  # elsewhere the LoadGen process's own exit paths stop the workers
    pr_set_pdeathsig = 1
    libc = ctypes.CDLL(None, use_errno=True)  # libc's symbols, without ldconfig -p
    libc.prctl(pr_set_pdeathsig, signal.SIGKILL)
    if os.getppid() == 1:  # the parent died before the request took effect
        os._exit(1)


def _serve(spec: WorkerSpec, number: int, ring_name: str, layout: _Layout,
           locks: tuple[Any, Any], writer: Any, max_batch: int, waits: tuple[float, float],
           sample_shape: tuple[int, ...],
           sample_dtype: np.dtype[Any], response_dtype: np.dtype[Any],
           raw: RawInput | None, share: Any) -> None:
    from suite.errors import BackendError
    from suite.harness.output_contract import OutputContract
    from suite.harness.sut.loading import load_model
    from suite.postprocess import make_postprocess

    claim_lock, wake = locks  # the claim lock; the semaphore a sleeping worker waits on
    card, backend, _ = load_model(spec.home, spec.config)
    if share is not None:
        backend.attach_share(share)
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
            from suite.datasets.base import InMemoryDataset

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
