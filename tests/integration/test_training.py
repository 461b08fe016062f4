"""train.py reproduces the committed model's accuracy (not its bytes)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.conftest import REPO

needs_torch = pytest.mark.skipif(importlib.util.find_spec("torch") is None,
                                 reason="torch is not installed (pip install -e '.[torch]')")


@needs_torch
@pytest.mark.slow
def test_train_py_reproduces_the_reference_accuracy(tmp_path: Path) -> None:
    script = REPO / "reference_models" / "digits" / "train.py"
    subprocess.run([sys.executable, str(script), "--out-dir", str(tmp_path)], check=True,
                   capture_output=True, text=True, timeout=600)
    committed = tomllib.loads((script.parent / "model.toml").read_text())
    retrained = tomllib.loads((tmp_path / "model.toml").read_text())
    # One validation sample is 0.222 %: allow two samples of drift across platforms.
    assert retrained["accuracy"]["reference_fp32"] == pytest.approx(
        committed["accuracy"]["reference_fp32"], abs=0.45)
    assert (tmp_path / "digits.onnx").stat().st_size > 0
    # The card written beside the new files describes them.
    from suite.models import sha256_file

    assert retrained["model"]["onnx_sha256"] == sha256_file(tmp_path / "digits.onnx")
