"""A task card's dataset (``suite.tasks.base.TaskData``) as the SUT's query sample library.

``TaskDataset`` is an ``InMemoryDataset``: LoadGen's ``load`` stages each loaded sample's
inputs once, and the SUT's gathers and buffers (one per worker, rows of the structured
dtype that holds every input) work on them as for any dataset.

* **Stacked** (the card's ``[[inputs]]`` fix every per-sample axis and sample 0 has those
  shapes: bert, yolo; a later sample that differs is a ``DatasetError``): each input is
  staged as one contiguous array (axis 0: the loaded samples, in LoadGen's order), and a
  batch (``Gathered``) is each input's batch as one contiguous array: a slice of the
  staged array where the batch's samples lie there consecutively (LoadGen's Offline
  query is the loaded set repeated in its load order; the staged arrays continue past
  their end with their first ``max_batch - 1`` samples again, so a batch that wraps is a
  slice too), else one ``np.take`` per input into the worker's buffer. No per-sample
  Python and no allocation on the hot path.
* **Per sample** (a ``-1`` beyond the batch axis, or sample 0 differs from the card: 3d-unet
  volumes, whisper audio): an object array of the
  samples' input dicts; the task's ``infer`` takes them one by one (windows, decoding).

``StagedSamples`` is what ``TensorTask.infer`` receives: a sequence of per-sample input
dicts over a gathered batch, which also knows the samples' QSL indices (for
``TensorTask.response``). A warm-up batch (zeros of the buffer's structured dtype, made
before any ``load``) stands for sample 0's inputs in the per-sample form.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from typing import Any, overload

import numpy as np
import numpy.typing as npt

from suite.datasets.base import InMemoryDataset
from suite.errors import DatasetError
from suite.models import ModelCard
from suite.types import IndexArray

#: The field (stacked) or key (per sample) holding a staged sample's QSL index.
QSL_FIELD = "__qsl_index"

Inputs = dict[str, npt.NDArray[Any]]


class Gathered(np.ndarray[Any, np.dtype[np.int64]]):
    """A stacked batch: the samples' QSL indices (int64), with ``fields``: each input of
    the batch as one C-contiguous array (axis 0: the samples)."""

    fields: Inputs


def gathered(qsl: IndexArray, fields: Inputs) -> Gathered:
    """``qsl`` as a ``Gathered`` batch of ``fields``."""
    batch = qsl.view(Gathered)
    batch.fields = fields
    return batch


class StagedSamples(Sequence[Inputs]):
    """A gathered batch of staged samples, as ``TensorTask.infer`` takes it."""

    def __init__(self, batch: npt.NDArray[Any], names: tuple[str, ...], warm: Inputs) -> None:
        self.batch, self.names, self._warm = batch, names, warm
        self._fields: Inputs | None = getattr(batch, "fields", None)
        self._stacked = self._fields is not None or batch.dtype.names is not None

    def __len__(self) -> int:
        return len(self.batch)

    @overload
    def __getitem__(self, index: int) -> Inputs: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Inputs]: ...

    def __getitem__(self, index: int | slice) -> Inputs | Sequence[Inputs]:
        if isinstance(index, slice):
            return [self[k] for k in range(*index.indices(len(self)))]
        if self._fields is not None:
            return {name: self._fields[name][index] for name in self.names}
        if self._stacked:
            return {name: self.batch[name][index] for name in self.names}
        item = self.batch[index]
        if not isinstance(item, dict):  # a warm-up batch: no sample staged there
            return self._warm
        return {name: item[name] for name in self.names}

    def stacked(self) -> Inputs | None:
        """Every input of the batch as one contiguous array (axis 0: the samples), or
        None where samples are staged one by one (their shapes vary)."""
        if self._fields is not None:
            return self._fields
        if not self._stacked:
            return None
        # a warm-up batch (structured zeros): copied out, once
        return {name: np.ascontiguousarray(self.batch[name]) for name in self.names}

    def indices(self) -> list[int]:
        """The QSL index of each sample (-1 for a warm-up batch's)."""
        if self._fields is not None:
            gathered_qsl: list[int] = self.batch.tolist()
            return gathered_qsl
        if self._stacked:
            return [-1] * len(self.batch)  # structured zeros: a warm-up batch
        return [int(item[QSL_FIELD]) if isinstance(item, dict) else -1 for item in self.batch]


class ReusedBuffer(threading.local):
    """A task's ``pack``'s ``out`` (``kinds.task.responses``): views of this thread's one
    growing buffer. A batch's packed responses are completed (LoadGen copies what it
    logs) before the thread packs the next, so reusing the memory is safe. Fresh memory
    per batch costs page faults (bert's 3 KB rows stacked: 3.5 us a sample of CPU time
    against 0.5 into reused memory, measured on the 2-core machine), and a fixed address
    lets the completer reuse its response objects (``loadgen.BytesCompleter``)."""

    def __init__(self) -> None:
        self.buffer = np.empty(0, np.uint8)

    def __call__(self, shape: tuple[int, ...], dtype: Any) -> npt.NDArray[Any]:
        kind = np.dtype(dtype)
        nbytes = math.prod(shape) * kind.itemsize  # (np.prod: a ufunc reduction per batch)
        if nbytes > len(self.buffer):
            self.buffer = np.empty(max(nbytes, 2 * len(self.buffer)), np.uint8)
        view: npt.NDArray[Any] = self.buffer[:nbytes].view(kind).reshape(shape)
        return view


class TaskDataset(InMemoryDataset):
    """``data`` (an opened ``TaskData``) staged for LoadGen; see the module docstring."""

    def __init__(self, card: ModelCard, data: Any) -> None:
        self.data = data
        self.name = card.dataset.name
        total = int(data.total_count)
        if total <= 0:
            raise DatasetError(f"{card.card_path}: the dataset '{card.dataset.name}' has no "
                               "samples", hint="check data.dataset_dir")
        # The inputs a sample carries: the card's [[inputs]] the task gives per sample (a
        # task may make the others in its ``infer``: whisper's decoder ids).
        given = data.inputs(0)
        self.names = tuple(spec.name for spec in card.inputs if spec.name in given)
        if not self.names:
            raise DatasetError(f"{self.name}: sample 0 has none of the card's inputs "
                               f"{[spec.name for spec in card.inputs]} (it has {sorted(given)})",
                               hint="the task's inputs must carry the [[inputs]] names")
        first = self._inputs(0)
        #: Sample 0's inputs: what a warm-up batch stands for.
        self.warm: Inputs = first
        specs = [spec for spec in card.inputs if spec.name in self.names]
        # ``varying_shapes``: the task's samples differ in shape from each other and from the
        # model's tensor (3d-unet's volumes, cut into the model's 128^3 windows by ``infer``).
        fixed = not getattr(data, "varying_shapes", False) and all(
            -1 not in spec.shape[1:] and tuple(spec.shape[1:]) == first[spec.name].shape
            for spec in specs)
        dtype = (np.dtype([(QSL_FIELD, np.int64), *(
            (name, first[name].dtype, first[name].shape) for name in self.names)])
            if fixed else np.dtype(object))
        super().__init__(np.zeros(total, dtype=np.int64), (), dtype)
        #: "stacked" (one array per input) or "per-sample" (input dicts).
        self.staging = "stacked" if fixed else "per-sample"
        #: Stacked: each input's staged samples (``load``), then the first ``_pad`` again.
        self._fields: Inputs = {}
        self._pad = self._rows = 0
        #: Stacked: the QSL index of each of those rows, as int64 bytes (``gather``).
        self._row_qsl = b""
        # A gather lays the batch's inputs out one after another in the worker's buffer
        # (whose rows are as wide as all of them), most strictly aligned first: each
        # input then starts aligned, with no padding between them.
        self._order = tuple(sorted(self.names, key=lambda n: -first[n].dtype.alignment))

    def _inputs(self, index: int) -> Inputs:
        """Sample ``index``'s inputs, every ``[[inputs]]`` name present, as arrays."""
        inputs = self.data.inputs(index)
        missing = [name for name in self.names if name not in inputs]
        if missing:
            raise DatasetError(f"{self.name}: sample {index} has no input {missing[0]!r} "
                               f"(it has {sorted(inputs)})",
                               hint="the task's inputs must carry every [[inputs]] name")
        return {name: np.asarray(inputs[name]) for name in self.names}

    def _read(self, indices: IndexArray) -> npt.NDArray[Any]:
        """Per-sample staging: the samples' input dicts, each with its QSL index."""
        out = np.empty(len(indices), dtype=self.dtype)
        for row, index in enumerate(indices.tolist()):
            out[row] = {**self._inputs(index), QSL_FIELD: index}
        return out

    def new_buffer(self, max_batch: int) -> npt.NDArray[Any]:
        """A worker's gather buffer; stacked staging then also repeats the first
        ``max_batch - 1`` staged samples after the last (see the module docstring)."""
        self._pad = max(self._pad, max_batch - 1)
        return super().new_buffer(max_batch)

    def load(self, indices: Sequence[int]) -> None:
        if self.staging != "stacked":
            super().load(indices)
            return
        staged = self.staging_order(indices)
        count = len(staged)
        pad = self._pad if count else 0
        fields = {name: np.empty((count + pad, *self.warm[name].shape), self.warm[name].dtype)
                  for name in self.names}
        for row, index in enumerate(staged.tolist()):
            inputs = self._inputs(index)
            for name, field in fields.items():
                if inputs[name].shape != field.shape[1:]:
                    raise DatasetError(
                        f"{self.name}: sample {index} input {name!r} has shape "
                        f"{inputs[name].shape}, sample 0's is {field.shape[1:]}",
                        hint=f"the card's [[inputs]] {name!r} has fixed per-sample axes, "
                             "so every sample must match them (check the dataset directory); "
                             "a task whose samples vary declares those axes -1 (staged one "
                             "by one)")
                field[row] = inputs[name]
        if pad:
            again = np.arange(pad) % count
            for field in fields.values():
                np.take(field[:count], again, axis=0, out=field[count:])
        self._fields, self._rows = fields, count + pad
        rows_qsl = np.concatenate([staged, staged[np.arange(pad) % count]]) if pad else staged
        self._row_qsl = np.ascontiguousarray(rows_qsl, dtype=np.int64).tobytes()
        self._slots.fill(-1)
        self._slots[staged] = np.arange(count)
        self._loaded = gathered(staged, {name: f[:count] for name, f in fields.items()})

    def unload(self, indices: Sequence[int]) -> None:
        super().unload(indices)
        self._fields, self._rows, self._row_qsl = {}, 0, b""

    def sample(self, index: int) -> npt.NDArray[Any]:
        if self.staging != "stacked":
            return super().sample(index)
        slot = int(self._slots[index])
        if slot < 0:
            raise DatasetError(f"{self.name}: sample {index} was not loaded")
        return gathered(np.array([index], np.int64),
                        {name: f[slot:slot + 1] for name, f in self._fields.items()})

    def gather(self, indices: IndexArray, out: npt.NDArray[Any]) -> npt.NDArray[Any]:
        """Stacked: the batch's inputs as slices of the staged arrays where its samples lie
        there consecutively (wrapping at the end), else taken into ``out``."""
        n = len(indices)
        if self.staging != "stacked" or n == 1:
            return super().gather(indices, out)
        # The batch is a slice where its QSL indices are the staged rows' from its first
        # sample's row on: one bytes comparison (numpy's min, diff and compare of the
        # slots took about 50 us a batch of CPU on the 2-core machine, 1.7 us a sample
        # at batch 32). Equal bytes also mean every sample is staged.
        qsl = np.asarray(indices, dtype=np.int64)
        start = int(self._slots[qsl[0]])
        if start >= 0 and start + n <= self._rows and (
                self._row_qsl[8 * start:8 * (start + n)] == qsl.tobytes()):
            return gathered(qsl, {name: f[start:start + n] for name, f in self._fields.items()})
        slots = self._slots[indices]
        if int(slots.min()) < 0:
            raise DatasetError(f"{self.name}: a sample of this batch was not loaded")
        views = self._views(out, n)
        for name, view in views.items():
            # mode="clip": "raise" gathers into a temporary first (see datasets.base)
            np.take(self._fields[name], slots, axis=0, out=view, mode="clip")
        return gathered(indices, views)

    def _views(self, out: npt.NDArray[Any], n: int) -> Inputs:
        """Each input's ``n`` rows, one after another in ``out``'s memory (a buffer of
        ``new_buffer``); new arrays where ``out`` is not such a buffer."""
        shapes = {name: ((n, *self.warm[name].shape), self.warm[name].dtype)
                  for name in self._order}
        views: Inputs = {}
        if (out.dtype == self.dtype and out.flags.c_contiguous and out.flags.writeable
                and len(out) >= n):
            memory, offset = out.reshape(-1).view(np.uint8), 0
            for name, (shape, dtype) in shapes.items():
                size = int(np.prod(shape)) * dtype.itemsize
                views[name] = memory[offset:offset + size].view(dtype).reshape(shape)
                offset += size
        if len(views) == len(shapes) and all(v.flags.aligned for v in views.values()):
            return views
        return {name: np.empty(shape, dtype) for name, (shape, dtype) in shapes.items()}

    def describe(self) -> dict[str, Any]:
        described: dict[str, Any] = dict(self.data.describe())
        return {"name": self.name, "total": self.total_count, **described,
                "staging": self.staging}

    def samples(self, batch: npt.NDArray[Any]) -> StagedSamples:
        """A gathered ``batch`` as ``TensorTask.infer`` takes it."""
        return StagedSamples(batch, self.names, self.warm)
