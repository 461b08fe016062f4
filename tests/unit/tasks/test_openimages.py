"""retinanet (``suite.tasks.openimages``): the reference's preprocessing, postprocessing,
response bytes and mAP, on fixtures in the reference's layout.

Reference figures, and how they were obtained (mlcommons/inference b66003e, pycocotools
2.0.11, numpy 2.4, opencv-python-headless 4.x of this venv):

* ``REF_STAND_IN``: ``RetinanetTask().write_stand_in(out, samples=8, seed=0)``, then the
  reference's own dataset and postprocessing code from the snapshot in /tmp:
  ``python/openimages.py`` ``OpenImages(data_path=<out>/openimages/validation/data,
  image_list=<...>/annotations/openimages-mlperf.json, image_format="NCHW",
  pre_process=dataset.pre_process_openimages_retinanet, image_size=[800, 800, 3])``
  (``get_item`` reads the cached ``.npy``), the model run by onnxruntime with the
  ``retinanet-onnxruntime`` profile's output order (boxes, labels, scores), and
  ``PostProcessOpenImagesRetinanet(False, 0.05, 800, 800, False)``, the bytes as
  ``run_one_item`` sends them (``np.array(rows, np.float32).tobytes()``). Scored by
  ``tools/accuracy-openimages.py --mlperf-accuracy-file log.json --openimages-dir
  <out>/openimages --verbose``: ``mAP=51.309%``, 2 images with no results.
* ``REF_KNOWN``: ``detection_fixtures.write_known(..., seed=381, categories=[0, 5, 17,
  263], images=14)``, scored by ``tools/accuracy-openimages.py --mlperf-accuracy-file
  mlperf_log_accuracy.json --openimages-dir <dir> --verbose``: ``mAP=32.444%``, found 15
  results, 14 images, 1 with no results, 1 dupe ignored.

Tolerance: none; inputs and response bytes are compared bit for bit (skipped, with the
reason, where the stand-in's JPEG bytes or the model's outputs differ from those the
figures were taken on: another Pillow encoder or onnxruntime build).
"""

from __future__ import annotations

import hashlib
import importlib
import json
import tomllib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from suite.errors import DatasetError
from suite.tasks import TASKS
from suite.tasks import detection as det
from suite.tasks.openimages import DEFAULTS, RetinanetTask, postprocess, preprocess
from tests.support.detection_fixtures import read_log, write_known

ROOT = Path(__file__).resolve().parents[3]

