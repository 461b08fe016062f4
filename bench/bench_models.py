"""The ResNet-50-shaped workload for ``make bench``: built locally, never downloaded.

It reuses the ResNet-50 test fixture (``reference_models/resnet50/make_fixture.py``): a
ResNet-50 v1.5 with fixed-seed random weights and the official model's interface, plus
a small synthetic ImageNet-format directory, so our harness can run the real
``resnet50`` benchmark pipeline (open division: it is not the reference model).
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent


def fixture_module() -> Any:
    """``reference_models/resnet50/make_fixture.py``, imported by path (it is a script)."""
    spec = importlib.util.spec_from_file_location(
        "make_fixture", REPO / "reference_models" / "resnet50" / "make_fixture.py")
    assert spec is not None and spec.loader is not None
    fixture = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fixture)
    return fixture


def build_resnet50_workload(directory: Path) -> tuple[Path, Path]:
    """Write (dataset directory, model file) under ``directory``; returns both."""
    fixture = fixture_module()
    dataset = directory / "imagenet"
    dataset.mkdir(parents=True, exist_ok=True)
    fixture.write_dataset(dataset)
    model = directory / "resnet50_random.onnx"
    fixture.export_model(model)
    return dataset, model
