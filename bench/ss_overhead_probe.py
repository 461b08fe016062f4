"""Where SingleStream's per-query time goes: one LoadGen run per process, in variants.

``python bench/ss_overhead_probe.py TREE VARIANT SECONDS OUTDIR`` runs, with the package
from ``TREE`` (a worktree, to compare before and after), one LoadGen SingleStream test
on digits and prints one JSON line with LoadGen's p50/p90 (us):

* ``minimal``: ``session._sess.run`` on a staged row, argmax, complete (no harness);
* ``sut``: our ``SystemUnderTest`` built as the child builds it (in-process, no child);
* ``sut-nocheck`` / ``sut-nopost`` / ``sut-noinflight``: the same with one step
  replaced by the cheapest stand-in, to attribute the cost;
* ``offline``: our Offline SUT (workers from the scenario config), samples/s.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any


def main() -> int:
    tree, variant, seconds, outdir = sys.argv[1], sys.argv[2], float(sys.argv[3]), Path(sys.argv[4])
    sys.path.insert(0, tree)
    import mlperf_loadgen as lg
    import numpy as np

    from suite import backends, datasets
    from suite.config.loader import ConfigRequest, load_config
    from suite.harness.loadgen import Completer
    from suite.harness.output_contract import OutputContract
    from suite.harness.sut.core import SystemUnderTest
    from suite.harness.sut.inline import inline_issue
    from suite.models import load_card
    from suite.paths import find_paths
    from suite.postprocess import make_postprocess
    from suite.scenarios import Scenario

    scenario = "offline" if variant.startswith("offline") else "singlestream"
    if variant.startswith("suite"):  # the whole `suite run` path: parent, child, LoadGen
        os.environ["PYTHONPATH"] = tree  # the child imports the same tree
        return suite_run(scenario, seconds, outdir)
    if variant == "raw-offline":  # one single-threaded session, batch 256: CPU per sample
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import time

        import numpy as np
        import raw

        from suite.datasets.digits import validation_split
        from suite.models import load_card
        from suite.paths import find_paths

        card = load_card(find_paths(), "digits")
        images = np.ascontiguousarray(validation_split(card)[0], dtype=np.float32)
        cpu = time.thread_time()
        rate = raw.throughput(raw.session(card.onnx_path, 1), images, 256, seconds)
        cpu = time.thread_time() - cpu
        # and the bench's per-core baseline: one single-threaded loop per core
        per_core = raw.per_core_throughput(card.onnx_path, images, 256, seconds,
                                           os.cpu_count() or 1)
        print(json.dumps({"variant": variant, "samples_per_s": rate,
                          "per_core_samples_per_s": per_core,
                          "cpu_us_per_sample": round(cpu / (rate * seconds) * 1e6, 3)}))
        return 0
    if variant in ("raw", "raw-binding"):  # bench/raw.py's one-sample loop, as long as a run
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        import numpy as np
        import raw

        from suite.datasets.digits import validation_split
        from suite.models import load_card
        from suite.paths import find_paths

        card = load_card(find_paths(), "digits")
        images = np.ascontiguousarray(validation_split(card)[0], dtype=np.float32)
        p90 = raw.single_sample_p90_us(raw.session(card.onnx_path, 1), images, seconds,
                                       binding=variant == "raw-binding")
        print(json.dumps({"variant": variant, "p90_us": p90}))
        return 0
    paths = find_paths()
    sets = [f"sut.workers={variant.split(':')[1]}"] if ":" in variant else []
    config = load_config(ConfigRequest(benchmark="digits", scenario=scenario,
                                       backend="onnxruntime", use_tuned=False, sets=sets),
                         paths)[0]
    card = load_card(paths, "digits")
    backend = backends.create(config.backend, config.backend_options)
    backend.load(card, config.sut.max_batch_size)
    dataset = datasets.create(card, config.data)
    total = dataset.total_count
    postprocess, dtype = make_postprocess(card)
    settings = lg.TestSettings()
    settings.mode = lg.TestMode.PerformanceOnly
    settings.min_duration_ms = int(seconds * 1000)
    settings.min_query_count = 100
    if scenario == "offline":
        settings.scenario = lg.TestScenario.Offline
        settings.offline_expected_qps = 600_000
    else:
        settings.scenario = lg.TestScenario.SingleStream
        settings.single_stream_expected_latency_ns = 20_000
    completer = Completer(dtype)
    issue: Any
    flush: Any = lambda: None  # noqa: E731
    load: Any = dataset.load
    unload: Any = dataset.unload
    if variant == "offline-completer":
        # The completion floor: every sample completed by our Completer in 256-sample
        # batches inside issue_queries, no inference (LoadGen's cost plus ours).
        responses = np.zeros(256, dtype=dtype)

        def issue(ids: list[int], indices: list[int]) -> None:
            for start in range(0, len(ids), 256):
                chunk = ids[start:start + 256]
                completer.complete(chunk, responses[:len(chunk)])
        load = unload = lambda s: None
        return finish(lg, settings, outdir, issue, flush, load, unload, total, variant)
    if variant == "minimal":
        run = backend._session._sess.run  # type: ignore[attr-defined]
        outs, name = [card.output.name], card.input.name
        dataset.load(list(range(total)))
        sample = dataset.sample
        payload = np.zeros(1, dtype=dtype)

        def issue(ids: list[int], indices: list[int]) -> None:
            payload[0] = run(outs, {name: sample(indices[0])}, None)[0].argmax(axis=1)[0]
            lg.QuerySamplesComplete([lg.QuerySampleResponse(ids[0], payload.ctypes.data, 8)])
        load = unload = lambda s: None
    else:
        contract = OutputContract(config.backend, card)
        check: Any = contract
        if variant == "sut-nocheck":
            check = lambda o, n: None  # noqa: E731
        if variant == "sut-nopost":
            fixed = np.zeros(1, dtype=dtype)
            postprocess = lambda o: fixed  # noqa: E731
        sut = SystemUnderTest(backend, dataset, postprocess, completer,
                              Scenario(scenario), config.sut, contract=check)
        if variant == "sut-noinflight":
            # The inline path's table calls (InflightTable.inline's hold and release)
            # replaced by no-ops, to measure what the table costs.
            sut.inflight.inline = lambda: (lambda ids: 0, lambda token: True)  # type: ignore[method-assign]
            sut.issue = inline_issue(sut)  # type: ignore[method-assign]
        sut.warmup()
        sut.start()
        issue, flush, load, unload = sut.issue, sut.flush, sut.load, sut.unload
        if variant == "paired":
            issue, report = paired(issue, backend, card, dataset, dtype)
        if variant == "steps":
            issue, report = steps(sut)
        if variant == "steps-inline":
            issue, report = steps_inline(sut)
    outdir.mkdir(parents=True, exist_ok=True)
    log = lg.LogSettings()
    log.log_output.outdir = str(outdir)
    log.enable_trace = False
    import gc
    gc.collect()
    gc.freeze()
    lsut = lg.ConstructFastSUT(issue, flush)
    qsl = lg.ConstructQSL(total, total, load, unload)
    import time

    cpu = time.process_time()
    lg.StartTestWithLogSettings(lsut, qsl, settings, log, "")
    cpu = time.process_time() - cpu
    lg.DestroyQSL(qsl)
    lg.DestroyFastSUT(lsut)
    if variant not in ("minimal",):
        sut.stop()
    detail = {}
    for line in (outdir / "mlperf_log_detail.txt").read_text().splitlines():
        record = json.loads(line.removeprefix(":::MLLOG "))
        detail[record["key"]] = record["value"]
    if variant in ("paired", "steps", "steps-inline"):
        print(json.dumps({"variant": variant, **report()}))
        return 0
    if scenario == "offline":
        profile = sut.batch_profile()
        batches = max(sum(profile.get("sizes", {}).values()) if isinstance(
            profile.get("sizes"), dict) else 1, 1)
        print(json.dumps({"variant": variant,
                          "samples_per_s": detail["result_samples_per_second"],
                          # the whole process's CPU per sample: LoadGen, harness, inference
                          "cpu_us_per_sample": round(cpu / max(completer.completed, 1) * 1e6,
                                                     3),
                          "profile": {k: v for k, v in profile.items() if k != "sizes"},
                          "batches": batches}))
    else:
        print(json.dumps({"variant": variant,
                          "p50_us": detail["result_50.00_percentile_latency_ns"] / 1e3,
                          "p90_us": detail["result_90.00_percentile_latency_ns"] / 1e3}))
    return 0


def finish(lg: Any, settings: Any, outdir: Path, issue: Any, flush: Any, load: Any,
           unload: Any, total: int, variant: str) -> int:
    """Run LoadGen on a bare issue callback; print its samples/s."""
    outdir.mkdir(parents=True, exist_ok=True)
    log = lg.LogSettings()
    log.log_output.outdir = str(outdir)
    log.enable_trace = False
    lsut = lg.ConstructFastSUT(issue, flush)
    qsl = lg.ConstructQSL(total, total, load, unload)
    lg.StartTestWithLogSettings(lsut, qsl, settings, log, "")
    lg.DestroyQSL(qsl)
    lg.DestroyFastSUT(lsut)
    for line in (outdir / "mlperf_log_detail.txt").read_text().splitlines():
        record = json.loads(line.removeprefix(":::MLLOG "))
        if record["key"] == "result_samples_per_second":
            print(json.dumps({"variant": variant, "samples_per_s": record["value"]}))
    return 0


def paired(ours: Any, backend: Any, card: Any, dataset: Any, dtype: Any) -> Any:
    """Queries alternate between our issue closure and the minimal one, each timed inside
    the callback: the same LoadGen run, the same noise, so their difference is ours."""
    import time

    import mlperf_loadgen as lg
    import numpy as np

    run, outs, name = backend._session._sess.run, [card.output.name], card.input.name
    sample = dataset.sample
    payload = np.zeros(1, dtype=dtype)
    address = payload.ctypes.data
    clock = time.perf_counter_ns
    times: tuple[list[int], list[int]] = ([], [])
    flip = [0]

    def minimal(ids: list[int], indices: list[int]) -> None:
        payload[0] = run(outs, {name: sample(indices[0])}, None)[0].argmax(axis=1)[0]
        lg.QuerySamplesComplete([lg.QuerySampleResponse(ids[0], address, 8)])

    def issue(ids: list[int], indices: list[int]) -> None:
        which = flip[0] = 1 - flip[0]
        start = clock()
        (ours if which else minimal)(ids, indices)
        times[which].append(clock() - start)

    def report() -> dict[str, float]:
        out: dict[str, float] = {}
        for label, values in zip(("minimal", "ours"), times, strict=True):
            values = sorted(values)
            out[f"{label}_p50_us"] = values[len(values) // 2] / 1e3
            out[f"{label}_p90_us"] = values[int(len(values) * 0.9)] / 1e3
        out["delta_p50_us"] = out["ours_p50_us"] - out["minimal_p50_us"]
        out["delta_p90_us"] = out["ours_p90_us"] - out["minimal_p90_us"]
        return out

    return issue, report


def steps(sut: Any) -> Any:
    """Our inline path's steps, each timed inside LoadGen's issue callback (median us)."""
    import time

    import numpy as np

    clock = time.perf_counter_ns
    add, claim = sut.inflight.add, sut.inflight.claim
    sample, predict, check = sut.dataset.sample, sut.backend.predict, sut.check_outputs
    post, complete = sut.postprocess, sut.completer.complete
    names = ("add", "sample", "predict", "check", "postprocess", "claim", "complete")
    times: list[list[int]] = [[] for _ in names]

    def issue(ids: list[int], indices: list[int]) -> None:
        t0 = clock()
        token = add(ids)
        t1 = clock()
        batch = sample(indices[0])
        t2 = clock()
        outputs = predict(batch)
        t3 = clock()
        check(outputs, 1)
        t4 = clock()
        responses = post(outputs)
        t5 = clock()
        claim(token)
        t6 = clock()
        complete(ids, responses)
        t7 = clock()
        for series, a, b in zip(times, (t0, t1, t2, t3, t4, t5, t6), (t1, t2, t3, t4, t5, t6, t7),
                                strict=True):
            series.append(b - a)

    def report() -> dict[str, float]:
        return {name: round(float(np.median(series)) / 1e3, 2)
                for name, series in zip(names, times, strict=True)}

    return issue, report


def steps_inline(sut: Any) -> Any:
    """``steps`` for the one-sample fast path of ``inline.inline_issue`` (after the change)."""
    import time

    import numpy as np

    from suite.postprocess import index_writer

    clock = time.perf_counter_ns
    hold, release = sut.inflight.inline()
    sample, predict, check = sut.dataset.sample, sut.backend.predict, sut.check_outputs
    write = index_writer(sut.postprocess)
    slot, complete_one = sut.completer.single_index()
    names = ("hold", "sample", "predict", "check", "write", "release", "complete")
    times: list[list[int]] = [[] for _ in names]

    def issue(ids: list[int], indices: list[int]) -> None:
        t0 = clock()
        token = hold(ids)
        t1 = clock()
        batch = sample(indices[0])
        t2 = clock()
        outputs = predict(batch)
        t3 = clock()
        check(outputs, 1)
        t4 = clock()
        write(outputs, slot)
        t5 = clock()
        release(token)
        t6 = clock()
        complete_one(ids[0])
        t7 = clock()
        for series, a, b in zip(times, (t0, t1, t2, t3, t4, t5, t6), (t1, t2, t3, t4, t5, t6, t7),
                                strict=True):
            series.append(b - a)

    def report() -> dict[str, float]:
        return {name: round(float(np.median(series)) / 1e3, 2)
                for name, series in zip(names, times, strict=True)}

    return issue, report


def suite_run(scenario: str, seconds: float, outdir: Path) -> int:
    from suite.api import run
    from suite.config.loader import ConfigRequest

    result = run(ConfigRequest(benchmark="digits", scenario=scenario, backend="onnxruntime",
                               quick=True, runs_dir=outdir, use_tuned=False,
                               sets=[f"loadgen.min_duration_ms={int(seconds * 1000)}"]))
    perf = result.tests[0].performance
    assert perf is not None
    import suite

    print(json.dumps({"variant": "suite", "package": str(Path(suite.__file__).parent.parent),
                      "p50_us": perf.latency_ns["50.00_percentile"] / 1e3,
                      "p90_us": perf.latency_ns["90.00_percentile"] / 1e3}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
