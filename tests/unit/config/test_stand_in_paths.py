"""``--stand-in`` points the run at its stand-in in the run's cache directory
(``data.cache_dir``, wherever a layer sets it; the state cache if none) and at the model
file the backend loads there (onnxruntime: ``model.onnx``, torch: ``model.pt2``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from suite.config.loader import ConfigRequest, load_config
from suite.paths import find_paths


@pytest.mark.parametrize(("backend", "model"), [("onnxruntime", "model.onnx"),
                                                ("torch", "model.pt2")])
def test_a_stand_in_lies_in_the_configured_cache_dir(tmp_path: Path, backend: str,
                                                     model: str) -> None:
    request = ConfigRequest(benchmark="bert-99", scenario="offline", backend=backend,
                            stand_in=True, sets=[f"data.cache_dir={tmp_path / 'mine'}"])
    config, _ = load_config(request, find_paths())
    root = tmp_path / "mine" / "stand-ins" / "bert-seed0"
    assert config.data.cache_dir == str(tmp_path / "mine")
    assert config.data.dataset_dir == str(root / "dataset")
    assert config.data.model_path == str(root / model)


def test_a_config_file_s_cache_dir_counts_too_and_none_means_the_state_cache(
        tmp_path: Path) -> None:
    paths = find_paths()
    config_file = tmp_path / "run.toml"
    config_file.write_text(f'[data]\ncache_dir = "{tmp_path / "from-file"}"\n')
    request = ConfigRequest(benchmark="yolo-95", scenario="offline", stand_in=True,
                            config_file=config_file)
    config, _ = load_config(request, paths)
    assert config.data.dataset_dir.startswith(str(tmp_path / "from-file" / "stand-ins"))
    plain, _ = load_config(ConfigRequest(benchmark="yolo-95", scenario="offline",
                                         stand_in=True), paths)
    # resolved, as every data path is (through the stand-in's link once it exists)
    root = paths.cache / "stand-ins" / "yolo-seed0"
    assert plain.data.dataset_dir == str((root / "dataset").resolve())
