"""scikit-learn's bundled 8x8 handwritten digits, the validation split of the model card.

The data ships inside scikit-learn (no download): ``sklearn/datasets/data/digits.csv.gz``,
which ``load_digits`` parses. This module reads that file itself, found without
importing scikit-learn: the import (with scipy) took 2.5-3 s of every run's fixed cost,
once in the parent and once in the child. The split and preprocessing are
defined in ``reference_models/digits/model.toml`` ``[dataset]``: sample ``i`` of
``load_digits()`` is in the validation split iff ``i % modulus == remainder``, and
pixels are scaled by ``1 / pixel_scale`` into float32 ``(N, 1, 8, 8)``.

Parsing the CSV took 20-60 ms, paid by the parent (for the sample count and labels)
and again by the child of every test. The split is staged once: the first process that
builds it saves it as ``<cache_dir>/sklearn-digits/validation-<key>.npz``, and later ones
load that (under a millisecond). The key hashes the CSV's path, size and mtime and the
card's split and shape, so a changed scikit-learn or card builds a fresh file
(``staged.staged_path``); a record beside it lets a run's parent read the split's size
without opening it, or importing numpy (``suite.datasets.staged``).
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from suite.config.model import DataConfig
from suite.datasets.base import InMemoryDataset
from suite.datasets.staged import (
    bundled_csv,
    read_record,
    staged_path,
    write_record,
)
from suite.errors import DatasetError
from suite.models import ModelCard
from suite.types import IndexArray

__all__ = ["DigitsDataset", "bundled_csv", "calibration_split", "load_bundled_digits",
           "staged_path", "staged_split", "validation_split"]


def validation_split(card: ModelCard) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]:
    """The preprocessed validation images and labels the card defines."""
    return _split(card, validation=True)


def calibration_split(card: ModelCard) -> npt.NDArray[np.float32]:
    """INT8 calibration samples: the training split, so the scored samples stay unseen."""
    return _split(card, validation=False)[0]


def _split(card: ModelCard, validation: bool
           ) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]:
    spec = card.dataset.model_dump()
    try:
        modulus, remainder = int(spec["validation_modulus"]), int(spec["validation_remainder"])
        scale = float(spec["pixel_scale"])
    except KeyError as exc:
        raise DatasetError(f"{card.card_path}: [dataset] lacks {exc}") from None
    pixels, target = load_bundled_digits()
    if len(pixels) != int(spec.get("total_samples", len(pixels))):
        raise DatasetError(
            f"scikit-learn's digits has {len(pixels)} samples, the card expects "
            f"{spec['total_samples']}",
            hint="install a scikit-learn whose load_digits matches the card",
        )
    chosen = (np.arange(len(pixels)) % modulus == remainder) == validation
    images = (pixels[chosen].astype(np.float32) / np.float32(scale))
    images = images.reshape(-1, *card.input.sample_shape)
    return np.ascontiguousarray(images), target[chosen].astype(np.int64)


def load_bundled_digits() -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64]]:
    """(pixels (1797, 64), targets) from scikit-learn's bundled ``digits.csv.gz``, as
    ``load_digits`` reads it (64 pixel columns, then the target), without importing
    scikit-learn."""
    data = np.loadtxt(bundled_csv(), delimiter=",")
    return data[:, :-1], data[:, -1].astype(np.int64)


def staged_split(card: ModelCard, cache_dir: Path
                 ) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.int64]]:
    """``validation_split``, from its staged copy when one is there; builds it if not."""
    path = staged_path(card, cache_dir)
    try:
        with np.load(path) as staged:
            images, labels = staged["images"], staged["labels"]
        if images.dtype == np.float32 and labels.dtype == np.int64 and \
                images.shape[1:] == tuple(card.input.sample_shape) and \
                len(images) == len(labels):
            if read_record(path, card) is None:  # staged by an older suite: record it
                write_record(path, len(labels), images.shape[1:])
            return images, labels
    except (OSError, ValueError, KeyError):
        pass  # not staged yet, or cut short: build it below
    images, labels = validation_split(card)
    # A read-only or full cache directory costs the next run the parse, nothing more.
    tmp = path.with_name(f"{path.stem}.{os.getpid()}.tmp.npz")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        np.savez(tmp, images=images, labels=labels)
        tmp.replace(path)  # atomic: a concurrent reader sees all of it or nothing
        write_record(path, len(labels), images.shape[1:])
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
    return images, labels


class DigitsDataset(InMemoryDataset):
    """The digits validation split as a QSL."""

    name = "sklearn-digits"

    def __init__(self, card: ModelCard, data: DataConfig | None = None,
                 progress: object = None) -> None:
        # Bundled with scikit-learn: no directory to read and nothing to report; the
        # parsed split is staged in the cache when the config names one. A directory the
        # user names would be silently ignored, so it is refused (a run records only what
        # it read).
        if data is not None and data.dataset_dir:
            raise DatasetError(
                f"{card.name}: data.dataset_dir={data.dataset_dir!r} does not apply: the "
                f"digits dataset is bundled with scikit-learn",
                hint="drop --dataset-path (or data.dataset_dir) for digits")
        cache_dir = data.cache_dir if data is not None else ""
        images, labels = staged_split(card, Path(cache_dir)) if cache_dir \
            else validation_split(card)
        super().__init__(labels, images.shape[1:], np.dtype(np.float32))
        self._images = images

    def _read(self, indices: IndexArray) -> npt.NDArray[Any]:
        return self._images[indices]
