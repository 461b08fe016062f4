"""`suite runs` fits 100 columns, piped, with one line per run (issue 40, item 6: the
headers wrapped and each metric cell took 7 lines)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import cli_env


def _perf(scenario: str, value: float, unit: str, name: str) -> dict[str, object]:
    return {"scenario": scenario, "metric_key": "k", "metric_name": name,
            "metric_value": value, "unit": unit, "result_validity": "VALID",
            "min_duration_met": True, "min_queries_met": True, "perf_constraints_met": True,
            "early_stopping_met": True, "early_stopping_result": None, "invalid_reason": None,
            "num_errors": 0, "errors": [], "query_count": 1, "latency_ns": {}, "effective": {},
            "loadgen_version": "6.0"}


def test_runs_fits_100_columns_one_line_per_run(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    for index, (scenario, value, unit, name) in enumerate([
            ("singlestream", 0.05632, "ms", "90th percentile latency"),
            ("offline", 22950.3, "samples/s", "samples per second")]):
        run_dir = runs / f"20261128T05583{index}Z_digits_{scenario}_all"
        run_dir.mkdir(parents=True)
        (run_dir / "result.json").write_text(json.dumps({
            "schema_version": 2, "run_id": run_dir.name, "run_dir": str(run_dir),
            "created_utc": f"2026-11-28T05:58:3{index}Z", "benchmark": "digits",
            "scenario": scenario, "mode": "all", "backend": "onnxruntime", "round": "v6.1",
            "model_sha256": "0" * 64, "division": "closed", "submittable": False,
            "non_submittable_reasons": ["--quick"], "status": "VALID", "exit_code": 0,
            "tests": [{"mode": "performance", "directory": str(run_dir / "performance"),
                       "status": "VALID", "exit_code": 0,
                       "performance": _perf(scenario, value, unit, name)}]}))
    # from the directory that holds runs/, as in a checkout: the paths are runs/NAME
    done = subprocess.run([sys.executable, "-m", "suite", "runs", "runs"], cwd=tmp_path,
                          env=cli_env(COLUMNS="100"), capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert max(len(line) for line in lines) <= 100
    rows = [line for line in lines if "_digits_" in line]
    assert len(rows) == 2, done.stdout  # one line per run: nothing folded
    assert any("p90 0.05632 ms" in row for row in rows)
    assert any("22,950.30 samples/s" in row for row in rows)
