"""The SUT's INLINE dispatch (SingleStream, MultiStream): each query is one batch, run
on LoadGen's issue thread, with no gather hand-off and, for a one-sample query whose
response is a class index, no lock and no allocation."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from suite.postprocess import index_writer

if TYPE_CHECKING:
    from suite.harness.sut.dispatch import SutParts


def inline_issue(sut: SutParts) -> Callable[[list[int], list[int]], None]:
    """``issue`` for INLINE dispatch: the query is one batch, run on the issue thread.

    A closure over its collaborators: SingleStream's latency is this path, and each
    attribute lookup and call layer taken off it is measurable in LoadGen's p90.
    A one-sample query whose response is a class index takes the shortest form:
    registered without the table's lock (``InflightTable.inline``), the index
    written by numpy straight into the completion payload
    (``postprocess.index_writer``, ``Completer.single_index``), the output
    contract checked as for every batch.
    """
    hold, release = sut.inflight.inline()
    sample, gather, buffer = sut.dataset.sample, sut.dataset.gather, sut.inline_buffer
    predict, postprocess, check = sut.backend.predict, sut.postprocess, sut.check_outputs
    complete, complete_empty = sut.completer.complete, sut.completer.complete_empty
    write = index_writer(postprocess)
    # The recording completers of unit tests have no single_index: the general path.
    single = getattr(sut.completer, "single_index", lambda: None)() if write else None

    def batch_of(indices: list[int]) -> Any:
        return (sample(indices[0]) if len(indices) == 1 else
                gather(np.asarray(indices, dtype=np.int64), buffer))

    def issue_batch(ids: list[int], indices: list[int]) -> None:
        sut.issue_calls += 1
        sut.issued_samples += len(ids)
        try:
            token = hold(ids)
        except Exception as exc:  # a bug here must not leave LoadGen waiting
            sut.fail("harness_error", f"issue_queries failed: {exc!r}", len(ids))
            return
        if token is None:  # drained: answer at once
            complete_empty(ids)
            return
        try:
            outputs = predict(batch_of(indices))
            check(outputs, len(indices))
            responses = postprocess(outputs)
        except Exception as exc:
            sut.batch_failed(exc, len(ids))
            return
        if release(token):  # not drained (watchdog) while we predicted
            complete(ids, responses)

    if single is None or write is None:
        return issue_batch
    slot, complete_one = single

    def issue(ids: list[int], indices: list[int]) -> None:
        if len(ids) != 1:
            issue_batch(ids, indices)
            return
        sut.issue_calls += 1
        sut.issued_samples += 1
        try:
            token = hold(ids)
        except Exception as exc:  # a bug here must not leave LoadGen waiting
            sut.fail("harness_error", f"issue_queries failed: {exc!r}", 1)
            return
        if token is None:  # drained: answer at once
            complete_empty(ids)
            return
        try:
            outputs = predict(sample(indices[0]))
            check(outputs, 1)
            write(outputs, slot)
        except Exception as exc:
            sut.batch_failed(exc, 1)
            return
        if release(token):  # not drained (watchdog) while we predicted
            complete_one(ids[0])

    return issue

