"""The shared-memory ring between the LoadGen process and its Server worker processes
(``workers``): the control words, the block's layout and the pipe's messages,
the same arithmetic in every process."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:
    from suite.config.model import RunConfig

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


def _staged_name(ring_name: str, generation: int) -> str:
    return f"{ring_name}_g{generation}"
