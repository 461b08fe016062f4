"""A task card's Offline throughput: ours, a plain LoadGen harness and the best raw loop.

For one task card's stand-in (``suite run --stand-in``: its small model with the official
I/O contract and its samples), in one invocation:

* a **sweep** first picks the batches: a plain loop of ``InferenceSession.run`` over the
  staged inputs (every ``[[inputs]]`` tensor, consecutive ``batch``-sized slices) for
  about ``--seconds`` at each batch size and each thread setting; the two batch sizes
  that ran fastest are the rounds' (one where the model's batch axis is fixed);
* then each round, at each of those batches and each thread setting (one session with
  1 intra-op thread, one with 2, and 2 Python threads over one 1-thread session;
  onnxruntime releases the GIL), one after the other:

  - **ours**: ``suite run --stand-in --scenario offline`` with ``sut.workers`` x
    ``intra_op_threads`` of the same setting (1 x 1, 1 x 2, 2 x 1), sized to last
    about ``--seconds`` (LoadGen's samples/s, from ``result.json``);
  - **plain**: ``bench_task_plain.py``, a minimal LoadGen harness (the same session
    options, the same arrays, slices of them as batches, responses pointing into the
    output; no response bytes made) in its own process, with our run's ``mlperf.conf``
    and ``user.conf``, so LoadGen issues the same query (LoadGen's samples/s);
  - **raw**: the loop over exactly the query's sample count (LoadGen's
    ``effective_samples_per_query`` of our run), timed from its first call to its last;

  and, at raw's best setting and batch, the same raw loop that also makes the task's
  response bytes (``raw + responses``). Each side's best setting and batch counts.

The ratios: ours/raw (the issue's target, >= 0.95), plain/raw (what LoadGen's own
per-sample cost leaves of a raw loop: the floor of any LoadGen harness) and ours/plain
(what our harness adds over the least a LoadGen harness does). Default card: the toy
task of ``tests/support/toy_task.py`` with an 8 x 1024 weight (``WideToyTask``) in a
temporary home; ``--benchmark bert-99`` (any benchmark whose card's task is in
``suite.tasks.TASKS``) measures that card's stand-in from the checkout.

    python bench/bench_tasks.py --seconds 3            # the toy task
    python bench/bench_tasks.py --benchmark bert-99 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402
from bench_task_wide import wide_cache  # noqa: E402

from suite.api import run  # noqa: E402
from suite.config.loader import ConfigRequest  # noqa: E402
from suite.config.model import STAND_IN_SEED  # noqa: E402
from suite.harness.kinds.task import ensure_stand_in, load_task, open_dataset  # noqa: E402
from suite.harness.kinds.task_data import ReusedBuffer  # noqa: E402
from suite.models import card_name, load_card  # noqa: E402
from suite.paths import Paths, find_paths, stand_in_dir  # noqa: E402
from suite.tasks.base import split  # noqa: E402

BATCHES = (1, 8, 32, 128)
#: Thread settings, (Python threads, intra-op threads): the raw loop's "1 session x 1
#: threads", "1 session x 2 threads", "2 threads x 1-thread session"; ours's and the plain
#: harness's sut.workers x intra_op_threads.
SETTINGS = ((1, 1), (1, 2), (2, 1))
PLAIN = Path(__file__).resolve().parent / "bench_task_plain.py"


def setting_name(workers: int, threads: int) -> str:
    return f"{workers} x {threads}"


def staged_inputs(paths: Paths, benchmark: str, task: Any = None
                  ) -> tuple[Path, dict[str, Any]]:
    """The stand-in's model and every sample's inputs stacked in QSL index order (as our
    dataset stages them); ``task`` (else a new one) is left with the stand-in's dataset
    open, for its responses."""
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
          task: Any = None, count: int = 0, part: tuple[int, int] = (0, 1),
          ready: threading.Barrier | None = None) -> tuple[int, float, float]:
    """Samples/s of ``sess.run`` on consecutive slices, for ``seconds`` or (``count``)
    over ``count`` samples, of which this loop runs the batches ``part`` = (k, of)
    takes in turns; with ``task``, each batch's outputs also become the task's response
    bytes (what any SUT of the task must do), by the fastest way the task offers: its
    ``pack`` of the whole batch into a reused buffer where it has one (as ours), else
    ``response`` per sample. The loops of one measurement start their clocks together
    (``ready``), each after its warm-up. Returns (samples, clock's start, last call's end)."""
    outputs = [o.name for o in sess.get_outputs()]
    pack, scratch = getattr(task, "pack", None), ReusedBuffer()
    for _ in range(3):
        sess.run(outputs, {k: v[:batch] for k, v in pool.items()})
    if ready is not None:
        ready.wait()
    done, start = 0, time.perf_counter()
    position = part[0] * batch
    while (position < count) if count else (time.perf_counter() - start < seconds):
        k = min(batch, count - position) if count else batch
        offset = position % n
        result = sess.run(outputs, {key: v[offset:offset + k] for key, v in pool.items()})
        if task is not None:
            named = dict(zip(outputs, result, strict=True))
            indices = [(offset + j) % n for j in range(k)]
            if pack is not None:
                pack(indices, named, scratch)
            else:
                for index, row in zip(indices, split(named, k), strict=True):
                    task.response(index, row)
        done += k
        position += batch * part[1]
    return done, start, time.perf_counter()


def _pool(staged: dict[str, Any], batch: int) -> tuple[dict[str, Any], int]:
    """The staged inputs continued with their first ``batch - 1`` samples (as ours
    stages them), so that every batch is a slice; and the sample count."""
    n = len(next(iter(staged.values())))
    again = np.arange(n + batch - 1) % n
    return {k: np.ascontiguousarray(v[again]) for k, v in staged.items()}, n


def raw_rate(model: Path, staged: dict[str, Any], setting: tuple[int, int], batch: int,
             seconds: float = 0.0, count: int = 0, task: Any = None) -> float:
    """The raw loop's samples/s at one thread setting (see ``_loop``)."""
    pool, n = _pool(staged, batch)
    workers, threads = setting
    sess = _session(model, threads)
    found: list[tuple[int, float, float]] = []
    ready = threading.Barrier(workers)
    # each thread: its share of the count's batches, or every batch it runs in the seconds
    loops = [threading.Thread(target=lambda k: found.append(_loop(
        sess, pool, n, batch, seconds, task, count, (k, workers), ready)), args=(k,))
        for k in range(workers)]
    for loop in loops:
        loop.start()
    for loop in loops:
        loop.join()
    # every sample over the span from the first clock's start to the last call's end
    # (a sum of each thread's own rate would count a thread that ran alone twice)
    return (sum(done for done, _, _ in found) /
            (max(end for _, _, end in found) - min(start for _, start, _ in found)))


