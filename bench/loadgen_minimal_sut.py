"""LoadGen's own floors and ceilings: the smallest Python SUTs, with no harness at all.

Each mode runs one LoadGen test (one per process: LoadGen cannot run a second) on
``ConstructFastSUT`` and prints one JSON object with LoadGen's own figures:

* ``offline-null SAMPLES OUTDIR``: every sample completed inside ``issue_queries`` in
  1024-sample chunks with one shared payload: the fastest a Python SUT can complete.
* ``singlestream-null SECONDS OUTDIR``: the same, one sample per query: LoadGen's own
  per-query latency (its trampoline, the GIL hand-off and the completion call).
* ``singlestream-ort SECONDS OUTDIR MODEL``: ``session.run`` on one sample inside
  ``issue_queries``, then complete: the least any onnxruntime SingleStream SUT can add.
* ``server-null QPS SECONDS OUTDIR BOUND_MS [COALESCE]``: Server at ``QPS`` with
  inline completion: does LoadGen's Python binding alone stay VALID at that rate?
  ``COALESCE`` (1, the default, or 0) sets ``server_coalesce_queries`` as our
  ``scenarios/server.toml`` does. It also reports ``cores``: the CPU this process
  (LoadGen's threads and the completions) used between 30 % and 80 % of the run, the
  share of the machine LoadGen's own work takes at that rate.

    python bench/loadgen_minimal_sut.py offline-null 500000 /tmp/out
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable
from itertools import repeat
from pathlib import Path
from typing import Any

import mlperf_loadgen as lg
import numpy as np


def run(settings: Any, outdir: Path, issue: Callable[[list[int], list[int]], None],
        samples: int = 1024) -> dict[str, Any]:
    outdir.mkdir(parents=True, exist_ok=True)
    settings.mode = lg.TestMode.PerformanceOnly
    log = lg.LogSettings()
    log.log_output.outdir = str(outdir)
    log.enable_trace = False
    sut = lg.ConstructFastSUT(issue, lambda: None)
    qsl = lg.ConstructQSL(samples, samples, lambda s: None, lambda s: None)
    try:
        lg.StartTestWithLogSettings(sut, qsl, settings, log, "")
    finally:
        lg.DestroyQSL(qsl)
        lg.DestroyFastSUT(sut)
    detail: dict[str, Any] = {}
    for line in (outdir / "mlperf_log_detail.txt").read_text().splitlines():
        record = json.loads(line.removeprefix(":::MLLOG "))
        detail[record["key"]] = record["value"]
    return detail


def null_issue(row_nbytes: int = 4) -> Callable[[list[int], list[int]], None]:
    payload = np.zeros(1, dtype=np.int32)
    address = payload.ctypes.data

    def issue(ids: list[int], indices: list[int]) -> None:
        for start in range(0, len(ids), 1024):
            chunk = ids[start:start + 1024]
            n = len(chunk)
            lg.QuerySamplesComplete(list(map(lg.QuerySampleResponse, chunk,
                                             repeat(address, n), repeat(row_nbytes, n))))
    return issue


def ort_issue(model: Path) -> tuple[Callable[[list[int], list[int]], None], int]:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    sess = ort.InferenceSession(str(model), sess_options=options,
                                providers=["CPUExecutionProvider"])
    meta = sess.get_inputs()[0]
    shape = [1 if not isinstance(d, int) else d for d in meta.shape]
    samples = np.random.default_rng(0).standard_normal([64, *shape[1:]]).astype(np.float32)
    rows = [np.ascontiguousarray(samples[i:i + 1]) for i in range(len(samples))]
    name, output = meta.name, sess.get_outputs()[0].name
    for row in rows:
        sess.run([output], {name: row})

    def issue(ids: list[int], indices: list[int]) -> None:
        out = sess.run([output], {name: rows[indices[0] % 64]})[0].argmax(axis=1)
        lg.QuerySamplesComplete([lg.QuerySampleResponse(ids[0], out.ctypes.data, 8)])
    return issue, 64


def _sample_cores(seconds: float, out: list[float]) -> None:
    """Cores this process used between 30 % and 80 % of a run of ``seconds``."""
    time.sleep(0.3 * seconds)
    cpu, wall = time.process_time(), time.monotonic()
    time.sleep(0.5 * seconds)
    out.append((time.process_time() - cpu) / (time.monotonic() - wall))


def main() -> int:
    mode, args = sys.argv[1], sys.argv[2:]
    settings = lg.TestSettings()
    if mode == "offline-null":
        settings.scenario = lg.TestScenario.Offline
        settings.min_duration_ms = 0
        settings.min_query_count = int(args[0])
        settings.offline_expected_qps = 1.0
        detail = run(settings, Path(args[1]), null_issue())
        print(json.dumps({"samples_per_s": detail["result_samples_per_second"]}))
    elif mode.startswith("singlestream-"):
        settings.scenario = lg.TestScenario.SingleStream
        settings.min_duration_ms = int(float(args[0]) * 1000)
        settings.min_query_count = 100
        settings.single_stream_expected_latency_ns = 2000
        if mode == "singlestream-ort":
            issue, samples = ort_issue(Path(args[2]))
            settings.single_stream_expected_latency_ns = 20_000
        else:
            issue, samples = null_issue(), 1024
        detail = run(settings, Path(args[1]), issue, samples)
        print(json.dumps({"p50_us": detail["result_50.00_percentile_latency_ns"] / 1e3,
                          "p90_us": detail["result_90.00_percentile_latency_ns"] / 1e3}))
    elif mode == "server-null":
        qps, seconds, bound_ms = float(args[0]), float(args[1]), float(args[3])
        settings.scenario = lg.TestScenario.Server
        settings.server_target_qps = qps
        settings.server_target_latency_ns = int(bound_ms * 1e6)
        settings.min_duration_ms = int(seconds * 1000)
        settings.min_query_count = 100
        settings.server_coalesce_queries = args[4:5] != ["0"]
        cores: list[float] = []
        sampler = threading.Thread(target=_sample_cores, args=(seconds, cores), daemon=True)
        sampler.start()
        detail = run(settings, Path(args[2]), null_issue())
        print(json.dumps({"valid": detail["result_validity"] == "VALID",
                          "p99_us": detail["result_99.00_percentile_latency_ns"] / 1e3,
                          "cores": cores[0] if cores else None}))
    else:
        raise SystemExit(f"unknown mode {mode!r}; see the module docstring")
    return 0


if __name__ == "__main__":
    sys.exit(main())
