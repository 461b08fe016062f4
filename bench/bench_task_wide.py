"""A wider variant of a task card's stand-in, for ``bench_tasks.py --wide WIDTH``.

The default stand-ins cost next to nothing a sample (bert's: about 10 us of CPU at batch
128), so a harness's fixed cost per sample, LoadGen's own included, is a large share of
their Offline rate; the real models cost hundreds of milliseconds a sample on a CPU.
This module makes a model with the same I/O contract (the same inputs and outputs, names,
dtypes and shapes) that costs more a sample: after each float output of shape
``[batch, F]`` it adds ``out + Tanh(out @ W1[F, WIDTH]) @ W2[WIDTH, F]`` (random weights;
about ``4 x F x WIDTH`` flops a sample and output). Its outputs are not the stand-in's,
so it serves performance runs only; the stand-in itself, and what its tests assert, are
unchanged. ``wide_cache`` lays out a cache directory whose stand-in of the card is the
original's dataset with the wider model, so ``suite run --stand-in`` with
``data.cache_dir`` pointing there runs it.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np


def widen(model: Path, width: int, out: Path, seed: int = 0) -> list[str]:
    """``model`` with the extra layers after each rank-2 float output, written to ``out``;
    the outputs widened (``SystemExit`` where there is none)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    proto = onnx.load(str(model))
    graph, rng = proto.graph, np.random.default_rng(seed)
    widened: list[str] = []
    for output in graph.output:
        kind = output.type.tensor_type
        dims = [d.dim_value for d in kind.shape.dim]
        if kind.elem_type != TensorProto.FLOAT or len(dims) != 2 or dims[1] <= 0:
            continue
        name, features, narrow = output.name, dims[1], f"{output.name}__narrow"
        for node in graph.node:
            node.output[:] = [narrow if o == name else o for o in node.output]
        for value in [v for v in graph.value_info if v.name == name]:
            graph.value_info.remove(value)
        scale = (1.0 / np.sqrt(features), 1.0 / np.sqrt(width))
        graph.initializer.extend([
            numpy_helper.from_array((rng.standard_normal((features, width)) * scale[0])
                                    .astype(np.float32), f"{name}__w1"),
            numpy_helper.from_array((rng.standard_normal((width, features)) * scale[1])
                                    .astype(np.float32), f"{name}__w2")])
        graph.node.extend([
            helper.make_node("MatMul", [narrow, f"{name}__w1"], [f"{name}__h"]),
            helper.make_node("Tanh", [f"{name}__h"], [f"{name}__t"]),
            helper.make_node("MatMul", [f"{name}__t", f"{name}__w2"], [f"{name}__d"]),
            helper.make_node("Add", [narrow, f"{name}__d"], [name])])
        widened.append(name)
    if not widened:
        raise SystemExit(f"{model}: no float output of shape [batch, F] to widen after "
                         "(--wide supports such cards: bert)")
    onnx.checker.check_model(proto)
    out.write_bytes(proto.SerializeToString())
    return widened


def wide_cache(stand_in_root: Path, cache: Path, width: int) -> Path:
    """A cache directory whose stand-in of the card (same directory name under
    ``stand-ins``) links the original's dataset and holds the widened model; returns the
    widened model's path."""
    root = cache / "stand-ins" / stand_in_root.name
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    (root / "dataset").symlink_to((stand_in_root / "dataset").resolve())
    model = root / "model.onnx"
    names = widen(stand_in_root / "model.onnx", width, model)
    record = json.loads((stand_in_root / "stand_in.json").read_text(encoding="utf-8"))
    record["bench_wide"] = {"width": width, "outputs": names}
    (root / "stand_in.json").write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    return model