def sweep(model: Path, staged: dict[str, Any], seconds: float,
          batches: tuple[int, ...]) -> dict[str, Any]:
    """Every batch size x thread setting of the raw loop for ``seconds``; the best, and
    the two batch sizes whose best settings ran fastest (the rounds' batches: a harness
    pays a little a batch that the loop does not, so the loop's best batch need not be
    every side's, and the loop's top two are often within noise of each other)."""
    rates = {f"{setting_name(*setting)}, batch {batch}": raw_rate(
        model, staged, setting, batch, seconds) for batch in batches for setting in SETTINGS}
    best = max(rates, key=lambda k: rates[k])
    by_batch = {batch: max(v for k, v in rates.items() if k.endswith(f", batch {batch}"))
                for batch in batches}
    top = sorted(sorted(by_batch, key=by_batch.__getitem__, reverse=True)[:2])
    return {"rates": rates, "best": best, "best_rate": rates[best], "batches": top}


def ours_run(benchmark: str, setting: tuple[int, int], batch: int, rate: float,
             seconds: float, runs_dir: Path, extra: list[str]) -> tuple[float, Path]:
    """Our Offline samples/s (LoadGen's) at one setting, and the run's test directory."""
    workers, threads = setting
    result = run(ConfigRequest(
        benchmark=benchmark, scenario="offline", stand_in=True, runs_dir=runs_dir,
        sets=[f"sut.max_batch_size={batch}", f"sut.workers={workers}",
              f"backend.onnxruntime.intra_op_threads={threads}",
              f"loadgen.min_duration_ms={int(seconds * 1000)}",
              f"loadgen.expected_qps={rate:.0f}", "loadgen.min_query_count=1", *extra]))
    test = result.tests[0]
    value = test.performance.metric_value if test.performance else 0.0
    return float(value or 0.0), Path(test.directory)


