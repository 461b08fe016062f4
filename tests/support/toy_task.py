"""A toy ``TensorTask`` with two inputs and two outputs, for the pipeline's task tests.

The model: ``y = (x * mask) @ W`` and ``total = sum(y, axis=1)``; inputs ``x`` (float32,
[-1, 8]) and ``mask`` (int64, [-1, 8]); outputs ``y`` (float32, [-1, WIDTH]) and ``total``
(float32, [-1, 1]). A sample's response is variable-length: ``total`` as float32, then
its first ``kept_columns(index)`` ``y`` values (1 to 4). The dataset directory holds ``x.npy``,
``mask.npy`` and ``labels.json`` (each sample's expected total and kept-column count);
the score is exact: the percentage of samples whose total matches within 1e-3 and whose
response has one ``y`` value per kept column, printed as ``accuracy=...%`` (the checker's
``acc`` pattern).

``ToyTask`` is named in a test card as ``"tests.support.toy_task:ToyTask"`` (the
third-party ``module:Class`` seam); ``WideToyTask`` has a wider ``W`` for the bench.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from suite.errors import DatasetError
from suite.tasks.base import Arrays, ModelCall, StandIn, TaskScore, split, stack

FEATURES = 8


def kept_columns(index: int) -> int:
    """How many ``y`` values sample ``index``'s response carries: 1 to 4 (variable)."""
    return index % 4 + 1


class ToyData:
    """The opened toy dataset."""

    def __init__(self, directory: Path, count: int | None) -> None:
        for name in ("x.npy", "mask.npy", "labels.json"):
            if not (directory / name).is_file():
                raise DatasetError(f"{directory / name} is missing",
                                   hint="a toy dataset holds x.npy, mask.npy and labels.json")
        self.x = np.load(directory / "x.npy")
        self.mask = np.load(directory / "mask.npy")
        labels = json.loads((directory / "labels.json").read_text(encoding="utf-8"))
        self.totals = np.asarray(labels["totals"], dtype=np.float64)
        self.kept = np.asarray(labels["kept"], dtype=np.int64)
        if self.x.ndim != 2 or self.x.shape[1] != FEATURES or self.mask.shape != self.x.shape:
            raise DatasetError(f"{directory / 'x.npy'}: shape {self.x.shape} (mask "
                               f"{self.mask.shape}), expected (N, {FEATURES}) for both",
                               hint="regenerate the dataset")
        if len(self.totals) != len(self.x):
            raise DatasetError(f"{directory / 'labels.json'}: {len(self.totals)} labels for "
                               f"{len(self.x)} samples", hint="regenerate the dataset")
        self.total_count = len(self.x) if count is None else min(count, len(self.x))

    def inputs(self, index: int) -> dict[str, npt.NDArray[Any]]:
        return {"x": self.x[index], "mask": self.mask[index]}

    def describe(self) -> dict[str, Any]:
        return {"layout": "toy x.npy/mask.npy/labels.json", "samples": self.total_count}


class ToyTask:
    """See the module docstring."""

    name: ClassVar[str] = "toy"
    width: ClassVar[int] = 8

    def open(self, dataset_dir: Path, card: Any, *, count: int | None = None) -> ToyData:
        return ToyData(dataset_dir, count)

    def infer(self, call: ModelCall, samples: Sequence[Arrays]) -> list[Arrays]:
        return split(call(stack(samples)), len(samples))

    def response(self, index: int, outputs: Arrays) -> bytes:
        total = np.asarray(outputs["total"], dtype=np.float32).reshape(1)
        kept = np.asarray(outputs["y"], dtype=np.float32)[: kept_columns(index)]
        return total.tobytes() + kept.tobytes()

    def score(self, data: Any, responses: Mapping[int, bytes]) -> TaskScore:
        good = 0
        for index, payload in responses.items():
            values = np.frombuffer(payload, dtype=np.float32)
            expected = float(data.totals[index])
            if len(values) and abs(float(values[0]) - expected) <= 1e-3 * max(1.0, abs(expected)) \
                    and len(values) - 1 == int(data.kept[index]):
                good += 1
        total = len(responses)
        value = 100.0 * good / total if total else 0.0
        return TaskScore("acc", value, (f"accuracy={value:.3f}%, good={good}, total={total}",),
                         {"good": float(good)})

    def write_stand_in(self, out: Path, *, samples: int, seed: int) -> StandIn:
        import onnx
        from onnx import TensorProto, helper, numpy_helper

        rng = np.random.default_rng(seed)
        weights = rng.integers(-3, 4, (FEATURES, self.width)).astype(np.float32)
        x = rng.integers(-8, 9, (samples, FEATURES)).astype(np.float32)
        mask = rng.integers(0, 2, (samples, FEATURES)).astype(np.int64)
        totals = ((x * mask) @ weights).sum(axis=1)
        graph = helper.make_graph(
            [helper.make_node("Cast", ["mask"], ["maskf"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["x", "maskf"], ["masked"]),
             helper.make_node("MatMul", ["masked", "W"], ["y"]),
             helper.make_node("ReduceSum", ["y", "axes"], ["total"], keepdims=1)],
            "toy",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", FEATURES]),
             helper.make_tensor_value_info("mask", TensorProto.INT64, ["n", FEATURES])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", self.width]),
             helper.make_tensor_value_info("total", TensorProto.FLOAT, ["n", 1])],
            [numpy_helper.from_array(weights, "W"),
             numpy_helper.from_array(np.array([1], dtype=np.int64), "axes")])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
        model.ir_version = 8
        dataset = out / "toy-dataset"
        dataset.mkdir(parents=True)
        np.save(dataset / "x.npy", x)
        np.save(dataset / "mask.npy", mask)
        labels = {"totals": totals.tolist(), "kept": [kept_columns(i) for i in range(samples)]}
        (dataset / "labels.json").write_text(json.dumps(labels), encoding="utf-8")
        model_path = out / "toy.onnx"
        onnx.save(model, str(model_path))
        return StandIn(dataset, model_path, samples)


class WideToyTask(ToyTask):
    """The toy task with a 8 x 1024 ``W``: enough work per sample for the bench."""

    width: ClassVar[int] = 1024


class _TrimmedData(ToyData):
    """The toy dataset with samples of varying length: each sample ends at its last
    feature whose mask is 1 (the features cut off are masked out: totals are unchanged)."""

    def inputs(self, index: int) -> dict[str, npt.NDArray[Any]]:
        kept = np.flatnonzero(self.mask[index])
        keep = int(kept[-1]) + 1 if len(kept) else 1
        return {"x": self.x[index][:keep], "mask": self.mask[index][:keep]}


class VaryingToyTask(ToyTask):
    """The toy task whose samples vary in shape (staged one by one, as 3d-unet volumes or
    whisper audio are); ``infer`` pads each to the model's 8 features with mask 0."""

    def open(self, dataset_dir: Path, card: Any, *, count: int | None = None) -> ToyData:
        return _TrimmedData(dataset_dir, count)

    def infer(self, call: ModelCall, samples: Sequence[Arrays]) -> list[Arrays]:
        padded = [{name: np.pad(sample[name], (0, FEATURES - len(sample[name])))
                   for name in ("x", "mask")} for sample in samples]
        return split(call(stack(padded)), len(samples))
