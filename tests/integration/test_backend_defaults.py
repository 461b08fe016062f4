"""A torch Server run records its backend's default worker count in the run's own
provenance (config.json), so a result's "1 worker" traces to "default for torch"."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import run_cli

pytest.importorskip("torch", reason="the torch backend needs torch (pip install -e '.[torch]')")


def test_a_torch_server_run_records_default_for_torch(runs_dir: Path) -> None:
    # Few queries: what is under test is the record, not the verdict (exit 0 or 2).
    proc = run_cli("run", "--benchmark", "digits", "--scenario", "server", "--backend",
                   "torch", "--quick", "--set", "loadgen.target_qps=200", "--runs-dir",
                   str(runs_dir))
    assert proc.returncode in (0, 2), proc.stdout + proc.stderr
    [run] = [p for p in runs_dir.iterdir() if p.is_dir()]
    config = json.loads((run / "config.json").read_text())
    assert config["sut"]["workers"] == 1
    assert config["provenance"]["sut.workers"] == "default for torch"
