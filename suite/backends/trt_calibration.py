"""INT8 calibration of the TensorRT backend: its batch size, its profile, its calibrator.

TensorRT calibrates at the OPT shape of the calibration profile
(``IBuilderConfig.set_calibration_profile``), and the calibrator hands it device buffers
of exactly one batch. So the batch size, the profile's shapes and the calibrator's
buffer are decided together, here: the profile is fixed at the calibrator's batch
size, only whole batches are fed (and counted as calibrated), and the device buffer is
freed once the build that needed it ends. ``trt.py`` builds and runs the engine.

tensorrt and pycuda are never imported here: the backend imports them lazily and
hands the modules in, so the calibrator class is defined inside ``make_calibrator``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np


def calibration_batch(requested: int, max_batch: int) -> int:
    """The calibrator's batch size: the requested one, at most the engine's maximum."""
    return max(1, min(requested, max_batch))


def calibration_shapes(sample_shape: tuple[int, ...], batch: int
                       ) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """(min, opt, max) of the calibration profile: all the calibrator's batch, because
    TensorRT calibrates at OPT and the calibrator's buffer holds exactly ``batch``."""
    shape = (batch, *sample_shape)
    return shape, shape, shape


def calibrated_samples(available: int, batch: int) -> int:
    """How many samples calibration sees: whole batches only (``get_batch`` stops at a
    partial one)."""
    return available // batch * batch


def make_calibrator(trt: Any, cuda: Any, data: Any, batch_size: int, cache: Path) -> Any:
    """An ``IInt8EntropyCalibrator2`` over ``data``; defined here because trt is lazy."""

    class EntropyCalibrator(trt.IInt8EntropyCalibrator2):  # type: ignore[misc]
        def __init__(self) -> None:
            trt.IInt8EntropyCalibrator2.__init__(self)
            self.position = 0
            self.device: Any = cuda.mem_alloc(batch_size * data[0].nbytes)

        def free(self) -> None:
            """Free the device buffer (once; calibration is over)."""
            if self.device is not None:
                self.device.free()
                self.device = None

        def get_batch_size(self) -> int:
            return batch_size

        def get_batch(self, names: list[str]) -> list[int] | None:
            if self.position + batch_size > len(data):
                return None  # no more batches: calibration ends
            chunk = np.ascontiguousarray(data[self.position:self.position + batch_size])
            cuda.memcpy_htod(self.device, chunk)
            self.position += batch_size
            return [int(self.device)]

        def read_calibration_cache(self) -> bytes | None:
            return cache.read_bytes() if cache.is_file() else None

        def write_calibration_cache(self, blob: Any) -> None:
            cache.parent.mkdir(parents=True, exist_ok=True)
            cache.write_bytes(bytes(blob))

    return EntropyCalibrator()
