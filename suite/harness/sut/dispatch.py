"""How the SUT dispatches each scenario's queries, and what its dispatch paths see of it.

``DISPATCH``: SingleStream and MultiStream run each query inline on LoadGen's issue
thread (``inline``), Offline splits it over the workers, Server queues it for the workers
to batch dynamically (``server``). Those paths, and the ``watchdog``, were split out of
``core`` and take the SUT as an argument: ``SutParts`` declares what they read and call,
so they depend on this contract rather than on ``core``, which imports them.
"""

from __future__ import annotations

import collections
import queue
import threading
from collections.abc import Callable
from enum import Enum
from typing import Any, Protocol

from suite.backends.base import BackendBase
from suite.config.model import SutConfig
from suite.datasets.base import InMemoryDataset
from suite.harness.loadgen import Completer
from suite.harness.sut.batch_stats import BatchStats
from suite.harness.sut.failures import FailureLog
from suite.harness.sut.inflight import InflightTable, Item
from suite.harness.sut.server_queue import Pacer, Query
from suite.harness.sut.workers import ProcessWorkers
from suite.postprocess import Postprocess
from suite.scenarios import Scenario


class Dispatch(Enum):
    INLINE = "inline"
    SPLIT = "split"
    DYNAMIC = "dynamic"


DISPATCH = {
    Scenario.SINGLE_STREAM: Dispatch.INLINE,
    Scenario.MULTI_STREAM: Dispatch.INLINE,
    Scenario.OFFLINE: Dispatch.SPLIT,
    Scenario.SERVER: Dispatch.DYNAMIC,
}


class SutParts(Protocol):
    """The SUT as its dispatch paths see it (``core.SystemUnderTest`` implements it)."""

    backend: BackendBase
    dataset: InMemoryDataset
    postprocess: Postprocess
    completer: Completer
    config: SutConfig
    failures: FailureLog
    inflight: InflightTable
    draining: threading.Event
    processes: ProcessWorkers | None
    batch_cap: int
    max_wait_s: float
    batches_begun: int
    issue_calls: int
    issued_samples: int
    waits: collections.deque[float]
    #: Server's queries waiting for a worker (the watchdog looks whether it empties).
    query_queue: queue.SimpleQueue[Query | None]
    #: Set when the SUT stops: the watchdog's wait ends.
    stopping: threading.Event
    #: Spaces Server batches ``interval_s`` apart (None: unpaced).
    pacer: Pacer | None
    #: The gather buffer of the inline path (LoadGen's issue thread).
    inline_buffer: Any
    #: Checks a batch's outputs against the card's output contract.
    check_outputs: Callable[[Any, int], None]

    def fail(self, kind: str, message: str, samples: int) -> None: ...

    def drain(self) -> None: ...

    def batch_failed(self, exc: Exception, samples: int) -> None:
        """Record a batch's exception and drain: every outstanding sample is answered."""
        ...

    def new_buffer(self) -> Any:
        """A worker's gather buffer (the backend's own where it has one)."""
        ...

    def new_stats(self) -> BatchStats:
        """A worker's batch record, summed into the test's batch profile."""
        ...

    def run_batch(self, item: Item, buffer: Any, stats: BatchStats) -> None:
        """Predict one registered batch and complete it, unless a drain claimed it."""
        ...
