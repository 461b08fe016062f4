"""The run's model card and its backend, loaded: in the LoadGen child and in each worker
process (``worker_loop``), the same way."""

from __future__ import annotations

from pathlib import Path

from suite import backends, datasets
from suite.backends.base import BackendBase, BackendInfo
from suite.config.model import RunConfig
from suite.models import ModelCard, load_card
from suite.paths import find_paths


def load_model(home: Path, config: RunConfig) -> tuple[ModelCard, BackendBase, BackendInfo]:
    """The run's model card and its backend, loaded (here and in each worker process)."""
    card = load_card(find_paths(home), config.benchmark).with_model_path(
        config.data.model_path)
    backend = backends.create(config.backend, config.backend_options)
    # A backend that calibrates (TensorRT INT8) draws its samples from the card's dataset;
    # handed in here so that backends never import the datasets layer above them.
    backend.calibration_source = datasets.calibration_set
    return card, backend, backend.load(card, config.sut.max_batch_size)
