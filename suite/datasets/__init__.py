"""Dataset registry: the model card's ``[dataset] name`` to a QSL-backed dataset.

``import suite.datasets`` loads no numpy: a run's parent asks ``for_run`` for what it needs
of the dataset, which for a staged digits split is read without it (``staged``).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any, Protocol

from suite.config.model import DataConfig
from suite.errors import DatasetError
from suite.models import ModelCard

if TYPE_CHECKING:  # the cache module loads multiprocessing: only ImageNet needs it
    import numpy.typing as npt

    from suite.datasets.base import InMemoryDataset
    from suite.datasets.cache import CacheProgress

__all__ = ["InMemoryDataset", "RunDataset", "calibration_set", "create", "for_run"]


def __getattr__(name: str) -> Any:
    # ``InMemoryDataset`` (numpy) is imported when asked for, not with the package.
    if name == "InMemoryDataset":
        from suite.datasets.base import InMemoryDataset

        return InMemoryDataset
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class RunDataset(Protocol):
    """What a run's parent uses of its dataset (an ``InMemoryDataset`` is one)."""

    name: str

    @property
    def total_count(self) -> int: ...

    def describe(self) -> dict[str, Any]: ...

    @property
    def labels(self) -> Any: ...


#: The model card's ``[dataset] name`` -> ``"module:Class"``; imported on use.
REGISTRY: dict[str, str] = {
    "sklearn-digits": "suite.datasets.digits:DigitsDataset",
    "imagenet2012-val": "suite.datasets.imagenet:ImagenetDataset",
}


def create(card: ModelCard, data: DataConfig | None = None,
           progress: CacheProgress | None = None) -> InMemoryDataset:
    """The dataset the card names, ready for LoadGen's ``load``/``unload`` calls.

    ``data`` locates user-supplied datasets and their preprocessing cache; a dataset
    that needs preprocessing does it here (once; later calls reuse the cache) and
    reports through ``progress(done, total, elapsed_s)``.

    Example::

        dataset = create(card, config.data)
        dataset.load([0, 1, 2])
    """
    spec = REGISTRY.get(card.dataset.name)
    if spec is None:
        raise DatasetError(
            f"{card.card_path}: unknown dataset '{card.dataset.name}'",
            hint=f"known datasets: {', '.join(REGISTRY)}",
        )
    module_name, _, class_name = spec.partition(":")
    cls = getattr(importlib.import_module(module_name), class_name)
    dataset: InMemoryDataset = cls(card, data or DataConfig(), progress)
    return dataset


#: The card's ``[dataset] name`` -> ``"module:function"`` giving a run's parent the view of
#: an already staged dataset without opening it (None: not staged, ``create`` it).
DESCRIBED: dict[str, str] = {
    "sklearn-digits": "suite.datasets.staged:described",
}


def for_run(card: ModelCard, data: DataConfig | None = None,
            progress: CacheProgress | None = None) -> RunDataset:
    """What a run's parent needs of the card's dataset: its size, its ``dataset.json``
    record and its labels. A staged digits split is described from its record, without
    numpy (``staged``); any other dataset is opened (``create``: staged or preprocessed
    into its cache on first use, bad input refused), as the child will open it."""
    spec = DESCRIBED.get(card.dataset.name)
    if spec is not None:
        module_name, _, function = spec.partition(":")
        view: RunDataset | None = getattr(importlib.import_module(module_name),
                                          function)(card, data)
        if view is not None:
            return view
    return create(card, data, progress)


def calibration_set(card: ModelCard, count: int) -> npt.NDArray[Any]:
    """Up to ``count`` preprocessed samples for INT8 calibration, never from the scored split.

    A dataset module offers one by defining ``calibration_split(card)``.
    """
    spec = REGISTRY.get(card.dataset.name, "")
    module = importlib.import_module(spec.partition(":")[0]) if spec else None
    split = getattr(module, "calibration_split", None)
    if split is None:
        raise DatasetError(f"dataset '{card.dataset.name}' defines no calibration set",
                           hint="INT8 needs one; use precision fp16 or fp32")
    samples: npt.NDArray[Any] = split(card)[:count]
    return samples