REF_STAND_IN: dict[str, Any] = {
    "jpegs": "ab5ba7c45d79b0781386898be046069943073c1e61b3c64a24ecaaa13947dc87",
    "model": "84558f094b57ea63f1695f298e6e696ca7c12589b5ecbd038a76da388ee96f21",
    "inputs": ["17aaa19b6fe1c29a", "302181577a7b96a7", "d9d26817066ec004",
               "cc4ce93abdd1fbc0", "cf9b8d98e3440163", "6e8357ef993ac0db",
               "1b5bb825f8baf53e", "edc715138b3a5ca5"],
    "responses": ["e3b0c44298fc1c14", "6e13b422c4ccda0c", "e3b0c44298fc1c14",
                  "fa790546aa49f244", "171262ac6919cb30", "6b5861f5b466792e",
                  "7a23ee02a6dba5df", "466318434b911c7a"],
    # sha256 of the model's outputs on those inputs, in sample order (what both sides
    # postprocessed; onnxruntime on another CPU may compute other floats)
    "outputs": "82453bc02ff1b18479cd70e4ab01decc00e876727f745e780042f6078d285cb1",
    "detections": [0, 1, 0, 3, 3, 2, 1, 3],
    "map_line": "mAP=51.309%",
}
REF_KNOWN = "mAP=32.444%"


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture(scope="module")
def stand_in(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return RetinanetTask().write_stand_in(tmp_path_factory.mktemp("ret"), samples=8, seed=0)


@pytest.fixture(scope="module")
def ran(stand_in: Any) -> tuple[RetinanetTask, Any, list[Any], list[Any], dict[int, bytes]]:
    """The stand-in through open, inputs, infer (onnxruntime) and response, once."""
    import onnxruntime as ort

    session = ort.InferenceSession(str(stand_in.model_path),
                                   providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    task = RetinanetTask()
    data = task.open(stand_in.dataset_dir, None)
    inputs = [data.inputs(i) for i in range(data.total_count)]
    outputs = task.infer(
        lambda feeds: dict(zip(names, session.run(None, dict(feeds)), strict=True)), inputs)
    return task, data, inputs, outputs, {i: task.response(i, o) for i, o in enumerate(outputs)}


def test_stand_in_matches_the_reference_bit_for_bit(stand_in: Any, ran: Any) -> None:
    jpegs = sorted((stand_in.dataset_dir / "validation" / "data").glob("*.jpg"))
    written = _sha(b"".join(p.read_bytes() for p in jpegs))
    if written != REF_STAND_IN["jpegs"] or _sha(stand_in.model_path.read_bytes()) != \
            REF_STAND_IN["model"]:
        pytest.skip("the stand-in's files differ from those the reference figures were taken "
                    "on (another Pillow JPEG encoder or onnx serializer); figures not comparable")
    task, data, inputs, outputs, responses = ran
    assert [_sha(x["images"].tobytes())[:16] for x in inputs] == REF_STAND_IN["inputs"]
    produced = hashlib.sha256()
    for output in outputs:
        for array in output.values():
            produced.update(np.ascontiguousarray(array).tobytes())
    if produced.hexdigest() != REF_STAND_IN["outputs"]:
        pytest.skip("onnxruntime computes other floats on this CPU than where the reference "
                    "figures were taken; the responses are not comparable")
    assert [len(r) // 28 for r in responses.values()] == REF_STAND_IN["detections"]
    assert [_sha(r)[:16] for r in responses.values()] == REF_STAND_IN["responses"]
    assert task.score(data, responses).lines[-1] == REF_STAND_IN["map_line"]


def test_map_equals_accuracy_openimages_py_on_the_same_log(tmp_path: Path) -> None:
    annotations = tmp_path / "annotations" / "openimages-mlperf.json"
    log = tmp_path / "mlperf_log_accuracy.json"
    write_known(annotations, log, seed=381, categories=[0, 5, 17, 263], images=14)
    entries, categories = det.read_annotations(annotations, "OpenImages")
    assert categories == {0, 5, 17, 263}
    score = det.coco_map(annotations, entries, read_log(log))
    assert score.lines[-1] == REF_KNOWN
    assert (score.details["images"], score.details["no_results"]) == (14, 1)


def test_stand_in_round_trip_scores_a_stable_real_map(stand_in: Any, ran: Any) -> None:
    task, data, inputs, _, responses = ran
    assert all(x["images"].shape == (3, 800, 800) and x["images"].dtype == np.float32
               for x in inputs)
    score = task.score(data, responses)
    assert 0.0 < score.value < 100.0
    assert task.score(data, dict(reversed(list(responses.items())))).value == score.value
    assert responses[2] == b""  # the image with no boxes


def test_stand_in_model_has_the_cards_io(stand_in: Any) -> None:
    import onnx

    card = tomllib.loads((ROOT / "reference_models/retinanet/model.toml").read_text())
    module, name = TASKS[card["task"]].split(":")
    assert getattr(importlib.import_module(module), name) is RetinanetTask
    assert RetinanetTask.name == card["task"]
    assert card["task_options"] == det.options(card, DEFAULTS)
    graph = onnx.load(str(stand_in.model_path)).graph
    for declared, actual in ((card["inputs"], graph.input), (card["outputs"], graph.output)):
        assert [d["name"] for d in declared] == [a.name for a in actual]
        for d, a in zip(declared, actual, strict=True):
            dims = [x.dim_value or -1 for x in a.type.tensor_type.shape.dim]
            assert dims == d["shape"]
            assert onnx.helper.tensor_dtype_to_np_dtype(a.type.tensor_type.elem_type) == \
                np.dtype(d["dtype"])


def test_preprocess_resizes_without_keeping_the_aspect_ratio() -> None:
    image = np.zeros((300, 500, 3), np.uint8)
    image[:, :250] = (255, 0, 0)  # BGR: the left half blue
    chw = preprocess(image, 800)
    assert chw.shape == (3, 800, 800) and chw.dtype == np.float32
    assert chw[2, 400, 10] == np.float32(1) and chw[0, 400, 10] == 0  # RGB: blue is channel 2
    assert chw[2, 400, 790] == 0  # the right half black: the width is stretched to 800


def test_postprocess_stops_at_the_first_score_below_threshold() -> None:
    boxes = np.float32([[80, 40, 400, 200], [0, 0, 800, 800], [10, 10, 20, 20]])
    scores = np.float32([0.9, 0.04, 0.5])  # the reference breaks at 0.04, 0.5 is never read
    rows = postprocess(boxes, scores, np.int64([263, 1, 2]), DEFAULTS)
    assert rows.tolist() == [[np.float32(40 / 800), np.float32(80 / 800), np.float32(200 / 800),
                              np.float32(400 / 800), np.float32(0.9), 263.0]]
    empty = postprocess(np.zeros((0, 4), np.float32), np.zeros(0, np.float32),
                        np.zeros(0, np.int64), DEFAULTS)
    assert det.pack(3, empty) == b""


def test_bad_dataset_directories_give_one_line(tmp_path: Path) -> None:
    task = RetinanetTask()
    with pytest.raises(DatasetError, match=r"openimages-mlperf\.json: the OpenImages MLPerf"):
        task.open(tmp_path, None)
    (tmp_path / "annotations").mkdir()
    (tmp_path / "annotations" / "openimages-mlperf.json").write_text("{not json")
    with pytest.raises(DatasetError, match="not a readable JSON file"):
        task.open(tmp_path, None)
    (tmp_path / "annotations" / "openimages-mlperf.json").write_text(json.dumps(
        {"images": [{"id": 1, "file_name": "0a.jpg", "height": 9, "width": 9}],
         "annotations": [], "categories": []}))
    with pytest.raises(DatasetError, match="validation/data: the images directory is missing"):
        task.open(tmp_path, None)
    (tmp_path / "validation" / "data").mkdir(parents=True)
    with pytest.raises(DatasetError, match=r"names 1 image\(s\) not in .* \(first: 0a\.jpg\)"):
        task.open(tmp_path, None)
