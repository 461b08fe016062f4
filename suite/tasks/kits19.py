"""3d-unet-99 / 3d-unet-99.9: the KiTS19 task (card ``3d-unet``, task ``segmentation-3d``).

Owns the dataset as the reference's ``preprocess.py`` leaves it, the model call, the
response bytes and the score (``vision/medical_imaging/3d-unet-kits19`` in
``mlcommons/inference``):

- **Layout** (``preprocess.py`` ``save``/``save_preprocessed_info``, read as
  ``kits_QSL.py`` reads it): ``preprocessed_files.pkl`` holds ``{"file_list": [case, ...],
  "cases": {case: {"image_shape": (1, D, H, W), ...}}}``; the QSL index is the position in
  ``file_list`` (the 43 cases of ``meta/inference_cases.json``); ``<case>.pkl`` holds
  ``[image, label]``: the preprocessed image (1, D, H, W) float32 and its label (1, D, H,
  W) uint8, every side at least 128 and a multiple of 64.
- **Ground truth**: ``accuracy_kits.py`` reads ``nifti/<case>/segmentation.nii.gz``, which
  ``preprocess.py`` writes from the very ``label`` array it pickles (uint8, so the NIfTI
  round trip is exact); we read the pickle's, and need no NIfTI reader.
- **Inference**: ``kits19_window.segment`` (the reference's windows, Gaussian map, blend
  and argmax), the official tensors ``input`` (N, 1, 128, 128, 128) float32 and
  ``output`` (N, 3, 128, 128, 128).
- **Response**: the labels as uint8, C order, D*H*W bytes (``base_SUT.issue_queries`` logs
  ``final_result.tobytes()``; ``accuracy_kits.py`` decodes ``--output_dtype uint8`` and
  reshapes to ``image_shape``): no crop, the score is taken at the preprocessed shape.
- **Score**: mean DICE over the cases and the line ``accuracy_kits.py`` prints.

The pickles are read with an unpickler that admits numpy arrays and plain containers only.
"""

from __future__ import annotations

import hashlib
import pickle
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from suite.errors import DatasetError
from suite.tasks.base import Arrays, ModelCall, StandIn, TaskData, TaskScore
from suite.tasks.kits19_window import (
    INDEX_FILE,
    INPUT_NAME,
    OUTPUT_NAME,
    ROI_SHAPE,
    Floats,
    Labels,
    accuracy_line,
    case_dice,
    mean_dice,
    segment,
    strides,
)

#: The key of each sample's labels in ``infer``'s outputs.
LABELS = "labels"
_HINT = ("point the dataset at the reference's preprocess.py output for KiTS19 "
         "(vision/medical_imaging/3d-unet-kits19: make preprocess_data)")
_CASE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
#: Numpy's pickle helpers under numpy 1.x and 2.x names, for pickle protocols 2 to 5
#: (protocol 2 encodes bytes with ``_codecs.encode``); nothing else is a global here.
_ALLOWED = {("numpy", "ndarray"), ("numpy", "dtype"), ("_codecs", "encode")} | {
    (f"numpy.{core}.{module}", name) for core in ("core", "_core")
    for module, name in (("multiarray", "_reconstruct"), ("multiarray", "scalar"),
                         ("numeric", "_frombuffer"))}


class _ArrayUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in _ALLOWED:
            raise pickle.UnpicklingError(f"it refers to {module}.{name}")
        if module.startswith("numpy.core.") and int(np.__version__.split(".")[0]) >= 2:
            module = "numpy._core." + module.removeprefix("numpy.core.")
        return super().find_class(module, name)


def _unpickle(path: Path) -> Any:
    try:
        with path.open("rb") as handle:
            return _ArrayUnpickler(handle).load()
    except FileNotFoundError:
        raise DatasetError(f"{path} is missing", hint=_HINT) from None
    except OSError as exc:
        raise DatasetError(f"{path} cannot be read: {exc.strerror or exc}",
                           hint="check the file's permissions and the dataset path") from None
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError,
            AttributeError, IndexError) as exc:
        raise DatasetError(f"{path} is not a preprocess.py pickle ({exc})",
                           hint=_HINT) from None


