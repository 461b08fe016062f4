"""The stand-in converter (``suite.tasks.standin_torch``): each ONNX operator it takes
gives what onnxruntime gives on the same graph and inputs (run eagerly here; the export
and the five stand-ins run in tests/integration/test_task_torch.py), and any other
operator is refused by name."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the torch extra is not installed")
onnx = pytest.importorskip("onnx", reason="onnx is not installed")
ort = pytest.importorskip("onnxruntime", reason="onnxruntime is not installed")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from suite.errors import ModelError  # noqa: E402
from suite.tasks.standin_torch import graph_module  # noqa: E402

F, INT = TensorProto.FLOAT, TensorProto.INT64


def _model(nodes: list[Any], inputs: list[Any], outputs: list[Any],
           inits: dict[str, Any], opset: int = 18) -> Any:
    graph = helper.make_graph(nodes, "t", inputs, outputs, [
        numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def _both(model: Any, feeds: dict[str, Any]) -> tuple[list[Any], list[Any]]:
    session = ort.InferenceSession(model.SerializeToString())
    expected = session.run(None, feeds)
    with torch.inference_mode():
        got = graph_module(model.graph)({k: torch.from_numpy(v) for k, v in feeds.items()})
    return expected, [got[o.name].numpy() for o in model.graph.output]


_RNG = np.random.default_rng(0)
CASES = {
    "gather-cast-arith": (_model(
        [helper.make_node("Gather", ["table", "ids"], ["g"]),
         helper.make_node("Cast", ["ids"], ["f"], to=F),
         helper.make_node("Mul", ["g", "f"], ["m"]), helper.make_node("Sub", ["m", "g"], ["s"]),
         helper.make_node("Add", ["s", "f"], ["out"])],
        [helper.make_tensor_value_info("ids", INT, ["b", 5])],
        [helper.make_tensor_value_info("out", F, ["b", 5])],
        {"table": _RNG.normal(size=9).astype(np.float32)}),
        {"ids": _RNG.integers(0, 9, (3, 5))}),
    "pool-reshape-matmul-reduce": (_model(
        [helper.make_node("AveragePool", ["x"], ["p"], kernel_shape=[4, 4], strides=[4, 4]),
         helper.make_node("Reshape", ["p", "shape"], ["r"]),
         helper.make_node("Transpose", ["r"], ["t"], perm=[0, 2, 1]),
         helper.make_node("MatMul", ["t", "w"], ["mm"]),
         helper.make_node("Sigmoid", ["mm"], ["sg"]),
         helper.make_node("ReduceMean", ["sg", "axes"], ["mean"], keepdims=0),
         helper.make_node("ReduceMax", ["sg", "axes"], ["max"], keepdims=1),
         helper.make_node("ArgMax", ["sg"], ["arg"], axis=2, keepdims=0),
         helper.make_node("Concat", ["sg", "max"], ["cat"], axis=1)],
        [helper.make_tensor_value_info("x", F, [1, 3, 16, 16])],
        [helper.make_tensor_value_info(n, t, shape) for n, t, shape in
         (("mean", F, [1, 4]), ("arg", INT, [1, 16]), ("cat", F, [1, 17, 4]))],
        {"shape": np.array([1, 3, -1]), "w": _RNG.normal(size=(3, 4)).astype(np.float32),
         "axes": np.array([1])}),
        {"x": _RNG.random((1, 3, 16, 16), dtype=np.float32)}),
    "topk-compress-greater-conv": (_model(
        [helper.make_node("Conv", ["v", "cw", "cb"], ["c"], kernel_shape=[1, 1, 1]),
         helper.make_node("ReduceMean", ["c", "all"], ["flat"], keepdims=0),
         helper.make_node("TopK", ["flat", "k"], ["top", "order"], axis=0),
         helper.make_node("Greater", ["top", "floor"], ["kept"]),
         helper.make_node("Compress", ["top", "kept"], ["scores"], axis=0),
         helper.make_node("Compress", ["order", "kept"], ["labels"], axis=0)],
        [helper.make_tensor_value_info("v", F, [1, 1, 4, 4, 4])],
        [helper.make_tensor_value_info("scores", F, ["n"]),
         helper.make_tensor_value_info("labels", INT, ["n"])],
        {"cw": _RNG.normal(size=(3, 1, 1, 1, 1)).astype(np.float32),
         "cb": _RNG.normal(size=3).astype(np.float32), "all": np.array([0, 2, 3, 4]),
         "k": np.array([3]), "floor": np.array([0.0], np.float32)}),
        {"v": _RNG.random((1, 1, 4, 4, 4), dtype=np.float32)}),
    "shape-range-clip-pad": (_model(
        [helper.make_node("Shape", ["ids"], ["shape"]),
         helper.make_node("Gather", ["shape", "one"], ["length"], axis=0),
         helper.make_node("Range", ["zero", "length", "one"], ["pos"]),
         helper.make_node("Clip", ["pos", "zero", "two"], ["win"]),
         helper.make_node("Pad", ["scores", "pads"], ["padded"]),
         helper.make_node("Gather", ["padded", "win"], ["out"], axis=1)],
        [helper.make_tensor_value_info("ids", INT, ["b", "t"]),
         helper.make_tensor_value_info("scores", F, ["b", 2, 4])],
        [helper.make_tensor_value_info("out", F, ["b", "t", 4])],
        {"zero": np.array(0), "one": np.array(1), "two": np.array(2),
         "pads": np.array([0, 0, 0, 0, 1, 0])}),
        {"ids": np.zeros((2, 5), np.int64), "scores": _RNG.random((2, 2, 4), np.float32)}),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_operator_gives_what_onnxruntime_gives(case: str) -> None:
    model, feeds = CASES[case]
    expected, got = _both(model, feeds)
    for want, have in zip(expected, got, strict=True):
        assert want.shape == have.shape and want.dtype == have.dtype
        np.testing.assert_allclose(have, want, rtol=1e-6, atol=1e-6)


def test_an_operator_it_does_not_convert_is_refused_by_name() -> None:
    model = _model([helper.make_node("Relu", ["x"], ["y"])],
                   [helper.make_tensor_value_info("x", F, [2])],
                   [helper.make_tensor_value_info("y", F, [2])], {})
    with pytest.raises(ModelError, match="ONNX operator Relu"):
        graph_module(model.graph)
