"""Turn a backend's raw outputs into the bytes LoadGen logs for each sample.

The response of a sample is one row of a C-contiguous array; the accuracy checker
decodes the same dtype from ``mlperf_log_accuracy.json``. Two kinds:

* ``argmax``: the model outputs scores (N, classes); the response is their argmax;
* ``class_index``: the model already applied argmax (the official ResNet-50 ONNX
  model's ``ArgMax:0``, int64 of shape (N,)); the response is that index.

Either way ``label_offset`` is added: -1 for models with a background class 0
(1001 outputs) scored against 0-based ImageNet labels.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import numpy.typing as npt

from .models import ModelCard
from .types import Outputs

Postprocess = Callable[[Outputs], npt.NDArray[Any]]


def make_postprocess(card: ModelCard) -> tuple[Postprocess, np.dtype[Any]]:
    """The card's postprocess function and the dtype of one response."""
    spec = card.postprocess
    dtype = np.dtype(spec.response_dtype)
    offset = spec.label_offset
    if spec.kind == "argmax":

        def argmax(outputs: Outputs) -> npt.NDArray[Any]:
            # The method, not np.argmax: the wrapper costs ~3 us per SingleStream query.
            classes = outputs.argmax(axis=1).astype(dtype, copy=False)
            if offset:
                classes += dtype.type(offset)
            return np.ascontiguousarray(classes)

        return argmax, dtype
    if spec.kind == "class_index":

        def class_index(outputs: Outputs) -> npt.NDArray[Any]:
            classes = np.asarray(outputs).reshape(len(outputs)).astype(dtype, copy=True)
            if offset:
                classes += dtype.type(offset)
            return classes

        return class_index, dtype
    raise ValueError(f"unknown postprocess kind {spec.kind!r}")  # the card model forbids it
