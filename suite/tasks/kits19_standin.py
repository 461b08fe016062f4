"""The 3d-unet stand-in: a few synthetic KiTS19 cases in the reference's layout and a
1x1x1-convolution ONNX model with the official tensors.

Owns what ``Kits19Task.write_stand_in`` writes, offline and in about a second:

- ``kits19/``: ``preprocessed_files.pkl`` and ``case_XXXXX.pkl`` as the reference's
  ``preprocess.py`` writes them (sides of 128 or 192: at least the window and a multiple
  of the 64-voxel stride, so cases need 1, 2 or 4 windows, sides of 192 not divisible
  by the window; a band of the padding value -2.2 with label 0 as ``constant_pad_volume``
  leaves; one case without tumour), and ``nifti/<case>/segmentation.nii.gz``, the
  ground truth ``accuracy_kits.py`` reads (NIfTI-1, uint8, written here: no nibabel);
- ``3d-unet-stand-in.onnx``: ``input`` (N, 1, 128, 128, 128) float32 -> ``output``
  (N, 3, 128, 128, 128), opset 12 as ``unet_pytorch_to_onnx.py`` exports; a 1x1x1
  convolution whose logits ``(-4x, 1, 4x - 3)`` label a voxel background below -0.25,
  kidney up to 1.0 and tumour above, so accuracy mode scores a stable DICE below 1 (the
  images are the labels' intensities plus seeded noise).

Never submittable: neither the model nor the data is the reference's.
"""

from __future__ import annotations

import gzip
import pickle
import struct
from pathlib import Path

import numpy as np
import numpy.typing as npt

from suite.tasks.base import StandIn
from suite.tasks.kits19_window import CLASSES, INDEX_FILE, INPUT_NAME, OUTPUT_NAME, ROI_SHAPE

MODEL_FILE = "3d-unet-stand-in.onnx"
DATASET_DIR = "kits19"
#: global_vars.py PADDING_VAL (the image's constant padding in preprocess.py).
PADDING_VALUE = -2.2
#: global_vars.py TARGET_SPACING (z, y, x) in mm: the preprocessed volumes' spacing.
SPACING = (1.6, 1.2, 1.2)
#: The stand-in's intensities per label (background, kidney, tumour) and noise.
_LEVELS = np.array([-1.0, 0.5, 1.5], dtype=np.float32)
_NOISE = 0.25
#: The stand-in model: logits = weight * x + bias per class.
WEIGHTS = (-4.0, 0.0, 4.0)
BIASES = (0.0, 1.0, -3.0)
_SHAPES = ((128, 128, 128), (192, 128, 128), (128, 128, 128), (128, 192, 128),
           (128, 128, 192), (192, 192, 128))
#: The case (by position) that has no tumour: an empty class in the ground truth.
_NO_TUMOUR = 2


def _ellipsoid(shape: tuple[int, ...], centre: npt.NDArray[np.float64],
               radii: npt.NDArray[np.float64]) -> npt.NDArray[np.bool_]:
    z, y, x = np.ogrid[:shape[0], :shape[1], :shape[2]]
    inside: npt.NDArray[np.bool_] = (((z - centre[0]) / radii[0]) ** 2
                                     + ((y - centre[1]) / radii[1]) ** 2
                                     + ((x - centre[2]) / radii[2]) ** 2) <= 1.0
    return inside


def synthetic_case(shape: tuple[int, int, int], rng: np.random.Generator, *,
                   tumour: bool) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.uint8]]:
    """An image (1, D, H, W) float32 and label (1, D, H, W) uint8 shaped like a
    preprocessed KiTS19 case: a kidney, maybe a tumour in it, a padded band."""
    label = np.zeros(shape, dtype=np.uint8)
    sides = np.array(shape, dtype=np.float64)
    radii = rng.uniform(0.12, 0.2, size=3) * sides
    centre = rng.uniform(radii + 8, sides - radii - 8)
    label[_ellipsoid(shape, centre, radii)] = 1
    if tumour:
        label[_ellipsoid(shape, centre, radii * rng.uniform(0.3, 0.5))] = 2
    image = _LEVELS[label] + np.float32(_NOISE) * rng.standard_normal(shape, np.float32)
    band = int(rng.integers(4, 16))  # constant_pad_volume's padding on one side of z
    image[:band] = PADDING_VALUE
    label[:band] = 0
    return image[np.newaxis].astype(np.float32), label[np.newaxis]


