"""A plain LoadGen harness: the least any harness does for the test one of our runs made.

``bench_fixed_cost`` runs it right after one of our quick Offline runs, with that run's
``mlperf.conf`` and ``user.conf`` (so LoadGen issues the same query: the same sample count
and duration, whatever the run derived at warm-up) and its QSL counts. One process:
import numpy, onnxruntime and LoadGen, create the onnxruntime session for the same model
file, load the same data (digits: the cached validation arrays; ResNet-50: the cached
crops, as NCHW float32), and run the LoadGen test with a SUT that

* ``null``: completes every sample inside ``issue_queries`` with one shared payload (our
  null backend's counterpart), or
* ``ort``: runs the session on ``BATCH`` samples at a time, then completes them.

The bench times the process from start to exit and subtracts LoadGen's span (first to
last record of the detail log), as it does for ours.

    python bench/plain_loadgen.py RUN_TEST_DIR MODEL DATA null|ort BATCH OUTDIR
"""

from __future__ import annotations

import json
import sys
from itertools import repeat
from pathlib import Path

import mlperf_loadgen as lg
import numpy as np
import onnxruntime as ort


def load(data: Path) -> np.ndarray:
    if data.suffix == ".npz":  # digits: the cached validation images, NCHW float32
        with np.load(data) as arrays:
            return np.ascontiguousarray(arrays["images"], dtype=np.float32)
    crops = np.load(data, mmap_mode="r")  # ResNet-50: uint8 NHWC crops
    return np.ascontiguousarray(crops.transpose(0, 3, 1, 2), dtype=np.float32)


def main() -> int:
    test_dir, model, data, kind, batch, outdir = sys.argv[1:7]
    run = Path(test_dir)
    spec = json.loads((run / "child_spec.json").read_text(encoding="utf-8"))
    name = spec["settings"]["loadgen_model"]
    session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    input_name = session.get_inputs()[0].name
    samples = load(Path(data))
    payload = np.zeros(1, dtype=np.int32)
    address, size = payload.ctypes.data, payload.nbytes
    step = int(batch)

    chunk = step if kind == "ort" else max(step, 1024)

    def issue(ids: list[int], indices: list[int]) -> None:
        for start in range(0, len(ids), chunk):
            these = ids[start:start + chunk]
            if kind == "ort":
                session.run(None, {input_name: samples[indices[start:start + chunk]]})
            lg.QuerySamplesComplete(list(map(lg.QuerySampleResponse, these,
                                             repeat(address, len(these)),
                                             repeat(size, len(these)))))

    settings = lg.TestSettings()
    settings.FromConfig(str(run / "mlperf.conf"), name, "Offline")
    settings.FromConfig(str(run / "user.conf"), name, "Offline")
    settings.scenario = lg.TestScenario.Offline
    settings.mode = lg.TestMode.PerformanceOnly
    log = lg.LogSettings()
    log.log_output.outdir = outdir
    log.log_output.copy_summary_to_stdout = False
    log.enable_trace = False
    Path(outdir).mkdir(parents=True, exist_ok=True)
    sut = lg.ConstructFastSUT(issue, lambda: None)
    qsl = lg.ConstructQSL(spec["qsl_total"], spec["qsl_performance"], lambda s: None,
                          lambda s: None)
    try:
        lg.StartTestWithLogSettings(sut, qsl, settings, log, "")
    finally:
        lg.DestroyQSL(qsl)
        lg.DestroyFastSUT(sut)
    return 0


if __name__ == "__main__":
    sys.exit(main())
