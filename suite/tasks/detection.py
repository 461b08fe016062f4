"""What the object-detection tasks share (``yolo``, ``openimages``): the COCO-format
annotation file and the images it names, JPEG decoding as the references do it, box
arithmetic and greedy NMS, the 7-float detection records the references' SUTs log, and
mAP as their accuracy scripts compute it with pycocotools.

Both references decode with OpenCV (``cv2.imread``/``cv2.imdecode`` with
``IMREAD_COLOR``): grayscale and CMYK JPEGs come out as 3-channel BGR, and the EXIF
orientation is applied. A detection is logged as float32
``[qsl_idx, ymin, xmin, ymax, xmax, score, label]``, the box as fractions of the original
image's height and width (``vision/classification_and_detection/python/main.py``
``run_one_item``; ``yolo/yolo_loadgen.py`` packs ``"7f"``). The accuracy scripts
(``tools/accuracy-coco.py``, ``tools/accuracy-openimages.py``) map QSL index ``i`` to the
``i``-th entry of the annotation file's ``images``, scale the box by that entry's
``height``/``width`` in float32, evaluate ``COCOeval(gt, dt, "bbox")`` over the image ids
present in the log, and print ``mAP=<100 * stats[0]>%``.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from suite.errors import ConfigError, DatasetError
from suite.tasks.base import TaskScore

F32 = npt.NDArray[np.float32]
U8 = npt.NDArray[np.uint8]
#: One image's preprocessing: decoded BGR uint8 HWC -> the model input (CHW float32).
Preprocess = Callable[[U8], F32]


@dataclass(frozen=True)
class ImageEntry:
    """One entry of the annotation file's ``images``: its QSL index is its position."""

    id: int
    file_name: str
    height: int
    width: int


def options(card: Any, defaults: Mapping[str, Any]) -> dict[str, Any]:
    """The task's constants: ``defaults`` overridden by the card's ``[task_options]``."""
    if isinstance(card, Mapping):
        given = card.get("task_options")
    else:
        given = getattr(card, "task_options", None) if card is not None else None
    given = dict(given or {})
    unknown = sorted(set(given) - set(defaults))
    if unknown:
        raise ConfigError(f"model card [task_options]: unknown key {unknown[0]!r}",
                          hint=f"the task reads {', '.join(sorted(defaults))}")
    return {**defaults, **given}


def read_annotations(path: Path, what: str) -> tuple[list[ImageEntry], set[int]]:
    """The ``images`` of a COCO-format annotation file (in file order) and its category
    ids; one ``DatasetError`` naming the file and the entry on anything malformed."""
    if not path.is_file():
        raise DatasetError(f"{path}: the {what} annotation file is missing",
                           hint="point data.dataset_dir at the directory laid out as "
                                "docs/benchmarks.md describes")
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise DatasetError(f"{path}: not a readable JSON file ({exc})",
                           hint="download the annotation file again") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("images"), list):
        raise DatasetError(f"{path}: no 'images' list: not a COCO-format annotation file",
                           hint="use the annotation file the reference's download gives")
    entries: list[ImageEntry] = []
    for number, img in enumerate(doc["images"]):
        try:
            entry = ImageEntry(int(img["id"]), str(img["file_name"]), int(img["height"]),
                               int(img["width"]))
        except (KeyError, TypeError, ValueError):
            raise DatasetError(f"{path}: images[{number}] lacks an integer id, height, width "
                               "or a file_name", hint="use the reference's annotation "
                               "file unchanged") from None
        name = Path(entry.file_name)
        if name.is_absolute() or ".." in name.parts or entry.file_name == "":
            raise DatasetError(f"{path}: images[{number}] file_name {entry.file_name!r} "
                               "points outside the images directory",
                               hint="file names are relative to the images directory")
        entries.append(entry)
    if not entries:
        raise DatasetError(f"{path}: 'images' is empty", hint="use the full annotation file")
    ids = {e.id for e in entries}
    for number, ann in enumerate(doc.get("annotations", [])):
        if not isinstance(ann, dict) or ann.get("image_id") not in ids:
            image_id = ann.get("image_id") if isinstance(ann, dict) else None
            raise DatasetError(f"{path}: annotations[{number}] names image_id {image_id!r}, "
                               "which is not in 'images'",
                               hint="use the reference's annotation file unchanged")
    categories = {int(c["id"]) for c in doc.get("categories", []) if isinstance(c, dict)}
    return entries, categories


