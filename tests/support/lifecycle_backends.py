"""Backends with a slow or endless setup, named by ``tests.support.lifecycle_backends:<Class>``.

They wrap the real null backend: only ``load`` misbehaves, the rest of the run is real
(``SlowLoadBackend`` also paces its batches, so that its run lasts however fast the machine).
"""

from __future__ import annotations

import threading
import time

from suite.backends.null import NullBackend

#: How long ``SlowLoadBackend.load`` takes: longer than the test-shortened liveness limit.
SLOW_LOAD_S = 10.0
#: Each of ``SlowLoadBackend``'s batches takes at least this long, so its rate is at most
#: max_batch_size / BATCH_S per worker however fast the machine: an Offline query sized
#: from that ceiling lasts its min_duration on any machine (VALID), and long enough for
#: the parent to relay progress.
BATCH_S = 0.001


class SlowLoadBackend(NullBackend):
    """Loads for ``SLOW_LOAD_S`` (a cold TensorRT build, compiling every batch size)."""

    def load(self, card: object, max_batch_size: int) -> object:  # type: ignore[override]
        time.sleep(SLOW_LOAD_S)
        return super().load(card, max_batch_size)  # type: ignore[arg-type]

    def predict(self, batch: object) -> object:  # type: ignore[override]
        time.sleep(BATCH_S)
        return super().predict(batch)  # type: ignore[arg-type]


class EndlessLoadBackend(NullBackend):
    """Never finishes ``load``; its process's heartbeat thread stays alive."""

    def load(self, card: object, max_batch_size: int) -> object:  # type: ignore[override]
        threading.Event().wait()
        raise AssertionError("unreachable")
