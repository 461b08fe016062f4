"""The contract between the tensor pipeline and one reference task (``suite.tasks``).

A task is pure data handling around a model: it never touches LoadGen, threads or
backends. The pipeline gives it the user's dataset directory and a callable that runs the
model on named input arrays; the task gives back per-sample model inputs, the bytes the
reference's SUT would log for each sample, and the reference's accuracy from those bytes.

Names of inputs and outputs are the official model's (the card's ``[[inputs]]`` and
``[[outputs]]``), so a user's real model file drops in unchanged.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol, overload

import numpy as np
import numpy.typing as npt

#: An uninitialised array of a shape and dtype (``np.empty``'s signature): ``pack``'s ``out``.
Scratch = Callable[[tuple[int, ...], Any], npt.NDArray[Any]]
#: Named arrays: model inputs or outputs, official tensor names as keys.
Arrays = Mapping[str, npt.NDArray[Any]]
#: Runs the model once: named inputs (a batch on axis 0) to named outputs.
ModelCall = Callable[[Arrays], dict[str, npt.NDArray[Any]]]


@dataclass(frozen=True)
class TaskScore:
    """One accuracy figure as the reference's script prints it, plus its details.

    ``metric`` is the key the submission checker reads from ``accuracy.txt`` for the
    benchmark (``F1``, ``mAP``, ``DICE``, ``ACCURACY``...); ``value`` is in the unit the
    checker compares against its target; ``lines`` are the lines ``accuracy.txt`` holds
    (the reference script's own output format, which the checker's regex parses).
    """

    metric: str
    value: float
    lines: tuple[str, ...]
    details: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class StandIn:
    """What ``TensorTask.write_stand_in`` wrote: a dataset directory in the reference's
    layout and an ONNX model with the official input/output names, dtypes and ranks."""

    dataset_dir: Path
    model_path: Path
    samples: int


class TaskData(Protocol):
    """An opened dataset: the query sample library of one task."""

    #: Samples LoadGen may issue (QSL size). A ``varying_shapes = True`` attribute (optional)
    #: says samples differ in shape from each other and from the model's tensor (3d-unet's
    #: volumes): the pipeline then stages them one by one.
    total_count: int

    def inputs(self, index: int) -> dict[str, npt.NDArray[Any]]:
        """The preprocessed model inputs of sample ``index`` (no batch axis), as the
        reference's preprocessing produces them."""

    def describe(self) -> dict[str, Any]:
        """What the run's ``dataset.json`` records (name, total, layout, checksums)."""


class TensorTask(Protocol):
    """One reference task. Implementations are classes with no required constructor
    arguments; the pipeline creates one per run.

    Optional: ``pack(indices, outputs, out) -> Packed``, where ``outputs`` is a whole
    batch's (what ``infer`` passed to ``split``; axis 0: the samples, QSL ``indices``):
    every sample's ``response`` bytes at once, in one buffer (``pack_rows``,
    ``pack_parts``), written where it can be into ``out(shape, dtype)`` (an uninitialised
    array, as ``np.empty``; the pipeline's is its thread's reused buffer: no fresh memory
    per batch). The pipeline calls it instead of ``response`` per sample where ``infer``
    returned a ``split`` batch; it must give exactly ``response``'s bytes.
    """

    #: The card's ``task`` value this implements.
    name: ClassVar[str]

    def open(self, dataset_dir: Path, card: Any, *, count: int | None = None) -> TaskData:
        """Read and preprocess the dataset at ``dataset_dir`` (the layout the user
        downloads). ``count`` limits it to the first samples (quick runs). Raises
        ``suite.errors.DatasetError`` with one line naming the file and what to do on a
        bad directory (missing files, wrong shapes, a label file pointing outside it)."""

    def infer(self, call: ModelCall, samples: Sequence[Arrays]) -> Sequence[Arrays]:
        """Run the model on ``samples`` (each ``TaskData.inputs``): stack them into one
        call where the task batches, or loop as the reference does (sliding windows,
        decoding). Returns each sample's outputs (``split`` of a batched call's: the
        pipeline then hands the batch to the task's ``pack``, where it has one)."""

    def response(self, index: int, outputs: Arrays) -> bytes:
        """The bytes the reference's SUT logs for sample ``index`` (what goes into
        ``mlperf_log_accuracy.json`` as hex), in the reference's encoding."""

    def score(self, data: TaskData, responses: Mapping[int, bytes]) -> TaskScore:
        """The reference script's accuracy over ``responses`` (QSL index -> bytes; every
        sample of ``data`` present)."""

    def write_stand_in(self, out: Path, *, samples: int, seed: int) -> StandIn:
        """Write, offline and in seconds, a stand-in dataset in the reference's layout and
        a small ONNX model with the official I/O contract under ``out``."""


