"""The null backend: zeros of the right shape, instantly.

It does no inference at all, so a run with it measures the harness's own overhead
(LoadGen, the SUT, gathers, postprocessing and completion).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from suite.backends.base import BackendBase, BackendInfo, BackendOptions

if TYPE_CHECKING:
    from suite.models import ModelCard
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

    def load(self, card: ModelCard, max_batch_size: int) -> BackendInfo:
        shape = (max_batch_size, *card.output.sample_shape)
        self._zeros = np.zeros(shape, dtype=np.dtype(card.output.dtype))
        return BackendInfo(name=self.name, version="0", device="none", precision="none",
                           weight_transformations="none: the null backend runs no model")

    def predict(self, batch: Batch) -> Outputs:
        return self._zeros[: len(batch)]