@dataclass(frozen=True)
class Case:
    """One case of the index: its name, pickle and preprocessed shape (D, H, W)."""

    name: str
    path: Path
    shape: tuple[int, int, int]

    @property
    def voxels(self) -> int:
        return int(np.prod(self.shape))


def _case_shape(index_path: Path, name: str, aux: Any) -> tuple[int, int, int]:
    shape = aux.get("image_shape") if isinstance(aux, dict) else None
    if (not isinstance(shape, tuple | list) or len(shape) != 4 or shape[0] != 1
            or not all(isinstance(s, int | np.integer) for s in shape)):
        raise DatasetError(f"{index_path}: cases[{name!r}]['image_shape'] is {shape!r}, "
                           "not (1, D, H, W)", hint=_HINT)
    d, h, w = (int(s) for s in shape[1:])
    steps = strides()
    for axis, side in enumerate((d, h, w)):
        if side < ROI_SHAPE[axis] or side % steps[axis]:
            raise DatasetError(
                f"{index_path}: {name} has shape {(1, d, h, w)}; preprocess.py makes every "
                f"side at least {ROI_SHAPE[axis]} and a multiple of {steps[axis]}", hint=_HINT)
    return d, h, w


def read_index(dataset_dir: Path) -> list[Case]:
    """The cases of ``preprocessed_files.pkl``, in QSL order, each checked: its name is a
    file of ``dataset_dir``, its pickle exists and is as large as its shape needs."""
    index_path = dataset_dir / INDEX_FILE
    if not dataset_dir.is_dir():
        raise DatasetError(f"KiTS19 dataset directory {dataset_dir} does not exist", hint=_HINT)
    content = _unpickle(index_path)
    names = content.get("file_list") if isinstance(content, dict) else None
    aux = content.get("cases") if isinstance(content, dict) else None
    if not isinstance(names, list) or not names or not isinstance(aux, dict):
        raise DatasetError(f"{index_path} has no 'file_list' and 'cases' as preprocess.py "
                           "writes them", hint=_HINT)
    cases = []
    for name in names:
        if not isinstance(name, str) or not _CASE_NAME.match(name):
            raise DatasetError(f"{index_path}: file_list names {name!r}, not a case file of "
                               f"{dataset_dir}", hint="file_list holds case names such as "
                               "'case_00000' (each <name>.pkl beside the index)")
        if name not in aux:
            raise DatasetError(f"{index_path}: file_list names {name} but 'cases' has no "
                               "entry for it", hint=_HINT)
        case = Case(name, dataset_dir / f"{name}.pkl", _case_shape(index_path, name, aux[name]))
        try:
            size = case.path.stat().st_size
        except OSError:
            raise DatasetError(f"{case.path} is missing (file_list of {index_path} names "
                               f"{name})", hint=_HINT) from None
        if size < 5 * case.voxels:  # float32 image + uint8 label
            raise DatasetError(f"{case.path} has {size} bytes, fewer than its image and label "
                               f"of shape {(1, *case.shape)} need", hint=_HINT)
        cases.append(case)
    return cases


def read_case(case: Case) -> tuple[Floats, Labels]:
    """A case's image (1, D, H, W) float32 and label (D, H, W) uint8, shapes checked."""
    content = _unpickle(case.path)
    if not isinstance(content, list | tuple) or len(content) < 2:
        raise DatasetError(f"{case.path} does not hold [image, label]", hint=_HINT)
    image, label = content[0], content[1]
    want = (1, *case.shape)
    for what, array in (("image", image), ("label", label)):
        if not isinstance(array, np.ndarray) or array.shape != want:
            got = array.shape if isinstance(array, np.ndarray) else type(array).__name__
            raise DatasetError(f"{case.path}: the {what} is {got}; {INDEX_FILE} gives "
                               f"image_shape {want}", hint=_HINT)
    return image.astype(np.float32, copy=False), label[0].astype(np.uint8, copy=False)


