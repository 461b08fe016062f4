"""A task card's dataset (``suite.tasks.base.TaskData``) as the SUT's query sample library.

``TaskDataset`` is an ``InMemoryDataset``: LoadGen's ``load`` stages each loaded sample's
inputs once, in one array, and the SUT's gathers, slices and buffers work on it unchanged.

* **Stacked** (the card's ``[[inputs]]`` fix every per-sample axis and sample 0 has those
  shapes: bert, yolo; a later sample that differs is a ``DatasetError``):
  the array is a numpy structured array, one field per input tensor plus the sample's QSL
  index, so a batch is one ``np.take`` or one slice, and ``StagedSamples.stacked`` hands
  the task's ``stack`` each input as one contiguous array: no per-sample Python on the
  hot path.
* **Per sample** (a ``-1`` beyond the batch axis, or sample 0 differs from the card: 3d-unet
  volumes, whisper audio): an object array of the
  samples' input dicts; the task's ``infer`` takes them one by one (windows, decoding).

``StagedSamples`` is what ``TensorTask.infer`` receives: a sequence of per-sample input
dicts over a gathered batch, which also knows the samples' QSL indices (for
``TensorTask.response``). A warm-up batch (zeros, made before any ``load``) stands for
sample 0's inputs in the per-sample form.
"""

from __future__ import annotations

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


class StagedSamples(Sequence[Inputs]):
    """A gathered batch of staged samples, as ``TensorTask.infer`` takes it."""

    def __init__(self, batch: npt.NDArray[Any], names: tuple[str, ...], warm: Inputs) -> None:
        self.batch, self.names, self._warm = batch, names, warm
        self._stacked = batch.dtype.names is not None

    def __len__(self) -> int:
        return len(self.batch)

    @overload
    def __getitem__(self, index: int) -> Inputs: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Inputs]: ...

    def __getitem__(self, index: int | slice) -> Inputs | Sequence[Inputs]:
        if isinstance(index, slice):
            return [self[k] for k in range(*index.indices(len(self)))]
        if self._stacked:
            return {name: self.batch[name][index] for name in self.names}
        item = self.batch[index]
        if not isinstance(item, dict):  # a warm-up batch: no sample staged there
            return self._warm
        return {name: item[name] for name in self.names}

    def stacked(self) -> Inputs | None:
        """Every input of the batch as one contiguous array (axis 0: the samples), or
        None where samples are staged one by one (their shapes vary)."""
        if not self._stacked:
            return None
        return {name: np.ascontiguousarray(self.batch[name]) for name in self.names}

    def indices(self) -> list[int]:
        """The QSL index of each sample (-1 for a warm-up batch's)."""
        if self._stacked:
            qsl: list[int] = self.batch[QSL_FIELD].tolist()
            return qsl
        return [int(item[QSL_FIELD]) if isinstance(item, dict) else -1 for item in self.batch]


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
        #: "stacked" (one structured array) or "per-sample" (input dicts).
        self.staging = "stacked" if fixed else "per-sample"

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
        out = np.empty(len(indices), dtype=self.dtype)
        for row, index in enumerate(indices.tolist()):
            inputs = self._inputs(index)
            if self.staging == "per-sample":
                out[row] = {**inputs, QSL_FIELD: index}
                continue
            out[QSL_FIELD][row] = index
            for name in self.names:
                field = out[name]
                if inputs[name].shape != field.shape[1:]:
                    raise DatasetError(
                        f"{self.name}: sample {index} input {name!r} has shape "
                        f"{inputs[name].shape}, sample 0's is {field.shape[1:]}",
                        hint=f"the card's [[inputs]] {name!r} has fixed per-sample axes, "
                             "so every sample must match them (check the dataset directory); "
                             "a task whose samples vary declares those axes -1 (staged one "
                             "by one)")
                field[row] = inputs[name]
        return out

    def describe(self) -> dict[str, Any]:
        described: dict[str, Any] = dict(self.data.describe())
        return {"name": self.name, "total": self.total_count, **described,
                "staging": self.staging}

    def samples(self, batch: npt.NDArray[Any]) -> StagedSamples:
        """A gathered ``batch`` as ``TensorTask.infer`` takes it."""
        return StagedSamples(batch, self.names, self.warm)
