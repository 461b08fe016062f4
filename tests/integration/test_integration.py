"""End to end through the real LoadGen, the CLI and a child process per test."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest

from suite.logs import parse_detail_log
from suite.paths import find_paths
from suite.results import RunResult
from tests.conftest import only_run_dir, run_cli, speed_free_offline

# LoadGen's own metric and verdict in result.json and the table, and the records beside the
# logs, for each scenario on the null and onnxruntime backends: checked on the runs of
# tests/integration/test_backend_contract.py (assert_records), which must also be VALID.


def test_effective_settings_come_from_the_written_conf_files(runs_dir: Path) -> None:
    proc = run_cli("run", "--scenario", "server", "--backend", "null", "--quick",
                   "--set", "loadgen.target_qps=777", "--runs-dir", str(runs_dir))
    assert proc.returncode in (0, 2), proc.stderr
    perf_dir = only_run_dir(runs_dir) / "performance"
    assert "digits.Server.target_qps = 777.0" in (perf_dir / "user.conf").read_text()
    log = parse_detail_log(perf_dir / "mlperf_log_detail.txt")
    assert log.values["effective_target_qps"] == 777
    assert log.values["effective_target_latency_ns"] == 10_000_000
    assert log.values["effective_performance_sample_count"] == 450
    # No "Multiple conf files" error: the FromConfig workaround holds.
    assert not [e for e in log.errors if "conf" in e.lower()]
    config = json.loads((only_run_dir(runs_dir) / "config.json").read_text())
    assert config["provenance"]["loadgen.target_qps"] == "--set loadgen.target_qps"


@pytest.mark.parametrize("coalesce", [True, False])
def test_coalesce_queries_reaches_loadgen_and_the_sut_takes_merged_queries(
        coalesce: bool, runs_dir: Path) -> None:
    # 20k QPS: LoadGen's issue thread oversleeps its schedule by tens of microseconds, so
    # with coalescing on some calls carry several queries; off, every call carries one.
    proc = run_cli("run", "--scenario", "server", "--backend", "null", "--quick",
                   "--set", "loadgen.target_qps=20000", "--set", "loadgen.min_duration_ms=1000",
                   "--set", f"loadgen.coalesce_queries={str(coalesce).lower()}",
                   "--runs-dir", str(runs_dir))
    assert proc.returncode in (0, 2), proc.stderr
    perf_dir = only_run_dir(runs_dir) / "performance"
    assert f"digits.Server.coalesce_queries = {int(coalesce)}" in (
        perf_dir / "user.conf").read_text()
    log = parse_detail_log(perf_dir / "mlperf_log_detail.txt")
    assert log.values["requested_server_coalesce_queries"] is coalesce
    assert log.values["num_errors"] == 0
    status = json.loads((perf_dir / "status.json").read_text())
    samples = status["samples_completed"]
    assert samples >= 20_000
    if coalesce:
        assert status["issue_calls"] < samples
    else:
        assert status["issue_calls"] == samples


def test_a_stray_audit_config_cannot_change_a_run(runs_dir: Path, tmp_path: Path) -> None:
    # LoadGen reads ./audit.config by default; the child's cwd is its test dir, and
    # the harness passes an explicit empty name anyway. Plant one where `suite run` starts
    # (a directory of this test's own: one in the repository root would make a compliance
    # run on another worker refuse to start, as its guard should).
    import subprocess
    import sys

    from tests.conftest import cli_env

    start = tmp_path / "start"
    start.mkdir()
    (start / "audit.config").write_text(
        "*.*.performance_issue_same = 1\n*.*.min_query_count = 4242\n")
    # A fixed sample count (speed_free_offline): sized from the warm-up rate, the null
    # backend's query held millions of samples; 100000 is not the planted 4242 either.
    proc = subprocess.run(
        [sys.executable, "-m", "suite", "run", "--scenario", "offline", "--backend", "null",
         "--quick", "--runs-dir", str(runs_dir), *speed_free_offline()],
        cwd=start, env=cli_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode in (0, 2), proc.stderr
    log = parse_detail_log(only_run_dir(runs_dir) / "performance" / "mlperf_log_detail.txt")
    assert log.values["effective_performance_issue_same"] is False
    assert log.values["effective_min_query_count"] != 4242
    assert not [w for w in log.warnings if "audit" in w.lower()]


# Every completion path: Offline's full and partial batches, Server's dynamic batches
# of every size (the per-thread response pools grow), SingleStream's single samples.
# "server-processes": the same through worker processes and the shared-memory ring.
@pytest.mark.parametrize("scenario", ["offline", "server", "singlestream", "server-processes"])
def test_accuracy_mode_matches_direct_onnxruntime(scenario: str, runs_dir: Path) -> None:
    extra = ["--set", "sut.worker_model=processes", "--workers", "2"] if "-" in scenario else []
    proc = run_cli("run", "--scenario", scenario.split("-")[0], "--mode", "accuracy", "--quick",
                   "--runs-dir", str(runs_dir), *extra)
    assert proc.returncode == 0, proc.stderr
    run_dir = only_run_dir(runs_dir)
    result = RunResult.load(run_dir / "result.json")
    [test] = result.tests
    assert test.accuracy is not None and test.accuracy.passed
    assert test.accuracy.value >= test.accuracy.target

    # accuracy.txt in the official format: the checker's ACC_PATTERN["acc"] and hash line.
    text = (run_dir / "accuracy" / "accuracy.txt").read_text().splitlines()
    match = re.match(r"^(?:\{\"accuracy|accuracy)[\": ]*=?\s*([\d\.]+).*", text[0])
    assert match and float(match.group(1)) == pytest.approx(test.accuracy.value)
    assert re.fullmatch(r"accuracy=\d+\.\d{3}%, good=\d+, total=450", text[0])
    import hashlib

    log_bytes = (run_dir / "accuracy" / "mlperf_log_accuracy.json").read_bytes()
    assert text[1] == f"hash={hashlib.sha256(log_bytes).hexdigest()}"

    # Every decoded response equals a direct onnxruntime prediction.
    import onnxruntime as ort

    from suite.datasets.digits import validation_split
    from suite.models import load_card

    card = load_card(find_paths(), "digits")
    images, labels = validation_split(card)
    session = ort.InferenceSession(str(card.onnx_path), providers=["CPUExecutionProvider"])
    direct = session.run(None, {card.input.name: images})[0].argmax(axis=1)
    decoded = np.full(len(labels), -1)
    for entry in json.loads(log_bytes):
        decoded[entry["qsl_idx"]] = np.frombuffer(bytes.fromhex(entry["data"]), np.int32)[0]
    np.testing.assert_array_equal(decoded, direct)
    assert test.accuracy.good == int((direct == labels).sum())


def test_mode_all_runs_performance_then_accuracy(runs_dir: Path) -> None:
    proc = run_cli("run", "--scenario", "multistream", "--mode", "all", "--quick",
                   "--runs-dir", str(runs_dir))
    assert proc.returncode in (0, 2), proc.stderr
    run_dir = only_run_dir(runs_dir)
    result = RunResult.load(run_dir / "result.json")
    assert [t.mode for t in result.tests] == ["performance", "accuracy"]
    assert result.tests[1].accuracy is not None and result.tests[1].accuracy.passed
    assert (run_dir / "STATUS").read_text().startswith(result.status.value)
