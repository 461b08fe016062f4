"""yolo-95 / yolo-99 (``suite.tasks.yolo``): the reference's letterbox, postprocessing,
response bytes and mAP, on fixtures in the reference's layout.

Reference figures, and how they were obtained (mlcommons/inference b66003e; Ultralytics
8.4.190 and pycocotools 2.0.11, numpy 2.4, opencv-python-headless 4.x of this venv):

* ``REF_STAND_IN``: ``YoloTask().write_stand_in(out, samples=8, seed=0)``, then the
  reference's own SUT code, ``yolo/yolo_loadgen.py`` ``Coco`` + ``Runner.enqueue`` (which
  calls ``YOLO(model).predict(path, conf=0.001)``), imported from the snapshot in /tmp with
  LoadGen's ``QuerySamplesComplete`` replaced by a capture of the response bytes, and
  Ultralytics' ``predictor.preprocess`` wrapped to hash the input tensor it built.
  torchvision's PyPI wheel needs a CUDA torch, so ``torchvision.ops.nms`` was Ultralytics'
  own ``TorchNMS.nms`` (its fallback, documented to match torchvision). The payloads were
  then written as an accuracy log and scored by ``tools/accuracy-coco.py
  --mlperf-accuracy-file log.json --coco-dir <out>/coco_safe --verbose``:
  ``mAP=8.459%``, 2 images with no results.
* ``REF_KNOWN``: ``detection_fixtures.write_known(..., seed=38, categories=[1, 3, 18, 44,
  90])`` (12 images), scored by ``tools/accuracy-coco.py --mlperf-accuracy-file
  mlperf_log_accuracy.json --coco-dir <dir> --verbose``: ``mAP=45.838%``, found 13
  results, 12 images, 1 with no results, 1 dupe ignored.

Tolerance: none. Preprocessing and response bytes are compared bit for bit (skipped, with
the reason, where the stand-in's JPEG bytes or the model's outputs differ from those the
figures were taken on: another Pillow encoder or onnxruntime build). Where two
detections have exactly equal scores, torch's argsort (not stable) may order them
differently from ours; the stand-in's scores carry a jitter so that none tie.
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

from suite.errors import ConfigError, DatasetError
from suite.models import card_name
from suite.tasks import TASKS
from suite.tasks import detection as det
from suite.tasks.yolo import COCO_80_TO_91, DEFAULTS, YoloTask, letterbox, postprocess
from tests.support.detection_fixtures import read_log, write_known

ROOT = Path(__file__).resolve().parents[3]

REF_STAND_IN: dict[str, Any] = {
    "jpegs": "536366fe56d24f7d216560c3dc1427874b5f895d4dd499307ca246886024e8ea",
    "model": "38be929a9e38fb8799a026de75b31f100a12fa3bc1cdcf10c99c0ab7d860eafe",
    "inputs": ["97a4a5150d687225", "4279bfc528ec12e0", "1ac636138960366d",
               "17d24a8fa95face8", "b2dc62588fe75031", "5326b7d19630f2be",
               "2ee0b616863a613d", "adc22e959a9148f9"],
    "responses": ["e3b0c44298fc1c14", "7b214b53358ab0f1", "e3b0c44298fc1c14",
                  "cdfa0e35e5123025", "9386a4d09d4704e1", "532d375e222a248b",
                  "cc9d797048d5a959", "6a4596b69ea7e1bd"],
    # sha256 of the model's outputs on those inputs, in sample order (what both sides
    # postprocessed; onnxruntime on another CPU may compute other floats)
    "outputs": "3db3460b3d0c187893edc1eaf1e04612baa67cd1e4854cd5e8dbca2fa90c71ff",
    "detections": [0, 234, 0, 300, 300, 300, 300, 300],
    "map_line": "mAP=8.459%",
}
REF_KNOWN = "mAP=45.838%"


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _session_call(model: Path) -> Any:
    import onnxruntime as ort

    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    return lambda feeds: dict(zip(names, session.run(None, dict(feeds)), strict=True))


@pytest.fixture(scope="module")
def stand_in(tmp_path_factory: pytest.TempPathFactory) -> Any:
    return YoloTask().write_stand_in(tmp_path_factory.mktemp("yolo"), samples=8, seed=0)


@pytest.fixture(scope="module")
def ran(stand_in: Any) -> tuple[YoloTask, Any, list[Any], list[Any], dict[int, bytes]]:
    """The stand-in through open, inputs, infer (onnxruntime) and response, once."""
    task = YoloTask()
    data = task.open(stand_in.dataset_dir, None)
    call = _session_call(stand_in.model_path)
    inputs = [data.inputs(i) for i in range(data.total_count)]
    outputs = task.infer(call, inputs)
    return task, data, inputs, outputs, {i: task.response(i, o) for i, o in enumerate(outputs)}


def test_stand_in_matches_the_reference_sut_bit_for_bit(stand_in: Any, ran: Any) -> None:
    jpegs = sorted((stand_in.dataset_dir / "val2017_safe").glob("*.jpg"))
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


def test_map_equals_accuracy_coco_py_on_the_same_log(tmp_path: Path) -> None:
    annotations = tmp_path / "annotations" / "instances_val2017.json"
    log = tmp_path / "mlperf_log_accuracy.json"
    write_known(annotations, log, seed=38, categories=[1, 3, 18, 44, 90])
    entries, _ = det.read_annotations(annotations, "COCO")
    score = det.coco_map(annotations, entries, read_log(log))
    assert score.metric == "mAP"
    assert score.lines[-1] == REF_KNOWN
    assert f"mAP={score.value:.3f}%" == REF_KNOWN
    assert (score.details["images"], score.details["no_results"]) == (12, 1)
    assert sum("Average Precision" in line for line in score.lines) == 6


def test_stand_in_round_trip_scores_a_stable_real_map(stand_in: Any, ran: Any) -> None:
    task, data, inputs, _, responses = ran
    assert data.total_count == stand_in.samples == 8
    assert all(x["images"].shape == (3, 640, 640) and x["images"].dtype == np.float32
               for x in inputs)
    first = task.score(data, responses)
    assert 0.0 < first.value < 100.0
    assert task.score(data, dict(reversed(list(responses.items())))).value == first.value
    assert responses[2] == b""  # the image with no boxes
    described = data.describe()
    assert described["total"] == 8 and len(described["annotations_sha256"]) == 64


def test_card_names_the_task_and_the_options_it_reads() -> None:
    card = tomllib.loads((ROOT / "reference_models/yolo/model.toml").read_text())
    module, name = TASKS[card["task"]].split(":")
    assert getattr(importlib.import_module(module), name) is YoloTask
    assert YoloTask.name == card["task"]
    assert card["task_options"] == det.options(card, DEFAULTS)  # every key known, all given
    assert card["accuracy"]["closed_target"] == {"yolo-95": 50.73, "yolo-99": 52.866}
    assert card_name("yolo-95") == card_name("yolo-99") == "yolo"


def test_stand_in_onnx_io(stand_in: Any) -> None:
    import onnx

    card = tomllib.loads((ROOT / "reference_models/yolo/model.toml").read_text())
    graph = onnx.load(str(stand_in.model_path)).graph
    for declared, actual in ((card["inputs"], graph.input), (card["outputs"], graph.output)):
        assert [d["name"] for d in declared] == [a.name for a in actual]
        for d, a in zip(declared, actual, strict=True):
            dims = [x.dim_value for x in a.type.tensor_type.shape.dim]
            assert dims == d["shape"]
            assert onnx.helper.tensor_dtype_to_np_dtype(a.type.tensor_type.elem_type) == \
                np.dtype(d["dtype"])


@pytest.mark.parametrize(("height", "width"), [(300, 500), (640, 200), (640, 640), (7, 3000)])
def test_letterbox_pads_with_114_around_the_scaled_image(height: int, width: int) -> None:
    image = np.full((height, width, 3), (10, 20, 30), np.uint8)  # BGR
    chw = letterbox(image, 640, 114)
    assert chw.shape == (3, 640, 640) and chw.dtype == np.float32
    scale = min(640 / height, 640 / width)
    new_h, new_w = max(round(height * scale), 1), max(round(width * scale), 1)
    top, left = round((640 - new_h) / 2 - 0.1), round((640 - new_w) / 2 - 0.1)
    inside = chw[:, top:top + new_h, left:left + new_w]
    assert np.array_equal(inside[:, 0, 0], np.float32([30, 20, 10]) / np.float32(255))  # RGB
    padding = np.ones((640, 640), bool)
    padding[top:top + new_h, left:left + new_w] = False
    assert np.all(chw[:, padding] == np.float32(114) / np.float32(255))


def test_postprocess_decodes_thresholds_nms_and_maps_classes() -> None:
    output = np.zeros((84, 8400), np.float32)
    # anchor 0: class 11 (COCO 13) at (320, 320), 100x50 input px; anchor 1 overlaps it
    # (same class, lower score: suppressed); anchor 2 the same box in class 0 (kept);
    # anchor 3 scores below 0.001 (dropped)
    output[:4, 0] = output[:4, 1] = output[:4, 2] = [320, 320, 100, 50]
    output[:4, 1] += [2, 0, 0, 0]
    output[:4, 3] = [100, 100, 20, 20]
    output[4 + 11, 0], output[4 + 11, 1], output[4 + 0, 2] = 0.9, 0.8, 0.5
    output[4 + 5, 3] = 0.0009
    rows = postprocess(output, (480, 640), DEFAULTS)  # letterbox: scale 1, pad 80 top
    assert rows.shape == (2, 6)
    assert rows[:, 5].tolist() == [COCO_80_TO_91[11], COCO_80_TO_91[0]] == [13, 1]
    expected = np.float32([(295 - 80) / 480, 270 / 640, (345 - 80) / 480, 370 / 640])
    assert np.array_equal(rows[0, :4], expected)
    assert rows[:, 4].tolist() == [np.float32(0.9), np.float32(0.5)]
    packed = det.pack(7, rows)
    record = np.frombuffer(packed, np.float32).reshape(-1, 7)
    assert record[:, 0].tolist() == [7, 7] and np.array_equal(record[:, 1:], rows)


def _naive_nms(boxes: np.ndarray, scores: np.ndarray, threshold: float) -> list[int]:
    """torchvision's CPU kernel, written from its definition: visit by score, drop a
    box whose float32 IoU with a kept one exceeds the threshold."""
    order = np.asarray(sorted(range(len(scores)), key=lambda i: -float(scores[i])))
    b = boxes[order]
    area = (b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1])
    alive = np.ones(len(order), bool)
    keep = []
    for i in range(len(order)):
        if not alive[i]:
            continue
        keep.append(int(order[i]))
        w = np.clip(np.minimum(b[i, 2], b[:, 2]) - np.maximum(b[i, 0], b[:, 0]), 0, None)
        h = np.clip(np.minimum(b[i, 3], b[:, 3]) - np.maximum(b[i, 1], b[:, 1]), 0, None)
        inter = w * h
        later = np.arange(len(order)) > i
        alive &= ~(later & (inter / (area[i] + area - inter) > np.float32(0.5)))
    return keep


@pytest.mark.parametrize("count", [1, 127, 400, 1500])  # within one block, across several
def test_nms_is_torchvisions_and_keeps_the_first_limit(count: int) -> None:
    rng = np.random.default_rng(count)
    xy = rng.uniform(0, 600, (count, 2)).astype(np.float32)
    boxes = np.concatenate([xy, xy + rng.uniform(10, 80, (count, 2)).astype(np.float32)], 1)
    scores = rng.permutation(count).astype(np.float32) / count  # no ties
    full = det.nms(boxes, scores, 0.5, 10_000)
    assert full.tolist() == _naive_nms(boxes, scores, 0.5)
    assert np.array_equal(det.nms(boxes, scores, 0.5, 40), full[:40])
    groups = (np.arange(count) % 3).astype(np.int64)  # classes: offset so they never overlap
    offset = boxes + (groups * 7680).astype(np.float32)[:, None]
    per_class = det.nms(offset, scores, 0.5, 10_000)
    assert per_class.tolist() == _naive_nms(offset, scores, 0.5)
    assert det.nms(boxes, scores, 0.5, 0).tolist() == []


def _layout(tmp_path: Path, images: list[dict[str, Any]], annotations: list[Any]) -> Path:
    (tmp_path / "val2017_safe").mkdir(parents=True)
    (tmp_path / "annotations").mkdir()
    (tmp_path / "annotations" / "instances_val2017.json").write_text(json.dumps(
        {"images": images, "annotations": annotations, "categories": [{"id": 1}]}))
    return tmp_path


def test_bad_dataset_directories_give_one_line(tmp_path: Path) -> None:
    task = YoloTask()
    with pytest.raises(DatasetError, match=r"instances_val2017\.json: the COCO safe annotation"):
        task.open(tmp_path / "empty", None)
    image = {"id": 1, "file_name": "a.jpg", "height": 4, "width": 4}
    root = _layout(tmp_path / "missing", [image], [])
    with pytest.raises(DatasetError, match=r"names 1 image\(s\) not in .*val2017_safe .*a\.jpg"):
        task.open(root, None)
    root = _layout(tmp_path / "outside", [{**image, "file_name": "../a.jpg"}], [])
    with pytest.raises(DatasetError, match="points outside the images directory"):
        task.open(root, None)
    root = _layout(tmp_path / "stray", [image], [{"image_id": 9, "bbox": [0, 0, 1, 1]}])
    with pytest.raises(DatasetError, match=r"annotations\[0\] names image_id 9"):
        task.open(root, None)
    root = _layout(tmp_path / "bad", [image], [])
    (root / "val2017_safe" / "a.jpg").write_bytes(b"not a jpeg")
    data = task.open(root, None)
    with pytest.raises(DatasetError, match=r"a\.jpg: not a decodable image") as caught:
        data.inputs(0)
    assert "\n" not in str(caught.value) and caught.value.hint
    with pytest.raises(ConfigError, match="unknown key 'conf'"):
        task.open(root, {"task_options": {"conf": 0.1}})
