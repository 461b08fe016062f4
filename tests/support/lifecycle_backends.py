"""Backends with a slow or endless setup, named by ``tests.support.lifecycle_backends:<Class>``.

They wrap the real null backend: only ``load`` misbehaves, the rest of the run is real.
"""

from __future__ import annotations

import threading
import time

from suite.backends.null import NullBackend

#: How long ``SlowLoadBackend.load`` takes: longer than the test-shortened liveness limit.
SLOW_LOAD_S = 10.0


class SlowLoadBackend(NullBackend):
    """Loads for ``SLOW_LOAD_S`` (a cold TensorRT build, compiling every batch size)."""

    def load(self, card: object, max_batch_size: int) -> object:  # type: ignore[override]
        time.sleep(SLOW_LOAD_S)
        return super().load(card, max_batch_size)  # type: ignore[arg-type]


class EndlessLoadBackend(NullBackend):
    """Never finishes ``load``; its process's heartbeat thread stays alive."""

    def load(self, card: object, max_batch_size: int) -> object:  # type: ignore[override]
        threading.Event().wait()
        raise AssertionError("unreachable")