def stack(samples: Sequence[Arrays]) -> dict[str, npt.NDArray[Any]]:
    """Samples' inputs stacked on a new batch axis (all samples share shapes).

    The pipeline hands ``infer`` its staged batch, whose samples are already stacked
    (``stacked()``): then that batch is returned as it is, with no per-sample work.
    """
    staged = getattr(samples, "stacked", None)
    batch: dict[str, npt.NDArray[Any]] | None = staged() if callable(staged) else None
    if batch is not None:
        return batch
    return {name: np.stack([s[name] for s in samples]) for name in samples[0]}


class Rows(Sequence[Arrays]):
    """A batch's outputs (axis 0: the samples) as a sequence of per-sample dicts of views,
    made only when indexed: ``batch`` keeps the batched arrays, so a task's ``pack``
    turns the whole batch into response bytes with no per-sample Python."""

    def __init__(self, batch: Arrays, n: int) -> None:
        self.batch, self._n = batch, n

    def __len__(self) -> int:
        return self._n

    @overload
    def __getitem__(self, index: int) -> Arrays: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[Arrays]: ...

    def __getitem__(self, index: int | slice) -> Arrays | Sequence[Arrays]:
        if isinstance(index, slice):
            return [self[k] for k in range(*index.indices(self._n))]
        if not -self._n <= index < self._n:
            raise IndexError(f"sample {index} of a batch of {self._n}")
        return {name: value[index] for name, value in self.batch.items()}


def split(outputs: Arrays, n: int) -> Rows:
    """A batch's outputs (axis 0: the samples) as ``n`` per-sample dicts of views."""
    return Rows(outputs, n)


class Packed(Sequence[bytes]):
    """A batch's response bytes in one buffer: sample ``k``'s are
    ``payload[offsets[k]:offsets[k + 1]]``. LoadGen's completion points into it, so no
    bytes object is made per sample (indexing makes one, for tests and the fallbacks)."""

    def __init__(self, payload: npt.NDArray[np.uint8], offsets: npt.NDArray[np.int64],
                 row_bytes: int | None = None) -> None:
        self.payload, self.offsets = np.ascontiguousarray(payload).reshape(-1), offsets
        if row_bytes is None:  # else the caller knows (``pack_rows``): no numpy per batch
            sizes = np.diff(offsets)
            row_bytes = int(sizes[0]) if len(sizes) and offsets[0] == 0 and (
                sizes == sizes[0]).all() else 0
        #: Every sample's size where the samples are equal-sized rows from the payload's
        #: start (sample ``k`` at ``k * row_bytes``), else 0.
        self.row_bytes = row_bytes

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @overload
    def __getitem__(self, index: int) -> bytes: ...

    @overload
    def __getitem__(self, index: slice) -> Sequence[bytes]: ...

    def __getitem__(self, index: int | slice) -> bytes | Sequence[bytes]:
        if isinstance(index, slice):
            return [self[k] for k in range(*index.indices(len(self)))]
        start, end = self.offsets[index], self.offsets[index + 1]
        return self.payload[start:end].tobytes()


def pack_rows(rows: npt.NDArray[Any]) -> Packed:
    """Equal-sized responses: row ``k`` of ``rows`` (axis 0: the samples) as sample
    ``k``'s bytes, in C order (``rows[k].tobytes()``)."""
    rows = np.ascontiguousarray(rows)
    n = len(rows)
    size = rows.nbytes // n if n else 0
    return Packed(rows.reshape(-1).view(np.uint8), np.arange(n + 1, dtype=np.int64) * size,
                  size)


def pack_parts(parts: Sequence[npt.NDArray[Any]]) -> Packed:
    """Responses of any size: ``parts[k].tobytes()`` as sample ``k``'s bytes, joined."""
    sizes = np.fromiter((part.nbytes for part in parts), np.int64, len(parts))
    offsets = np.zeros(len(parts) + 1, np.int64)
    np.cumsum(sizes, out=offsets[1:])
    payload = np.empty(int(offsets[-1]), np.uint8)
    for part, start, end in zip(parts, offsets[:-1].tolist(), offsets[1:].tolist(),
                                strict=True):
        payload[start:end] = np.ascontiguousarray(part).reshape(-1).view(np.uint8)
    return Packed(payload, offsets)
