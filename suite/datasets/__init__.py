"""Dataset registry: the model card's ``[dataset] name`` to a QSL-backed dataset."""

from __future__ import annotations

from ..errors import DatasetError
from ..models import ModelCard
from .base import InMemoryDataset

__all__ = ["InMemoryDataset", "create"]


def create(card: ModelCard) -> InMemoryDataset:
    """The dataset the card names, ready for LoadGen's ``load``/``unload`` calls."""
    if card.dataset.name == "sklearn-digits":
        from .digits import DigitsDataset

        return DigitsDataset(card)
    raise DatasetError(
        f"{card.card_path}: unknown dataset '{card.dataset.name}'",
        hint="known datasets: sklearn-digits",
    )
