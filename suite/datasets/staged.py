"""The digits split's staged file and its record, read without numpy.

A run's parent needs three things of the dataset: its size (the QSL's, and the round's
check), what ``dataset.json`` records, and the labels, only when it scores accuracy or
judges a compliance test. The child opens the dataset itself. Opening the staged split
(``digits.staged_split``) in the parent meant importing numpy there, about 0.1 s of CPU
before the child's spec, on every run.

So the staged ``<cache_dir>/sklearn-digits/validation-<key>.npz`` has a record beside it,
``validation-<key>.json``: the split's size, sample shape and dtype, and the size and mtime
of the ``.npz`` it describes. The parent reads the record (``described``) when it matches
the file on disk; any other file (missing, rebuilt, cut short, from an older suite) makes
it open the dataset as before (``datasets.create``), which stages the split and writes
the record again. The labels are read from the staged file on first use.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from suite.errors import DatasetError
from suite.paths import install_hint

if TYPE_CHECKING:
    from suite.config.model import DataConfig
    from suite.models import ModelCard

#: The model card's ``[dataset] name`` of the digits split (``DigitsDataset.name``).
NAME = "sklearn-digits"
#: The only dtype the staged split holds (``digits.validation_split``).
DTYPE = "float32"


def bundled_csv() -> Path:
    """scikit-learn's bundled ``digits.csv.gz``, found without importing scikit-learn."""
    spec = importlib.util.find_spec("sklearn")
    locations = list(spec.submodule_search_locations or []) if spec else []
    path = Path(locations[0]) / "datasets" / "data" / "digits.csv.gz" if locations else None
    if path is None or not path.is_file():
        raise DatasetError("scikit-learn's bundled digits.csv.gz was not found",
                           hint=f"install scikit-learn (a core dependency): {install_hint()}")
    return path


def staged_path(card: ModelCard, cache_dir: Path) -> Path:
    """Where the validation split of ``card`` is staged under ``cache_dir``: the key hashes
    the CSV's path, size and mtime and the card's split and shape, so a changed
    scikit-learn or card stages a fresh file."""
    csv = bundled_csv()
    stat = csv.stat()
    key = json.dumps([str(csv), stat.st_size, stat.st_mtime_ns, card.dataset.model_dump(),
                      list(card.input.sample_shape)], sort_keys=True, default=str)
    digest = hashlib.sha256(key.encode()).hexdigest()[:16]
    return cache_dir / NAME / f"validation-{digest}.npz"


def record_path(staged: Path) -> Path:
    return staged.with_suffix(".json")


def write_record(staged: Path, total: int, sample_shape: tuple[int, ...]) -> None:
    """Record what ``staged`` (just written or loaded whole) holds, with its size and
    mtime; a read-only or full cache costs the next parent numpy's import, nothing more."""
    tmp = staged.with_name(f"{staged.stem}.{os.getpid()}.tmp.json")
    try:
        stat = staged.stat()
        text = json.dumps({"staged": staged.name, "size": stat.st_size,
                           "mtime_ns": stat.st_mtime_ns, "total": total,
                           "sample_shape": list(sample_shape), "dtype": DTYPE}) + "\n"
        tmp.write_text(text, encoding="utf-8")
        tmp.replace(record_path(staged))  # atomic, as the .npz itself
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)


def read_record(staged: Path, card: ModelCard) -> dict[str, Any] | None:
    """The record of ``staged`` if it describes the file now on disk (same size and
    mtime) and the card's sample shape; else None."""
    try:
        record = json.loads(record_path(staged).read_text(encoding="utf-8"))
        stat = staged.stat()
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict):
        return None
    total = record.get("total")
    matches = (record.get("staged") == staged.name and record.get("size") == stat.st_size
               and record.get("mtime_ns") == stat.st_mtime_ns and record.get("dtype") == DTYPE
               and record.get("sample_shape") == list(card.input.sample_shape)
               and isinstance(total, int) and not isinstance(total, bool) and total > 0)
    return record if matches else None


class StagedDigits:
    """A run parent's view of the staged digits split: its size and ``dataset.json``
    record now, its labels from the staged file when first asked for (with numpy)."""

    name = NAME

    def __init__(self, card: ModelCard, cache_dir: Path, total: int) -> None:
        self.card, self.cache_dir, self.total = card, cache_dir, total
        self._labels: Any = None

    @property
    def total_count(self) -> int:
        return self.total

    def describe(self) -> dict[str, Any]:
        """What ``InMemoryDataset.describe`` records for the same split."""
        return {"name": self.name, "total": self.total,
                "sample_shape": list(self.card.input.sample_shape), "dtype": DTYPE}

    @property
    def labels(self) -> Any:
        if self._labels is None:
            self._labels = self._read_labels()
        return self._labels

    def _read_labels(self) -> Any:
        # Read here, not through ``digits.staged_split``: that module imports this one.
        import numpy as np

        path = staged_path(self.card, self.cache_dir)
        try:
            with np.load(path) as staged:
                labels = staged["labels"]
        except (OSError, ValueError, KeyError) as exc:
            raise DatasetError(f"{path}: the staged digits split cannot be read ({exc})",
                               hint=f"delete {path.parent} and run again: the split "
                                    "is staged afresh") from None
        if labels.dtype != np.int64 or labels.shape != (self.total,):
            raise DatasetError(f"{path}: the staged labels are {labels.dtype} "
                               f"{list(labels.shape)}, not int64 [{self.total}] as recorded",
                               hint=f"delete {path.parent} and run again: the split is "
                                    "staged afresh")
        return labels


def described(card: ModelCard, data: DataConfig | None) -> StagedDigits | None:
    """The staged split's view where the config names a cache and the split is staged with
    its record; None where the dataset must be opened (``datasets.create``: it stages the
    split, and refuses a dataset directory)."""
    if data is None or not data.cache_dir or data.dataset_dir:
        return None
    cache_dir = Path(data.cache_dir)
    record = read_record(staged_path(card, cache_dir), card)
    return StagedDigits(card, cache_dir, record["total"]) if record else None
