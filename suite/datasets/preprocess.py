"""Image preprocessing as the MLPerf ResNet-50 reference defines it, in pure functions.

The reference (``vision/classification_and_detection/python/dataset.py``,
``pre_process_vgg``) decodes with OpenCV, converts BGR to RGB, resizes so the shorter
side is 256 (``int(100 * 224 / 87.5)``) with ``cv2.INTER_AREA`` keeping the aspect
ratio (the longer side is ``int(256 * long / short)``), center-crops 224x224 at
``int((size - 224) / 2)``, casts to float32 and subtracts the per-channel means
(123.68, 116.78, 103.94); NCHW for onnxruntime.

We use OpenCV too, for the same reason the reference's numbers depend on it: the
decoder and the area resampling decide pixel values, and any other library (Pillow's
``BOX`` filter, for instance) differs on upscaling and in rounding. The work is split
in two so the cache can hold the exact intermediate: ``decode_and_crop`` (file ->
uint8 RGB HWC crop, the expensive part, cached) and ``normalize`` (uint8 crops ->
float32 minus means, in the requested layout, done when LoadGen loads samples).
Casting uint8 to float32 is exact, so the result equals the reference's bit for bit.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from suite.errors import DatasetError

Layout = Literal["NCHW", "NHWC"]


@dataclass(frozen=True)
class CropParams:
    """What the cached uint8 crops depend on (a change invalidates the cache)."""

    resize_short_side: int = 256
    crop_size: int = 224
    interpolation: Literal["area"] = "area"
    decoder: str = "opencv-imdecode-color-bgr2rgb"

    def key(self) -> str:
        """A stable hash of the parameters, part of the cache key."""
        text = json.dumps(asdict(self), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class NormalizeParams:
    """Applied when samples are loaded: means subtracted and the layout."""

    means: tuple[float, float, float] = (123.68, 116.78, 103.94)
    layout: Layout = "NCHW"


class ImageError(DatasetError):
    """An image that cannot be decoded; the message names the file."""


def decode_rgb(path: Path) -> npt.NDArray[np.uint8]:
    """Decode an image file to uint8 RGB HWC (grayscale and CMYK become RGB).

    Example::

        rgb = decode_rgb(Path("ILSVRC2012_val_00000001.JPEG"))  # (375, 500, 3) uint8
    """
    import cv2  # lazy: the child process of a digits run never needs OpenCV

    try:
        data = np.fromfile(path, dtype=np.uint8)
    except OSError as exc:
        raise ImageError(f"{path}: cannot be read: {exc.strerror or exc}") from None
    if data.size == 0:
        raise ImageError(f"{path}: the file is empty")
    # IMREAD_COLOR is what the reference's cv2.imread(src) uses: 3 channels, BGR.
    bgr = cv2.imdecode(data, cv2.IMREAD_COLOR)
    if bgr is None:
        raise ImageError(f"{path}: not a decodable image (corrupt or not an image file)")
    rgb = np.asarray(cv2.cvtColor(bgr, cv2.COLOR_BGR2RGB), dtype=np.uint8)
    return rgb


def resized_shape(height: int, width: int, short_side: int) -> tuple[int, int]:
    """(height, width) after the aspect-preserving resize (the reference's truncation)."""
    if height > width:
        return int(short_side * height / width), short_side
    return short_side, int(short_side * width / height)


def crop_box(height: int, width: int, size: int) -> tuple[int, int, int, int]:
    """(top, bottom, left, right) of the center crop, as the reference computes it."""
    top, bottom = int((height - size) / 2), int((height + size) / 2)
    left, right = int((width - size) / 2), int((width + size) / 2)
    return top, bottom, left, right


def resize_and_crop(rgb: npt.NDArray[np.uint8], params: CropParams) -> npt.NDArray[np.uint8]:
    """Resize the shorter side to ``resize_short_side`` (area), then center-crop."""
    import cv2

    height, width = rgb.shape[:2]
    new_h, new_w = resized_shape(height, width, params.resize_short_side)
    resized = cv2.resize(rgb, (new_w, new_h), interpolation=cv2.INTER_AREA)
    top, bottom, left, right = crop_box(new_h, new_w, params.crop_size)
    crop: npt.NDArray[np.uint8] = np.ascontiguousarray(resized[top:bottom, left:right])
    return crop


def decode_and_crop(path: Path, params: CropParams) -> npt.NDArray[np.uint8]:
    """The cached part of preprocessing: file -> uint8 RGB crop (size, size, 3)."""
    return resize_and_crop(decode_rgb(path), params)


def normalize(crops: npt.NDArray[np.uint8], params: NormalizeParams) -> npt.NDArray[np.float32]:
    """uint8 RGB crops (N, H, W, 3) -> float32 minus the means, NCHW or NHWC.

    Example::

        batch = normalize(crops, NormalizeParams())  # (N, 3, 224, 224) float32
    """
    count, height, width, _ = crops.shape
    nchw = params.layout == "NCHW"
    # One output allocation, written channel by channel: LoadGen's load of 1024
    # samples is 616 MB of float32, and temporaries would triple the peak.
    out = np.empty((count, 3, height, width) if nchw else (count, height, width, 3),
                   dtype=np.float32)
    for channel, mean in enumerate(params.means):
        target = out[:, channel] if nchw else out[..., channel]
        np.subtract(crops[..., channel], np.float32(mean), out=target, dtype=np.float32)
    return out


def sample_shape(crop: CropParams, norm: NormalizeParams) -> tuple[int, ...]:
    """The shape of one preprocessed sample."""
    size = crop.crop_size
    return (3, size, size) if norm.layout == "NCHW" else (size, size, 3)


def params_from_card(spec: dict[str, Any]) -> tuple[CropParams, NormalizeParams]:
    """Read the card's ``[dataset]`` preprocessing keys (defaults: the reference's)."""
    crop = CropParams(
        resize_short_side=int(spec.get("resize_short_side", 256)),
        crop_size=int(spec.get("crop_size", 224)),
    )
    means = tuple(float(m) for m in spec.get("channel_means", (123.68, 116.78, 103.94)))
    if len(means) != 3:
        raise ValueError(f"channel_means must have 3 values, got {len(means)}")
    return crop, NormalizeParams(means=(means[0], means[1], means[2]))