def nifti_bytes(volume: npt.NDArray[np.uint8], spacing: tuple[float, float, float]) -> bytes:
    """An uncompressed NIfTI-1 file of a uint8 volume (axis 0 is the file's i axis, as
    nibabel saves ``Nifti1Image(volume, affine)``), with a diagonal affine."""
    header = bytearray(352)
    struct.pack_into("<i", header, 0, 348)
    header[38] = ord("r")
    struct.pack_into("<8h", header, 40, 3, *volume.shape, 1, 1, 1, 1)
    struct.pack_into("<hh", header, 70, 2, 8)  # datatype uint8, bits per voxel
    struct.pack_into("<8f", header, 76, 1.0, *spacing, 1.0, 1.0, 1.0, 1.0)
    struct.pack_into("<fff", header, 108, 352.0, 1.0, 0.0)  # vox_offset, scl slope/inter
    header[123] = 2  # xyzt_units: millimetres
    struct.pack_into("<hh", header, 252, 0, 2)  # qform unknown, sform aligned
    for row in range(3):
        srow = [0.0, 0.0, 0.0, 0.0]
        srow[row] = spacing[row]
        struct.pack_into("<4f", header, 280 + 16 * row, *srow)
    header[344:348] = b"n+1\0"
    return bytes(header) + volume.astype(np.uint8).tobytes(order="F")


def stand_in_model() -> bytes:
    """The stand-in ONNX model's bytes (built with onnx.helper; no torch)."""
    import onnx
    from onnx import TensorProto, helper

    batch = "batch_size"
    model_input = helper.make_tensor_value_info(INPUT_NAME, TensorProto.FLOAT,
                                                [batch, 1, *ROI_SHAPE])
    model_output = helper.make_tensor_value_info(OUTPUT_NAME, TensorProto.FLOAT,
                                                 [batch, CLASSES, *ROI_SHAPE])
    weight = helper.make_tensor("weight", TensorProto.FLOAT, [CLASSES, 1, 1, 1, 1], WEIGHTS)
    bias = helper.make_tensor("bias", TensorProto.FLOAT, [CLASSES], BIASES)
    conv = helper.make_node("Conv", [INPUT_NAME, "weight", "bias"], [OUTPUT_NAME],
                            kernel_shape=[1, 1, 1])
    graph = helper.make_graph([conv], "unet3d_stand_in", [model_input], [model_output],
                              initializer=[weight, bias])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 12)],
                              producer_name="infersuite stand-in")
    model.ir_version = 7
    onnx.checker.check_model(model)
    data: bytes = model.SerializeToString()
    return data


def write_stand_in(out: Path, *, samples: int, seed: int) -> StandIn:
    """Write ``samples`` cases under ``out/kits19`` and the model at ``out``."""
    rng = np.random.default_rng(seed)
    dataset = out / DATASET_DIR
    dataset.mkdir(parents=True, exist_ok=True)
    affine = np.diag([*SPACING, 1.0])
    names = [f"case_{index:05d}" for index in range(samples)]
    aux: dict[str, dict[str, object]] = {}
    for index, name in enumerate(names):
        shape = _SHAPES[index % len(_SHAPES)]
        image, label = synthetic_case(shape, rng, tumour=index != _NO_TUMOUR)
        with (dataset / f"{name}.pkl").open("wb") as handle:
            pickle.dump([image, label], handle)
        nifti = dataset / "nifti" / name
        nifti.mkdir(parents=True, exist_ok=True)
        (nifti / "segmentation.nii.gz").write_bytes(
            gzip.compress(nifti_bytes(label[0], SPACING), compresslevel=1))
        aux[name] = {"case": name, "image_shape": image.shape, "original_affine": affine,
                     "reshaped_affine": affine, "zoom_factor": np.ones(3)}
    with (dataset / INDEX_FILE).open("wb") as handle:
        pickle.dump({"file_list": names, "cases": aux}, handle)
    model_path = out / MODEL_FILE
    model_path.write_bytes(stand_in_model())
    return StandIn(dataset_dir=dataset, model_path=model_path, samples=samples)
