"""Live progress and early INVALID warnings (``suite.harness.progress``) in real runs.

Two Server runs through the real CLI and LoadGen with the simulated backend: one far past
the ``slow-cpu`` profile's capacity (about 1,000 samples/s, however fast this machine is)
records its warnings in status.json and shows them on the progress line; a comfortable
one (the ``digits-h100`` profile at 200 QPS) records none. Only that "none" depends on this
machine's speed (a stall of the whole machine lands in the SUT-side p99: CI once saw 741 ms
at 200 QPS), so it is a ``timing`` assertion; what the run must show and record is not. The
estimator's unit tests, on a fake clock, are in tests/unit/harness/test_progress.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import only_run_dir, run_cli
from tests.support.timing import timing_assert


def server_run(runs_dir: Path, profile: str, qps: int, *extra: str
               ) -> tuple[dict[str, Any], str]:
    proc = run_cli("run", "--scenario", "server", "--backend", "simulated", "--quick",
                   "--set", f'backend.simulated.profile="{profile}"',
                   "--set", f"loadgen.target_qps={qps}",
                   "--set", "loadgen.min_duration_ms=2000", *extra,
                   "--runs-dir", str(runs_dir), COLUMNS="300")  # the whole progress line
    assert proc.returncode in (0, 2), proc.stderr  # VALID or INVALID: LoadGen's verdict
    [status_file] = only_run_dir(runs_dir).glob("*/status.json")
    return json.loads(status_file.read_text(encoding="utf-8")), proc.stderr


def test_a_server_run_past_capacity_warns_and_records_why(runs_dir: Path) -> None:
    # 5,000 QPS against a device that completes at most 1,000 samples/s. Coalescing off:
    # issue_queries is then called once per sample, so the backlog is counted exactly.
    status, stderr = server_run(runs_dir, "slow-cpu", 5000,
                                "--set", "loadgen.coalesce_queries=false")
    kinds = {w["kind"] for w in status["warnings"]}
    assert {"backlog", "p99"} <= kinds, status["warnings"]
    for warning in status["warnings"]:
        assert warning["message"] and warning["latest"] and warning["at_s"] >= 0
    assert "WARNING" in stderr


@pytest.mark.timing
def test_a_comfortable_server_run_records_no_warning(runs_dir: Path) -> None:
    # A fraction of a percent of the fast profile's capacity, and a bound ten times the
    # round's: a busy machine's scheduling hiccups stay far below it. The p99 estimate
    # is made (400 samples), so "no warning" is a verdict on it, not its absence.
    status, stderr = server_run(runs_dir, "digits-h100", 200,
                                "--set", "loadgen.latency_bound_ms=100")
    assert "SUT-side p99 est." in stderr
    # Whatever a stalled machine makes it record is a latency warning, shown as one.
    for warning in status["warnings"]:
        assert warning["kind"] in {"p99", "backlog"} and warning["message"], warning
        assert "WARNING" in stderr
    timing_assert(status["warnings"] == [], "a comfortable Server run warned on this "
                  f"machine: {[w['message'] for w in status['warnings']]}")
    assert "WARNING" not in stderr