class Kits19Data:
    """The opened KiTS19 set: cases in QSL order, each read from its pickle on use."""

    #: Volumes differ in shape (each side >= 128, a multiple of 64): staged one by one.
    varying_shapes = True

    def __init__(self, dataset_dir: Path, cases: list[Case]) -> None:
        self.dataset_dir = dataset_dir
        self.cases = cases
        self.total_count = len(cases)

    def inputs(self, index: int) -> dict[str, npt.NDArray[Any]]:
        """The case's preprocessed volume (1, D, H, W) under the model's input name."""
        image, _ = read_case(self.cases[index])
        return {INPUT_NAME: image}

    def truth(self, index: int) -> Labels:
        """The case's ground-truth labels (D, H, W)."""
        return read_case(self.cases[index])[1]

    def describe(self) -> dict[str, Any]:
        index = self.dataset_dir / INDEX_FILE
        return {
            "name": "kits19",
            "layout": "mlcommons/inference 3d-unet-kits19 preprocess.py output",
            "total": self.total_count,
            "index_file": str(index),
            "index_sha256": hashlib.sha256(index.read_bytes()).hexdigest(),
            "cases": {c.name: list(c.shape) for c in self.cases},
        }


class Kits19Task:
    """The KiTS19 3D U-Net task (``TensorTask``); ``patch_batch`` patches per model call
    (the reference sends 1; the official dynamic-batch ONNX takes any)."""

    name: ClassVar[str] = "segmentation-3d"

    def __init__(self, patch_batch: int = 1) -> None:
        self.patch_batch = patch_batch

    def open(self, dataset_dir: Path, card: Any, *, count: int | None = None) -> Kits19Data:
        cases = read_index(dataset_dir)
        return Kits19Data(dataset_dir, cases[:count] if count is not None else cases)

    def infer(self, call: ModelCall, samples: Sequence[Arrays]) -> list[Arrays]:
        def predict(patches: Floats) -> npt.NDArray[Any]:
            outputs = call({INPUT_NAME: patches})
            return outputs[OUTPUT_NAME]

        return [{LABELS: segment(np.asarray(s[INPUT_NAME], dtype=np.float32), predict,
                                 batch=self.patch_batch)} for s in samples]

    def response(self, index: int, outputs: Arrays) -> bytes:
        return np.ascontiguousarray(outputs[LABELS], dtype=np.uint8).tobytes()

    def score(self, data: TaskData, responses: Mapping[int, bytes]) -> TaskScore:
        if not isinstance(data, Kits19Data):
            raise DatasetError(f"Kits19Task.score scores a KiTS19 dataset, not a "
                               f"{type(data).__name__}", hint="pass what Kits19Task.open returned")
        scores = []
        for index, case in enumerate(data.cases):
            if index not in responses:
                raise DatasetError(f"no response for QSL index {index} ({case.name})",
                                   hint="score an accuracy-mode run, which covers every case")
            raw = responses[index]
            if len(raw) != case.voxels:
                raise DatasetError(
                    f"the response for {case.name} (QSL index {index}) has {len(raw)} bytes; "
                    f"its volume {case.shape} needs {case.voxels} (one uint8 label a voxel)",
                    hint="score the log against the dataset the run used")
            prediction = np.frombuffer(raw, dtype=np.uint8).reshape(case.shape)
            scores.append(case_dice(case.name, prediction, data.truth(index)))
        composite, kidney, tumor = mean_dice(scores)
        return TaskScore(metric="DICE", value=composite,
                         lines=(accuracy_line(composite, kidney, tumor),),
                         details={"kidney": kidney, "tumor": tumor})

    def write_stand_in(self, out: Path, *, samples: int = 6, seed: int = 0) -> StandIn:
        from suite.tasks.kits19_standin import write_stand_in

        return write_stand_in(out, samples=samples, seed=seed)
