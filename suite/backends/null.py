"""The null backend: zeros of the right shape, instantly.

It does no inference at all, so a run with it measures the harness's own overhead
(LoadGen, the SUT, gathers, postprocessing and completion).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from suite.backends.base import BackendBase, BackendInfo, BackendOptions

if TYPE_CHECKING:
    from suite.models import ModelCard, TensorSpec
    from suite.types import Batch, Outputs


class NullOptions(BackendOptions):
    """The null backend has no options."""


class NullBackend(BackendBase):
    """Returns a preallocated block of zeros shaped like the model's output."""

    name = "null"
    Options = NullOptions

    def __init__(self, options: BackendOptions | None = None) -> None:
        super().__init__(options)
        self._zeros: Outputs = np.zeros((0,), dtype=np.float32)
        self._outputs: list[TensorSpec] = []

    def load(self, card: ModelCard, max_batch_size: int) -> BackendInfo:
        shape = (max_batch_size, *(max(d, 1) for d in card.output.sample_shape))
        self._zeros = np.zeros(shape, dtype=np.dtype(card.output.dtype))
        self._outputs = card.outputs
        return BackendInfo(name=self.name, version="0", device="none", precision="none",
                           weight_transformations="none: the null backend runs no model")

    def predict(self, batch: Batch) -> Outputs:
        return self._zeros[: len(batch)]

    serves_tasks = True

    def predict_named(self, inputs: Mapping[str, Any]) -> dict[str, Any]:
        """Zeros of every ``[[outputs]]`` tensor's shape and dtype (a dynamic axis: the
        batch's size on the first, 1 on the others)."""
        n = len(next(iter(inputs.values())))
        return {spec.name: np.zeros([n, *(max(d, 1) for d in spec.shape[1:])], spec.dtype)
                for spec in self._outputs}
