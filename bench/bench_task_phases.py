"""A task card's batch path, phase by phase, in CPU time: what each sample costs the
thread that runs it, beside the model's own call on the same batch.

LoadGen's samples/s on a shared machine moves by tens of percent with the load (the
other processes take the cores in turns), so ``bench_tasks.py``'s ratios need repeats;
the CPU time a thread spends per sample (``time.thread_time``) hardly moves with it.
Here, in one process and with no LoadGen test, the stand-in's dataset is staged as a
run stages it, and each round runs the pipeline's steps on a batch of random samples:
``gather`` (the dataset's, into the worker's buffer), ``predict`` (the task's ``infer``
around the onnxruntime backend), ``responses`` (the task's bytes: ``pack`` or
``response`` per sample) and ``complete`` (``BytesCompleter`` building the LoadGen
responses; LoadGen's ``QuerySamplesComplete`` itself is replaced by a no-op, as no test
runs), then ``model``: the backend's named call alone on the same batch.

    python bench/bench_task_phases.py --benchmark bert-99 --batch 128
    python bench/bench_task_phases.py --benchmark yolo-95 --batch 1 --rounds 40
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402

from suite import backends  # noqa: E402
from suite.config.model import STAND_IN_SEED  # noqa: E402
from suite.harness import loadgen  # noqa: E402
from suite.harness.kinds.task import (  # noqa: E402
    TaskBackend,
    ensure_stand_in,
    load_task,
    open_dataset,
    responses,
)
from suite.models import card_name, load_card  # noqa: E402
from suite.paths import find_paths, stand_in_dir  # noqa: E402

PHASES = ("gather", "predict", "responses", "complete", "model")


def measure(benchmark: str, batch: int, rounds: int) -> dict[str, float]:
    """Microseconds of thread CPU time per sample, by phase."""
    paths = find_paths()
    card = load_card(paths, card_name(benchmark))
    task = load_task(card)
    root = stand_in_dir(paths.cache, card.name, STAND_IN_SEED)
    ensure_stand_in(task, card, root, STAND_IN_SEED)
    card = card.with_model_path(str(root / "model.onnx"))
    dataset = open_dataset(task, card, str(root / "dataset"))
    buffer = dataset.new_buffer(batch)
    dataset.load(list(range(dataset.total_count)))
    backend = backends.create("onnxruntime", {"intra_op_threads": 1})
    backend.load(card, batch)
    pipeline = TaskBackend(backend, task, dataset, card)
    postprocess, completer = responses(task), loadgen.BytesCompleter()
    loadgen.lg.QuerySamplesComplete = lambda _responses: None  # no test runs here
    rng = np.random.default_rng(0)
    batches = [rng.integers(0, dataset.total_count, batch) for _ in range(16)]
    ids = list(range(1, batch + 1))
    totals = dict.fromkeys(PHASES, 0.0)
    for n in range(rounds + 3):  # three unrecorded rounds first
        clock = [time.thread_time()]
        gathered = dataset.gather(batches[n % len(batches)], buffer)
        clock.append(time.thread_time())
        outputs = pipeline.predict(gathered)
        clock.append(time.thread_time())
        made = postprocess(outputs)
        clock.append(time.thread_time())
        completer.complete(ids, made)
        clock.append(time.thread_time())
        stacked = dataset.samples(gathered).stacked()  # (untimed: a copy in some trees)
        if stacked is not None:
            mark = time.thread_time()
            backend.predict_named(stacked)
            clock.append(clock[-1] + time.thread_time() - mark)
        else:
            clock.append(clock[-1])
        if n >= 3:
            for phase, start, end in zip(PHASES, clock[:-1], clock[1:], strict=True):
                totals[phase] += end - start
    return {phase: round(value / (rounds * batch) * 1e6, 2) for phase, value in totals.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--benchmark", default="bert-99")
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=0, help="default: about 2,000 samples")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results")
    args = parser.parse_args()
    rounds = args.rounds or max(2000 // args.batch, 10)
    per_sample = measure(args.benchmark, args.batch, rounds)
    report: dict[str, Any] = {
        "benchmark": args.benchmark, "batch": args.batch, "rounds": rounds,
        "us_cpu_per_sample": per_sample,
        "pipeline_over_model": round(sum(per_sample[p] for p in PHASES[:4]) /
                                     per_sample["model"], 3) if per_sample["model"] else None,
        "note": "thread CPU time per sample; random batches (the take path of the gather); "
                "QuerySamplesComplete replaced by a no-op"}
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / (f"bench_task_phases_{args.benchmark}_"
                       f"{time.strftime('%Y%m%dT%H%M%SZ')}.json")
    path.write_text(json.dumps(report, indent=2) + "\n")
    print(f"{args.benchmark} batch {args.batch}, us of CPU per sample: " + ", ".join(
        f"{k} {v}" for k, v in per_sample.items()) +
          f"; pipeline / model {report['pipeline_over_model']}; written: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
