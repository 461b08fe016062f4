"""The 3D U-Net reference's constants and arithmetic on KiTS19 volumes: sliding windows
and DICE.

Owns the names and numbers of ``vision/medical_imaging/3d-unet-kits19`` in
``mlcommons/inference`` that decide a prediction and its score, written from the
reference's definitions:

- the official tensors ``input`` and ``output`` (``unet_pytorch_to_onnx.py``) and the
  index file ``preprocessed_files.pkl`` (``preprocess.py``);

- where the 128^3 windows sit (``inference_utils.get_slice_for_sliding_window``: a stride
  of ``int(128 * (1 - 0.5)) = 64`` per axis, ``(side - 128) // 64 + 1`` windows per axis,
  the first at 0; no padding at inference time, because ``preprocess.py`` already made
  every side at least 128 and a multiple of 64);
- the Gaussian importance map (``inference_utils.gaussian_kernel(128, 0.125 * 128)``: the
  1-D window ``exp(-n^2 / (2 sigma^2))`` for ``n = k - 63.5``, its 3-D outer product, the
  cube root, divided by its maximum, as float32);
- the blend (``base_SUT.infer_single_query``: each window's output times the map added
  into a float32 sum, the map added into a float32 norm map, the sum divided by the norm
  map, the argmax over the 3 classes as uint8);
- DICE (``accuracy_kits.get_dice_score``: per foreground class, ``(2 |P&T| + 1e-6) /
  (|P| + |T| + 1e-6)`` in float64; kidney = label 1, tumour = label 2; the composite is
  their mean).

Pure numpy: the model is a callable on a batch of patches.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from suite.errors import DatasetError, ModelError

#: unet_pytorch_to_onnx.py input_names / output_names.
INPUT_NAME = "input"
OUTPUT_NAME = "output"
#: preprocess.py save_preprocessed_info: the case list and each case's shape.
INDEX_FILE = "preprocessed_files.pkl"
#: global_vars.py ROI_SHAPE: the model's patch (the official ONNX input's D, H, W).
ROI_SHAPE = (128, 128, 128)
#: global_vars.py SLIDE_OVERLAP_FACTOR.
OVERLAP = 0.5
#: inference_utils.prepare_arrays: ``gaussian_kernel(roi, 0.125 * roi)``.
SIGMA_SCALE = 0.125
#: accuracy_kits.py: background, kidney, tumour.
CLASSES = 3
#: accuracy_kits.get_dice_score: smooth_nr and smooth_dr.
SMOOTH = 1e-6

Floats = npt.NDArray[np.float32]
Labels = npt.NDArray[np.uint8]
#: A batch of patches (N, 1, 128, 128, 128) to the model's logits (N, 3, 128, 128, 128).
PatchCall = Callable[[Floats], npt.NDArray[Any]]


def strides(roi: tuple[int, int, int] = ROI_SHAPE,
            overlap: float = OVERLAP) -> tuple[int, int, int]:
    """The window step per axis: ``int(roi * (1 - overlap))`` (64 for the reference)."""
    d, h, w = (int(side * (1 - overlap)) for side in roi)
    return d, h, w


def window_starts(shape: tuple[int, ...], roi: tuple[int, int, int] = ROI_SHAPE,
                  overlap: float = OVERLAP) -> list[tuple[int, int, int]]:
    """Each window's first voxel (z, y, x) over a volume of ``shape`` (D, H, W), in the
    reference's order (z outermost). A side not covered by whole steps keeps its tail
    uncovered, as the reference's does; ``preprocess.py``'s output never has one."""
    steps = strides(roi, overlap)
    counts = [(shape[axis] - roi[axis]) // steps[axis] + 1 for axis in range(3)]
    axes = [range(0, steps[axis] * counts[axis], steps[axis]) for axis in range(3)]
    return [(i, j, k) for i in axes[0] for j in axes[1] for k in axes[2]]


@functools.lru_cache(maxsize=2)
def gaussian_map(side: int = ROI_SHAPE[0], sigma_scale: float = SIGMA_SCALE) -> Floats:
    """The importance map (side^3, float32, maximum 1.0) as the reference builds it;
    computed once per process (read-only)."""
    sigma = sigma_scale * side
    offsets = np.arange(0, side) - (side - 1.0) / 2.0
    line = np.exp(-(offsets ** 2) / (2 * sigma * sigma))
    cube = np.outer(np.outer(line, line), line).reshape(side, side, side)
    cube = np.cbrt(cube)
    cube /= cube.max()
    patch: Floats = cube.astype(np.float32)
    patch.flags.writeable = False
    return patch


@dataclass(frozen=True)
class Window:
    """One window's slices into a (C, D, H, W) volume."""

    start: tuple[int, int, int]
    roi: tuple[int, int, int]

    @property
    def where(self) -> tuple[slice, slice, slice, slice]:
        (i, j, k), (d, h, w) = self.start, self.roi
        return slice(None), slice(i, i + d), slice(j, j + h), slice(k, k + w)


def _batches(items: list[Window], size: int) -> Iterator[list[Window]]:
    for first in range(0, len(items), size):
        yield items[first:first + size]


