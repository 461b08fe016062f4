"""The run's model card and its backend, loaded: in the LoadGen child and in each worker
process (``worker_loop``), the same way.

A child started early (``suite.harness.child_start``) may ``preload`` the model as soon as
the parent has resolved the config, while the parent stages the dataset and the run
directory; ``load_model`` then hands that load to the test whose config it was made for.
"""

from __future__ import annotations

import threading
from pathlib import Path

from suite import backends, datasets
from suite.backends.base import BackendBase, BackendInfo
from suite.config.model import RunConfig
from suite.models import ModelCard, load_card
from suite.paths import find_paths

Loaded = tuple[ModelCard, BackendBase, BackendInfo]

#: Backends whose model ``preload`` loads before the spec: quick loads only. The load runs
#: on a thread, so the test's heartbeat starts on time and beats while the test waits for
#: it; still, a slow load (a TensorRT build can take many minutes) stays in the test.
PRELOADED_BACKENDS = frozenset({"onnxruntime"})
#: (the config's JSON, home, the load) of a ``preload``: taken by the first ``load_model``.
_preloaded: tuple[str, Path, Loaded] | None = None
#: The thread of a ``preload`` still loading (``load_model`` waits for it).
_preloading: threading.Thread | None = None


def preload(home: Path, config: RunConfig) -> bool:
    """Start loading the run's model ahead of the test's spec, on a thread, where its
    backend loads quickly (``PRELOADED_BACKENDS``); whether it started. A failure is left
    for the test's own load, which reports it with the stage and the file."""
    global _preloaded, _preloading
    _preloaded = None
    if config.backend not in PRELOADED_BACKENDS:
        return False

    def load() -> None:
        global _preloaded
        try:
            _preloaded = (config.model_dump_json(), home, _load(home, config))
        except Exception:  # reported by the test's own load
            _preloaded = None

    _preloading = threading.Thread(target=load, name="model-preload", daemon=True)
    _preloading.start()
    return True


def load_model(home: Path, config: RunConfig) -> Loaded:
    """The run's model card and its backend, loaded (here and in each worker process);
    the ``preload`` of the same config and home, if there is one (waited for)."""
    global _preloaded, _preloading
    if _preloading is not None:
        _preloading.join()
        _preloading = None
    held, _preloaded = _preloaded, None
    if held is not None and held[1] == home and held[0] == config.model_dump_json():
        return held[2]
    return _load(home, config)


def _load(home: Path, config: RunConfig) -> Loaded:
    card = load_card(find_paths(home), config.benchmark).with_model_path(
        config.data.model_path)
    backend = backends.create(config.backend, config.backend_options)
    # A backend that calibrates (TensorRT INT8) draws its samples from the card's dataset;
    # handed in here so that backends never import the datasets layer above them.
    backend.calibration_source = datasets.calibration_set
    return card, backend, backend.load(card, config.sut.max_batch_size)
