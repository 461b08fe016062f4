"""The ``Dataset`` contract: LoadGen's query sample library (QSL) plus labels.

LoadGen calls ``load`` with the QSL indices of the performance set before issuing
and ``unload`` after. ``load`` copies those samples into one contiguous array;
``gather`` then builds a batch with a single vectorised ``np.take`` into a
preallocated buffer, with no per-sample Python objects on the hot path.

A dataset whose samples are normalised from a cheaper raw form (ImageNet: uint8
pixels, a quarter of float32's bytes) offers that form (``raw_input``); a backend
that normalises on its device accepts it, and the dataset then stages raw samples
(``offer_raw``), so every gather and host-to-device copy moves fewer bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from suite.errors import DatasetError
from suite.types import Batch, IndexArray

if TYPE_CHECKING:
    from suite.backends.base import RawInput


class InMemoryDataset:
    """A dataset whose preprocessed samples can be produced as one array.

    Subclasses implement ``_read(indices)`` (return preprocessed samples for QSL
    indices) and set ``name``, ``labels``, ``sample_shape`` and ``dtype``.
    """

    name = ""

    def __init__(self, labels: npt.NDArray[np.int64], sample_shape: tuple[int, ...],
                 dtype: np.dtype[Any]) -> None:
        self.labels = labels
        self.sample_shape = sample_shape
        self.dtype = dtype
        self._slots = np.full(len(labels), -1, dtype=np.int64)
        self._loaded: npt.NDArray[Any] = np.empty((0, *sample_shape), dtype=dtype)
        #: The raw form staged instead of model inputs, once a backend accepted it.
        self.raw: RawInput | None = None

    @property
    def total_count(self) -> int:
        return len(self.labels)

    def _read(self, indices: IndexArray) -> npt.NDArray[Any]:
        raise NotImplementedError

    def _read_raw(self, indices: IndexArray) -> npt.NDArray[Any]:
        """Samples at ``indices`` in the ``raw_input`` form (datasets that offer one)."""
        raise DatasetError(f"{self.name}: no raw form to read")

    def raw_input(self) -> RawInput | None:
        """The raw form this dataset can stage instead of model inputs, or None."""
        return None

    def offer_raw(self, accept: Callable[[RawInput], bool]) -> bool:
        """Stage the raw form from now on if there is one and ``accept`` (a backend's
        ``accept_raw_input``) takes it; call before ``load``. Returns whether it did."""
        raw = self.raw_input()
        if raw is None or not accept(raw):
            return False
        self.raw = raw
        self.sample_shape = raw.shape
        self.dtype = np.dtype(raw.dtype)
        self.unload([])
        return True

    def describe(self) -> dict[str, Any]:
        """What the run directory's ``dataset.json`` records about this dataset."""
        return {"name": self.name, "total": self.total_count,
                "sample_shape": list(self.sample_shape), "dtype": str(self.dtype)}

    def load(self, indices: Sequence[int]) -> None:
        """Stage the samples at ``indices`` (duplicates allowed) in one contiguous array,
        in the order given.

        LoadGen's Offline query is the loaded set repeated in the order it was loaded
        (measured), so staged in that order most Offline batches are one slice of the
        array, which ``gather`` hands over without a copy.
        """
        staged = self.staging_order(indices)
        read = self._read if self.raw is None else self._read_raw
        self._loaded = np.ascontiguousarray(read(staged), dtype=self.dtype)
        self._slots.fill(-1)
        self._slots[staged] = np.arange(len(staged))

    def staging_order(self, indices: Sequence[int]) -> IndexArray:
        """The QSL indices ``load`` stages: each one's first occurrence, in LoadGen's order
        (a ``DatasetError`` for one out of range)."""
        order = np.asarray(indices, dtype=np.int64)
        unique, first = np.unique(order, return_index=True)
        if len(unique) and (unique[0] < 0 or unique[-1] >= self.total_count):
            raise DatasetError(f"{self.name}: QSL index out of range 0..{self.total_count - 1}")
        staged: IndexArray = order[np.sort(first)]
        return staged

    def unload(self, indices: Sequence[int]) -> None:
        """Drop the staged samples."""
        self._slots.fill(-1)
        self._loaded = np.empty((0, *self.sample_shape), dtype=self.dtype)

    def staged(self) -> tuple[npt.NDArray[np.int64], npt.NDArray[Any]]:
        """The QSL-index-to-slot map (-1: not loaded) and the staged samples."""
        return self._slots, self._loaded

    def attach(self, slots: npt.NDArray[np.int64], loaded: npt.NDArray[Any]) -> None:
        """Serve samples staged elsewhere (a worker process maps the LoadGen process's)."""
        self._slots, self._loaded = slots, loaded

    def new_buffer(self, max_batch: int) -> Batch:
        """A batch buffer for ``gather``; one per worker thread."""
        return np.empty((max_batch, *self.sample_shape), dtype=self.dtype)

    def sample(self, index: int) -> Batch:
        """A one-sample batch: a view of the staged sample, no copy (SingleStream)."""
        slot = int(self._slots[index])
        if slot < 0:
            raise DatasetError(f"{self.name}: sample {index} was not loaded")
        return self._loaded[slot:slot + 1]

    def gather(self, indices: IndexArray, out: Batch) -> Batch:
        """The staged samples at ``indices`` as one batch: a view of the staged array when
        they lie in it consecutively, else copied into ``out[:n]``."""
        n = len(indices)
        if n == 1:
            return self.sample(int(indices[0]))
        slots = self._slots[indices]
        start = int(slots[0])
        if start >= 0 and int(slots[-1]) - start == n - 1 and (np.diff(slots) == 1).all():
            return self._loaded[start:start + n]  # staged in this order: no copy
        if int(slots.min()) < 0:
            raise DatasetError(f"{self.name}: a sample of this batch was not loaded")
        # mode="clip": with the default "raise", numpy gathers into a temporary and copies
        # it into ``out`` (so that a bad index leaves ``out`` untouched): two copies, 4-8x
        # slower for 150 KB ResNet-50 samples here. The slots were checked just above.
        np.take(self._loaded, slots, axis=0, out=out[:n], mode="clip")
        return out[:n]
