"""A task card's Offline throughput through the suite against the best raw onnxruntime loop.

For one task card's stand-in (``suite run --stand-in``: its small model with the official
I/O contract and its samples), in one invocation:

* **raw**: a plain loop of ``InferenceSession.run`` over the staged inputs (every
  ``[[inputs]]`` tensor, consecutive ``batch``-sized slices), for each batch size and each
  of: one session with 1 intra-op thread, one with 2, and 2 Python threads over one
  1-thread session (onnxruntime releases the GIL); the best is the baseline;
* **ours**: ``suite run --stand-in --scenario offline`` at the raw best batch size, with
  ``sut.workers`` x ``intra_op_threads`` of 1 x 1, 1 x 2 and 2 x 1, each run sized to
  last about ``--seconds`` (LoadGen's samples/s, from ``result.json``); the best counts.

The task's ``infer`` and ``response`` run on our side (the pipeline's work per batch);
the raw side only calls the model: the ratio is what the pipeline costs. Default card: the
toy task of ``tests/support/toy_task.py`` with an 8 x 1024 weight (``WideToyTask``) in a
temporary home; ``--benchmark bert-99`` (any benchmark whose card's task is in
``suite.tasks.TASKS``) measures that card's stand-in from the checkout.

    python bench/bench_tasks.py --seconds 3            # the toy task
    python bench/bench_tasks.py --benchmark bert-99    # after suite/tasks/squad.py lands
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402

from suite.api import run  # noqa: E402
from suite.config.loader import ConfigRequest  # noqa: E402
from suite.config.model import STAND_IN_SEED  # noqa: E402
from suite.harness.kinds.task import ensure_stand_in, load_task, open_dataset  # noqa: E402
from suite.harness.kinds.task_data import ReusedBuffer  # noqa: E402
from suite.models import card_name, load_card  # noqa: E402
from suite.paths import Paths, find_paths, stand_in_dir  # noqa: E402
from suite.tasks.base import split  # noqa: E402

BATCHES = (1, 8, 32, 128)


def staged_inputs(paths: Paths, benchmark: str, task: Any = None
                  ) -> tuple[Path, dict[str, Any]]:
    """The stand-in's model and every sample's inputs stacked (as our dataset stages them);
    ``task`` (else a new one) is left with the stand-in's dataset open, for its responses."""
    card = load_card(paths, card_name(benchmark))
    task = task if task is not None else load_task(card)
    root = stand_in_dir(paths.cache, card.name, STAND_IN_SEED)
    ensure_stand_in(task, card, root, STAND_IN_SEED)
    dataset = open_dataset(task, card, str(root / "dataset"))
    dataset.load(list(range(dataset.total_count)))
    staged = dataset.samples(dataset.staged()[1]).stacked()
    if staged is None:
        raise SystemExit(f"{benchmark}: samples vary in shape; the raw loop needs one stack")
    return root / "model.onnx", staged


def _session(model: Path, threads: int) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    return ort.InferenceSession(str(model), sess_options=options,
                                providers=["CPUExecutionProvider"])


def _loop(sess: Any, pool: dict[str, Any], n: int, batch: int, seconds: float,
          task: Any = None) -> float:
    """Samples/s of ``sess.run`` on consecutive slices; with ``task``, each batch's
    outputs also become the task's response bytes (what any SUT of the task must do), by
    the fastest way the task offers: its ``pack`` of the whole batch into a reused buffer
    where it has one (as ours), else ``response`` per sample."""
    outputs = [o.name for o in sess.get_outputs()]
    pack, scratch = getattr(task, "pack", None), ReusedBuffer()
    for _ in range(3):
        sess.run(outputs, {k: v[:batch] for k, v in pool.items()})
    done, start = 0, time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        offset = done % n
        result = sess.run(outputs, {k: v[offset:offset + batch] for k, v in pool.items()})
        if task is not None:
            named = dict(zip(outputs, result, strict=True))
            indices = [(offset + k) % n for k in range(batch)]
            if pack is not None:
                pack(indices, named, scratch)
            else:
                for index, row in zip(indices, split(named, batch), strict=True):
                    task.response(index, row)
        done += batch
    return done / elapsed


def _append_loop(found: list[float], *args: Any) -> None:
    found.append(_loop(*args))


