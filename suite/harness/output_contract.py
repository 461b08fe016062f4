"""The backend output contract: what ``predict`` must return for a batch of ``n`` samples.

numpy is forgiving where the harness must not be: postprocessing a single row returned
for a whole batch broadcasts it to every sample, extra rows are dropped by the slice
that completes a query, and a wrong width, a wrong dtype or NaN scores still yield an
argmax. None of that fails a performance run, so a broken backend would be timed and
reported VALID. ``OutputContract`` checks each batch against the model card first:

* rows: ``outputs.shape[0] == n`` on every batch (a tuple compare);
* per-sample shape and dtype kind: once per *shape class*, the pair (trailing shape,
  dtype) of a batch; classes already seen are remembered, so a steady run pays a
  tuple compare with the last class that passed, else a set lookup keyed by the whole
  shape (rows included, so a steady batch size takes no slice): 0.27-0.36 us a call in
  a tight loop, against 0.36-0.57 for the (trailing shape, dtype) lookup;
* finite values: on the first batch of each class of floating outputs.

What the card asks for:

* ``postprocess.kind = "argmax"``: one row of ``output.sample_shape`` per sample
  (a ``-1`` in the card matches any length), e.g. ``(n, 10)`` for digits;
* ``"class_index"``: one class index per sample, ``(n,)`` or ``(n, 1)``;
* dtype: the *kind* of ``output.dtype``. A float card takes any float width (an fp16
  backend returns float16 scores, and argmax reads them the same); an integer card
  takes any signed or unsigned integer. Anything else (ints for float scores, bool,
  complex, strings, Python objects) is a wrong dtype.

A broken contract raises ``BackendError`` naming the backend, the shape the card expects
and the shape (or dtype) the backend returned; the SUT records it as the batch's failure,
so the run ends FAILED.
"""

from __future__ import annotations

from typing import Any, NoReturn

import numpy as np

from suite.errors import BackendError
from suite.models import ModelCard

#: dtype kinds accepted for each card dtype kind (numpy's ``dtype.kind`` letters).
_KINDS: dict[str, frozenset[str]] = {
    "f": frozenset("f"),
    "i": frozenset("iu"),
    "u": frozenset("iu"),
}
_KIND_WORDS = {"f": "floating", "i": "integer", "u": "integer"}


def expected_sample_shapes(card: ModelCard) -> tuple[tuple[int, ...], ...]:
    """The per-sample output shapes the card allows (``-1``: any length on that axis).

    Example::

        expected_sample_shapes(load_card(paths, "digits"))  # ((10,),)
    """
    if card.postprocess.kind == "class_index":
        return ((), (1,))
    return (card.output.sample_shape,)


def _show(shapes: tuple[tuple[int, ...], ...], n: int) -> str:
    """``(64, 10)``, or ``(64,) or (64, 1)``; ``?`` for a card's dynamic axis."""
    shown = []
    for sample in shapes:
        dims = [str(n), *("?" if d < 0 else str(d) for d in sample)]
        shown.append(f"({dims[0]},)" if len(dims) == 1 else f"({', '.join(dims)})")
    return " or ".join(shown)


class OutputContract:
    """Checks one backend's outputs against one model card; cheap once warm.

    Safe to share between worker threads: the only state is a set of shape classes
    already checked (a race at worst checks a class twice).

    Example::

        contract = OutputContract(config.backend, card)
        outputs = backend.predict(batch)
        contract.check(outputs, len(batch))  # raises BackendError
        responses = postprocess(outputs)
    """

    __slots__ = (
        "_kinds",
        "_last",
        "_passed",
        "_seen",
        "backend_name",
        "card_dtype",
        "card_name",
        "sample_shapes",
    )

    def __init__(self, backend_name: str, card: ModelCard) -> None:
        self.backend_name = backend_name
        self.card_name = card.name
        self.card_dtype = np.dtype(card.output.dtype)
        self.sample_shapes = expected_sample_shapes(card)
        self._kinds = _KINDS.get(self.card_dtype.kind, frozenset(self.card_dtype.kind))
        #: (trailing shape, dtype) of the batches already checked in full.
        self._seen: set[tuple[tuple[int, ...], np.dtype[Any]]] = set()
        #: (whole shape, dtype) of numpy batches that passed: the per-batch fast path.
        #: At most one entry per batch size (``MAX_BATCH_SIZE`` bounds it).
        self._passed: set[tuple[tuple[int, ...], np.dtype[Any]]] = set()
        #: The last class that passed (threads may overwrite it: any value in it passed).
        self._last: tuple[tuple[int, ...], Any] = ((), None)

    def check(self, outputs: Any, n: int) -> None:
        """Raise ``BackendError`` unless ``outputs`` holds one valid row per sample."""
        try:
            shape = outputs.shape
            if shape[0] == n:
                # The last batch's class by identity (a tuple compare, 0.15 us a query
                # less than the set), then any class that passed before.
                last_shape, last_dtype = self._last
                if shape == last_shape and outputs.dtype is last_dtype:
                    return
                key = (shape, outputs.dtype)
                if key in self._passed:
                    self._last = key
                    return
        except (AttributeError, IndexError, TypeError):
            pass  # not an array, or a 0-d one: the full check names what is wrong
        self._full(outputs, n)

    __call__ = check

    def _full(self, outputs: Any, n: int) -> None:
        try:
            shape = outputs.shape
            key = (shape[1:], outputs.dtype)
        except AttributeError:
            self._fail(f"returned a {type(outputs).__name__}, not an array", n)
        if not shape or shape[0] != n:
            self._fail(f"returned outputs of shape {shape} for a batch of {n} samples", n)
        if key not in self._seen:
            self._first_of_class(outputs, n, key)
        if isinstance(outputs, np.ndarray):
            self._passed.add((shape, outputs.dtype))
            self._last = (shape, outputs.dtype)

    def _first_of_class(self, outputs: Any, n: int,
                        key: tuple[tuple[int, ...], np.dtype[Any]]) -> None:
        if not isinstance(outputs, np.ndarray):
            self._fail(f"returned a {type(outputs).__module__}.{type(outputs).__name__}, "
                       "not a numpy array", n)
        shape, dtype = outputs.shape, outputs.dtype
        if not any(self._matches(shape[1:], sample) for sample in self.sample_shapes):
            self._fail(f"returned outputs of shape {shape} for a batch of {n} samples", n)
        if dtype.kind not in self._kinds:
            self._fail(f"returned outputs of shape {shape} and dtype {dtype}, not "
                       f"{_KIND_WORDS.get(self.card_dtype.kind, str(self.card_dtype))}", n)
        if dtype.kind == "f":
            finite = np.isfinite(outputs)
            if not finite.all():
                bad = int(finite.size - np.count_nonzero(finite))
                self._fail(f"returned outputs of shape {shape} with {bad} NaN or infinite "
                           "value(s)", n)
        self._seen.add(key)

    @staticmethod
    def _matches(trailing: tuple[int, ...], sample: tuple[int, ...]) -> bool:
        return len(trailing) == len(sample) and all(
            want < 0 or got == want for got, want in zip(trailing, sample, strict=True))

    def _fail(self, what: str, n: int) -> NoReturn:
        kind = _KIND_WORDS.get(self.card_dtype.kind, str(self.card_dtype))
        raise BackendError(
            f"backend '{self.backend_name}' broke the output contract: it {what}; the "
            f"model card '{self.card_name}' expects {_show(self.sample_shapes, n)} "
            f"{kind} ({self.card_dtype}), one row per sample",
            hint="predict(batch) must return one output row per input sample, shaped and "
            "typed as the card's [output] says",
        )
