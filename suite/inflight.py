"""The ``InflightTable``: issued samples a worker has registered, until completed.

Shared by the SUT's dispatch strategies and its drain, so that nothing issued can be
forgotten: whoever claims a token completes its samples, exactly once.
"""

from __future__ import annotations

import collections
import threading
import time
from typing import Any

# A registered unit of work: (inflight token, LoadGen ids, QSL indices).
Item = tuple[int, list[int], list[int]]


class InflightTable:
    """Issued, not yet completed work; whoever claims a token completes it.

    An Offline query is registered whole as a *span* and carved into batches by the
    workers (``take``): issuing it is O(1), so LoadGen's issue thread does not hold
    the GIL for thousands of slices while the workers wait for it. ``claim_all``
    (a drain) also closes the table: what is added afterwards is refused, and the
    caller completes it itself, so nothing can slip in behind a drain and hang LoadGen.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: dict[int, tuple[list[int], float]] = {}
        self._spans: collections.deque[list[Any]] = collections.deque()
        self._next = 0
        self._closed = False

    def add(self, ids: list[int]) -> int | None:
        """Register ``ids`` as one item; None once the table is closed."""
        with self._lock:
            if self._closed:
                return None
            token = self._next
            self._next += 1
            self._items[token] = (ids, time.monotonic())
            return token

    def add_span(self, ids: list[int], indices: list[int]) -> bool:
        """Register a query to be carved by ``take``; False once the table is closed."""
        with self._lock:
            if self._closed:
                return False
            self._spans.append([ids, indices, 0])
            return True

    def take(self, size: int) -> Item | None:
        """The next batch of at most ``size`` samples carved from the oldest span."""
        with self._lock:
            while self._spans:
                span = self._spans[0]
                ids, indices, start = span
                if start >= len(ids):
                    self._spans.popleft()
                    continue
                end = span[2] = start + size
                chunk = ids[start:end]
                token = self._next
                self._next += 1
                self._items[token] = (chunk, time.monotonic())
                return token, chunk, indices[start:end]
            return None

    def claim(self, token: int) -> bool:
        with self._lock:
            return self._items.pop(token, None) is not None

    def claim_all(self) -> list[int]:
        """Every outstanding id, items and uncarved spans alike; closes the table."""
        with self._lock:
            self._closed = True
            ids = [qid for qids, _ in self._items.values() for qid in qids]
            for span_ids, _, start in self._spans:
                ids.extend(span_ids[start:])
            self._items.clear()
            self._spans.clear()
            return ids

    def oldest_age(self) -> float:
        with self._lock:
            if not self._items:
                return 0.0
            return time.monotonic() - min(start for _, start in self._items.values())
