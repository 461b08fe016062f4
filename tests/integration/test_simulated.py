"""The simulated accelerator and the Server scheduler it exists to exercise, in runs.

Through the real CLI and LoadGen: a Server run records its batch sizes and never forms a
batch above the derived cap, worker processes place their calls on the LoadGen process's
devices, and a ResNet-50-shaped run stages raw uint8 pixels that the backend normalises
"on the device". No assertion depends on this machine's speed. The backend's unit tests
are in tests/unit/backends/test_simulated.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import REPO, only_run_dir, run_cli


def _status(run_dir: Path) -> dict[str, Any]:
    [status] = run_dir.glob("*/status.json")
    record: dict[str, Any] = json.loads(status.read_text(encoding="utf-8"))
    return record


def test_a_server_run_records_its_batches_and_respects_the_cap(runs_dir: Path) -> None:
    proc = run_cli("run", "--scenario", "server", "--backend", "simulated", "--quick",
                   "--set", 'backend.simulated.profile="digits-h100"',
                   "--set", "loadgen.target_qps=3000", "--set", "loadgen.min_duration_ms=1000",
                   "--set", "sut.max_batch_size=64", "--runs-dir", str(runs_dir))
    assert proc.returncode in (0, 2), proc.stderr  # INVALID on a stalled box is no error
    status = _status(only_run_dir(runs_dir))
    cap = status["derived"]["batch_cap"]
    assert 1 <= cap <= 64
    # digits-h100: 0.19 ms a call, nearly all fixed: paced, within the cap's share.
    assert 0 < status["derived"]["dispatch_interval_us"] <= 0.8 * cap / 3000 * 1e6
    batches = status["batches"]
    assert batches["input_form"] == "model"  # digits has no raw form
    assert batches["samples"] == status["samples_completed"] > 0
    largest = max(int(key.split("-")[-1]) for key in batches["size_histogram"])
    assert largest <= 1 << (cap - 1).bit_length()  # the bin holding the cap at most
    # Where the calls' time went on the device, from the run's calls only (not warm-up).
    device = status["backend"]["run"]
    assert device["calls"] == batches["batches"]
    assert device["cold_calls"] == 0  # shapes = "all": every size warmed at load
    for q in ("p50", "p90", "p99"):  # per call: device time = idle time + queued
        assert device["device_ms"][q] >= device["idle_ms"][q] >= 0.19 * 0.8
        assert device["queued_ms"][q] >= 0


def test_worker_processes_place_their_calls_on_the_loadgen_process_devices(
        runs_dir: Path) -> None:
    """With ``sut.worker_model = "processes"`` the workers share the LoadGen process's
    simulated node (``SharedDevices``): every call they make is in the run's record,
    which before stayed empty (each worker simulated a node of its own)."""
    proc = run_cli("run", "--scenario", "server", "--backend", "simulated", "--quick",
                   "--set", 'backend.simulated.profile="digits-h100"',
                   "--set", 'sut.worker_model="processes"', "--set", "sut.workers=2",
                   "--set", "loadgen.target_qps=1000", "--set", "loadgen.min_duration_ms=1000",
                   "--set", "sut.max_batch_size=16", "--runs-dir", str(runs_dir))
    assert proc.returncode in (0, 2), proc.stderr  # INVALID on a stalled box is no error
    status = _status(only_run_dir(runs_dir))
    batches = status["batches"]
    assert batches["samples"] == status["samples_completed"] > 0
    device = status["backend"]["run"]
    assert device["calls"] == batches["batches"]  # the workers' calls, not warm-up
    assert device["device_ms"]["p50"] >= device["idle_ms"]["p50"] >= 0.19 * 0.8


@pytest.fixture(scope="module")
def r50_images(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("r50sim")
    subprocess.run([sys.executable, str(REPO / "reference_models" / "resnet50" /
                                        "make_fixture.py"), "--out-dir", str(out),
                    "--no-model"], check=True, timeout=120)
    (out / "stand-in.onnx").write_bytes(b"not a model: the simulated backend loads none")
    return out


def test_resnet50_shaped_inputs_are_staged_raw_and_run_every_mode(
        r50_images: Path, runs_dir: Path, tmp_path: Path) -> None:
    proc = run_cli("run", "--benchmark", "resnet50", "--scenario", "offline", "--backend",
                   "simulated", "--quick", "--mode", "all",
                   "--set", 'backend.simulated.profile="slow-cpu"',
                   "--set", "loadgen.expected_qps=5000", "--set", "sut.max_batch_size=8",
                   "--set", f'data.cache_dir="{tmp_path / "cache"}"',
                   "--runs-dir", str(runs_dir),
                   SUITE_IMAGENET_DIR=str(r50_images / "imagenet"),
                   SUITE_RESNET50_ONNX=str(r50_images / "stand-in.onnx"))
    assert proc.returncode in (0, 2), proc.stderr
    run_dir = only_run_dir(runs_dir)
    for status_file in run_dir.glob("*/status.json"):
        status = json.loads(status_file.read_text(encoding="utf-8"))
        assert status["status"] == "completed", status
        assert status["batches"]["input_form"] == "raw"
    result = json.loads((run_dir / "result.json").read_text(encoding="utf-8"))
    assert not result["submittable"]
    assert any("simulated" in reason for reason in result["non_submittable_reasons"])