def detail(test_dir: Path, key: str) -> float:
    """A value of LoadGen's detail log (``:::MLLOG`` JSON lines); a missing one fails."""
    for line in (test_dir / "mlperf_log_detail.txt").read_text().splitlines():
        record = json.loads(line.partition(":::MLLOG")[2] or "{}")
        if record.get("key") == key:
            return float(record["value"])
    raise SystemExit(f"{test_dir}: LoadGen's detail log has no {key}")


def plain_run(test_dir: Path, model: Path, arrays: Path, setting: tuple[int, int],
              batch: int, outdir: Path) -> float:
    """The plain harness's samples/s (LoadGen's) at one setting, on our run's query."""
    workers, threads = setting
    subprocess.run([sys.executable, str(PLAIN), str(test_dir), str(model), str(arrays),
                    str(batch), str(threads), str(workers), str(outdir)], check=True)
    return detail(outdir, "result_samples_per_second")


def one_round(benchmark: str, model: Path, staged: dict[str, Any], arrays: Path,
              batches: list[int], rate: float, seconds: float, task: Any, tmp: Path,
              extra: list[str], turn: int, last: list[Path]) -> dict[str, Any]:
    """Ours, plain and raw at each batch and setting, interleaved; raw + responses at
    raw's best.
    The three sides take turns going first (``turn``: the round's number), so a load
    that rises or falls within a setting's three runs favours none of them; the plain
    harness and the raw loop take the query of our latest run (``last``), which every
    run of the invocation shares (the same expected_qps and duration)."""
    load = os.getloadavg()
    sides: dict[str, dict[str, float]] = {"ours": {}, "plain": {}, "raw": {}}
    cases = {f"{setting_name(*setting)}, batch {batch}": (setting, batch)
             for batch in batches for setting in SETTINGS}
    for number, (name, (setting, batch)) in enumerate(cases.items()):
        order = ("ours", "plain", "raw")[(turn + number) % 3:] + (
            "ours", "plain", "raw")[:(turn + number) % 3]
        for side in order if last else ("ours", "plain", "raw"):
            if side == "ours":
                sides["ours"][name], test_dir = ours_run(
                    benchmark, setting, batch, rate, seconds, tmp / "runs", extra)
                last[:] = [test_dir]
            elif side == "plain":
                sides["plain"][name] = plain_run(last[0], model, arrays, setting, batch,
                                                 tmp / "plain" / f"{time.time_ns()}")
            else:
                count = int(detail(last[0], "effective_samples_per_query"))
                sides["raw"][name] = raw_rate(model, staged, setting, batch, count=count)
    count = int(detail(last[0], "effective_samples_per_query"))
    best = {side: max(rates, key=rates.__getitem__) for side, rates in sides.items()}
    raw_setting, raw_batch = cases[best["raw"]]
    # (the wide model's outputs are not the stand-in's: its responses still cost the same)
    with_task = raw_rate(model, staged, raw_setting, raw_batch, count=count, task=task)
    ours, plain, raw = (sides[side][best[side]] for side in ("ours", "plain", "raw"))
    return {"load_average": [round(x, 2) for x in load + os.getloadavg()],
            "samples": count, "rates": sides, "best": best, "raw_with_responses": with_task,
            "ours": ours, "plain": plain, "raw": raw, "ours/raw": ours / raw,
            "plain/raw": plain / raw, "ours/plain": ours / plain,
            "ours/(raw + responses)": ours / with_task}


