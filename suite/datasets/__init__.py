"""Dataset registry: the model card's ``[dataset] name`` to a QSL-backed dataset."""

from __future__ import annotations

import importlib

from ..errors import DatasetError
from ..models import ModelCard
from .base import InMemoryDataset

__all__ = ["InMemoryDataset", "create"]


#: The model card's ``[dataset] name`` -> ``"module:Class"``; imported on use.
REGISTRY: dict[str, str] = {
    "sklearn-digits": "suite.datasets.digits:DigitsDataset",
}


def create(card: ModelCard) -> InMemoryDataset:
    """The dataset the card names, ready for LoadGen's ``load``/``unload`` calls."""
    spec = REGISTRY.get(card.dataset.name)
    if spec is None:
        raise DatasetError(
            f"{card.card_path}: unknown dataset '{card.dataset.name}'",
            hint=f"known datasets: {', '.join(REGISTRY)}",
        )
    module_name, _, class_name = spec.partition(":")
    cls = getattr(importlib.import_module(module_name), class_name)
    dataset: InMemoryDataset = cls(card)
    return dataset
