"""The simulated backend's devices: their timelines and the record of every call.

A ``Devices`` object places each call on the timeline of the device with the fewest
calls running (``_Device.reserve`` says how a call's phases queue there) and keeps,
per call, where its time went. ``Devices`` lives in one process. ``SharedDevices``
keeps the same state in a shared-memory block under a process-shared lock, so that
Server worker *processes* (``sut.worker_model = "processes"``) share one node's
devices, as the processes of a real server share its GPUs: without it each worker
process would simulate a node of its own, and eight workers eight times the hardware.
``perf_counter`` is ``CLOCK_MONOTONIC`` on Linux, the same clock in every process, so
the processes' calls land on one timeline.
"""

from __future__ import annotations

import collections
import threading
from dataclasses import dataclass, field
from multiprocessing import shared_memory
from typing import Any

import numpy as np

from suite.errors import BackendError

#: Calls the record keeps (the latest): a 10-minute run at 1,000 batches/s.
RECORDED_CALLS = 600_000
#: Calls one shared device can hold placed and not ended: one per worker and warm-up
#: thread is all a run makes, so this is far above what any configuration reaches.
_SHARED_PENDING = 256


@dataclass
class _Device:
    """One simulated device's timeline: when each stream, the copy engine and the
    compute are next free, in ``perf_counter`` seconds.

    A call is placed on the timeline when it is made (``reserve``), as a GPU queues work
    on a stream, and the device then runs it whatever the host thread does: a thread
    that wakes late from its one sleep delays only its own return, never the device's
    next call. (Holding a lock across each phase's sleep made every late wake-up, a
    GIL hand-off on a busy host, device time: 1.6 ms a call at 7k QPS on the 4-device
    profile.)"""

    streams: list[float]
    copy_free: float = 0.0
    #: Compute reservations (start, end), sorted; ended ones are pruned.
    compute: list[tuple[float, float]] = field(default_factory=list)

    def running(self, now: float) -> int:
        """Calls placed on this device that have not ended by ``now``."""
        return sum(end > now for end in self.streams)

    def reserve(self, now: float, transfer_s: float, fixed_s: float,
                compute_s: float) -> float:
        """Place a call made at ``now``; returns when it ends.

        It waits for the stream that is free first; its transfer queues on the copy
        engine and overlaps its fixed part (both start when the stream does); its
        compute then takes the earliest gap of ``compute_s`` in the device's compute,
        which runs one call's at a time.
        """
        stream = min(range(len(self.streams)), key=self.streams.__getitem__)
        begin = max(now, self.streams[stream])
        copied = max(begin, self.copy_free) + transfer_s
        if transfer_s:
            self.copy_free = copied
        ready = max(copied, begin + fixed_s)
        self.compute = busy = [slot for slot in self.compute if slot[1] > now]
        start, at = ready, len(busy)
        for k, (lo, hi) in enumerate(busy):  # first fit: never delays a placed call
            if start + compute_s <= lo:
                at = k
                break
            start = max(start, hi)
        busy.insert(at, (start, start + compute_s))
        self.streams[stream] = end = start + compute_s
        return end


class Devices:
    """A node's devices in this process: ``place`` a call, ``record`` how it went."""

    def __init__(self, devices: int, streams: int) -> None:
        self.count, self.streams = devices, streams
        self._devices = [_Device([0.0] * streams) for _ in range(devices)]
        #: Guards the timelines (worker threads place calls at once).
        self._lock = threading.Lock()
        #: Per call: (seconds on the device from the call to its end, what it would
        #: take on an idle device, how late its thread returned).
        self._calls: collections.deque[tuple[float, float, float]] = collections.deque(
            maxlen=RECORDED_CALLS)
        self._cold = 0

    def place(self, now: float, transfer_s: float, fixed_s: float, compute_s: float,
              cold: bool) -> float:
        """Place a call made at ``now`` on the device with the fewest calls running (ties:
        the first), as a backend that counts its outstanding calls per device would
        choose; returns when it ends. ``cold``: it paid a first-shape cost."""
        with self._lock:
            self._cold += cold
            device = min(self._devices, key=lambda d: d.running(now))
            return device.reserve(now, transfer_s, fixed_s, compute_s)

    def record(self, device_s: float, idle_s: float, late_s: float) -> None:
        self._calls.append((device_s, idle_s, late_s))

    def calls(self) -> tuple[np.ndarray[Any, np.dtype[np.float64]], int]:
        """The recorded calls (n x 3 seconds) and how many paid a first-shape cost."""
        return np.asarray(self._calls, dtype=np.float64).reshape(-1, 3), self._cold

    def clear(self) -> None:
        self._calls.clear()
        self._cold = 0

    def share(self) -> SharedDevices:
        """A node of these devices in shared memory, for worker processes; its timelines
        start idle and its record empty (``begin_record`` follows the workers' warm-up)."""
        return SharedDevices.create(self.count, self.streams)

    def close(self) -> None:
        """Nothing to free in one process."""


