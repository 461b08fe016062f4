"""The SUT's DYNAMIC dispatch (Server): the loop each worker thread runs.

A worker takes the first query from the Server queue, fills its batch from the queue
(``server_queue.fill``: up to the batch cap, until its wait or its paced time), registers
it in the inflight table and runs it. Paced, only the worker holding ``Pacer.forming``
takes queries; the wait adapts to the load between 0 and ``max_wait_s``.
"""

from __future__ import annotations

import collections
import contextlib
from itertools import chain
from typing import TYPE_CHECKING

from suite.harness.sut.server_queue import Query, fill, next_query

if TYPE_CHECKING:
    from suite.harness.sut.dispatch import SutParts


def server_worker(sut: SutParts) -> None:
    """One Server worker thread: form a batch from the queue (``server_queue.fill``),
    register it and run it, until the stop signal."""
    max_batch = sut.batch_cap
    max_wait = sut.max_wait_s
    pacer = sut.pacer
    # The wait adapts to the load (halved after a batch under half full, doubled after
    # a fuller one, never above max_wait): at light load waiting only adds latency, at
    # heavy load it fills batches.
    wait = max_wait
    buffer, stats = sut.new_buffer(), sut.new_stats()
    # The rest of a query that did not fit, in batch-sized pieces: a coalesced query
    # can hold thousands of samples after a stall, and cutting it once is O(n).
    carry: collections.deque[Query] = collections.deque()
    stopping = False
    while not stopping:
        # Paced, one worker at a time takes queries while its batch waits for its
        # time (Pacer.forming): the others wait without queries, so a query is
        # never held back behind batches due to leave before its own. A worker
        # with a carry already holds its next batch's queries and needs no turn
        # (waiting for one deadlocked: the turn's holder waits for new queries).
        forming = pacer.forming if pacer is not None and not carry else None
        with forming if forming is not None else contextlib.nullcontext():
            first = carry.popleft() if carry else next_query(sut.query_queue)
            if first is None:
                return
            sut.batches_begun += 1
            queries: list[Query] = [first]
            try:
                count, stopping = fill(sut.query_queue, queries, carry, wait, max_batch,
                                       sut.waits, pacer)
                if 2 * count >= max_batch:
                    wait = min(max_wait, max(2 * wait, 50e-6))
                else:
                    wait = wait / 2 if wait > 20e-6 else 0.0
                if len(queries) == 1:
                    ids, indices = queries[0]
                else:
                    ids = list(chain.from_iterable(q[0] for q in queries))
                    indices = list(chain.from_iterable(q[1] for q in queries))
                token = sut.inflight.add(ids)
            except BaseException:
                # What this worker holds is in no table a drain reaches: answer it here,
                # or LoadGen waits for it forever (_warm_then records the failure).
                sut.completer.complete_empty(
                    [qid for query in (*queries, *carry) for qid in query[0]])
                raise
        if token is None:  # drained while this batch was gathered
            sut.completer.complete_empty(ids)
        else:
            sut.run_batch((token, ids, indices), buffer, stats)
