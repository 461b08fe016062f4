"""A stand-in's torch program: its ONNX graph, node for node, as torch ops, exported with
``torch.export`` to the file the torch backend loads (``model.pt2``).

A stand-in model is defined once, as the ONNX graph its task writes (``write_stand_in``):
this module derives the torch twin from that graph, so the two backends run the same
computation and a difference in their accuracy is a backend's, never a second
definition's. It interprets only the operators the stand-ins use (``_OPS``); any other
is a ``ModelError`` naming it. Official models are never converted here: a user brings
their own exported program (``docs/benchmarks.md``).

The exported program's contract is the torch backend's (``suite.backends.torch_task``):
``forward`` takes one dict of the card's inputs by official name and returns a dict of
its outputs by official name (dict in, dict out, as onnxruntime's named call). A graph
input dimension that ONNX names (``batch_size``, ``tokens``) stays dynamic; a fixed one
(yolo's and retinanet's batch of 1) is fixed.

torch and onnx are imported inside the functions: writing an onnxruntime stand-in needs
neither, and this file is imported only when a torch run asks for its program.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from suite.errors import ModelError

#: The file the torch backend loads for a stand-in, beside ``model.onnx``.
PROGRAM_FILE = "model.pt2"
#: Initializers at most this long are also kept as Python values: the operands that ONNX
#: passes as tensors but torch wants as numbers (shapes, axes, pads, k, clip bounds).
_STATIC_MAX = 16
#: An example size for each dynamic dimension: 0 and 1 are specialised by torch.export.
_EXAMPLE_DIM = 2


def write_program(onnx_path: Path, out: Path) -> Path:
    """``out`` (``model.pt2``): the torch program of the stand-in ONNX file ``onnx_path``,
    written atomically (a concurrent writer's complete file is as good as ours)."""
    import onnx
    import torch

    model = onnx.load(str(onnx_path))
    module = graph_module(model.graph)
    example, dynamic = _examples(model.graph, torch)
    try:
        program = torch.export.export(module, (example,), dynamic_shapes={"inputs": dynamic})
    except Exception as exc:  # torch.export raises many of its own types
        raise ModelError(f"cannot export the torch program of {onnx_path}: "
                         f"{type(exc).__name__}: {str(exc).splitlines()[0]}") from None
    tmp = out.with_name(f".{out.stem}.{os.getpid()}.tmp{out.suffix}")  # torch wants .pt2
    torch.export.save(program, str(tmp))
    os.replace(tmp, out)
    return out


def _examples(graph: Any, torch: Any) -> tuple[dict[str, Any], dict[str, dict[int, Any]]]:
    """Example inputs (zeros; a dynamic dimension at ``_EXAMPLE_DIM``) and the dynamic
    dimensions of each graph input, named as the graph names them."""
    from onnx import helper

    dims: dict[str, Any] = {}
    example, dynamic = {}, {}
    for value in graph.input:
        shape = value.type.tensor_type.shape.dim
        sizes = [d.dim_value if d.HasField("dim_value") else _EXAMPLE_DIM for d in shape]
        dtype = helper.tensor_dtype_to_np_dtype(value.type.tensor_type.elem_type)
        example[value.name] = torch.from_numpy(np.zeros(sizes, dtype=dtype))
        dynamic[value.name] = {
            axis: dims.setdefault(d.dim_param, torch.export.Dim(_dim_name(d.dim_param), min=1))
            for axis, d in enumerate(shape) if not d.HasField("dim_value")}
    return example, dynamic


def _dim_name(param: str) -> str:
    return "".join(c if c.isalnum() else "_" for c in param) or "dim"


def graph_module(graph: Any) -> Any:
    """A ``torch.nn.Module`` running ``graph``'s nodes (dict in, dict out)."""
    import torch
    from onnx import helper, numpy_helper

    class _Graph(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.static: dict[str, Any] = {}
            self.buffers_by_name: dict[str, str] = {}
            for index, init in enumerate(graph.initializer):
                array = numpy_helper.to_array(init)
                if array.size <= _STATIC_MAX:
                    self.static[init.name] = array
                buffer = f"init{index}"
                self.register_buffer(buffer, torch.from_numpy(array.copy()))
                self.buffers_by_name[init.name] = buffer
            self.nodes = [(node.op_type, list(node.input), list(node.output),
                           {a.name: helper.get_attribute_value(a) for a in node.attribute})
                          for node in graph.node]
            for op, *_ in self.nodes:
                if op not in _OPS:
                    raise ModelError(f"the stand-in graph {graph.name!r} uses ONNX operator "
                                     f"{op}, which suite.tasks.standin_torch does not convert")
            self.outputs = [value.name for value in graph.output]

        def forward(self, inputs: dict[str, Any]) -> dict[str, Any]:
            values: dict[str, Any] = dict(inputs)
            for name, buffer in self.buffers_by_name.items():
                values[name] = getattr(self, buffer)
            for op, names, outs, attrs in self.nodes:
                args = [values[n] if n else None for n in names]
                consts = [self.static.get(n) for n in names]
                result = _OPS[op](torch, args, consts, attrs)
                for name, value in zip(outs, result, strict=False):
                    values[name] = value
            return {name: values[name] for name in self.outputs}

    return _Graph()


Op = Callable[[Any, list[Any], list[Any], dict[str, Any]], Sequence[Any]]


def _static(consts: list[Any], index: int, op: str) -> list[int]:
    """A static operand (an initializer's value) as Python ints."""
    value = consts[index] if index < len(consts) else None
    if value is None:
        raise ModelError(f"ONNX {op}: operand {index} must be a small initializer here")
    return [int(v) for v in np.asarray(value).reshape(-1)]


def _gather(torch: Any, a: list[Any], c: list[Any], at: dict[str, Any]) -> Sequence[Any]:
    data, indices, axis = a[0], a[1], int(at.get("axis", 0))
    if isinstance(data, tuple):  # a Shape's dimensions: a static index picks one
        return [data[_static(c, 1, "Gather")[0]]]
    axis %= data.dim()
    picked = data.index_select(axis, indices.reshape(-1))
    return [picked.reshape(*data.shape[:axis], *indices.shape, *data.shape[axis + 1:])]


def _reshape(torch: Any, a: list[Any], c: list[Any], at: dict[str, Any]) -> Sequence[Any]:
    shape = _static(c, 1, "Reshape")
    return [a[0].reshape([a[0].shape[i] if s == 0 else s for i, s in enumerate(shape)])]


def _reduce(name: str) -> Op:
    def op(torch: Any, a: list[Any], c: list[Any], at: dict[str, Any]) -> Sequence[Any]:
        axes = list(at["axes"]) if "axes" in at else _static(c, 1, f"Reduce{name}")
        keep = bool(at.get("keepdims", 1))
        x = a[0]
        if name == "Mean":
            return [x.mean(dim=axes, keepdim=keep)]
        return [x.amax(dim=axes, keepdim=keep)]
    return op


def _conv(torch: Any, a: list[Any], c: list[Any], at: dict[str, Any]) -> Sequence[Any]:
    conv = {3: torch.nn.functional.conv1d, 4: torch.nn.functional.conv2d,
            5: torch.nn.functional.conv3d}[a[0].dim()]
    spatial = a[0].dim() - 2
    if any(at.get("pads", [0] * 2 * spatial)) or at.get("auto_pad", b"NOTSET") != b"NOTSET":
        raise ModelError("ONNX Conv: padding is not converted")
    return [conv(a[0], a[1], a[2] if len(a) > 2 else None,
                 stride=list(at.get("strides", [1] * spatial)),
                 dilation=list(at.get("dilations", [1] * spatial)),
                 groups=int(at.get("group", 1)))]


def _average_pool(torch: Any, a: list[Any], c: list[Any], at: dict[str, Any]) -> Sequence[Any]:
    if any(at.get("pads", [])) or at.get("auto_pad", b"NOTSET") != b"NOTSET":
        raise ModelError("ONNX AveragePool: padding is not converted")
    pool = {4: torch.nn.functional.avg_pool2d, 5: torch.nn.functional.avg_pool3d}[a[0].dim()]
    kernel = list(at["kernel_shape"])
    return [pool(a[0], kernel, stride=list(at.get("strides", kernel)))]


def _topk(torch: Any, a: list[Any], c: list[Any], at: dict[str, Any]) -> Sequence[Any]:
    k = _static(c, 1, "TopK")[0]
    values, indices = torch.topk(a[0], k, dim=int(at.get("axis", -1)),
                                 largest=bool(at.get("largest", 1)),
                                 sorted=bool(at.get("sorted", 1)))
    return [values, indices]


def _compress(torch: Any, a: list[Any], c: list[Any], at: dict[str, Any]) -> Sequence[Any]:
    if "axis" not in at:
        raise ModelError("ONNX Compress without an axis is not converted")
    kept = torch.nonzero(a[1]).reshape(-1)
    return [a[0].index_select(int(at["axis"]) % a[0].dim(), kept)]


def _pad(torch: Any, a: list[Any], c: list[Any], at: dict[str, Any]) -> Sequence[Any]:
    if at.get("mode", b"constant") != b"constant" or (len(a) > 2 and a[2] is not None):
        raise ModelError("ONNX Pad: only constant zero padding is converted")
    pads = _static(c, 1, "Pad")
    rank = len(pads) // 2
    flat: list[int] = []
    for axis in reversed(range(rank)):  # torch: the last axis first, (begin, end) each
        flat += [pads[axis], pads[axis + rank]]
    return [torch.nn.functional.pad(a[0], flat)]


def _range(torch: Any, a: list[Any], c: list[Any], at: dict[str, Any]) -> Sequence[Any]:
    start, step = _static(c, 0, "Range")[0], _static(c, 2, "Range")[0]
    limit = a[1] if c[1] is None else _static(c, 1, "Range")[0]
    return [torch.arange(start, limit, step, dtype=torch.int64)]


def _clip(torch: Any, a: list[Any], c: list[Any], at: dict[str, Any]) -> Sequence[Any]:
    low = _static(c, 1, "Clip")[0] if len(c) > 1 and c[1] is not None else None
    high = _static(c, 2, "Clip")[0] if len(c) > 2 and c[2] is not None else None
    return [a[0].clamp(low, high)]


def _cast(torch: Any, a: list[Any], c: list[Any], at: dict[str, Any]) -> Sequence[Any]:
    from onnx import helper

    dtype = helper.tensor_dtype_to_np_dtype(int(at["to"]))
    return [a[0].to(torch.from_numpy(np.zeros(0, dtype=dtype)).dtype)]


_OPS: dict[str, Op] = {
    "Add": lambda t, a, c, at: [a[0] + a[1]],
    "Sub": lambda t, a, c, at: [a[0] - a[1]],
    "Mul": lambda t, a, c, at: [a[0] * a[1]],
    "MatMul": lambda t, a, c, at: [t.matmul(a[0], a[1])],
    "Sigmoid": lambda t, a, c, at: [t.sigmoid(a[0])],
    "Greater": lambda t, a, c, at: [a[0] > a[1]],
    "Transpose": lambda t, a, c, at: [a[0].permute(list(at["perm"]))],
    "Concat": lambda t, a, c, at: [t.cat(a, dim=int(at["axis"]))],
    "ArgMax": lambda t, a, c, at: [t.argmax(a[0], dim=int(at.get("axis", 0)),
                                            keepdim=bool(at.get("keepdims", 1)))],
    "Shape": lambda t, a, c, at: [tuple(a[0].shape)],
    "Cast": _cast, "Gather": _gather, "Reshape": _reshape, "ReduceMean": _reduce("Mean"),
    "ReduceMax": _reduce("Max"), "Conv": _conv, "AveragePool": _average_pool,
    "TopK": _topk, "Compress": _compress, "Pad": _pad, "Range": _range, "Clip": _clip,
}
