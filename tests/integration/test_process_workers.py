"""Server worker processes at rest: idle workers sleep instead of polling, wake for the
next query, and exit on their own after a stop and drain.

The tests start real worker processes (digits, the null backend) and read their CPU time
from /proc. The ring's bookkeeping is in tests/unit/harness/sut/test_workers.py; the
workers run through the real LoadGen in test_integration.py and test_faults.py.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from suite.config.loader import ConfigRequest, load_config
from suite.harness.sut.workers import ProcessWorkers, WorkerSpec
from suite.paths import find_paths
from tests.conftest import REPO
from tests.unit.harness.sut.test_core import ArrayDataset, RecordingCompleter
from tests.unit.harness.sut.test_workers import Failure


@pytest.fixture
def live() -> Iterator[tuple[ProcessWorkers, RecordingCompleter]]:
    """Two started worker processes (digits, null backend) over published samples."""
    config, _ = load_config(ConfigRequest(scenario="server", backend="null", quick=True),
                            find_paths())
    dataset = ArrayDataset(16)
    dataset.load(list(range(16)))
    completer = RecordingCompleter()
    failures: list[Failure] = []
    pool = ProcessWorkers(WorkerSpec(REPO, config), dataset,
                          completer, workers=2, max_batch=4,  # type: ignore[arg-type]
                          on_failure=lambda *f: failures.append(f))
    pool.start(max_wait_s=0.0, timeout_s=60.0)
    pool.publish()
    assert not failures, failures
    yield pool, completer
    pool.stop()
    assert not failures, failures


def _cpu_s(pids: list[int]) -> float:
    """User plus system CPU seconds of ``pids`` (fields 14 and 15 of /proc/<pid>/stat)."""
    total = 0
    for pid in pids:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def _wait_asleep(pool: ProcessWorkers, count: int, timeout_s: float = 30.0) -> None:
    """Until ``count`` workers declared themselves asleep (control word 5)."""
    deadline = time.monotonic() + timeout_s
    while int(pool._ctrl[5]) != count and time.monotonic() < deadline:
        time.sleep(0.005)
    assert int(pool._ctrl[5]) == count, f"{int(pool._ctrl[5])} of {count} workers asleep"


def _wait_completed(completer: RecordingCompleter, count: int, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while completer.completed < count and time.monotonic() < deadline:
        time.sleep(0.005)
    assert completer.completed == count, f"{completer.completed} of {count} completed"


@pytest.mark.skipif(sys.platform != "linux", reason="reads worker CPU time from /proc")
def test_idle_workers_block_instead_of_polling_and_wake_for_the_next_query(
        live: Any) -> None:
    pool, completer = live
    pids = [process.pid for process in pool._processes]
    pool.issue([1], [3])  # a batch, then idleness: the workers poll a moment, then sleep
    _wait_completed(completer, 1)
    time.sleep(0.2)  # forty times the polling window (_HOT_S)
    before = _cpu_s(pids)
    time.sleep(2.0)
    idle = _cpu_s(pids) - before
    # Polling every 100 us, two idle workers took about 0.25 s of CPU a second.
    assert idle < 0.2, f"two idle workers used {idle:.2f} s of CPU in 2 s"
    _wait_asleep(pool, 2)  # both declared asleep
    # After the long idle, a query is still completed; so is a burst of three batches.
    pool.issue([2], [5])
    _wait_completed(completer, 2)
    _wait_asleep(pool, 2)
    pool.issue(list(range(10, 22)), [k % 16 for k in range(12)])
    _wait_completed(completer, 14)
    assert completer.values[2] == 0 and not completer.empty
    assert sorted(q for batch in completer.batches for q in batch) == [1, 2, *range(10, 22)]


def test_stop_and_drain_wake_sleeping_workers_which_then_exit_on_their_own(
        live: Any) -> None:
    pool, completer = live
    _wait_asleep(pool, 2)
    pool.drain()  # a failure's drain: the workers stop claiming and leave
    for process in pool._processes:
        process.join(timeout=10.0)
        assert process.exitcode == 0  # left by itself, not terminated by stop()
    pool.issue([1], [0])
    assert completer.empty == [1]

