"""Turn a backend's raw outputs into the bytes LoadGen logs for each sample.

The response of a sample is one row of a C-contiguous array; the accuracy checker
decodes the same dtype from ``mlperf_log_accuracy.json``.
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
            classes = np.argmax(outputs, axis=1).astype(dtype, copy=False)
            if offset:
                classes += dtype.type(offset)
            return np.ascontiguousarray(classes)

        return argmax, dtype
    raise ValueError(f"unknown postprocess kind {spec.kind!r}")  # the card model forbids it
