"""Each client process of the ``openai`` backend records what it spent, through a real run.

The real CLI, LoadGen and client worker processes against the synthetic endpoint: the
run's ``result.json`` (``tests[0].backend.run``) and ``status.json`` (``backend.run``) hold
LoadGen's process's record and one per worker, and they add up (requests to the samples
LoadGen issued, SSE events to requests x events a response). Plausibility only, never a
speed figure; the figures themselves are ``bench/bench_endpoint.py``'s.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import only_run_dir, run_cli
from tests.support.llm_endpoints import synthetic

pytest.importorskip("aiohttp",
                    reason="the openai backend needs aiohttp (pip install -e '.[openai]')")

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
from bench_endpoint import derive

SAMPLES = 64
EVENTS = 7  # 16 tokens in chunks of <= 3: 6 chunks, then the usage event


def _run(tmp_path: Path, workers: int) -> tuple[dict[str, Any], dict[str, Any]]:
    with synthetic("--tokens", "16", "--chunk-tokens", "3") as (url, _):
        proc = run_cli("run", "--benchmark", "tinylm", "--backend", "openai", "--quick",
                       "--url", url, "--runs-dir", str(tmp_path), "--scenario", "offline",
                       "--set", f"loadgen.min_query_count={SAMPLES}",
                       "--set", f"backend.openai.client_workers={workers}", timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    run_dir = only_run_dir(tmp_path)
    [test] = json.loads((run_dir / "result.json").read_text())["tests"]
    status = json.loads((run_dir / "performance" / "status.json").read_text())
    assert status["backend"]["run"] == test["backend"]["run"]  # the same record in both
    return test["backend"]["run"], status


@pytest.mark.parametrize("workers", [1, 2])
def test_every_worker_and_loadgens_process_report_what_they_spent(tmp_path: Path,
                                                                  workers: int) -> None:
    run, status = _run(tmp_path, workers)
    assert run["client_workers"] == workers and run["workers_reported"] == workers
    assert run["samples_issued"] == SAMPLES == status["samples_completed"]
    parent = run["parent"]
    assert parent["role"] == "loadgen" and parent["requests"] == SAMPLES
    assert parent["chunks"] == 0 and parent["streamed"] == 0  # the workers streamed
    assert 0 < parent["run_cpu_s"] <= parent["cpu_s"]
    assert [w["index"] for w in run["workers"]] == list(range(workers))
    assert len({w["pid"] for w in run["workers"]} | {parent["pid"]}) == workers + 1
    for worker in run["workers"]:
        assert worker["role"] == "worker" and worker["requests"] > 0
        assert 0 < worker["run_cpu_s"] <= worker["cpu_s"]
        assert worker["chunks"] == worker["requests"] * EVENTS
        assert worker["messages"] > 0
    assert sum(w["requests"] for w in run["workers"]) == SAMPLES
    # requests sent again after an idle close: each worker's count, and their sum
    assert run["requests_resent"] == sum(w["resent"] for w in run["workers"])
    figures = derive(run)
    assert figures["requests"] == SAMPLES and figures["events"] == SAMPLES * EVENTS
    assert figures["worker_ceiling_requests_per_s"] > 0
    predicted = figures["predicted_requests_per_s"]
    assert 0 < predicted["1"] <= predicted["2"]


def test_the_client_in_loadgens_process_reports_it_alone(tmp_path: Path) -> None:
    run, _ = _run(tmp_path, 0)
    assert run["client_workers"] == 0 and run["workers"] == []
    parent = run["parent"]
    assert parent["requests"] == parent["streamed"] == SAMPLES
    assert parent["chunks"] == SAMPLES * EVENTS
    assert 0 < parent["run_cpu_s"] <= parent["cpu_s"]
    assert derive(run)["parent"]["us_per_request"] > 0