class SharedDevices(Devices):
    """The same devices and record in one shared-memory block, for worker processes.

    The block holds a header (calls recorded, first-shape calls), each device's state
    (its streams' free times, the copy engine's, the number of compute reservations and
    the reservations) and a ring of call records. A multiprocessing lock guards it; a
    call takes it twice (placing, recording), for a microsecond or so each. The
    process that creates it (the LoadGen process) unlinks it at ``close``; a worker
    process attaches by pickling (``__reduce__``) as its arguments are sent.
    """

    def __init__(self, devices: int, streams: int, block: shared_memory.SharedMemory,
                 lock: Any, owner: bool) -> None:
        super().__init__(devices, streams)
        self._block, self._lock, self._owner = block, lock, owner
        self._width = streams + 2 + 2 * _SHARED_PENDING
        buf: Any = block.buf
        self._header = np.ndarray((2,), np.int64, buf, 0)
        self._state = np.ndarray((devices, self._width), np.float64, buf, 16)
        self._ring = np.ndarray((RECORDED_CALLS, 3), np.float64, buf,
                                16 + self._state.nbytes)

    @classmethod
    def _nbytes(cls, devices: int, streams: int) -> int:
        return 16 + 8 * devices * (streams + 2 + 2 * _SHARED_PENDING) + 24 * RECORDED_CALLS

    @classmethod
    def create(cls, devices: int, streams: int) -> SharedDevices:
        import multiprocessing

        block = shared_memory.SharedMemory(create=True, size=cls._nbytes(devices, streams))
        shared = cls(devices, streams, block, multiprocessing.get_context("spawn").Lock(),
                     owner=True)
        shared._header[:] = 0
        shared._state[:] = 0.0
        return shared

    def __reduce__(self) -> tuple[Any, ...]:
        return (_attach, (self.count, self.streams, self._block.name, self._lock))

    def place(self, now: float, transfer_s: float, fixed_s: float, compute_s: float,
              cold: bool) -> float:
        streams = self.streams
        with self._lock:
            self._header[1] += cold
            # The fewest calls running (a stream free only after now), reading just the
            # streams' columns: the whole state is 516 values a device.
            free = self._state[:, :streams].tolist()
            k = min(range(self.count), key=lambda d: sum(t > now for t in free[d]))
            pending = int(self._state[k, streams + 1])
            row = self._state[k, :streams + 2 + 2 * pending].tolist()
            flat = row[streams + 2:]
            device = _Device(row[:streams], row[streams],
                             list(zip(flat[0::2], flat[1::2], strict=True)))
            end = device.reserve(now, transfer_s, fixed_s, compute_s)
            if len(device.compute) > _SHARED_PENDING:
                raise BackendError(f"more than {_SHARED_PENDING} calls placed and not ended "
                                   "on one simulated device",
                                   hint="each worker keeps one call in flight: use fewer "
                                   f"than {_SHARED_PENDING} sut.workers")
            state = self._state[k]
            state[:streams] = device.streams
            state[streams] = device.copy_free
            state[streams + 1] = len(device.compute)
            if device.compute:
                state[streams + 2:streams + 2 + 2 * len(device.compute)] = \
                    np.asarray(device.compute, np.float64).ravel()
        return end

    def record(self, device_s: float, idle_s: float, late_s: float) -> None:
        with self._lock:
            at = int(self._header[0])
            self._ring[at % RECORDED_CALLS] = (device_s, idle_s, late_s)
            self._header[0] = at + 1

    def calls(self) -> tuple[np.ndarray[Any, np.dtype[np.float64]], int]:
        with self._lock:
            count, cold = (int(v) for v in self._header)
            if count <= RECORDED_CALLS:
                return self._ring[:count].copy(), cold
            at = count % RECORDED_CALLS  # the oldest kept
            return np.concatenate([self._ring[at:], self._ring[:at]]), cold

    def clear(self) -> None:
        with self._lock:
            self._header[:] = 0

    def share(self) -> SharedDevices:
        return self

    def close(self) -> None:
        del self._header, self._state, self._ring
        self._block.close()
        if self._owner:
            self._block.unlink()


def _attach(devices: int, streams: int, name: str, lock: Any) -> SharedDevices:
    """A worker process's view of the LoadGen process's shared devices."""
    return SharedDevices(devices, streams, shared_memory.SharedMemory(name=name), lock,
                         owner=False)
