"""Server worker count per backend: quick digits Server runs at given rates with 1 and 2
workers, interleaved over rounds, every figure read from LoadGen's logs: its verdict and
p99 from the detail log; from its trace (``loadgen.enable_trace``) the SUT-side p99, of
each sample's ``issue_to_done`` (LoadGen issued it -> the SUT completed it), and the p99
of ``issue_delay`` (scheduled -> issued: LoadGen's own thread, late on a busy machine).
Both are the "Latency" counter events of ``loadgen/loadgen.cc``
(``ResponseDelegateDetailed::SampleComplete``, mlcommons/inference).

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


def trace_p99(run_dir: Path) -> dict[str, float]:
    """p99 (ms) of each sample's ``issue_to_done`` and ``issue_delay`` in LoadGen's trace."""
    # Line by line: the file is not valid JSON as a whole (LoadGen writes its LogDetail
    # keys double-quoted twice), while each "Latency" event is one JSON line.
    text = (run_dir / "performance" / "mlperf_log_trace.json").read_text()
    latency = [json.loads(line.rstrip(","))["args"] for line in text.splitlines()
               if line.startswith('{"name":"Latency"')]
    out = {}
    for key in ("issue_to_done", "issue_delay"):
        values = sorted(args[key] for args in latency)
        out[f"{key}_p99_ms"] = values[int(0.99 * len(values))] / 1e6  # LoadGen: sorted[n p]
    return out


def one(backend: str, rate: int, workers: int, runs: Path) -> dict[str, object]:
    before = set(runs.glob("*")) if runs.exists() else set()
    subprocess.run([sys.executable, "-m", "suite", "run", "--benchmark", "digits",
                    "--scenario", "server", "--backend", backend, "--quick",
                    "--set", f"loadgen.target_qps={rate}", "--set", f"sut.workers={workers}",
                    "--set", "loadgen.enable_trace=true", "--runs-dir", str(runs)],
                   capture_output=True, check=False)
    (run_dir,) = set(runs.glob("*")) - before
    return {"rate": rate, "workers": workers, "load1": os.getloadavg()[0], **detail(run_dir),
            **trace_p99(run_dir), "run_dir": str(run_dir)}


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
    print(f"\n{args.backend}: digits quick Server, ms per run (median); VALID runs of all")
    for rate in map(int, args.rates.split(",")):
        for workers in map(int, args.workers.split(",")):
            mine = [r for r in rows if r["rate"] == rate and r["workers"] == workers]
            valid = sum(r["result_validity"] == "VALID" for r in mine)
            figures = []
            for label, key, scale in (("p99", "result_99.00_percentile_latency_ns", 1e6),
                                      ("SUT-side p99", "issue_to_done_p99_ms", 1),
                                      ("issue-delay p99", "issue_delay_p99_ms", 1)):
                values = [float(r[key]) / scale for r in mine]  # type: ignore[arg-type]
                figures.append(f"{label} {'/'.join(f'{v:.1f}' for v in values)} "
                               f"(median {statistics.median(values):.1f})")
            print(f"  {rate:>5} QPS, {workers} worker(s): {'; '.join(figures)}; "
                  f"VALID {valid}/{len(mine)}")


if __name__ == "__main__":
    main()
