"""The backend output contract (suite/harness/output_contract.py) through the real LoadGen
with hostile backends, in worker threads and in worker processes.

These tests need the SUT to call ``OutputContract.check`` on every batch
(suite/harness/sut/core.py and suite/harness/sut/worker_loop.py); before that hook, each
hostile run below ends VALID with exit 0, which is the bug they pin down. The unit tests
against the real model cards are in tests/unit/harness/test_output_contract.py.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from suite.results import RunResult
from tests.conftest import only_run_dir, run_cli, speed_free_offline

#: hostile backend -> what its run's failure message must show it returned
FAULTS = {
    "OneRowBackend": r"shape \(1, 10\) for a batch of (?P<n>\d+) samples",
    "ExtraRowsBackend": r"shape \((?P<rows>\d+), 10\) for a batch of (?P<n>\d+) samples",
    "WideBackend": r"shape \((?P<n>\d+), 11\) for a batch of (?P=n) samples",
    "IntScoresBackend": r"shape \((?P<n>\d+), 10\) and dtype int32",
    "ObjectScoresBackend": r"shape \((?P<n>\d+), 10\) and dtype object",
    "NanBackend": r"shape \((?P<n>\d+), 10\) with (?P<bad>\d+) NaN or infinite",
}


_FAST_FAIL = ["--set", "sut.watchdog_timeout_s=5", "--set", "sut.drain_grace_s=1"]


def _failed_message(proc_args: list[str], runs_dir: Path, spec: str) -> str:
    proc = run_cli(*proc_args, "--runs-dir", str(runs_dir), "--backend", spec, *_FAST_FAIL,
                   timeout=180)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert spec in proc.stderr  # the CLI's error line names the backend
    result = RunResult.load(only_run_dir(runs_dir) / "result.json")
    assert result.status.value == "FAILED" and result.exit_code == 1
    [test] = result.tests
    assert spec in test.message and "output contract" in test.message, test.message
    return test.message


@pytest.mark.parametrize("fault", list(FAULTS))
def test_a_backend_breaking_the_contract_fails_the_run(fault: str, runs_dir: Path) -> None:
    # Offline in batches of up to 64: one row for a batch is only wrong for batches > 1,
    # and the Offline SUT fills its batches. A fixed sample count: the first batch fails
    # the run, and a query sized from the warm-up rate (millions of samples, answered
    # empty after the failure) only made each run last 10-25 s.
    message = _failed_message(["run", "--scenario", "offline", "--quick", "--batch-size",
                               "64", *speed_free_offline()], runs_dir,
                              f"tests.support.fault_backends:{fault}")
    got = re.search(FAULTS[fault], message)
    assert got, message
    n = int(got["n"])
    assert f"expects ({n}, 10)" in message  # the card's shape for that batch
    if fault == "OneRowBackend":
        assert n > 1
    if fault == "ExtraRowsBackend":
        assert int(got["rows"]) == n + 1
    if fault == "NanBackend":
        assert int(got["bad"]) == n * 10


def test_a_worker_process_breaking_the_contract_fails_the_run(runs_dir: Path) -> None:
    # Server batches may hold one sample, so the fault is one every batch size shows.
    message = _failed_message(["run", "--scenario", "server", "--quick", "--workers", "2",
                               "--set", "sut.worker_model=processes"], runs_dir,
                              "tests.support.fault_backends:WideBackend")
    assert re.search(FAULTS["WideBackend"], message), message
    assert re.search(r"expects \(\d+, 10\)", message), message

