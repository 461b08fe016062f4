"""Turn a backend's raw outputs into the bytes LoadGen logs for each sample.

The response of a sample is one row of a C-contiguous array; the accuracy checker
decodes the same dtype from ``mlperf_log_accuracy.json``. Two kinds:

* ``argmax``: the model outputs scores (N, classes); the response is their argmax;
* ``class_index``: the model already applied argmax (the official ResNet-50 ONNX
  model's ``ArgMax:0``, int64 of shape (N,)); the response is that index.

Either way ``label_offset`` is added: -1 for models with a background class 0
(1001 outputs) scored against 0-based ImageNet labels.

``index_writer`` gives SingleStream a form that writes the class indices straight
into the completion payload (``Completer.single_index``), with no array made per query.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from suite.models import ModelCard
from suite.types import Outputs

Postprocess = Callable[[Outputs], npt.NDArray[Any]]
#: Writes a batch's class indices, as int64, into ``out`` (one per sample).
IndexWriter = Callable[[Outputs, npt.NDArray[np.int64]], None]


def make_postprocess(card: ModelCard) -> tuple[Postprocess, np.dtype[Any]]:
    """The card's postprocess function and the dtype of one response."""
    spec = card.postprocess
    dtype = np.dtype(spec.response_dtype)
    offset = spec.label_offset
    if spec.kind == "argmax":

        def argmax(outputs: Outputs) -> npt.NDArray[Any]:
            # The method, not np.argmax: the wrapper costs ~3 us per SingleStream query.
            # argmax returns a new C-contiguous intp array: no contiguity pass needed.
            classes: npt.NDArray[Any] = outputs.argmax(axis=1)
            if classes.dtype != dtype:
                classes = classes.astype(dtype)
            if offset:
                classes += dtype.type(offset)
            return classes

        def write_indices(outputs: Outputs, out: npt.NDArray[np.int64]) -> None:
            # ``out=``: numpy writes the indices in place (0.26 us; with an int32 ``out``
            # it takes a casting path, 0.93 us, hence int64).
            outputs.argmax(axis=1, out=out)
            if offset:
                out += offset

        if dtype.kind in "iu":
            setattr(argmax, "index_writer", write_indices)  # noqa: B010 (read by index_writer)
        return argmax, dtype
    if spec.kind == "class_index":

        def class_index(outputs: Outputs) -> npt.NDArray[Any]:
            classes = np.asarray(outputs).reshape(len(outputs)).astype(dtype, copy=True)
            if offset:
                classes += dtype.type(offset)
            return classes

        return class_index, dtype
    raise ValueError(f"unknown postprocess kind {spec.kind!r}")  # the card model forbids it


def index_writer(postprocess: Postprocess) -> IndexWriter | None:
    """The in-place form of ``postprocess`` when it has one (an ``argmax`` to an integer
    response), else None: the caller keeps to ``postprocess``."""
    writer: IndexWriter | None = getattr(postprocess, "index_writer", None)
    return writer
