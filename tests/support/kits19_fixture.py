"""KiTS19-shaped arrays made from integer arithmetic only, for the 3d-unet task's tests.

Everything here is exact in float32 (no transcendental functions, no random numbers), so
the same arrays come out under any numpy version: the tests compare our sliding window
and DICE against figures the reference's own code printed on these arrays (its
``base_SUT.infer_single_query`` and ``accuracy_kits.py``, run outside the repository with
numpy 1.26.4, scipy 1.12.0, pandas 1.5.3 and nibabel 5.4.2). This module imports numpy
only, so that the reference's environment can import it too.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

#: Volumes for the sliding-window comparison: 6 and 4 windows, sides not multiples of 128.
BLEND_SHAPES = ((192, 128, 256), (128, 192, 192))


def volume(shape: tuple[int, int, int]) -> npt.NDArray[np.float32]:
    """A deterministic image (1, D, H, W) with values in [-1, 1)."""
    z, y, x = np.ogrid[:shape[0], :shape[1], :shape[2]]
    steps = (z * 7 + y * 3 + x * 5 + (z * y) % 11) % 23
    image: npt.NDArray[np.float32] = steps.astype(np.float32) / np.float32(11.5) - np.float32(1.0)
    return image[np.newaxis]


def toy_logits(patches: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    """A stand-in for the model: (N, 1, 128, 128, 128) -> (N, 3, 128, 128, 128) logits
    from float32 products and sums only."""
    x = patches[:, 0]
    half, three = np.float32(0.5), np.float32(3.0)
    logits = np.stack([x, half - x * x * three, (x - half) * three * x])
    return np.ascontiguousarray(logits.transpose(1, 0, 2, 3, 4), dtype=np.float32)


def _box(shape: tuple[int, int, int], low: tuple[int, int, int],
         high: tuple[int, int, int]) -> npt.NDArray[np.bool_]:
    mask = np.zeros(shape, dtype=bool)
    mask[low[0]:high[0], low[1]:high[1], low[2]:high[2]] = True
    return mask


def dice_cases() -> list[tuple[str, npt.NDArray[np.uint8], npt.NDArray[np.uint8]]]:
    """(case, ground truth, prediction) label volumes (D, H, W) uint8 with the awkward
    cases: an empty tumour class on both sides, a tumour predicted where there is none,
    a kidney missed entirely, shapes not multiples of the window."""
    cases = []
    shape = (128, 128, 128)
    truth = np.zeros(shape, np.uint8)
    truth[_box(shape, (20, 30, 30), (90, 100, 80))] = 1
    truth[_box(shape, (40, 50, 40), (60, 70, 60))] = 2
    pred = np.zeros(shape, np.uint8)
    pred[_box(shape, (24, 28, 33), (93, 97, 84))] = 1
    pred[_box(shape, (43, 50, 42), (66, 69, 57))] = 2
    cases.append(("case_00000", truth, pred))

    shape = (192, 128, 128)  # no tumour on either side: its DICE is 1 by the smoothing
    truth = np.zeros(shape, np.uint8)
    truth[_box(shape, (50, 10, 60), (150, 70, 120))] = 1
    pred = np.zeros(shape, np.uint8)
    pred[_box(shape, (55, 12, 58), (160, 75, 118))] = 1
    cases.append(("case_00003", truth, pred))

    shape = (128, 192, 128)  # no tumour in the truth, one predicted: its DICE is ~0
    truth = np.zeros(shape, np.uint8)
    truth[_box(shape, (10, 100, 10), (70, 180, 64))] = 1
    pred = truth.copy()
    pred[_box(shape, (30, 120, 20), (40, 135, 30))] = 2
    cases.append(("case_00005", truth, pred))

    shape = (128, 128, 192)  # the kidney missed entirely, the tumour half found
    truth = np.zeros(shape, np.uint8)
    truth[_box(shape, (0, 0, 100), (40, 64, 192))] = 1
    truth[_box(shape, (10, 10, 150), (30, 30, 180))] = 2
    pred = np.zeros(shape, np.uint8)
    pred[_box(shape, (10, 10, 165), (30, 30, 191))] = 2
    cases.append(("case_00400", truth, pred))
    return cases
