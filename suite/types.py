"""Shared type aliases for arrays and LoadGen identifiers."""

from __future__ import annotations

from typing import Any, TypeAlias

import numpy as np
import numpy.typing as npt

#: A batch of model inputs, first axis is the batch.
Batch: TypeAlias = npt.NDArray[Any]
#: Raw model outputs for a batch (e.g. logits), first axis is the batch.
Outputs: TypeAlias = npt.NDArray[Any]
#: QSL sample indices of a batch.
IndexArray: TypeAlias = npt.NDArray[np.int64]
#: LoadGen response ids (opaque pointers, never 0).
QueryIds: TypeAlias = list[int]
