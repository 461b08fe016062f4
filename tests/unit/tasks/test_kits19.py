"""The 3d-unet task (``suite.tasks.kits19``) against the reference's own code.

Every expected figure below was printed by mlcommons/inference's code at commit b66003e
(vision/medical_imaging/3d-unet-kits19, "the reference" here), run from a snapshot
outside the repository in a virtualenv with numpy 1.26.4, scipy 1.12.0, pandas 1.5.3 and
nibabel 5.4.2 (the versions its code still runs on: ``scipy.signal.gaussian`` and
``DataFrame.append``), on the arrays of ``tests/support/kits19_fixture.py``:

* windows: ``inference_utils.get_slice_for_sliding_window(np.empty((1, 1, *shape)),
  ROI_SHAPE, SLIDE_OVERLAP_FACTOR)`` per shape;
* Gaussian map: ``inference_utils.prepare_arrays(...)[2]``; it was bit-identical to ours
  (equal sha256 of the float32 bytes, numpy 1.26 there, 2.x here); the test compares
  sampled values within one float32 ulp, because float64 ``exp`` and ``cbrt`` may round
  differently in another numpy build;
* blend: ``base_SUT.BASE_3DUNET_SUT.infer_single_query(volume(shape), "")`` with
  ``do_infer = toy_logits`` (LoadGen stubbed out): sha256 of the uint8 labels;
* DICE: ``python3 accuracy_kits.py --log_file LOG --preprocessed_data_dir DIR
  --postprocessed_data_dir OUT --num_proc 1`` on a LoadGen-format log of
  ``dice_cases()``'s predictions, ground truth saved with nibabel as ``preprocess.py``
  saves it; and the same command on the stand-in below (seed 0, 6 cases, its NIfTI files
  written by ``kits19_standin.nifti_bytes``, responses from onnxruntime 1.32).
"""

from __future__ import annotations

import hashlib
import importlib
import itertools
import os
import pickle
import struct
import tomllib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from suite.errors import DatasetError, ModelError
from suite.models import card_name
from suite.tasks import TASKS
from suite.tasks.kits19 import Kits19Data, Kits19Task
from suite.tasks.kits19_standin import nifti_bytes
from suite.tasks.kits19_window import (
    case_dice,
    class_argmax,
    gaussian_map,
    segment,
    window_starts,
)
from tests.conftest import REPO
from tests.support import kits19_fixture as fx

#: get_slice_for_sliding_window's output per shape: the product of these starts, z outermost.
REFERENCE_AXES = {
    (128, 128, 128): ([0], [0], [0]),
    (192, 128, 256): ([0, 64], [0], [0, 64, 128]),
    (128, 192, 192): ([0], [0, 64], [0, 64]),
    (320, 192, 128): ([0, 64, 128, 192], [0, 64], [0]),
    (200, 130, 129): ([0, 64], [0], [0]),  # not preprocess.py's: tails left uncovered
    (256, 256, 384): ([0, 64, 128], [0, 64, 128], [0, 64, 128, 192, 256]),
}
#: prepare_arrays' norm_patch at (z, y, x), and its float64 sum.
REFERENCE_GAUSSIAN = {
    (63, 63, 0): 0.0724397599697113, (63, 63, 7): 0.1251646727323532,
    (63, 63, 60): 0.9922179579734802, (63, 63, 63): 1.0, (64, 64, 64): 1.0,
    (0, 0, 0): 0.0003801289713010192, (0, 63, 127): 0.005247518420219421,
    (127, 127, 127): 0.0003801289713010192,
}
REFERENCE_GAUSSIAN_SUM = 314764.46225524717
#: infer_single_query's labels: sha256 of the bytes and the count per class.
REFERENCE_BLEND = {
    (192, 128, 256): ("ddbd6a01a532141675268e7f20bc18e2daebee5bd77c399e4917a16891a01145",
                      [1914793, 1367710, 3008953]),
    (128, 192, 192): ("71aeb72260a87c80718eeda2d0978109e7968bdb2f03ffa565735084b054eddc",
                      [1436057, 1025775, 2256760]),
}
#: accuracy_kits.py on dice_cases(): its printed line and summary.csv (kidney, tumor).
REFERENCE_DICE_LINE = "Accuracy: mean = 0.61004, kidney = 0.6697, tumor = 0.5504"
REFERENCE_DICE_MEAN = 0.6100359842333488
REFERENCE_DICE_CASES = {
    "case_00000": (0.8372804570891076, 0.6657506011909481),
    "case_00003": (0.8444444444446499, 1.0),
    "case_00005": (0.9970980847359313, 6.666666662222222e-10),
    "case_00400": (4.473872584088789e-12, 0.5357142857350128),
}
#: accuracy_kits.py on the stand-in (seed 0, 6 cases) with our responses.
REFERENCE_STAND_IN_LINE = "Accuracy: mean = 0.82421, kidney = 0.9457, tumor = 0.7027"
REFERENCE_STAND_IN_MEAN = 0.8242095099334862


