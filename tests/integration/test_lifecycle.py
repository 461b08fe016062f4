"""The run's lifecycle on the parent side, through real child processes and LoadGen:
a long setup stays alive by its heartbeat, a setup that never ends is bounded, a
performance test without LoadGen's verdict fails, an interrupted test shows no metric,
and a full disk ends the run with one line and a consistent run directory."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from suite import api
from suite.config.loader import ConfigRequest, RunConfig
from suite.harness import runner
from suite.logs import DETAIL_LOG
from suite.reports.table import results_table, run_notes
from suite.results import RunResult, Status, TestResult
from suite.scenarios import Mode
from tests.conftest import REPO, cli_env, only_run_dir, speed_free_offline
from tests.support.lifecycle_backends import BATCH_S

FAST = ["sut.watchdog_timeout_s=2", "sut.drain_grace_s=1"]


def _prepare(backend: str, runs_dir: Path, *sets: str):  # type: ignore[no-untyped-def]
    request = ConfigRequest(benchmark="digits", scenario="offline", backend=backend,
                            mode="performance", quick=True, sets=[*FAST, *sets],
                            runs_dir=runs_dir)
    return api.prepare(request)


def test_a_setup_longer_than_the_liveness_limit_stays_alive_by_its_heartbeat(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # Silence limit while beating: 2 + 1 + 1 = 4 s; the model load takes 10 s.
    monkeypatch.setattr(runner, "LIVENESS_SLACK_S", 1.0)
    monkeypatch.setattr(runner, "STARTUP_ALLOWANCE_S", 60.0)
    # One worker of 64-sample batches of at least BATCH_S: at most 64k samples/s, so a
    # query sized at that ceiling outlasts its min_duration on any machine.
    ceiling = 64 / BATCH_S
    ready = _prepare("tests.support.lifecycle_backends:SlowLoadBackend",
                     tmp_path, "sut.workers=1", "sut.max_batch_size=64",
                     f"loadgen.expected_qps={ceiling:.0f}")
    config, paths = ready.config, ready.paths
    stages: list[str] = []
    beats: list[int] = []
    test_dir = tmp_path / "performance"
    test_dir.mkdir()
    test = runner.run_in_child(config, Mode.PERFORMANCE, test_dir, paths.home,
                               on_progress=lambda done, expected, elapsed: beats.append(done),
                               on_stage=stages.append)
    assert test.status is Status.VALID, test.message
    assert stages[:1] == ["loading model"] and "running" in stages, stages
    assert stages.index("loading model") < stages.index("running")
    assert beats, "no progress relayed once LoadGen ran"


def test_a_setup_that_never_ends_is_killed_at_the_setup_bound(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner, "SETUP_TIMEOUT_S", 6.0)
    ready = _prepare("tests.support.lifecycle_backends:EndlessLoadBackend", tmp_path)
    config, paths = ready.config, ready.paths
    test_dir = tmp_path / "performance"
    test_dir.mkdir()
    test = runner.run_in_child(config, Mode.PERFORMANCE, test_dir, paths.home)
    assert test.status is Status.FAILED
    assert "setup did not finish within 6 s (stage: loading model)" in test.message


@pytest.fixture(scope="module")
def finished_test(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The performance directory of a real, completed quick run (null backend).

    VALID however fast the machine (``SPEED_FREE_OFFLINE``): a query sized from an
    expected rate once ended before min_duration on a machine faster than the guess."""
    runs = tmp_path_factory.mktemp("runs")
    proc = subprocess.run(
        [sys.executable, "-m", "suite", "run", "--quick", "--backend", "null",
         *speed_free_offline(), "--runs-dir", str(runs)], cwd=REPO,
        env=cli_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return only_run_dir(runs) / "performance"


def _collect(finished: Path, tmp_path: Path, change: str) -> tuple[Path, TestResult]:
    test_dir = tmp_path / "performance"
    shutil.copytree(finished, test_dir)
    detail = test_dir / DETAIL_LOG
    if change == "missing":
        detail.unlink()
    elif change == "truncated":  # cut before LoadGen's verdict
        lines = detail.read_text().splitlines(keepends=True)
        detail.write_text("".join(lines[: len(lines) // 3]))
    elif change == "garbage":
        detail.write_bytes(b"\x00\xff not a LoadGen log\n" * 100)
    elif change == "interrupted":
        status = json.loads((test_dir / "status.json").read_text())
        (test_dir / "status.json").write_text(json.dumps(status | {"status": "interrupted"}))
    config = RunConfig.model_validate_json((finished.parent / "config.json").read_text())
    return detail, runner.collect_test(config, Mode.PERFORMANCE, test_dir, 0, False)


@pytest.mark.parametrize("change", ["missing", "truncated", "garbage"])
def test_a_performance_test_without_loadgens_verdict_fails_naming_the_log(
        finished_test: Path, tmp_path: Path, change: str) -> None:
    detail, test = _collect(finished_test, tmp_path, change)
    assert test.status is Status.FAILED, test
    assert str(detail) in test.message
    assert test.performance is None


def test_the_intact_log_is_valid(finished_test: Path, tmp_path: Path) -> None:
    _, test = _collect(finished_test, tmp_path, "none")
    assert test.status is Status.VALID and test.performance is not None


def test_an_interrupted_test_carries_no_metric_and_no_advice(
        finished_test: Path, tmp_path: Path) -> None:
    _, test = _collect(finished_test, tmp_path, "interrupted")
    assert test.status is Status.INTERRUPTED and test.performance is None
    # A result.json from before: an INTERRUPTED row with a drain-inflated INVALID summary.
    result = RunResult.load(finished_test.parent / "result.json")
    [valid] = result.tests
    assert valid.performance is not None
    inflated = valid.performance.model_copy(update={
        "metric_value": 516_659.0, "result_validity": "INVALID", "min_duration_met": False})
    for status in (Status.INTERRUPTED, Status.FAILED):
        row = valid.model_copy(update={"status": status, "performance": inflated,
                                       "message": "interrupted (SIGTERM)"})
        shown = result.model_copy(update={"status": status, "tests": [row]})
        cells = [str(c) for column in results_table([shown]).columns for c in column.cells]
        assert not any("516" in c for c in cells), cells
        notes = " ".join(run_notes([shown]))
        assert "expected_qps" not in notes and "INVALID because" not in notes, notes


@contextlib.contextmanager
def _tmpfs(path: Path, size: str) -> Iterator[Path]:
    path.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs to fill (needs root): {mounted.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def _fill(directory: Path) -> None:
    with contextlib.suppress(OSError), (directory / "filler").open("wb") as handle:
        while True:
            handle.write(b"\0" * 4096)
            handle.flush()
            os.fsync(handle.fileno())
