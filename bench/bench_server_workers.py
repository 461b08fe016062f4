"""Server worker count per backend: quick digits Server runs at given rates with 1 and 2
workers, interleaved over rounds, every figure read from LoadGen's detail log.

The figures behind a backend's ``scenario_defaults`` (``suite/backends/pytorch.py``:
torch's Server default of 1 worker; docs/tuning.md "Worker count per backend").

    python bench/bench_server_workers.py --backend torch --rates 500,1000 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

KEYS = ("result_validity", "result_99.00_percentile_latency_ns",
        "result_overlatency_query_count", "result_query_count",
        "result_completed_samples_per_sec")


def detail(run_dir: Path) -> dict[str, object]:
    """The result keys of a run's LoadGen detail log."""
    values: dict[str, object] = {}
    for line in (run_dir / "performance" / "mlperf_log_detail.txt").read_text().splitlines():
        if line.startswith(":::MLLOG"):
            record = json.loads(line.removeprefix(":::MLLOG "))
            if record.get("key") in KEYS:
                values[record["key"]] = record["value"]
    return values


def one(backend: str, rate: int, workers: int, runs: Path) -> dict[str, object]:
    before = set(runs.glob("*")) if runs.exists() else set()
    subprocess.run([sys.executable, "-m", "suite", "run", "--benchmark", "digits",
                    "--scenario", "server", "--backend", backend, "--quick",
                    "--set", f"loadgen.target_qps={rate}", "--set", f"sut.workers={workers}",
                    "--runs-dir", str(runs)], capture_output=True, check=False)
    (run_dir,) = set(runs.glob("*")) - before
    return {"rate": rate, "workers": workers, "load1": os.getloadavg()[0], **detail(run_dir),
            "run_dir": str(run_dir)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="torch")
    parser.add_argument("--rates", default="500,1000")
    parser.add_argument("--workers", default="1,2")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    runs = Path(tempfile.mkdtemp(prefix="bench-server-workers-"))
    rows = []
    for _ in range(args.rounds):
        for rate in map(int, args.rates.split(",")):
            for workers in map(int, args.workers.split(",")):
                row = one(args.backend, rate, workers, runs)
                rows.append(row)
                print(json.dumps(row), flush=True)
    print(f"\n{args.backend}: digits quick Server, LoadGen p99 (ms) per run, median; "
          f"VALID runs of all")
    for rate in map(int, args.rates.split(",")):
        for workers in map(int, args.workers.split(",")):
            mine = [r for r in rows if r["rate"] == rate and r["workers"] == workers]
            p99 = [float(r["result_99.00_percentile_latency_ns"]) / 1e6  # type: ignore[arg-type]
                   for r in mine]
            valid = sum(r["result_validity"] == "VALID" for r in mine)
            print(f"  {rate:>5} QPS, {workers} worker(s): p99 "
                  f"{', '.join(f'{v:.1f}' for v in p99)} (median {statistics.median(p99):.1f})"
                  f"; VALID {valid}/{len(mine)}")


if __name__ == "__main__":
    main()
