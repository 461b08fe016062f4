"""Harness-overhead benchmark (``make bench``): our Offline throughput against a plain
onnxruntime loop, and the null backend, on the digits benchmark.

Every harness figure is LoadGen's own ``result_samples_per_second`` from the run's
``result.json``; the raw loop is the baseline we compare against. Each figure is the
median of ``--repeats`` runs with its min and max; the ratio is taken from figures
measured in this one invocation (machines are shared and noisy). Results are written
as JSON to ``bench/results/`` and printed as a table.

    python bench/bench_harness.py --repeats 3 --seconds 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from suite.api import run  # noqa: E402
from suite.config import ConfigRequest, load_config  # noqa: E402
from suite.datasets.digits import validation_split  # noqa: E402
from suite.models import load_card  # noqa: E402
from suite.paths import find_paths  # noqa: E402
from suite.system import collect  # noqa: E402


def stats(values: list[float]) -> dict[str, Any]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "runs": values}


def raw_onnxruntime(batch_size: int, seconds: float) -> float:
    """Samples/s of ``session.run`` in a plain loop over the validation set."""
    import onnxruntime as ort

    card = load_card(find_paths(), "digits")
    images, _ = validation_split(card)
    reps = -(-batch_size // len(images)) + 1
    data = np.ascontiguousarray(np.concatenate([images] * reps))
    session = ort.InferenceSession(str(card.onnx_path), providers=["CPUExecutionProvider"])
    feed_name, out_name = card.input.name, card.output.name
    for _ in range(20):
        session.run([out_name], {feed_name: data[:batch_size]})
    done, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        offset = done % len(images)
        session.run([out_name], {feed_name: data[offset:offset + batch_size]})
        done += batch_size
    return done / elapsed


def harness_offline(backend: str, expected_qps: float, seconds: float,
                    runs_dir: Path) -> tuple[float, str]:
    """LoadGen's samples/s for one quick Offline run of our harness, and its validity."""
    request = ConfigRequest(
        scenario="offline", backend=backend, quick=True, runs_dir=runs_dir,
        sets=[f"loadgen.min_duration_ms={int(seconds * 1000)}",
              f"loadgen.expected_qps={expected_qps:.1f}"],
    )
    result = run(request)
    perf = result.tests[0].performance
    if perf is None or perf.metric_value is None:
        raise SystemExit(f"benchmark run failed: {result.tests[0].message} ({result.run_dir})")
    return perf.metric_value, perf.result_validity or "?"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=3.0, help="per measurement")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results")
    args = parser.parse_args()

    config, _ = load_config(ConfigRequest(scenario="offline"), find_paths())
    batch = config.sut.max_batch_size
    raw, ours, null = [], [], []
    validity: dict[str, list[str]] = {"onnxruntime": [], "null": []}
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(args.repeats):  # interleaved, so drift hits every variant alike
            raw.append(raw_onnxruntime(batch, args.seconds))
            value, valid = harness_offline("onnxruntime", raw[-1], args.seconds, Path(tmp))
            ours.append(value)
            validity["onnxruntime"].append(valid)
            value, valid = harness_offline("null", 600_000.0, args.seconds, Path(tmp))
            null.append(value)
            validity["null"].append(valid)
    ratios = [o / r for o, r in zip(ours, raw, strict=True)]
    report = {
        "benchmark": "digits",
        "scenario": "Offline",
        "created_utc": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": collect(),
        "settings": {"batch_size": batch, "workers": config.sut.workers,
                     "backend_options": config.backend_options, "seconds": args.seconds,
                     "repeats": args.repeats},
        "raw_onnxruntime_samples_per_s": stats(raw),
        "harness_onnxruntime_samples_per_s": stats(ours),
        "harness_over_raw_ratio": stats(ratios),
        "null_backend_samples_per_s": stats(null),
        "loadgen_validity": validity,
        "note": "harness figures are LoadGen's result_samples_per_second; raw is a plain "
                "session.run loop at the same batch size with onnxruntime's default threads",
    }
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"bench_{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}.json"
    path.write_text(json.dumps(report, indent=2) + "\n")

    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"digits Offline, batch {batch}, median of {args.repeats} [min-max]")
    table.add_column("figure")
    table.add_column("value")
    for name, key in (("raw onnxruntime loop (samples/s)", "raw_onnxruntime_samples_per_s"),
                      ("harness, onnxruntime (samples/s)", "harness_onnxruntime_samples_per_s"),
                      ("harness / raw", "harness_over_raw_ratio"),
                      ("harness, null backend (samples/s)", "null_backend_samples_per_s")):
        s = report[key]
        fmt = "{:.3f}" if "ratio" in key else "{:,.0f}"
        table.add_row(name, f"{fmt.format(s['median'])} [{fmt.format(s['min'])}-"
                      f"{fmt.format(s['max'])}]")
    Console().print(table)
    print(f"written: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
