"""The torch backend on ResNet-50 with random weights, for ``make bench-gpu``.

The resnet50 card names no torch module (the benchmark's model is the user's ONNX
file), so ``bench_gpu.py`` runs this subclass as a ``module:Class`` backend:

    python -m suite run --benchmark resnet50 --backend bench.gpu_resnet50:RandomResNet50Torch \
        --set data.model_path=/tmp/resnet50_random.pt ...

The "model file" (``data.model_path``) is the state dict ``write_weights`` saved, so
the sha256 the run records is the hash of the weights that ran (open division: they
are not the reference model). The module is ``reference_models/resnet50/model.py``
with an argmax head, answering a class index as the official ONNX model's ``ArgMax:0``.
Every option of the torch backend applies (device, dtype, shapes, tf32, ...).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

from suite.backends.pytorch import TorchBackend

REPO = Path(__file__).resolve().parent.parent


def resnet50_class() -> Any:
    """``ResNet50`` from the in-repo definition, imported by path."""
    path = REPO / "reference_models" / "resnet50" / "model.py"
    spec = importlib.util.spec_from_file_location("_bench_resnet50_model", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module.ResNet50


def write_weights(path: Path, seed: int = 0) -> None:
    """Fixed-seed random ResNet-50 weights (1001 classes) as a torch state dict."""
    import torch

    torch.manual_seed(seed)
    torch.save(resnet50_class()(classes=1001).state_dict(), path)


class RandomResNet50Torch(TorchBackend):
    """ResNet-50 v1.5 from ``model.py`` with the weights at ``data.model_path``."""

    def build_model(self, card: Any) -> Any:
        torch = self._torch
        net = resnet50_class()(classes=1001)
        net.load_state_dict(torch.load(card.onnx_path, map_location="cpu", weights_only=True))

        class ArgMaxHead(torch.nn.Module):  # type: ignore[misc]
            def __init__(self) -> None:
                super().__init__()
                self.net = net

            def forward(self, x: Any) -> Any:
                return torch.argmax(self.net(x), dim=1)

        return ArgMaxHead().eval()
