"""The ``InflightTable``: issued samples a worker has registered, until completed.

Shared by the SUT's dispatch strategies and its drain, so that nothing issued can be
forgotten: whoever claims a token completes its samples, exactly once.

SingleStream's latency includes the registration, so the inline path has its own
lock-free pair (``inline``): it relies on single dict operations (insert, ``pop``,
``popitem``) being atomic, which they are under the GIL and with per-object locks in
free-threaded CPython.
"""

from __future__ import annotations

import collections
import itertools
import threading
import time
from collections.abc import Callable
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
        # One atomic dict operation: no lock needed, and it races safely with
        # ``claim_all``'s ``popitem`` and with ``inline``'s release.
        return self._items.pop(token, None) is not None

    def inline(self) -> tuple[Callable[[list[int]], int | None], Callable[[int], bool]]:
        """``(hold, release)``: ``add`` and ``claim`` without the lock, for the one
        query at a time that INLINE dispatch predicts on LoadGen's issue thread.

        ``hold`` inserts first and looks at ``closed`` after, while ``claim_all`` closes
        first and empties after, so an insert is either seen by the drain (which then
        completes it: ``release`` returns False) or sees the table closed and takes
        its item back (``hold`` returns None, the caller completes it). Its tokens are
        negative, apart from ``add``'s and ``take``'s. Measured on LoadGen's issue
        thread: 1.6-2.1 us for the pair, against 2.4-3.2 us for ``add`` and ``claim``
        through the lock.
        """
        items, tokens, now = self._items, itertools.count(-1, -1), time.monotonic

        def hold(ids: list[int]) -> int | None:
            token = next(tokens)
            items[token] = (ids, now())
            if self._closed and items.pop(token, None) is not None:
                return None  # drained before this query: the caller answers it
            return token

        def release(token: int) -> bool:
            return items.pop(token, None) is not None

        return hold, release

    def claim_all(self) -> list[int]:
        """Every outstanding id, items and uncarved spans alike; closes the table."""
        with self._lock:
            self._closed = True
            ids: list[int] = []
            # popitem, not a read then clear(): a lock-free ``claim`` or ``release``
            # may race it, and each item must go to exactly one of them.
            while self._items:
                try:
                    ids.extend(self._items.popitem()[1][0])
                except KeyError:  # claimed between the test and the pop
                    break
            for span_ids, _, start in self._spans:
                ids.extend(span_ids[start:])
            self._spans.clear()
            return ids

    def oldest_age(self) -> float:
        # A snapshot in one C call: ``inline``'s hold inserts without the lock.
        starts = [start for _, start in tuple(self._items.values())]
        return time.monotonic() - min(starts) if starts else 0.0
