"""A run's fixed cost: the wall time of ``suite run`` outside its LoadGen test.

``measure(tmp)`` times, in fresh processes (each start pays its imports, as a user's
does): ``import suite.api``, and a whole ``suite run --quick --backend null`` on digits
Offline, from which LoadGen's own span (first to last record of the performance test's
detail log) is subtracted. The target (issue 18) is 1 s or less; the MLPerf reference
harness spends 0.7-1.8 s on the same runs.

    python bench/bench_fixed_cost.py        # prints the dict as JSON
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent


def _wall(args: list[str], cwd: Path) -> tuple[float, subprocess.CompletedProcess[str]]:
    start = time.perf_counter()
    done = subprocess.run(args, cwd=cwd, capture_output=True, text=True, check=False)
    return time.perf_counter() - start, done


def _loadgen_span_s(detail_log: Path) -> float:
    """Seconds between the first and the last record LoadGen wrote for the test."""
    times = []
    for line in detail_log.read_text(encoding="utf-8").splitlines():
        if line.startswith(":::MLLOG"):
            record = json.loads(line.split(" ", 1)[1])
            times.append(float(record["time_ms"]))
    if not times:
        raise RuntimeError(f"{detail_log} holds no LoadGen record")
    return (max(times) - min(times)) / 1000


def measure(tmp: Path, repeats: int = 3) -> dict[str, Any]:
    """The fixed cost of a quick null-backend digits Offline run (median of ``repeats``)."""
    imports, totals, fixed = [], [], []
    for i in range(repeats):
        seconds, done = _wall([sys.executable, "-c", "import suite.api"], REPO)
        if done.returncode:
            raise RuntimeError(done.stderr)
        imports.append(seconds)
        runs = tmp / f"runs-{i}"
        seconds, done = _wall([sys.executable, "-m", "suite", "run", "--quick", "--backend",
                               "null", "--scenario", "offline", "--runs-dir", str(runs)], REPO)
        if done.returncode:
            raise RuntimeError(f"suite run failed ({done.returncode}): {done.stderr[-2000:]}")
        (detail,) = runs.glob("*/performance/mlperf_log_detail.txt")
        totals.append(seconds)
        fixed.append(seconds - _loadgen_span_s(detail))

    def median(values: list[float]) -> float:
        return round(sorted(values)[len(values) // 2], 3)

    return {"benchmark": "digits", "scenario": "offline", "backend": "null", "quick": True,
            "repeats": repeats, "import_suite_api_s": median(imports),
            "run_total_s": median(totals), "fixed_cost_s": median(fixed),
            "target_s": 1.0, "met": median(fixed) <= 1.0}


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="bench-fixed-") as directory:
        print(json.dumps(measure(Path(directory)), indent=2))