def check_images(images_dir: Path, entries: Sequence[ImageEntry], annotations: Path) -> None:
    """Every image the annotation file names is a file under ``images_dir``."""
    if not images_dir.is_dir():
        raise DatasetError(f"{images_dir}: the images directory is missing",
                           hint=f"it holds the images {annotations.name} names")
    missing = [e.file_name for e in entries if not (images_dir / e.file_name).is_file()]
    if missing:
        raise DatasetError(f"{annotations}: names {len(missing)} image(s) not in {images_dir} "
                           f"(first: {missing[0]})",
                           hint="download the whole image set, or use the annotation file "
                                "that matches these images")


def decode_bgr(path: Path) -> U8:
    """A JPEG as the references decode it: 3-channel BGR uint8 (grayscale and CMYK
    converted by OpenCV's decoder, EXIF orientation applied)."""
    import cv2

    try:
        data = np.fromfile(path, np.uint8)
    except OSError as exc:
        raise DatasetError(f"{path}: cannot be read ({exc.strerror or exc})",
                           hint="check the file's permissions") from None
    image = cv2.imdecode(data, cv2.IMREAD_COLOR) if data.size else None
    if image is None:
        raise DatasetError(f"{path}: not a decodable image",
                           hint="download the image again")
    return np.asarray(image, dtype=np.uint8)


