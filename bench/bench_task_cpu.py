"""CPU time a sample: ours, the plain LoadGen harness and the raw loop, 1 thread each.

``bench_tasks.py``'s samples/s are wall-clock rates, which on the shared 2-core machine
follow the share of the cores each run wins from the other engineers' processes (single
rounds move by tens of percent). CPU time moves far less with the load, so this measures
what each side spends a sample at the 1 x 1 setting (one worker thread, one intra-op
thread; no spinning thread pool):

* **ours** and **plain**: the process's CPU time (user + system, ``RUSAGE_CHILDREN`` of
  this process around the run) for two queries of different sizes (LoadGen's
  ``effective_samples_per_query``), so that start-up, imports, model load and staging
  cancel out: (CPU of the large query - CPU of the small one) / (the sample difference);
* **raw**: the loop's thread CPU time (``time.thread_time``) over the large query's
  sample count (onnxruntime with one intra-op thread computes on the calling thread).

    python bench/bench_task_cpu.py --benchmark bert-99 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from bench_task_wide import wide_cache
from bench_tasks import (
    REPO,
    _loop,
    _pool,
    _session,
    detail,
    ours_run,
    plain_run,
    staged_inputs,
)

from suite.paths import find_paths


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def one_round(benchmark: str, model: Path, arrays: Path, batch: int,
              rates: tuple[float, float], seconds: float, tmp: Path, extra: list[str]
              ) -> tuple[float, float, int]:
    """Ours's and plain's CPU us a sample between a small and a large query (plain runs
    ours's two queries), and the large query's sample count."""
    ours_cpu, plain_cpu, counts = [], [], []
    for rate in rates:
        before = children_cpu()
        _, test_dir = ours_run(benchmark, (1, 1), batch, rate, seconds, tmp / "runs", extra)
        ours_cpu.append(children_cpu() - before)
        before = children_cpu()
        plain_run(test_dir, model, arrays, (1, 1), batch, tmp / "plain" / f"{time.time_ns()}")
        plain_cpu.append(children_cpu() - before)
        counts.append(int(detail(test_dir, "effective_samples_per_query")))
    extra_samples = counts[1] - counts[0]
    return ((ours_cpu[1] - ours_cpu[0]) / extra_samples * 1e6,
            (plain_cpu[1] - plain_cpu[0]) / extra_samples * 1e6, counts[1])


def raw_cpu(model: Path, staged: dict[str, Any], batch: int, count: int) -> float:
    pool, n = _pool(staged, batch)
    sess = _session(model, 1)
    clock = time.thread_time()
    for _ in range(3):  # _loop's warm-up, timed here to take it out
        sess.run(None, {k: v[:batch] for k, v in pool.items()})
    warm = time.thread_time() - clock
    clock = time.thread_time()
    _loop(sess, pool, n, batch, 0.0, None, count)
    return (time.thread_time() - clock - warm) / count * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--benchmark", default="bert-99")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--rate", type=float, default=20000.0,
                        help="expected_qps of the large query (the small: a tenth)")
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--wide", type=int, default=0, metavar="WIDTH")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results")
    args = parser.parse_args()
    rounds: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        model, staged = staged_inputs(find_paths(), args.benchmark)
        extra: list[str] = []
        if args.wide:
            model = wide_cache(model.parent, tmp / "cache", args.wide)
            extra = [f"data.cache_dir={tmp / 'cache'}"]
        arrays = tmp / "arrays.npz"
        np.savez(arrays, **staged)
        rates = (args.rate / 10, args.rate)
        for _ in range(args.repeats):
            load = os.getloadavg()
            ours, plain, count = one_round(args.benchmark, model, arrays, args.batch, rates,
                                           args.seconds, tmp, extra)
            raw = raw_cpu(model, staged, args.batch, count)
            rounds.append({"load_average": [round(x, 2) for x in load + os.getloadavg()],
                           "samples": count, "us_cpu_per_sample": {
                               "ours": ours, "plain": plain, "raw": raw},
                           "raw/ours": raw / ours, "raw/plain": raw / plain,
                           "plain/ours": plain / ours})
    keys = ("raw/ours", "plain/ours", "raw/plain")
    report = {"benchmark": args.benchmark, "batch": args.batch, "wide": args.wide,
              "setting": "1 worker x 1 intra-op thread", "rounds": rounds,
              "medians": {k: statistics.median(r[k] for r in rounds) for k in keys},
              "note": "CPU us a sample; a ratio raw/ours is the throughput ratio ours/raw "
                      "that a core of ours's own would give"}
    args.out.mkdir(parents=True, exist_ok=True)
    label = f"{args.benchmark}-wide{args.wide}" if args.wide else args.benchmark
    path = args.out / f"bench_task_cpu_{label}_{time.strftime('%Y%m%dT%H%M%SZ')}.json"
    path.write_text(json.dumps(report, indent=2) + "\n")
    for item in rounds:
        print(f"load {item['load_average']}, {item['samples']} samples, CPU us a sample: " +
              ", ".join(f"{k} {v:.2f}" for k, v in item["us_cpu_per_sample"].items()))
    print(f"{label} batch {args.batch}, 1 x 1, medians of {len(rounds)}: " + ", ".join(
        f"{k} {v:.3f}" for k, v in report["medians"].items()) +
        " (CPU ratios: raw/ours is ours's throughput share); written: " + str(path))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
