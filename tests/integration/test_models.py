"""The model card and the sha256 gate in front of every run."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import run_cli


@pytest.mark.parametrize("damage", ["tamper", "delete"])
def test_cli_refuses_a_bad_model_with_exit_1(suite_home: Path, runs_dir: Path,
                                             damage: str) -> None:
    onnx = suite_home / "reference_models" / "digits" / "digits.onnx"
    if damage == "tamper":
        onnx.write_bytes(onnx.read_bytes()[:-1] + b"\x00")
    else:
        onnx.unlink()
    proc = run_cli("run", "--quick", "--runs-dir", str(runs_dir), SUITE_HOME=str(suite_home))
    assert proc.returncode == 1
    assert "digits.onnx" in proc.stderr
    assert list(runs_dir.iterdir()) == []

