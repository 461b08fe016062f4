"""retinanet (v6.0): RetinaNet ResNeXt50-FPN 800x800 on the MLPerf OpenImages subset, as
the reference (``vision/classification_and_detection/python/``) runs and scores it.

The dataset is the directory ``tools/openimages_mlperf.sh`` (``tools/openimages.py``)
downloads: ``validation/data/<ImageID>.jpg`` and ``annotations/openimages-mlperf.json``
(COCO format, 24781 images, 264 categories with ids 0-263). Sample ``i`` is ``images[i]``
of that file, as ``python/openimages.py`` ``OpenImages`` orders it and
``tools/accuracy-openimages.py`` maps it back.

Preprocessing is ``dataset.pre_process_openimages_retinanet`` after ``cv2.imread``: the
BGR image cast to float32, BGR to RGB, ``cv2.resize`` to 800x800 (``INTER_LINEAR``, on the
float image, aspect ratio not kept), ``/ 255``, NCHW. The ONNX model
(``tools/retinanet_pytorch_to_onnx.py``: input ``images`` 1x3x800x800, outputs ``boxes``
(N, 4: xmin, ymin, xmax, ymax in input pixels), ``scores`` (N, best first), ``labels``
(N, int64 category ids)) runs one image a call (``retinanet-onnxruntime``'s
``max-batchsize`` 1). ``PostProcessOpenImagesRetinanet(False, 0.05, 800, 800, False)``
stops at the first score below 0.05 and logs float32 ``[qsl_idx, ymin/800, xmin/800,
ymax/800, xmax/800, score, label]`` per detection.
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

#: The task's constants; a card's ``[task]`` table overrides them (each sourced there).
DEFAULTS: dict[str, Any] = {
    "images_dir": "validation/data",
    "annotations": "annotations/openimages-mlperf.json",
    "input_name": "images",
    "boxes_name": "boxes",
    "scores_name": "scores",
    "labels_name": "labels",
    "image_size": 800,
    "score_threshold": 0.05,
}

#: The first MLPerf classes (tools/openimages_mlperf.sh MLPERF_CLASSES), for the stand-in.
_CLASSES = ("Airplane", "Antelope", "Apple")


def preprocess(image: det.U8, size: int) -> det.F32:
    """``pre_process_openimages_retinanet`` on a decoded BGR image: RGB float32 CHW."""
    import cv2

    rgb = cv2.cvtColor(np.asarray(image, dtype=np.float32), cv2.COLOR_BGR2RGB)
    resized = np.asarray(cv2.resize(rgb, (size, size), interpolation=cv2.INTER_LINEAR),
                         dtype=np.float32)
    resized /= np.float32(255.0)
    return np.ascontiguousarray(resized.transpose(2, 0, 1))


def postprocess(boxes: det.F32, scores: det.F32, labels: Any,
                opts: Mapping[str, Any]) -> det.F32:
    """The model's detections to rows (ymin, xmin, ymax, xmax, score, label), boxes as
    fractions of the input, up to the first score below the threshold."""
    scores = np.asarray(scores, dtype=np.float32).reshape(-1)
    low = np.flatnonzero(scores < np.float32(opts["score_threshold"]))
    count = int(low[0]) if low.size else scores.size
    box = np.asarray(boxes, dtype=np.float32).reshape(-1, 4)[:count]
    size = np.float32(opts["image_size"])
    label = np.asarray(labels).reshape(-1)[:count].astype(np.int64).astype(np.float32)
    return np.stack([box[:, 1] / size, box[:, 0] / size, box[:, 3] / size, box[:, 2] / size,
                     scores[:count], label], axis=1).astype(np.float32)


class RetinanetTask:
    """The ``object-detection-openimages`` task (``TensorTask``)."""

    name: ClassVar[str] = "object-detection-openimages"

    def __init__(self) -> None:
        self.opts: dict[str, Any] = dict(DEFAULTS)
        self.data: det.DetectionData | None = None

    def open(self, dataset_dir: Path, card: Any, *, count: int | None = None) -> TaskData:
        self.opts = det.options(card, DEFAULTS)
        annotations = dataset_dir / str(self.opts["annotations"])
        entries, _ = det.read_annotations(annotations, "OpenImages MLPerf")
        images = dataset_dir / str(self.opts["images_dir"])
        entries = entries[:count] if count else entries
        det.check_images(images, entries, annotations)
        size = int(self.opts["image_size"])
        self.data = det.DetectionData(
            "openimages-mlperf", dataset_dir, annotations, images, entries,
            str(self.opts["input_name"]), lambda image: preprocess(image, size))
        return self.data

    def infer(self, call: ModelCall, samples: Sequence[Arrays]) -> list[Arrays]:
        """One model call per image (the reference's ONNX profile has a batch of 1; the
        outputs are per image, with no batch axis)."""
        return [call({k: v[None] for k, v in sample.items()}) for sample in samples]

    def response(self, index: int, outputs: Arrays) -> bytes:
        rows = postprocess(outputs[str(self.opts["boxes_name"])],
                           outputs[str(self.opts["scores_name"])],
                           outputs[str(self.opts["labels_name"])], self.opts)
        return det.pack(index, rows)

    def score(self, data: TaskData, responses: Mapping[int, bytes]) -> TaskScore:
        opened = data if isinstance(data, det.DetectionData) else self.data
        if opened is None:
            raise DatasetError("the retinanet task has no dataset open",
                               hint="call open() before score()")
        return det.coco_map(opened.annotations, opened.entries, responses)

    def write_stand_in(self, out: Path, *, samples: int, seed: int) -> StandIn:
        """``out/openimages`` (JPEGs of coloured boxes on noise, one grayscale, one CMYK,
        one with no boxes; ``openimages-mlperf.json``) and ``out/retinanet-standin.onnx``."""
        rng = np.random.default_rng(seed)
        root = out / "openimages"
        images: list[dict[str, Any]] = []
        annotations: list[dict[str, Any]] = []
        colours = ((220, 30, 30), (30, 200, 40), (40, 60, 230))  # category 0, 1, 2
        for i in range(samples):
            height, width = int(rng.integers(240, 640)), int(rng.integers(240, 720))
            rgb = rng.integers(90, 160, (height, width, 3)).astype(np.uint8)
            for _ in range(0 if i == 2 else int(rng.integers(1, 4))):  # sample 2: no boxes
                category = int(rng.integers(0, 3))
                # at 800x800: about the model's box, centred on one of its 8x8 cells
                side, cell = int(rng.integers(90, 130)), rng.integers(0, 8, 2) * 100 + 50
                bw, bh = side * width // 800, side * height // 800
                x = int((cell[0] - side / 2) * width / 800)
                y = int((cell[1] - side / 2) * height / 800)
                rgb[y:y + bh, x:x + bw] = colours[category]
                annotations.append({"id": len(annotations) + 1, "image_id": i + 1,
                                    "category_id": category, "bbox": [x, y, bw, bh],
                                    "area": float(bw * bh), "iscrowd": 0, "IsOccluded": 0,
                                    "IsInside": 0, "IsDepiction": 0, "IsTruncated": 0,
                                    "IsGroupOf": 0})
            name = f"{rng.integers(0, 1 << 62):016x}.jpg"
            det.write_jpeg(root / "validation" / "data" / name, rgb,
                           {0: "L", 1: "CMYK"}.get(i, "RGB"))  # a grayscale, a CMYK JPEG
            images.append({"id": i + 1, "file_name": name, "height": height, "width": width,
                           "license": None, "coco_url": None})
        doc = {"info": {"dataset": "openimages_mlperf", "version": "v6 (stand-in)"},
               "licenses": [], "images": images, "annotations": annotations,
               "categories": [{"id": i, "name": n, "supercategory": None}
                              for i, n in enumerate(_CLASSES)]}
        (root / "annotations").mkdir(parents=True, exist_ok=True)
        (root / "annotations" / "openimages-mlperf.json").write_text(json.dumps(doc))
        model = out / "retinanet-standin.onnx"
        _stand_in_model(model, rng)
        return StandIn(root, model, samples)


def _stand_in_model(path: Path, rng: np.random.Generator) -> None:
    """An ONNX model with the official I/O (``images`` (1, 3, 800, 800) float32 ->
    ``boxes`` (N, 4), ``scores`` (N,), ``labels`` (N,) int64, best first): one box per
    cell of an 8x8 grid, centred on it and sized by its brightness, scored by a sigmoid of
    its mean colour (red, green, blue: categories 0, 1, 2) with a small fixed jitter;
    scores at or below 0.01 are dropped, so N varies and may be 0."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    ys, xs = np.meshgrid(np.arange(8), np.arange(8), indexing="ij")
    centres = np.stack([xs.ravel(), ys.ravel()], axis=1) * 100.0 + 50.0
    weights = np.asarray([[1.0, -0.5, -0.5], [-0.5, 1.0, -0.5], [-0.5, -0.5, 1.0]]) * 20.0
    consts = {"centres": centres, "w": weights, "b": np.full(3, -8.0),
              "jitter": rng.uniform(0.0, 0.05, (64, 1)), "size_gain": [60.0],
              "size_base": [30.0], "floor": [0.01]}
    inits = [numpy_helper.from_array(np.asarray(v, np.float32), k) for k, v in consts.items()]
    inits += [numpy_helper.from_array(np.asarray(v, np.int64), k)
              for k, v in {"flat": [3, 64], "k": [64]}.items()]
    node = helper.make_node
    nodes = [
        node("AveragePool", ["images"], ["pooled"], kernel_shape=[100, 100], strides=[100, 100]),
        node("Reshape", ["pooled", "flat"], ["feat_c"]),
        node("Transpose", ["feat_c"], ["feat"], perm=[1, 0]),
        node("MatMul", ["feat", "w"], ["logit0"]),
        node("Add", ["logit0", "b"], ["logit1"]),
        node("Add", ["logit1", "jitter"], ["logit"]),
        node("Sigmoid", ["logit"], ["prob"]),
        node("ReduceMax", ["prob"], ["best"], axes=[1], keepdims=0),
        node("ArgMax", ["prob"], ["label"], axis=1, keepdims=0),
        node("ReduceMean", ["feat"], ["mean"], axes=[1], keepdims=1),
        node("Mul", ["mean", "size_gain"], ["half0"]),
        node("Add", ["half0", "size_base"], ["half"]),
        node("Sub", ["centres", "half"], ["low"]),
        node("Add", ["centres", "half"], ["high"]),
        node("Concat", ["low", "high"], ["all_boxes"], axis=1),
        node("TopK", ["best", "k"], ["sorted", "order"], axis=0),
        node("Gather", ["all_boxes", "order"], ["sorted_boxes"], axis=0),
        node("Gather", ["label", "order"], ["sorted_labels"], axis=0),
        node("Greater", ["sorted", "floor"], ["kept"]),
        node("Compress", ["sorted_boxes", "kept"], ["boxes"], axis=0),
        node("Compress", ["sorted", "kept"], ["scores"], axis=0),
        node("Compress", ["sorted_labels", "kept"], ["labels"], axis=0),
    ]
    graph = helper.make_graph(
        nodes, "retinanet_standin",
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, [1, 3, 800, 800])],
        [helper.make_tensor_value_info("boxes", TensorProto.FLOAT, ["N", 4]),
         helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["N"]),
         helper.make_tensor_value_info("labels", TensorProto.INT64, ["N"])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                              producer_name="infersuite-stand-in")
    onnx.checker.check_model(model)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))