def raw_best(model: Path, staged: dict[str, Any], seconds: float, task: Any = None,
             batches: tuple[int, ...] = BATCHES) -> dict[str, Any]:
    """Every raw configuration's samples/s and the best (config, batch, rate)."""
    n = len(next(iter(staged.values())))
    reps = -(-max(batches) // n) + 1
    pool = {k: np.ascontiguousarray(np.concatenate([v] * reps)) for k, v in staged.items()}
    rates: dict[str, float] = {}
    for batch in batches:
        for threads in (1, 2):
            rates[f"1 session x {threads} threads, batch {batch}"] = _loop(
                _session(model, threads), pool, n, batch, seconds, task)
        shared, found = _session(model, 1), list[float]()
        loops = [threading.Thread(target=_append_loop, args=(
            found, shared, pool, n, batch, seconds, task)) for _ in range(2)]
        for loop in loops:
            loop.start()
        for loop in loops:
            loop.join()
        rates[f"2 threads x 1-thread session, batch {batch}"] = sum(found)
    best = max(rates, key=lambda k: rates[k])
    return {"rates": rates, "best": best, "best_rate": rates[best],
            "best_batch": int(best.rsplit(" ", 1)[1])}


def ours_best(benchmark: str, batch: int, rate: float, seconds: float,
              runs_dir: Path) -> dict[str, Any]:
    """Our Offline samples/s (LoadGen's) for each workers x intra-op threads setting."""
    rates: dict[str, float] = {}
    for workers, threads in ((1, 1), (1, 2), (2, 1)):
        result = run(ConfigRequest(
            benchmark=benchmark, scenario="offline", stand_in=True, runs_dir=runs_dir,
            sets=[f"sut.max_batch_size={batch}", f"sut.workers={workers}",
                  f"backend.onnxruntime.intra_op_threads={threads}",
                  f"loadgen.min_duration_ms={int(seconds * 1000)}",
                  f"loadgen.expected_qps={rate:.0f}", "loadgen.min_query_count=1"]))
        test = result.tests[0]
        value = test.performance.metric_value if test.performance else 0.0
        rates[f"{workers} workers x {threads} threads, batch {batch}"] = float(value or 0.0)
    best = max(rates, key=lambda k: rates[k])
    return {"rates": rates, "best": best, "best_rate": rates[best]}


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--benchmark", default="", help="a task card's benchmark (default: "
                        "the toy task in a temporary home)")
    parser.add_argument("--seconds", type=float, default=3.0, help="per measurement")
    parser.add_argument("--repeats", type=int, default=1, help="interleaved repeats")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        benchmark = args.benchmark
        if not benchmark:
            import os

            sys.path.insert(0, str(REPO / "tests" / "support"))
            from tests.support.task_home import make_task_home

            home = make_task_home(tmp / "home", task="tests.support.toy_task:WideToyTask")
            os.environ["SUITE_HOME"] = str(home)
            benchmark = "toytask"
        paths = find_paths()
        task = load_task(load_card(paths, card_name(benchmark)))
        model, staged = staged_inputs(paths, benchmark, task)
        ratios, task_ratios, rounds = [], [], []
        # a model with a fixed batch axis (yolo's static 640 export: batch 1) runs only that
        import onnxruntime

        first = onnxruntime.InferenceSession(str(model)).get_inputs()[0].shape[0]
        batches = (first,) if isinstance(first, int) and first > 0 else BATCHES
        for _ in range(args.repeats):
            raw = raw_best(model, staged, args.seconds, batches=batches)
            # the same loop, also making each sample's response bytes with the task
            with_task = raw_best(model, staged, args.seconds, task, (raw["best_batch"],))
            ours = ours_best(benchmark, raw["best_batch"], raw["best_rate"], args.seconds,
                             tmp / "runs")
            ratios.append(ours["best_rate"] / raw["best_rate"])
            task_ratios.append(ours["best_rate"] / with_task["best_rate"])
            rounds.append({"raw": raw, "raw_with_task_responses": with_task, "ours": ours})
    report = {"benchmark": benchmark, "seconds": args.seconds, "rounds": rounds,
              "ratio_median": statistics.median(ratios), "ratios": ratios,
              "ratio_to_raw_with_responses_median": statistics.median(task_ratios),
              "note": "ours: LoadGen's Offline samples/s of suite run --stand-in; raw: "
                      "InferenceSession.run in a plain loop over the same staged inputs "
                      "(raw_with_task_responses: plus the task's response bytes per sample)"}
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"bench_tasks_{benchmark}_{time.strftime('%Y%m%dT%H%M%SZ')}.json"
    path.write_text(json.dumps(report, indent=2) + "\n")
    for item in rounds:
        print(f"raw best:  {item['raw']['best_rate']:>12,.0f} samples/s ({item['raw']['best']})")
        best = item["raw_with_task_responses"]
        print(f"raw + the task's responses: {best['best_rate']:>12,.0f} samples/s "
              f"({best['best']})")
        print(f"ours best: {item['ours']['best_rate']:>12,.0f} samples/s "
              f"({item['ours']['best']})")
    print(f"{benchmark} Offline ours/raw: {report['ratio_median']:.3f} "
          f"(median of {len(ratios)}; target >= 0.95); ours/(raw + the task's responses): "
          f"{report['ratio_to_raw_with_responses_median']:.3f}; written: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