@dataclass
class DetectionData:
    """An opened detection dataset: the QSL. Sample ``i`` is ``images[i]`` of the
    annotation file; inputs are preprocessed on request (nothing is cached here)."""

    name: str
    dataset_dir: Path
    annotations: Path
    images_dir: Path
    entries: list[ImageEntry]
    input_name: str
    preprocess: Preprocess
    total_count: int = field(init=False)
    _shapes: dict[int, tuple[int, int]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.total_count = len(self.entries)

    def inputs(self, index: int) -> dict[str, npt.NDArray[Any]]:
        image = decode_bgr(self.images_dir / self.entries[index].file_name)
        self._shapes[index] = (int(image.shape[0]), int(image.shape[1]))
        return {self.input_name: self.preprocess(image)}

    def original_shape(self, index: int) -> tuple[int, int]:
        """(height, width) of sample ``index`` as decoded (what the boxes scale back to)."""
        if index not in self._shapes:
            image = decode_bgr(self.images_dir / self.entries[index].file_name)
            self._shapes[index] = (int(image.shape[0]), int(image.shape[1]))
        return self._shapes[index]

    def describe(self) -> dict[str, Any]:
        return {"name": self.name, "total": self.total_count,
                "dataset_dir": str(self.dataset_dir), "images": str(self.images_dir),
                "annotations": str(self.annotations),
                "annotations_sha256": hashlib.sha256(self.annotations.read_bytes()).hexdigest()}


def xywh_to_xyxy(boxes: F32) -> F32:
    """Center-size boxes to corners, in float32 as the reference's torch code does."""
    half = boxes[:, 2:4] / np.float32(2)
    return np.concatenate([boxes[:, 0:2] - half, boxes[:, 0:2] + half], axis=1)


def nms(boxes: F32, scores: F32, iou_threshold: float, limit: int) -> npt.NDArray[np.int64]:
    """Greedy NMS as torchvision's: highest score first, a box is dropped when its IoU
    with a kept one is above the threshold (a NaN IoU drops nothing), all in float32; the
    first ``limit`` kept, best first. Per-class NMS passes class-offset boxes (boxes of
    different classes then never overlap), as Ultralytics and torchvision's
    ``batched_nms`` do."""
    order = np.argsort(-scores, kind="stable")
    return order[_greedy(boxes[order], np.float32(iou_threshold), limit)]


#: Boxes whose suppression is settled together (``_greedy``).
_BLOCK = 128


def _overlapping(a: tuple[F32, ...], b: tuple[F32, ...], threshold: np.float32
                 ) -> npt.NDArray[np.bool_]:
    """Whether each box of ``a`` (rows) and each of ``b`` (columns), given as their
    (x1, y1, x2, y2, area) columns, have an IoU above ``threshold``: torchvision's
    float32 steps, the row's area first in the union."""
    ax1, ay1, ax2, ay2, a_area = (column[:, None] for column in a)
    bx1, by1, bx2, by2, b_area = b
    zero = np.float32(0)
    inter = (np.maximum(np.minimum(ax2, bx2) - np.maximum(ax1, bx1), zero) *
             np.maximum(np.minimum(ay2, by2) - np.maximum(ay1, by1), zero))
    with np.errstate(invalid="ignore", divide="ignore"):
        overlapping: npt.NDArray[np.bool_] = inter / (a_area + b_area - inter) > threshold
    return overlapping


def _greedy(boxes: F32, threshold: np.float32, limit: int) -> npt.NDArray[np.int64]:
    """Positions kept by greedy NMS over ``boxes`` already in score order, at most
    ``limit`` (the first ``limit`` of a full run: later boxes never suppress earlier).

    Block by block in score order: a block's boxes that a box kept before it overlaps
    are dropped at once (one IoU matrix, kept x block); the rest are settled in order
    over the block's own IoU matrix, each row a bit set (a Python int), so the walk is
    integer arithmetic. The walk stops at ``limit`` kept: the boxes past that point
    are never compared."""
    x1, y1, x2, y2 = (np.ascontiguousarray(boxes[:, i]) for i in range(4))
    columns = (x1, y1, x2, y2, (x2 - x1) * (y2 - y1))
    count = boxes.shape[0]
    kept = np.empty(max(min(count, limit), 0), np.int64)
    if not len(kept):
        return kept
    k = 0
    for low in range(0, count, _BLOCK):
        block = tuple(column[low:low + _BLOCK] for column in columns)
        size = len(block[0])
        dropped: npt.NDArray[np.bool_] = np.zeros(size, bool)
        if k:
            earlier = tuple(column[kept[:k]] for column in columns)
            np.any(_overlapping(earlier, block, threshold), axis=0, out=dropped)
        rows = np.packbits(_overlapping(block, block, threshold), axis=1, bitorder="little")
        out = int.from_bytes(np.packbits(dropped, bitorder="little").tobytes(), "little")
        for j in range(size):
            if out >> j & 1:
                continue
            kept[k] = low + j
            k += 1
            if k == limit:
                return kept
            out |= int.from_bytes(rows[j].tobytes(), "little")
    return kept[:k]


def pack(index: int, rows: F32) -> bytes:
    """Detections ``rows`` (k x 6: ymin, xmin, ymax, xmax, score, label) as the logged
    bytes: float32 ``[index, ymin, xmin, ymax, xmax, score, label]`` per detection."""
    if rows.shape[0] == 0:
        return b""
    column = np.full((rows.shape[0], 1), index, dtype=np.float32)
    return np.concatenate([column, rows.astype(np.float32)], axis=1).tobytes()


def coco_map(annotations: Path, entries: Sequence[ImageEntry],
             responses: Mapping[int, bytes]) -> TaskScore:
    """mAP as ``tools/accuracy-coco.py`` / ``accuracy-openimages.py`` compute it from the
    accuracy log (``responses``: QSL index -> logged bytes, in log order)."""
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    detections: list[dict[str, Any]] = []
    image_ids: set[int] = set()
    lines: list[str] = []
    no_results = 0
    for idx, payload in responses.items():
        entry = entries[idx]
        data = np.frombuffer(payload, np.float32)
        image_ids.add(entry.id)
        if len(data) < 7:
            no_results += 1
            continue
        for row in data[: len(data) // 7 * 7].reshape(-1, 7):
            if int(row[0]) != idx:
                lines.append(f"ERROR: loadgen({idx}) and payload({int(row[0])}) disagree "
                             "on image_idx")
            # float32 arithmetic, as the script's numpy scalars (NumPy >= 2) do
            ymin, xmin = row[1] * entry.height, row[2] * entry.width
            ymax, xmax = row[3] * entry.height, row[4] * entry.width
            detections.append({"image_id": entry.id, "category_id": int(row[6]),
                               "bbox": [float(xmin), float(ymin), float(xmax - xmin),
                                        float(ymax - ymin)],
                               "score": float(row[5])})
    counts = {"results": float(len(responses)), "images": float(len(image_ids)),
              "no_results": float(no_results), "detections": float(len(detections))}
    if not detections:  # the reference's script stops with an IndexError here
        lines.append("no detections in the accuracy log: mAP=0.000%")
        return TaskScore("mAP", 0.0, tuple(lines), counts)
    quiet = io.StringIO()
    with contextlib.redirect_stdout(quiet):
        truth = COCO(str(annotations))
        # through JSON, as the script does (json.dump then loadRes from the file)
        found = truth.loadRes(json.loads(json.dumps(detections)))
        evaluation = COCOeval(truth, found, iouType="bbox")
        evaluation.params.imgIds = list(image_ids)
        evaluation.evaluate()
        evaluation.accumulate()
        evaluation.summarize()
    summary = [ln for ln in quiet.getvalue().splitlines() if "Average" in ln]
    value = 100.0 * float(evaluation.stats[0])
    lines = [*lines, *summary, f"mAP={value:.3f}%"]
    stats = {f"stats_{i}": float(s) for i, s in enumerate(evaluation.stats)}
    return TaskScore("mAP", value, tuple(lines), {**counts, **stats})


def write_jpeg(path: Path, rgb: U8, mode: str) -> None:
    """Write ``rgb`` (HWC uint8) as a JPEG in PIL ``mode`` (``RGB``, ``L``, ``CMYK``)."""
    from PIL import Image

    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(rgb, "RGB").convert(mode).save(path, "JPEG", quality=90)