def segment(image: Floats, predict: PatchCall, *, batch: int = 1,
            roi: tuple[int, int, int] = ROI_SHAPE, overlap: float = OVERLAP,
            importance: Floats | None = None) -> Labels:
    """The reference's sliding-window segmentation of one volume.

    ``image`` is the preprocessed case (1, D, H, W) float32; ``predict`` runs the model on
    ``batch`` patches at a time (the reference sends one). Returns the labels (D, H, W),
    uint8: each window's logits weighted by the Gaussian map and summed in float32 in the
    reference's window order, divided by the summed map, argmax over the classes.
    """
    patch_map = gaussian_map(roi[0]) if importance is None else importance
    shape = image.shape[1:]
    result = np.zeros((CLASSES, *shape), dtype=np.float32)
    # One channel: the reference keeps three identical ones; the quotient is the same.
    norm = np.zeros((1, *shape), dtype=np.float32)
    weighted = np.empty((CLASSES, *roi), dtype=np.float32)
    windows = [Window(start, roi) for start in window_starts(shape, roi, overlap)]
    for group in _batches(windows, max(1, batch)):
        patches = np.stack([image[w.where] for w in group]).astype(np.float32, copy=False)
        logits = np.asarray(predict(np.ascontiguousarray(patches)))
        expected = (len(group), CLASSES, *roi)
        if logits.shape != expected:
            raise ModelError(
                f"the model's output has shape {logits.shape} for {len(group)} patch(es) of "
                f"{roi}; the 3D U-Net reference's is {expected}",
                hint="use the official 3dunet_kits19_128x128x128 ONNX model or one with "
                     "its input/output contract (see reference_models/3d-unet/model.toml)")
        for window, out in zip(group, logits, strict=True):
            # The reference's float32 `result += out * map`, without temporaries.
            np.multiply(out, patch_map, out=weighted, dtype=np.float32, casting="same_kind")
            region = result[window.where]
            region += weighted
            region = norm[window.where]
            region += patch_map
    result /= norm
    return class_argmax(result)


def class_argmax(scores: Floats) -> Labels:
    """``np.argmax(scores, axis=0).astype(np.uint8)`` for a (classes, D, H, W) array, as a
    few element-wise passes per class instead of numpy's reduction over the outer axis,
    which walks the volume a class's stride at a time (a 192x192x128 case: 105 ms against
    19 on a 2-core machine). The same answer for every input: ties keep the earlier class, and a NaN
    counts as the largest value, its first class winning (numpy's rule)."""
    best = scores[0].copy()
    labels: Labels = np.zeros(scores.shape[1:], dtype=np.uint8)
    wins = np.empty(best.shape, dtype=bool)
    below = np.empty(best.shape, dtype=bool)
    marked = np.empty(best.shape, dtype=np.uint8)
    for label in range(1, scores.shape[0]):
        # Both rules in one mask: `not (v <= best)` holds where v is larger or either is a
        # NaN, and `best == best` leaves out the voxels whose best is already a NaN.
        np.less_equal(scores[label], best, out=below)
        np.equal(best, best, out=wins)
        np.greater(wins, below, out=wins)
        # Each class's label is above every label set before it, so "label where it wins"
        # is the maximum of the labels so far and wins x label.
        np.multiply(wins.view(np.uint8), np.uint8(label), out=marked)
        np.maximum(labels, marked, out=labels)
        np.maximum(best, scores[label], out=best)
    return labels


@dataclass(frozen=True)
class CaseDice:
    """One case's DICE per foreground class, as accuracy_kits.py's summary.csv row."""

    case: str
    kidney: float
    tumor: float

    @property
    def composite(self) -> float:
        return float(np.mean(np.array([self.kidney, self.tumor], dtype=np.float64)))


def case_dice(case: str, prediction: Labels, truth: Labels) -> CaseDice:
    """DICE of one case's labels against its ground truth (same shape), per class."""
    if prediction.shape != truth.shape:
        raise DatasetError(f"{case}: the prediction's shape {prediction.shape} is not the "
                           f"ground truth's {truth.shape}",
                           hint="score the responses against the dataset the run used")
    scores = []
    for label in (1, 2):
        predicted, actual = prediction == label, truth == label
        overlap = float(np.count_nonzero(predicted & actual))
        total = float(np.count_nonzero(predicted)) + float(np.count_nonzero(actual))
        scores.append((2.0 * overlap + SMOOTH) / (total + SMOOTH))
    return CaseDice(case, scores[0], scores[1])


def mean_dice(cases: list[CaseDice]) -> tuple[float, float, float]:
    """(composite, kidney, tumour): the means over cases accuracy_kits.py reports (its
    ``df.fillna(0).mean()``; no score is NaN here, the smoothing keeps 0/0 away)."""
    columns = ([c.composite for c in cases], [c.kidney for c in cases],
               [c.tumor for c in cases])
    # One contiguous column at a time, as pandas sums a column (numpy's pairwise sum).
    composite, kidney, tumor = (float(np.array(column, dtype=np.float64).sum()
                                      / len(cases)) for column in columns)
    return composite, kidney, tumor


def accuracy_line(composite: float, kidney: float, tumor: float) -> str:
    """The line accuracy_kits.py prints, which the checker's DICE pattern
    (``Accuracy\\:\\s*mean\\s*=\\s*([\\d\\.]+).*``) parses."""
    return f"Accuracy: mean = {composite:.5f}, kidney = {kidney:.4f}, tumor = {tumor:.4f}"
