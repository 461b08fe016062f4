"""A backend that raises or hangs, and Ctrl-C: the run ends, says where its logs are,
and keeps them. Real LoadGen, real child processes."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from suite.results import RunResult
from tests.conftest import REPO, cli_env, interrupt_once_loadgen_runs, only_run_dir, run_cli

FAULTS = "tests.support.fault_backends:"  # the backends a run imports by module:Class

FAST_FAIL = ["--set", "sut.watchdog_timeout_s=2", "--set", "sut.drain_grace_s=1"]
PROCESSES = ["--set", "sut.worker_model=processes", "--workers", "2"]


def _check_failed_run(proc: subprocess.CompletedProcess[str], runs_dir: Path,
                      kind: str) -> RunResult:
    assert proc.returncode == 1, proc.stdout + proc.stderr
    run_dir = only_run_dir(runs_dir)
    test_dir = run_dir / "performance"
    assert str(test_dir) in proc.stderr  # the message names where the logs are
    result = RunResult.load(run_dir / "result.json")
    assert result.status.value == "FAILED" and result.exit_code == 1
    [test] = result.tests
    assert test.failures and test.failures[0]["kind"] == kind
    # The count is the sum of the recorded failures (never a separate guess); a failed
    # batch costs samples, while a watchdog drain completes what was outstanding empty
    # and records the stall itself.
    recorded = sum(f["samples"] for f in test.failures)
    assert test.failed_samples == recorded if len(test.failures) < 20 else \
        test.failed_samples >= recorded  # the evidence keeps the first 20 failures
    if kind != "watchdog_timeout":
        assert test.failed_samples >= 1
    # LoadGen's logs are kept, next to the child's status and output.
    assert (test_dir / "mlperf_log_detail.txt").is_file()
    assert (test_dir / "harness.log").is_file()
    status = json.loads((test_dir / "status.json").read_text())
    assert status["status"] == "failed"
    assert (run_dir / "STATUS").read_text().startswith("FAILED")
    return result


@pytest.mark.parametrize("scenario", ["offline", "server", "singlestream"])
def test_backend_that_raises_fails_the_run(scenario: str, runs_dir: Path) -> None:
    proc = run_cli("run", "--scenario", scenario, "--quick", "--runs-dir", str(runs_dir),
                   "--backend", FAULTS + "RaisingBackend", *FAST_FAIL)
    result = _check_failed_run(proc, runs_dir, "backend_error")
    assert "injected failure" in result.tests[0].message
    assert "injected failure" in proc.stderr


def test_a_worker_process_that_raises_fails_the_run(runs_dir: Path) -> None:
    proc = run_cli("run", "--scenario", "server", "--quick", "--runs-dir", str(runs_dir),
                   "--backend", FAULTS + "RaisingBackend", *PROCESSES, *FAST_FAIL)
    result = _check_failed_run(proc, runs_dir, "backend_error")
    assert "worker process" in result.tests[0].message
    assert "injected failure" in result.tests[0].message


def test_a_worker_process_that_dies_fails_the_run(runs_dir: Path) -> None:
    proc = run_cli("run", "--scenario", "server", "--quick", "--runs-dir", str(runs_dir),
                   "--backend", FAULTS + "ExitingBackend", *PROCESSES, *FAST_FAIL,
                   timeout=120)
    result = _check_failed_run(proc, runs_dir, "worker_error")
    assert "exited with code 3" in result.tests[0].message


def _worker_processes() -> set[int]:
    """PIDs of live multiprocessing spawn children (the Server worker processes)."""
    pids = set()
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if b"--multiprocessing-fork" in cmdline.read_bytes():
                pids.add(int(cmdline.parent.name))
        except OSError:
            continue  # it exited while we looked
    return pids


@pytest.mark.skipif(sys.platform != "linux", reason="reads /proc to find worker processes")
def test_a_hung_worker_process_is_drained_and_killed_with_the_run(runs_dir: Path) -> None:
    before = _worker_processes()
    proc = run_cli("run", "--scenario", "server", "--quick", "--runs-dir", str(runs_dir),
                   "--backend", FAULTS + "HangingBackend", *PROCESSES, *FAST_FAIL,
                   timeout=120)
    result = _check_failed_run(proc, runs_dir, "watchdog_timeout")
    assert "did not answer" in result.tests[0].message
    deadline = time.monotonic() + 10
    while (left := _worker_processes() - before) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not left, f"worker processes outlived the run: {left}"


@pytest.mark.parametrize("scenario", ["offline", "singlestream"])
def test_backend_that_hangs_is_stopped_by_the_watchdog(scenario: str, runs_dir: Path) -> None:
    started = time.monotonic()
    # The hang must come under LoadGen: an explicit Offline rate skips the warm-up probe,
    # which would use up the healthy batches (a probe that hangs keeps the guess:
    # tests/unit/harness/test_offline_rate.py).
    rate = ["--expected-qps", "100000"] if scenario == "offline" else []
    proc = run_cli("run", "--scenario", scenario, "--quick", "--runs-dir", str(runs_dir),
                   "--backend", FAULTS + "HangingBackend", *FAST_FAIL, *rate, timeout=120)
    result = _check_failed_run(proc, runs_dir, "watchdog_timeout")
    assert "did not answer" in result.tests[0].message
    assert time.monotonic() - started < 100  # generous: it must end, not be fast


def _start_and_interrupt(runs_dir: Path, scenario: str) -> subprocess.CompletedProcess[str]:
    args = [sys.executable, "-m", "suite", "run", "--scenario", scenario, "--runs-dir",
            str(runs_dir), "--backend", FAULTS + "SlowBackend",
            "--set", "loadgen.min_duration_ms=120000", "--set", "sut.drain_grace_s=1",
            "--set", "loadgen.expected_qps=1000", "--set", "loadgen.target_qps=200",
            "--set", "sut.max_batch_size=1"]  # 2 ms per sample: still running when interrupted
    proc = subprocess.Popen(args, cwd=REPO, env=cli_env(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    stdout, stderr = interrupt_once_loadgen_runs(proc, runs_dir)
    return subprocess.CompletedProcess(args, proc.returncode, stdout, stderr)


@pytest.mark.parametrize("scenario", ["offline", "server"])
def test_ctrl_c_exits_130_and_keeps_partial_logs(scenario: str, runs_dir: Path) -> None:
    proc = _start_and_interrupt(runs_dir, scenario)
    assert proc.returncode == 130, proc.stdout + proc.stderr
    run_dir = only_run_dir(runs_dir)
    assert "interrupted" in proc.stderr and str(run_dir) in proc.stderr
    result = RunResult.load(run_dir / "result.json")
    assert result.status.value == "INTERRUPTED" and result.exit_code == 130
    test_dir = run_dir / "performance"
    assert (test_dir / "mlperf_log_detail.txt").stat().st_size > 0
    assert json.loads((test_dir / "status.json").read_text())["status"] == "interrupted"


def test_setup_failure_is_reported_with_the_run_directory(runs_dir: Path) -> None:
    proc = run_cli("run", "--quick", "--runs-dir", str(runs_dir),
                   "--backend", FAULTS + "BrokenLoadBackend")
    assert proc.returncode == 1
    run_dir = only_run_dir(runs_dir)
    result = RunResult.load(run_dir / "result.json")
    assert "setup failed" in result.tests[0].message
    assert "weights are corrupt" in proc.stderr
