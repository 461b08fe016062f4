"""A plain LoadGen harness for a task card's stand-in: the floor any LoadGen harness has.

``bench_tasks.py`` runs it in its own process right after one of our Offline runs, with
that run's ``mlperf.conf``, ``user.conf`` and QSL counts (so LoadGen issues the same
query: the same sample count), on the same model file and the same sample arrays. It
imports numpy, onnxruntime and LoadGen only (no ``suite``), and does the least a SUT
can do for the test:

* the QSL's ``load`` stages each input as one contiguous array in LoadGen's load order,
  continued past its end with its first ``batch - 1`` samples (as the raw loop's pool);
* the SUT's ``issue`` (a ``ConstructFastSUT``, as ours) cuts the query into ``batch``-
  sized batches; a batch whose samples lie consecutively in the staged arrays (LoadGen's
  Offline query repeats the loaded set in load order) is fed as slices, any other as one
  ``np.take`` per input; ``workers`` Python threads take the batches in turns (one
  session, released GIL), as the raw loop's "2 threads x 1-thread session";
* each batch is completed by one ``QuerySamplesComplete`` whose responses point into the
  first output's rows (no response bytes are made: the floor, not the task's work).

LoadGen's summary (``result_samples_per_second`` of the detail log) is the figure.

    python bench/bench_task_plain.py TEST_DIR MODEL ARRAYS_NPZ BATCH THREADS WORKERS OUTDIR
"""

from __future__ import annotations

import json
import sys
import threading
from itertools import repeat
from pathlib import Path
from typing import Any

import mlperf_loadgen as lg
import numpy as np
import onnxruntime as ort


def session(model: str, threads: int) -> Any:
    """The raw loop's session options (``bench_tasks._session``)."""
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    return ort.InferenceSession(model, sess_options=options,
                                providers=["CPUExecutionProvider"])


def main() -> int:
    test_dir, model, arrays_path, batch_s, threads_s, workers_s, outdir = sys.argv[1:8]
    batch, workers = int(batch_s), int(workers_s)
    spec = json.loads((Path(test_dir) / "child_spec.json").read_text(encoding="utf-8"))
    settings_spec = spec["settings"]
    sess = session(model, int(threads_s))
    outputs = [o.name for o in sess.get_outputs()]
    with np.load(arrays_path) as npz:
        samples = {name: np.ascontiguousarray(npz[name]) for name in npz.files}
    staged: dict[str, Any] = {}
    slot_of = np.full(spec["qsl_total"], -1, np.int64)
    count = [0]
    batches = {"sliced": 0, "taken": 0}  # how the batches were fed (written to OUTDIR)

    def load(indices: list[int]) -> None:
        order = np.asarray(indices, np.int64)
        again = np.concatenate([order, order[np.arange(batch - 1) % len(order)]])
        for name, array in samples.items():
            staged[name] = np.ascontiguousarray(array[again])
        slot_of[order] = np.arange(len(order))
        count[0] = len(order)

    def run_batches(ids: list[int], slots: Any, starts: range) -> None:
        rows = len(next(iter(staged.values())))
        for start in starts:
            these, k = slots[start:start + batch], min(batch, len(ids) - start)
            first, steps = int(these[0]), np.diff(these)
            if first + k <= rows and ((steps == 1) | (steps == 1 - count[0])).all():
                feed = {name: array[first:first + k] for name, array in staged.items()}
                batches["sliced"] += 1
            else:
                feed = {name: np.take(array, these, axis=0) for name, array in staged.items()}
                batches["taken"] += 1
            out = sess.run(outputs, feed)[0]
            base, stride = out.ctypes.data, out.strides[0]
            lg.QuerySamplesComplete(list(map(
                lg.QuerySampleResponse, ids[start:start + k],
                range(base, base + k * stride, stride), repeat(stride, k))))

    def issue(ids: list[int], indices: list[int]) -> None:
        slots = slot_of[np.asarray(indices, np.int64)]
        if workers == 1:
            run_batches(ids, slots, range(0, len(ids), batch))
            return
        loops = [threading.Thread(target=run_batches, args=(
            ids, slots, range(w * batch, len(ids), workers * batch))) for w in range(workers)]
        for loop in loops:
            loop.start()
        for loop in loops:
            loop.join()

    # warm the session at the batch size, as ours warms before the test
    for _ in range(3):
        sess.run(outputs, {name: array[:batch] for name, array in samples.items()})
    settings = lg.TestSettings()
    name, scenario = settings_spec["loadgen_model"], settings_spec["scenario"]
    settings.FromConfig("", name, scenario, 0)  # the embedded mlperf.conf, as ours loads it
    for conf in (settings_spec["mlperf_conf"], settings_spec["user_conf"]):
        settings.FromConfig(conf, name, scenario, 2)
    settings.scenario = lg.TestScenario.Offline
    settings.mode = lg.TestMode.PerformanceOnly
    settings.qsl_rng_seed = settings_spec["qsl_rng_seed"]
    settings.sample_index_rng_seed = settings_spec["sample_index_rng_seed"]
    settings.schedule_rng_seed = settings_spec["schedule_rng_seed"]
    log = lg.LogSettings()
    log.log_output.outdir = outdir
    log.log_output.copy_summary_to_stdout = False
    log.enable_trace = False
    Path(outdir).mkdir(parents=True, exist_ok=True)
    sut = lg.ConstructFastSUT(issue, lambda: None)
    qsl = lg.ConstructQSL(spec["qsl_total"], spec["qsl_performance"], load, lambda s: None)
    try:
        lg.StartTestWithLogSettings(sut, qsl, settings, log, "")
    finally:
        lg.DestroyQSL(qsl)
        lg.DestroyFastSUT(sut)
    (Path(outdir) / "plain_batches.json").write_text(json.dumps(batches) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
