"""Baselines without the harness: onnxruntime in a plain loop.

These are what the harness is compared with. They time ``session.run`` directly with
``time.perf_counter``; the harness's own figures always come from LoadGen's logs.
"""

from __future__ import annotations

import statistics
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt


def session(model: Path, intra_op_threads: int = 0) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = intra_op_threads
    return ort.InferenceSession(str(model), sess_options=options,
                                providers=["CPUExecutionProvider"])


def throughput(sess: Any, data: npt.NDArray[Any], batch: int, seconds: float) -> float:
    """Samples/s of ``sess.run`` on consecutive ``batch``-sized slices of ``data``."""
    name = sess.get_inputs()[0].name
    reps = -(-batch // len(data)) + 1
    pool = np.ascontiguousarray(np.concatenate([data] * reps))
    for _ in range(5):
        sess.run(None, {name: pool[:batch]})
    done, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        offset = done % len(data)
        sess.run(None, {name: pool[offset:offset + batch]})
        done += batch
    return done / elapsed


def per_core_throughput(model: Path, data: npt.NDArray[Any], batch: int, seconds: float,
                        threads: int) -> float:
    """Samples/s of ``threads`` plain loops sharing one single-threaded session.

    onnxruntime releases the GIL in ``run``, so on a small model one loop per core
    beats one loop whose operators are split across the cores: the stronger baseline.
    """
    sess = session(model, intra_op_threads=1)
    rates: list[float] = []
    workers = [threading.Thread(target=lambda: rates.append(
        throughput(sess, data, batch, seconds))) for _ in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return sum(rates)


def best_batch(sess: Any, data: npt.NDArray[Any], batches: list[int],
               seconds: float) -> tuple[int, float]:
    """The batch size with the highest raw throughput, and that throughput."""
    rates = {b: throughput(sess, data, b, seconds) for b in batches}
    best = max(rates, key=lambda b: rates[b])
    return best, rates[best]


def best_batch_until_flat(sess: Any, data: npt.NDArray[Any], batches: list[int],
                         seconds: float, limit: int = 256) -> tuple[int, float, dict[int, float]]:
    """``best_batch`` over ``batches``, then doubling past the largest while the rate still
    rises by more than 3 % (up to ``limit``): the raw side's best, not the best of a range
    that stopped while it was climbing. Returns (batch, rate, every batch's rate)."""
    rates = {b: throughput(sess, data, b, seconds) for b in sorted(batches)}
    batch = max(rates)
    while batch * 2 <= limit:
        rates[batch * 2] = throughput(sess, data, batch * 2, seconds)
        if rates[batch * 2] < 1.03 * rates[batch]:
            break
        batch *= 2
    best = max(rates, key=lambda b: rates[b])
    return best, rates[best], rates


def single_sample_p90_us(sess: Any, data: npt.NDArray[Any], seconds: float,
                         binding: bool = False) -> float:
    """p90 latency (µs) of one-sample ``sess.run`` calls, back to back.

    ``binding``: call the compiled session's ``run`` as the harness's onnxruntime
    backend does, without ``InferenceSession.run``'s per-call feed validation: the
    stricter baseline for the harness's SingleStream overhead.
    """
    name = sess.get_inputs()[0].name
    samples = [np.ascontiguousarray(data[i:i + 1]) for i in range(len(data))]
    run, outputs, options = ((sess._sess.run, [sess.get_outputs()[0].name], (None,))
                             if binding else (sess.run, None, ()))
    for sample in samples[:20]:
        run(outputs, {name: sample}, *options)
    latencies: list[float] = []
    start = time.perf_counter()
    i = 0
    while time.perf_counter() - start < seconds:
        t0 = time.perf_counter_ns()
        run(outputs, {name: samples[i % len(samples)]}, *options)
        latencies.append((time.perf_counter_ns() - t0) / 1e3)
        i += 1
    latencies.sort()
    return latencies[int(len(latencies) * 0.9)] if latencies else statistics.mean([0.0])