@pytest.mark.parametrize("shape", sorted(REFERENCE_AXES))
def test_window_positions_are_the_references(shape: tuple[int, int, int]) -> None:
    assert window_starts(shape) == list(itertools.product(*REFERENCE_AXES[shape]))


def test_gaussian_map_is_the_references() -> None:
    patch = gaussian_map()
    assert patch.shape == (128, 128, 128) and patch.dtype == np.float32
    for where, value in REFERENCE_GAUSSIAN.items():
        assert patch[where] == pytest.approx(value, rel=2.0 ** -23), where
    assert float(patch.astype(np.float64).sum()) == pytest.approx(REFERENCE_GAUSSIAN_SUM,
                                                                  rel=1e-6)


@pytest.mark.parametrize("shape", fx.BLEND_SHAPES)
def test_sliding_window_labels_are_the_references(shape: tuple[int, int, int]) -> None:
    calls: list[int] = []

    def model(patches: Any) -> Any:
        calls.append(len(patches))
        return fx.toy_logits(patches)

    labels = segment(fx.volume(shape), model)
    sha, counts = REFERENCE_BLEND[shape]
    assert labels.shape == shape and labels.dtype == np.uint8
    assert np.bincount(labels.ravel(), minlength=3).tolist() == counts
    assert hashlib.sha256(labels.tobytes()).hexdigest() == sha
    assert calls == [1] * len(window_starts(shape))  # one patch a call, as the reference


def test_batched_patches_give_the_same_labels() -> None:
    shape = fx.BLEND_SHAPES[1]
    sizes: list[int] = []

    def model(patches: Any) -> Any:
        sizes.append(len(patches))
        return fx.toy_logits(patches)

    labels = segment(fx.volume(shape), model, batch=3)
    assert sizes == [3, 1]
    assert hashlib.sha256(labels.tobytes()).hexdigest() == REFERENCE_BLEND[shape][0]


@pytest.mark.parametrize("classes", [2, 3, 5])
def test_class_argmax_is_numpys_argmax_ties_and_nans_included(classes: int) -> None:
    rng = np.random.default_rng(classes)
    # few distinct values: many ties; NaNs in any class, and voxels that are all NaN (an
    # uncovered voxel's 0/0)
    scores = rng.integers(0, 3, (classes, 6, 7, 9)).astype(np.float32)
    scores[rng.random(scores.shape) < 0.15] = np.nan
    scores[:, 0, 0, :] = np.nan
    expected = np.argmax(scores, axis=0).astype(np.uint8)
    labels = class_argmax(scores)
    assert labels.dtype == np.uint8 and labels.shape == scores.shape[1:]
    assert np.array_equal(labels, expected)
    assert set(np.unique(labels).tolist()) == set(range(classes))  # every class wins somewhere


def _write_dataset(root: Path, cases: list[tuple[str, np.ndarray]],
                   index_names: list[str] | None = None) -> Path:
    """A preprocess.py-layout directory: each case's label, a zero image."""
    root.mkdir(parents=True, exist_ok=True)
    for name, truth in cases:
        with (root / f"{name}.pkl").open("wb") as handle:
            pickle.dump([np.zeros((1, *truth.shape), np.float32), truth[np.newaxis]], handle)
    aux = {name: {"case": name, "image_shape": (1, *truth.shape)} for name, truth in cases}
    names = [name for name, _ in cases] if index_names is None else index_names
    with (root / "preprocessed_files.pkl").open("wb") as handle:
        pickle.dump({"file_list": names, "cases": aux}, handle)
    return root


