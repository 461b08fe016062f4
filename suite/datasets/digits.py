"""scikit-learn's bundled 8x8 handwritten digits, the validation split of the model card.

The data ships inside scikit-learn (no download). The split and preprocessing are
defined in ``reference_models/digits/model.toml`` ``[dataset]``: sample ``i`` of
``load_digits()`` is in the validation split iff ``i % modulus == remainder``, and
pixels are scaled by ``1 / pixel_scale`` into float32 ``(N, 1, 8, 8)``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from ..config import DataConfig
from ..errors import DatasetError
from ..models import ModelCard
from ..types import IndexArray
from .base import InMemoryDataset


def validation_split(card: ModelCard) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]:
    """The preprocessed validation images and labels the card defines."""
    return _split(card, validation=True)


def calibration_split(card: ModelCard) -> npt.NDArray[np.float32]:
    """INT8 calibration samples: the training split, so the scored samples stay unseen."""
    return _split(card, validation=False)[0]


def _split(card: ModelCard, validation: bool
           ) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]:
    from sklearn.datasets import load_digits  # lazy: sklearn is slow to import

    spec = card.dataset.model_dump()
    try:
        modulus, remainder = int(spec["validation_modulus"]), int(spec["validation_remainder"])
        scale = float(spec["pixel_scale"])
    except KeyError as exc:
        raise DatasetError(f"{card.card_path}: [dataset] lacks {exc}") from None
    digits = load_digits()
    if len(digits.images) != int(spec.get("total_samples", len(digits.images))):
        raise DatasetError(
            f"scikit-learn's digits has {len(digits.images)} samples, the card expects "
            f"{spec['total_samples']}",
            hint="install a scikit-learn whose load_digits matches the card",
        )
    chosen = (np.arange(len(digits.images)) % modulus == remainder) == validation
    images = (digits.images[chosen].astype(np.float32) / np.float32(scale))
    images = images.reshape(-1, *card.input.sample_shape)
    return np.ascontiguousarray(images), digits.target[chosen].astype(np.int64)


class DigitsDataset(InMemoryDataset):
    """The digits validation split as a QSL."""

    name = "sklearn-digits"

    def __init__(self, card: ModelCard, data: DataConfig | None = None,
                 progress: object = None) -> None:
        # Bundled with scikit-learn: no directory, no cache, nothing to report.
        images, labels = validation_split(card)
        super().__init__(labels, images.shape[1:], np.dtype(np.float32))
        self._images = images

    def _read(self, indices: IndexArray) -> npt.NDArray[Any]:
        return self._images[indices]