RATIOS = ("ours/raw", "plain/raw", "ours/plain", "ours/(raw + responses)")


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--benchmark", default="", help="a task card's benchmark (default: "
                        "the toy task in a temporary home)")
    parser.add_argument("--seconds", type=float, default=3.0, help="per measurement")
    parser.add_argument("--repeats", type=int, default=3, help="interleaved rounds")
    parser.add_argument("--wide", type=int, default=0, metavar="WIDTH", help=(
        "measure a wider model with the stand-in's I/O contract (bench_task_wide.py: "
        "layers of WIDTH after each [batch, F] output; bert) instead of the stand-in's"))
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        benchmark = args.benchmark
        if not benchmark:
            sys.path.insert(0, str(REPO / "tests" / "support"))
            from tests.support.task_home import make_task_home

            home = make_task_home(tmp / "home", task="tests.support.toy_task:WideToyTask")
            os.environ["SUITE_HOME"] = str(home)
            benchmark = "toytask"
        paths = find_paths()
        task = load_task(load_card(paths, card_name(benchmark)))
        model, staged = staged_inputs(paths, benchmark, task)
        extra: list[str] = []
        if args.wide:
            model = wide_cache(model.parent, tmp / "cache", args.wide)
            extra = [f"data.cache_dir={tmp / 'cache'}"]
        arrays = tmp / "arrays.npz"
        np.savez(arrays, **staged)
        # a model with a fixed batch axis (yolo's static 640 export: batch 1) runs only that
        import onnxruntime

        first = onnxruntime.InferenceSession(str(model)).get_inputs()[0].shape[0]
        batches = (first,) if isinstance(first, int) and first > 0 else BATCHES
        swept = sweep(model, staged, args.seconds, batches)
        last: list[Path] = []
        rounds = [one_round(benchmark, model, staged, arrays, swept["batches"],
                            swept["best_rate"], args.seconds, task, tmp, extra, turn, last)
                  for turn in range(args.repeats)]
    report = {"benchmark": benchmark, "seconds": args.seconds, "wide": args.wide,
              "sweep": swept,
              "rounds": rounds,
              "medians": {r: statistics.median(x[r] for x in rounds) for r in RATIOS},
              "note": "ours and plain: LoadGen's Offline samples/s (ours: suite run "
                      "--stand-in; plain: bench_task_plain.py on our run's query); raw: "
                      "InferenceSession.run in a plain loop over the same staged inputs and "
                      "sample count (raw_with_responses: plus the task's response bytes)"}
    args.out.mkdir(parents=True, exist_ok=True)
    label = f"{benchmark}-wide{args.wide}" if args.wide else benchmark
    path = args.out / f"bench_tasks_{label}_{time.strftime('%Y%m%dT%H%M%SZ')}.json"
    path.write_text(json.dumps(report, indent=2) + "\n")
    print(f"sweep: best {swept['best']} ({swept['best_rate']:,.0f} samples/s); rounds at "
          f"batches {swept['batches']}")
    for item in rounds:
        print(f"load {item['load_average']}, {item['samples']} samples: " + ", ".join(
            f"{side} {item[side]:,.0f} ({item['best'][side]})"
            for side in ("raw", "plain", "ours")) +
            f", raw + responses {item['raw_with_responses']:,.0f}; " + ", ".join(
            f"{r} {item[r]:.3f}" for r in RATIOS))
    print(f"{label} Offline, medians of {len(rounds)} rounds: " + ", ".join(
        f"{r} {v:.3f}" for r, v in report["medians"].items()) +
        f" (target ours/raw >= 0.95); written: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