def test_dice_is_what_accuracy_kits_prints(tmp_path: Path) -> None:
    cases = fx.dice_cases()
    root = _write_dataset(tmp_path, [(name, truth) for name, truth, _ in cases])
    task = Kits19Task()
    data = task.open(root, None)
    responses = {i: task.response(i, {"labels": pred}) for i, (_, _, pred) in enumerate(cases)}
    score = task.score(data, responses)
    assert score.metric == "DICE"
    assert score.lines == (REFERENCE_DICE_LINE,)
    assert score.value == pytest.approx(REFERENCE_DICE_MEAN, rel=1e-12)
    for name, truth, pred in cases:
        dice = case_dice(name, pred, truth)
        assert (dice.kidney, dice.tumor) == pytest.approx(REFERENCE_DICE_CASES[name],
                                                         rel=1e-9, abs=1e-15)


def test_stand_in_round_trip_scores_what_accuracy_kits_prints(tmp_path: Path) -> None:
    import onnxruntime as ort

    task = Kits19Task(patch_batch=2)  # a dynamic batch axis, as the official model's
    stand_in = task.write_stand_in(tmp_path, samples=6, seed=0)
    data = task.open(stand_in.dataset_dir, None)
    assert data.total_count == stand_in.samples == 6
    session = ort.InferenceSession(str(stand_in.model_path),
                                   providers=["CPUExecutionProvider"])

    def call(arrays: Any) -> dict[str, Any]:
        return {"output": session.run(["output"], dict(arrays))[0]}

    responses = {}
    for index in range(data.total_count):  # cases of 1, 2 and 4 windows
        (outputs,) = task.infer(call, [data.inputs(index)])
        responses[index] = task.response(index, outputs)
        assert len(responses[index]) == data.cases[index].voxels
    score = task.score(data, responses)
    assert score.lines == (REFERENCE_STAND_IN_LINE,)
    assert score.value == pytest.approx(REFERENCE_STAND_IN_MEAN, rel=1e-9)


def test_card_and_stand_in_model_carry_the_official_contract(tmp_path: Path) -> None:
    import onnx

    card = tomllib.loads((REPO / "reference_models/3d-unet/model.toml").read_text())
    module, _, cls = TASKS[card["task"]].partition(":")
    task_cls = getattr(importlib.import_module(module), cls)
    assert task_cls is Kits19Task and task_cls.name == card["task"]
    assert {card_name("3d-unet-99"), card_name("3d-unet-99.9")} == {card["name"]}
    rules = tomllib.loads((REPO / "run_rules/v6.1.toml").read_text())["models"]
    for bench, target in card["accuracy"]["closed_target"].items():
        assert rules[bench]["targets"]["DICE"] == pytest.approx(target)
    assert card["accuracy"]["closed_target"]["3d-unet-99"] == pytest.approx(
        card["accuracy"]["reference_fp32"] * 0.99)
    model = onnx.load(str(Kits19Task().write_stand_in(tmp_path, samples=1, seed=1).model_path))
    for spec, value in ((card["inputs"][0], model.graph.input[0]),
                        (card["outputs"][0], model.graph.output[0])):
        dims = [d.dim_value or -1 for d in value.type.tensor_type.shape.dim]
        assert (value.name, dims, value.type.tensor_type.elem_type) == (
            spec["name"], spec["shape"], onnx.TensorProto.FLOAT)


def test_nifti_ground_truth_header_and_voxel_order() -> None:
    volume = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4)
    raw = nifti_bytes(volume, (1.6, 1.2, 1.2))
    assert struct.unpack_from("<i", raw, 0)[0] == 348 and raw[344:348] == b"n+1\0"
    assert struct.unpack_from("<8h", raw, 40)[:4] == (3, 2, 3, 4)
    assert struct.unpack_from("<hh", raw, 70) == (2, 8)  # uint8
    assert struct.unpack_from("<f", raw, 108)[0] == 352.0
    data = np.frombuffer(raw[352:], np.uint8).reshape(volume.shape, order="F")
    assert np.array_equal(data, volume)


def _one_line_error(root: Path, *, open_only: bool = True) -> str:
    with pytest.raises(DatasetError) as info:
        data = Kits19Task().open(root, None)
        if not open_only:
            data.inputs(0)
    message = str(info.value)
    assert "\n" not in message and info.value.hint
    return message


SMALL = np.zeros((128, 128, 128), np.uint8)


