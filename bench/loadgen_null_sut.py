"""LoadGen's own ceiling: a minimal Python null SUT on ConstructFastSUT, Offline.

It completes every sample inside ``issue_queries`` in 1024-sample chunks with one
shared 4-byte payload and no harness at all: the fastest a Python SUT can be. Run as
a script (one LoadGen test per process); prints LoadGen's result_samples_per_second.

    python bench/loadgen_null_sut.py SAMPLES OUTDIR
"""

from __future__ import annotations

import json
import sys
from itertools import repeat
from pathlib import Path

import mlperf_loadgen as lg
import numpy as np


def main() -> int:
    samples, outdir = int(sys.argv[1]), Path(sys.argv[2])
    outdir.mkdir(parents=True, exist_ok=True)
    payload = np.zeros(1, dtype=np.int32)
    address = payload.ctypes.data

    def issue(ids: list[int], indices: list[int]) -> None:
        for start in range(0, len(ids), 1024):
            chunk = ids[start:start + 1024]
            n = len(chunk)
            lg.QuerySamplesComplete(list(map(lg.QuerySampleResponse, chunk,
                                             repeat(address, n), repeat(4, n))))

    settings = lg.TestSettings()
    settings.scenario = lg.TestScenario.Offline
    settings.mode = lg.TestMode.PerformanceOnly
    settings.min_duration_ms = 0
    settings.min_query_count = samples
    settings.offline_expected_qps = 1.0
    log = lg.LogSettings()
    log.log_output.outdir = str(outdir)
    log.enable_trace = False
    sut = lg.ConstructFastSUT(issue, lambda: None)
    qsl = lg.ConstructQSL(1024, 1024, lambda s: None, lambda s: None)
    try:
        lg.StartTestWithLogSettings(sut, qsl, settings, log, "")
    finally:
        lg.DestroyQSL(qsl)
        lg.DestroyFastSUT(sut)
    for line in (outdir / "mlperf_log_detail.txt").read_text().splitlines():
        record = json.loads(line.removeprefix(":::MLLOG "))
        if record["key"] == "result_samples_per_second":
            print(record["value"])
            return 0
    return 1


if __name__ == "__main__":
    sys.exit(main())
