"""The ImageNet 2012 validation set from a user's directory, as MLPerf's ResNet-50 uses it.

The directory holds the validation JPEGs and ``val_map.txt``: one ``<file name>
<label>`` line per image, labels 0-999 (``label_range``, from the model card). QSL
index ``i`` is line ``i`` of ``val_map.txt`` (the official accuracy script,
``tools/accuracy-imagenet.py``, assumes the same order). The directory comes from
``data.dataset_dir`` or ``SUITE_IMAGENET_DIR`` (resolved in ``suite.config.loader``).

Preprocessing (``preprocess``) runs once into the cache (``cache``); LoadGen's
``load`` then copies the requested crops from the memory map into RAM, subtracting
the means and transposing to the requested layout.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from suite.backends.base import RawInput
from suite.config.model import DataConfig
from suite.datasets.base import InMemoryDataset
from suite.datasets.cache import CacheProgress, CacheReport, CropCache
from suite.datasets.preprocess import (
    NormalizeParams,
    normalize,
    params_from_card,
    sample_shape,
)
from suite.errors import DatasetError
from suite.models import ModelCard
from suite.types import IndexArray

VAL_MAP = "val_map.txt"
_HINT_DIR = ("set data.dataset_dir (--set data.dataset_dir=/path, a [data] table in "
             "--config) or SUITE_IMAGENET_DIR to the directory of the 50,000 validation "
             "JPEGs and val_map.txt")


#: ImageNet 2012's 1,000 classes: the labels when the model card does not say.
IMAGENET_LABELS = range(1000)


def label_range(card: ModelCard) -> range:
    """The dataset labels the card's model can predict: its classes shifted by the
    postprocess ``label_offset``, without the background class an offset of -1 drops.

    The class count is the card's ``[output] classes`` if present, else the width of an
    ``argmax`` output; a card with neither gets ImageNet's 1,000. resnet50 (1001 classes,
    offset -1) gives 0-999.
    """
    classes = (card.output.model_extra or {}).get("classes")
    shape = card.output.sample_shape
    if not isinstance(classes, int) and card.postprocess.kind == "argmax" and shape:
        classes = shape[-1] if shape[-1] > 0 else None
    if not isinstance(classes, int):
        return IMAGENET_LABELS
    offset = card.postprocess.label_offset
    return range(max(0, offset), classes + offset)


def read_val_map(directory: Path, labels_in: range = IMAGENET_LABELS,
                 ) -> tuple[list[Path], npt.NDArray[np.int64]]:
    """The image files and labels ``val_map.txt`` lists, every file checked to exist
    and every label in ``labels_in`` (``label_range(card)``).

    Example::

        files, labels = read_val_map(Path("/data/imagenet2012"), label_range(card))
    """
    if not str(directory) or str(directory) == ".":
        raise DatasetError("no ImageNet directory is configured", hint=_HINT_DIR)
    if not directory.is_dir():
        raise DatasetError(f"ImageNet directory {directory} does not exist", hint=_HINT_DIR)
    val_map = directory / VAL_MAP
    if not val_map.is_file():
        raise DatasetError(f"{val_map} does not exist",
                           hint=f"the dataset directory needs {VAL_MAP}: one '<file> <label>' "
                           "line per validation image")
    files: list[Path] = []
    labels: list[int] = []
    for number, line in enumerate(_read_text(val_map).splitlines(), 1):
        if not line.strip():
            continue
        parts = re.split(r"\s+", line.strip())
        # ASCII digits only, and few: int() refuses "²" and digits past its limit.
        if len(parts) != 2 or not re.fullmatch(r"-?[0-9]{1,18}", parts[1]):
            raise DatasetError(f"{val_map}:{number}: expected '<file name> <label>', "
                               f"got {line.strip()[:200]!r}")
        name = Path(parts[0])
        if name.is_absolute() or ".." in name.parts:
            # The cache would read, and a report name, a file outside the dataset.
            raise DatasetError(
                f"{val_map}:{number}: {parts[0][:200]!r} is outside the dataset directory",
                hint=f"{VAL_MAP} names images relative to {directory}, without '..'")
        label = int(parts[1])
        if label not in labels_in:
            # A label the model cannot predict scores as a miss: accuracy would drop
            # silently instead of the file being fixed.
            raise DatasetError(
                f"{val_map}:{number}: label {label} is outside {labels_in.start}-"
                f"{labels_in.stop - 1}, the labels the model card scores",
                hint=f"fix {VAL_MAP}: ImageNet validation labels are 0-999, one "
                "'<file> <label>' line per image (the official val_map.txt)")
        files.append(directory / name)
        labels.append(label)
    if not files:
        raise DatasetError(f"{val_map} lists no images")
    missing = [path for path in files if not path.is_file()]
    if missing:
        shown = "\n  ".join(str(p) for p in missing[:10])
        more = f"\n  … and {len(missing) - 10} more" if len(missing) > 10 else ""
        raise DatasetError(
            f"{len(missing)} image(s) listed in {val_map} are missing:\n  {shown}{more}",
            hint="restore the files, or fix val_map.txt; images are never skipped silently",
        )
    return files, np.asarray(labels, dtype=np.int64)


def _read_text(val_map: Path) -> str:
    try:
        data = val_map.read_bytes()
    except OSError as exc:
        raise DatasetError(f"{val_map} cannot be read: {exc.strerror or exc}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise DatasetError(f"{val_map}:{line}: not UTF-8 text (byte {exc.start}: {exc.reason})",
                           hint=f"re-save {VAL_MAP} as UTF-8 (the official file is ASCII)"
                           ) from None


class ImagenetDataset(InMemoryDataset):
    """ImageNet validation images as a QSL, preprocessed through the cache."""

    name = "imagenet2012-val"

    def __init__(self, card: ModelCard, data: DataConfig,
                 progress: CacheProgress | None = None) -> None:
        try:
            crop, norm = params_from_card(card.dataset.model_dump())
        except (TypeError, ValueError) as exc:
            raise DatasetError(f"{card.card_path}: [dataset]: {exc}") from None
        layout = card.input.layout if data.layout == "auto" else data.layout
        if layout not in ("NCHW", "NHWC"):
            raise DatasetError(f"{card.card_path}: input layout {layout!r} is not NCHW or NHWC")
        self.norm = NormalizeParams(means=norm.means,
                                    layout="NCHW" if layout == "NCHW" else "NHWC")
        self.directory = Path(data.dataset_dir) if data.dataset_dir else Path()
        self.files, labels = read_val_map(self.directory, label_range(card))
        self.cache = CropCache(Path(data.cache_dir), self.name, self.files, crop)
        self.report: CacheReport = self.cache.ensure(data.preprocess_workers, progress)
        self._crops = self.cache.open()
        super().__init__(labels, sample_shape(crop, self.norm), np.dtype(np.float32))

    def _read(self, indices: IndexArray) -> npt.NDArray[Any]:
        return normalize(self._crops[indices], self.norm)

    def _read_raw(self, indices: IndexArray) -> npt.NDArray[Any]:
        return np.asarray(self._crops[indices])

    def raw_input(self) -> RawInput:
        """The cached crops as they are: uint8 RGB (size, size, 3); the model's input is
        them less the channel means, in ``layout`` (what ``normalize`` does)."""
        return RawInput(shape=tuple(self._crops.shape[1:]), dtype="uint8",
                        means=tuple(float(m) for m in self.norm.means), layout=self.norm.layout)

    def describe(self) -> dict[str, Any]:
        return {
            **super().describe(),
            "directory": str(self.directory),
            "layout": self.norm.layout,
            "means": list(self.norm.means),
            "cache": self.report.__dict__,
        }