def test_bad_dataset_directories_give_one_line(tmp_path: Path) -> None:
    assert "does not exist" in _one_line_error(tmp_path / "absent")
    (tmp_path / "empty").mkdir()
    assert "preprocessed_files.pkl is missing" in _one_line_error(tmp_path / "empty")

    root = _write_dataset(tmp_path / "missing", [("case_00000", SMALL)],
                          index_names=["case_00000", "case_00001"])
    assert "'cases' has no entry" in _one_line_error(root)

    root = _write_dataset(tmp_path / "outside", [("case_00000", SMALL)],
                          index_names=["../case_00000"])
    assert "'../case_00000', not a case file" in _one_line_error(root)

    root = _write_dataset(tmp_path / "nofile", [("case_00000", SMALL)])
    os.remove(root / "case_00000.pkl")
    assert "case_00000.pkl is missing" in _one_line_error(root)


def test_wrong_shapes_give_one_line(tmp_path: Path) -> None:
    root = _write_dataset(tmp_path / "odd", [("case_00000", np.zeros((128, 128, 100),
                                                                     np.uint8))])
    assert "multiple of 64" in _one_line_error(root)

    root = _write_dataset(tmp_path / "short", [("case_00000", SMALL)])
    (root / "case_00000.pkl").write_bytes((root / "case_00000.pkl").read_bytes()[:1000])
    assert "fewer than its image and label" in _one_line_error(root)

    root = _write_dataset(tmp_path / "swapped", [("case_00000", SMALL)])
    with (root / "case_00000.pkl").open("wb") as handle:  # large enough, wrong shape
        pickle.dump([np.zeros((1, 64, 256, 128), np.float32), SMALL[np.newaxis]], handle)
    assert "image is (1, 64, 256, 128)" in _one_line_error(root, open_only=False)


def test_pickles_hold_arrays_only(tmp_path: Path) -> None:
    root = tmp_path / "hostile"
    root.mkdir()
    with (root / "preprocessed_files.pkl").open("wb") as handle:
        pickle.dump({"file_list": [os.getcwd], "cases": {}}, handle)
    assert "not a preprocess.py pickle (it refers to" in _one_line_error(root)


@pytest.mark.parametrize("protocol", [2, 3, 4, 5])
def test_pickles_of_any_protocol_and_numpy_1_names_load(tmp_path: Path, protocol: int) -> None:
    truth = np.zeros((128, 128, 192), np.uint8)
    truth[1, 2, 3] = 2
    image = np.full((1, *truth.shape), -2.2, np.float32)
    raw = pickle.dumps([image, truth[np.newaxis]], protocol=protocol)
    if protocol < 4:  # GLOBAL opcodes are text: write the names numpy 1.x pickles hold
        raw = raw.replace(b"numpy._core.", b"numpy.core.")
        assert b"numpy.core.multiarray" in raw
    (tmp_path / "case_00000.pkl").write_bytes(raw)
    aux = {"case_00000": {"image_shape": (1, 128, 128, 192)}}
    (tmp_path / "preprocessed_files.pkl").write_bytes(
        pickle.dumps({"file_list": ["case_00000"], "cases": aux}, protocol=protocol))
    data = Kits19Task().open(tmp_path, None)
    assert isinstance(data, Kits19Data)
    assert np.array_equal(data.inputs(0)["input"], image)
    assert np.array_equal(data.truth(0), truth)


def test_responses_must_cover_every_case_at_its_size(tmp_path: Path) -> None:
    root = _write_dataset(tmp_path, [("case_00000", SMALL), ("case_00003", SMALL)])
    task = Kits19Task()
    data = task.open(root, None, count=1)
    assert isinstance(data, Kits19Data) and data.total_count == 1
    with pytest.raises(DatasetError, match="has 10 bytes; its volume"):
        task.score(data, {0: b"\0" * 10})
    with pytest.raises(DatasetError, match="no response for QSL index 0"):
        task.score(data, {})
    assert task.score(data, {0: SMALL.tobytes()}).value == pytest.approx(1.0)


def test_a_model_or_prediction_of_another_shape_is_one_line() -> None:
    with pytest.raises(ModelError, match=r"output has shape \(1, 2, 128, 128, 128\)") as info:
        segment(fx.volume((128, 128, 128)), lambda p: np.zeros((1, 2, 128, 128, 128)))
    assert "\n" not in str(info.value) and info.value.hint
    with pytest.raises(DatasetError, match="is not the ground truth's"):
        case_dice("case_00000", np.zeros((2, 2, 2), np.uint8), np.zeros((2, 2, 3), np.uint8))
