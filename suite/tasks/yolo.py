"""yolo-95 / yolo-99: YOLO11l on the COCO 2017 "safe" subset, as the MLPerf reference
(``vision/classification_and_detection/yolo/``) runs and scores it.

The dataset is the directory the reference's download gives (``yolo/README.md``):
``val2017_safe/`` (1525 JPEGs) and ``annotations/instances_val2017.json`` (the safe
annotations ``create_safe_annotations.py`` writes; its ``instances_val2017_safe.json``
name is accepted too). Sample ``i`` is ``images[i]`` of that file, as ``yolo_loadgen.py``'s
``Coco`` orders it and ``tools/accuracy-coco.py`` maps it back.

The reference predicts with Ultralytics (``YOLO(model).predict(path, conf=0.001)``, every
other argument at its default: 640, IoU 0.7, 300 detections, class-aware NMS, best class
only). On an ONNX model with a fixed input that is: OpenCV decode (BGR), letterbox to
640x640 (scale ``min(640/h, 640/w)``, each side ``round``ed, ``cv2.INTER_LINEAR``,
padding 114 split ``round(d/2 -+ 0.1)``), BGR to RGB, NCHW, float32 ``/ 255``; the output
``output0`` (1, 84, 8400) is boxes (cx, cy, w, h, input pixels) then 80 class scores;
postprocessing keeps anchors whose best score > 0.001, class-offset NMS (7680 px), the
first 300, undoes the letterbox and clips to the image. ``yolo_loadgen.py`` logs each box as
fractions of the decoded image's height and width with the COCO category id
(``COCO_80_TO_91``). Ultralytics 8.4.190 was read; ``tests/unit/tasks/test_yolo.py``
compares with it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np

from suite.errors import DatasetError
from suite.tasks import detection as det
from suite.tasks.base import Arrays, ModelCall, StandIn, TaskData, TaskScore

#: yolo_loadgen.py COCO_80_TO_91: the model's class index -> COCO category id.
COCO_80_TO_91 = (
    1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25,
    27, 28, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 46, 47, 48, 49, 50, 51,
    52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65, 67, 70, 72, 73, 74, 75, 76, 77,
    78, 79, 80, 81, 82, 84, 85, 86, 87, 88, 89, 90,
)

#: The task's constants; a card's ``[task]`` table overrides them (each sourced there).
DEFAULTS: dict[str, Any] = {
    "images_dir": "val2017_safe",
    "annotations": ["annotations/instances_val2017.json",
                    "annotations/instances_val2017_safe.json"],
    "input_name": "images",
    "output_name": "output0",
    "image_size": 640,
    "pad_value": 114,
    "conf_threshold": 0.001,
    "iou_threshold": 0.7,
    "max_det": 300,
    "max_nms": 30000,
    "max_wh": 7680,
}


def letterbox(image: det.U8, size: int, pad_value: int) -> det.F32:
    """Ultralytics' ``LetterBox(640, auto=False)`` then its ``preprocess``: BGR uint8 HWC
    to RGB float32 CHW in [0, 1]."""
    import cv2

    height, width = image.shape[:2]
    ratio = min(size / height, size / width)
    new_w, new_h = max(round(width * ratio), 1), max(round(height * ratio), 1)
    resized: Any = image
    if (width, height) != (new_w, new_h):
        resized = cv2.resize(image, (new_w, new_h), interpolation=cv2.INTER_LINEAR)
    dw, dh = (size - new_w) / 2, (size - new_h) / 2
    top, bottom = round(dh - 0.1), round(dh + 0.1)
    left, right = round(dw - 0.1), round(dw + 0.1)
    padded = cv2.copyMakeBorder(resized, top, bottom, left, right, cv2.BORDER_CONSTANT,
                                value=(pad_value,) * 3)
    chw = np.ascontiguousarray(padded[:, :, ::-1].transpose(2, 0, 1))
    return chw.astype(np.float32) / np.float32(255)


def postprocess(output: det.F32, shape: tuple[int, int], opts: Mapping[str, Any]) -> det.F32:
    """One image's ``output0`` (84, anchors) to rows (ymin, xmin, ymax, xmax, score,
    COCO category) as ``yolo_loadgen.py`` logs them, boxes as fractions of ``shape``."""
    output = np.asarray(output, dtype=np.float32)
    best = output[4:].max(axis=0)
    keep = np.flatnonzero(best > np.float32(opts["conf_threshold"]))
    pred, best = output[:, keep].T, best[keep]
    classes = pred[:, 4:].argmax(axis=1)
    if pred.shape[0] > int(opts["max_nms"]):
        top = np.argsort(-best, kind="stable")[: int(opts["max_nms"])]
        pred, best, classes = pred[top], best[top], classes[top]
    boxes = det.xywh_to_xyxy(pred[:, :4])
    offset = (classes.astype(np.float32) * np.float32(opts["max_wh"]))[:, None]
    kept = det.nms(boxes + offset, best, float(opts["iou_threshold"]), int(opts["max_det"]))
    boxes, best, classes = boxes[kept], best[kept], classes[kept]
    height, width = shape
    size = int(opts["image_size"])
    gain = min(size / height, size / width)
    new_h, new_w = max(round(height * gain), 1), max(round(width * gain), 1)
    pad_x, pad_y = round((size - new_w) / 2 - 0.1), round((size - new_h) / 2 - 0.1)
    x1 = np.clip((boxes[:, 0] - np.float32(pad_x)) / np.float32(new_w / width), 0, width)
    y1 = np.clip((boxes[:, 1] - np.float32(pad_y)) / np.float32(new_h / height), 0, height)
    x2 = np.clip((boxes[:, 2] - np.float32(pad_x)) / np.float32(new_w / width), 0, width)
    y2 = np.clip((boxes[:, 3] - np.float32(pad_y)) / np.float32(new_h / height), 0, height)
    h32, w32 = np.float32(height), np.float32(width)
    category = np.asarray([COCO_80_TO_91[c] for c in classes], dtype=np.float32)
    return np.stack([y1 / h32, x1 / w32, y2 / h32, x2 / w32, best, category],
                    axis=1).astype(np.float32)


class YoloTask:
    """The ``object-detection-yolo`` task (``TensorTask``)."""

    name: ClassVar[str] = "object-detection-yolo"

    def __init__(self) -> None:
        self.opts: dict[str, Any] = dict(DEFAULTS)
        self.data: det.DetectionData | None = None

    def open(self, dataset_dir: Path, card: Any, *, count: int | None = None) -> TaskData:
        self.opts = det.options(card, DEFAULTS)
        names = self.opts["annotations"]
        candidates = [dataset_dir / n for n in ([names] if isinstance(names, str) else names)]
        annotations = next((p for p in candidates if p.is_file()), candidates[0])
        entries, _ = det.read_annotations(annotations, "COCO safe")
        images = dataset_dir / str(self.opts["images_dir"])
        entries = entries[:count] if count else entries
        det.check_images(images, entries, annotations)
        size, pad = int(self.opts["image_size"]), int(self.opts["pad_value"])
        self.data = det.DetectionData(
            "coco2017-safe", dataset_dir, annotations, images, entries,
            str(self.opts["input_name"]), lambda image: letterbox(image, size, pad))
        return self.data

    def _opened(self) -> det.DetectionData:
        if self.data is None:
            raise DatasetError("the yolo task has no dataset open",
                                   hint="call open() before response() or score()")
        return self.data

    def infer(self, call: ModelCall, samples: Sequence[Arrays]) -> list[Arrays]:
        """One model call per image, as the reference predicts (the official export has a
        batch of 1); the outputs without their batch axis."""
        results: list[Arrays] = []
        for sample in samples:
            outputs = call({k: v[None] for k, v in sample.items()})
            results.append({k: v[0] for k, v in outputs.items()})
        return results

    def response(self, index: int, outputs: Arrays) -> bytes:
        data = self._opened()
        output = outputs[str(self.opts["output_name"])]
        return det.pack(index, postprocess(output, data.original_shape(index), self.opts))

    def score(self, data: TaskData, responses: Mapping[int, bytes]) -> TaskScore:
        opened = data if isinstance(data, det.DetectionData) else self._opened()
        return det.coco_map(opened.annotations, opened.entries, responses)

    def write_stand_in(self, out: Path, *, samples: int, seed: int) -> StandIn:
        """``out/coco_safe`` (JPEGs of coloured boxes on noise, one grayscale, one CMYK,
        one with no boxes; the safe annotation file) and ``out/yolo11l-standin.onnx``."""
        rng = np.random.default_rng(seed)
        root = out / "coco_safe"
        images: list[dict[str, Any]] = []
        annotations: list[dict[str, Any]] = []
        colours = {1: (220, 30, 30), 3: (30, 200, 40), 18: (40, 60, 230)}  # person, car, dog
        for i in range(samples):
            height, width = int(rng.integers(240, 560)), int(rng.integers(240, 640))
            rgb = rng.integers(90, 160, (height, width, 3)).astype(np.uint8)
            boxes = 0 if i == 2 else int(rng.integers(1, 4))  # sample 2 has no boxes
            for _ in range(boxes):
                category = int(rng.choice(list(colours)))
                # about the size of the model's stride-32 boxes (~120 px at 640)
                side = int(rng.integers(105, 135) * max(height, width) / 640)
                bw, bh = min(side, width - 1), min(side, height - 1)
                x, y = int(rng.integers(0, width - bw)), int(rng.integers(0, height - bh))
                rgb[y:y + bh, x:x + bw] = colours[category]
                annotations.append({"id": len(annotations) + 1, "image_id": 1000 + i,
                                    "category_id": category, "bbox": [x, y, bw, bh],
                                    "area": float(bw * bh), "iscrowd": 0})
            name = f"{1000 + i:012d}.jpg"
            mode = {0: "L", 1: "CMYK"}.get(i, "RGB")  # a grayscale and a CMYK JPEG
            det.write_jpeg(root / "val2017_safe" / name, rgb, mode)
            images.append({"id": 1000 + i, "file_name": name, "height": height,
                           "width": width, "license": 4,
                           "coco_url": f"http://images.cocodataset.org/val2017/{name}"})
        doc = {"info": {"description": "infersuite stand-in, COCO 2017 safe layout"},
               "licenses": [{"id": 4, "name": "Attribution License",
                             "url": "http://creativecommons.org/licenses/by/2.0/"}],
               "images": images, "annotations": annotations,
               "categories": [{"id": c, "name": n, "supercategory": "stand-in"}
                              for c, n in ((1, "person"), (3, "car"), (18, "dog"))]}
        (root / "annotations").mkdir(parents=True, exist_ok=True)
        (root / "annotations" / "instances_val2017.json").write_text(json.dumps(doc))
        model = out / "yolo11l-standin.onnx"
        _stand_in_model(model, rng)
        return StandIn(root, model, samples)


def _stand_in_model(path: Path, rng: np.random.Generator) -> None:
    """An ONNX model with the official I/O (``images`` (1, 3, 640, 640) float32 ->
    ``output0`` (1, 84, 8400) float32): each anchor of the 80/40/20 grids gets its cell's
    mean colour; boxes are centred on the cell, sized by brightness; class scores are a
    sigmoid of the colour (red: person, green: car, blue: dog; the rest near zero), with a
    small fixed jitter per anchor so that no two scores tie."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    centres, sizes, prior = [], [], []
    for stride, offset in ((8, -3.0), (16, -1.5), (32, 0.0)):  # the large boxes rank first
        cells = 640 // stride
        ys, xs = np.meshgrid(np.arange(cells), np.arange(cells), indexing="ij")
        centres.append(np.stack([xs.ravel(), ys.ravel()]) * stride + stride / 2)
        sizes.append(np.full((2, cells * cells), 4.0 * stride))
        prior.append(np.full(cells * cells, offset))
    weights = np.zeros((3, 80), np.float32)
    bias = np.full(80, -12.0, np.float32)
    for cls, direction in ((0, (1.0, -0.5, -0.5)), (2, (-0.5, 1.0, -0.5)), (16, (-0.5, -0.5, 1.0))):
        weights[:, cls] = np.asarray(direction) * 14.0
        bias[cls] = -7.5  # grey (and the 114 padding) scores below the 0.001 threshold
    weights[:, [0, 2, 16]] += rng.normal(0.0, 0.1, (3, 3)).astype(np.float32)
    consts = {"xy": np.concatenate(centres, 1)[None], "wh": np.concatenate(sizes, 1)[None],
              "w": weights, "b": bias,
              "prior": (np.concatenate(prior) + rng.uniform(0.0, 0.05, 8400))[None, :, None],
              "half": np.asarray([0.75], np.float32),
              "gain": np.asarray([0.5], np.float32)}
    inits = [numpy_helper.from_array(np.asarray(v, np.float32), k) for k, v in consts.items()]
    inits.append(numpy_helper.from_array(np.asarray([1, 3, -1], np.int64), "flat"))
    node = helper.make_node
    nodes = []
    for stride in (8, 16, 32):
        nodes += [node("AveragePool", ["images"], [f"p{stride}"], kernel_shape=[stride] * 2,
                       strides=[stride] * 2),
                  node("Reshape", [f"p{stride}", "flat"], [f"f{stride}"])]
    nodes += [
        node("Concat", ["f8", "f16", "f32"], ["feat"], axis=2),
        node("Transpose", ["feat"], ["feat_t"], perm=[0, 2, 1]),
        node("MatMul", ["feat_t", "w"], ["logit0"]),
        node("Add", ["logit0", "b"], ["logit1"]),
        node("Add", ["logit1", "prior"], ["logit"]),
        node("Sigmoid", ["logit"], ["prob"]),
        node("Transpose", ["prob"], ["cls"], perm=[0, 2, 1]),
        node("ReduceMean", ["feat"], ["mean"], axes=[1], keepdims=1),
        node("Mul", ["mean", "gain"], ["scaled"]),
        node("Add", ["scaled", "half"], ["factor"]),
        node("Mul", ["wh", "factor"], ["wh_out"]),
        node("Concat", ["xy", "wh_out", "cls"], ["output0"], axis=1),
    ]
    graph = helper.make_graph(
        nodes, "yolo11l_standin",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, 640, 640])],
        [helper.make_tensor_value_info("output0", TensorProto.FLOAT, [1, 84, 8400])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                              producer_name="infersuite-stand-in")
    names = {i: f"class{i}" for i in range(80)} | {0: "person", 2: "car", 16: "dog"}
    helper.set_model_props(model, {"task": "detect", "stride": "32", "batch": "1",
                                   "imgsz": "[640, 640]", "names": str(names)})
    onnx.checker.check_model(model)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))
