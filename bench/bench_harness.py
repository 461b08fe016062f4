"""``make bench``: how close the harness gets to the raw backend, measured in one run.

For digits (and a ResNet-50-shaped model when one can be built here), back to back:

* the raw onnxruntime loop at its best batch size (and, the stronger baseline, one
  single-threaded loop per core), and our Offline run at that batch;
* SingleStream: LoadGen's p90 latency minus the raw one-sample p90 (the overhead), both
  over the public ``InferenceSession.run`` loop and over a loop calling the binding's
  ``run`` as our backend does (the stricter figure), and the same for the smallest
  possible SUT (``session.run`` inside ``issue_queries``): the part of the overhead
  that LoadGen's Python binding costs any SUT;
* Server (``server_coalesce_queries`` on, as in ``scenarios/server.toml``): the highest
  target QPS that stays VALID under the 10 ms bound (``suite tune``'s search), as a
  fraction of our own Offline throughput, and the highest one LoadGen's own null SUT
  sustains with the same setting (the ceiling of any Python SUT; once without it);
* the null backend against LoadGen's own Python null SUT, the ceiling of any Python SUT.

The minimal SUTs are in ``loadgen_minimal_sut.py``.

Every harness figure is LoadGen's (``result.json``); each figure is the median of
``--repeats`` interleaved runs with its min and max, and ratios are formed within one
invocation. One JSON file goes to ``bench/results/``; a table is printed.

    python bench/bench_harness.py --repeats 3 --seconds 3
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import bench_checker  # noqa: E402
import bench_endpoint  # noqa: E402
import bench_fixed_cost  # noqa: E402
import bench_fixed_cost_resnet50  # noqa: E402
import bench_llm  # noqa: E402
import bench_simulated  # noqa: E402
import numpy as np  # noqa: E402
import raw  # noqa: E402

from suite.api import run  # noqa: E402
from suite.config.loader import ConfigRequest  # noqa: E402
from suite.datasets.digits import validation_split  # noqa: E402
from suite.models import load_card  # noqa: E402
from suite.paths import find_paths  # noqa: E402
from suite.system import collect  # noqa: E402


def stats(values: list[float]) -> dict[str, Any]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "runs": values}


def harness(scenario: str, backend: str, sets: dict[str, Any], runs_dir: Path,
            benchmark: str = "digits") -> Any:
    """One quick run through the suite; returns its performance summary."""
    result = run(ConfigRequest(benchmark=benchmark, scenario=scenario, backend=backend,
                               quick=True, runs_dir=runs_dir, use_tuned=False,
                               sets=[f"{k}={v}" for k, v in sets.items()]))
    perf = result.tests[0].performance
    if perf is None or perf.metric_value is None:
        raise SystemExit(f"benchmark run failed: {result.tests[0].message} ({result.run_dir})")
    return perf


def offline_batch(benchmark: str) -> int:
    """The Offline ``sut.max_batch_size`` a plain ``suite run`` uses for ``benchmark``."""
    from suite.config.loader import load_config

    config = load_config(ConfigRequest(benchmark=benchmark, scenario="offline",
                                       use_tuned=False), find_paths())[0]
    return config.sut.max_batch_size


def minimal_sut(*args: str) -> dict[str, Any]:
    """One run of ``loadgen_minimal_sut.py``; its JSON line."""
    proc = subprocess.run([sys.executable, str(REPO / "bench" / "loadgen_minimal_sut.py"),
                           *args], capture_output=True, text=True, check=True)
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def null_server_ceiling(outdir: Path, coalesce: bool = True, bound_ms: float = 10.0) -> float:
    """The highest Server QPS LoadGen's null SUT keeps VALID: doubling, then bisecting."""
    def valid(qps: float) -> bool:
        return bool(minimal_sut("server-null", str(qps), "3", str(outdir / f"srv_{qps:.0f}"),
                                str(bound_ms), str(int(coalesce)))["valid"])

    low, high = 0.0, 25_000.0
    while high <= 1_600_000 and valid(high):
        low, high = high, high * 2
    for _ in range(4):
        mid = (low + high) / 2
        low, high = (mid, high) if valid(mid) else (low, mid)
    return low


def server_max_valid(backend: str, offline_rate: float, runs_dir: Path, probe_ms: int,
                     log: list[str]) -> float:
    """``suite tune``'s Server search; what it said (each setup's best probe, the chosen
    one) goes to ``log``."""
    from suite.harness.tune import Tuner

    def say(message: str) -> None:
        log.append(message)
        print(f"server search: {message}", file=sys.stderr, flush=True)

    tuner = Tuner(find_paths(), "digits", backend, "bench", runs_dir, probe_ms,
                  confirm_ms=2 * probe_ms, fresh=True, say=say)
    cores = os.cpu_count() or 1
    # Threads do best with one worker more than the cores (it covers the GIL waits),
    # processes with one per core (measured; see bench/PERFORMANCE.md).
    try:
        qps = tuner.server(offline_rate, [128, 256], steps=5,
                           setups=[("threads", cores + 1), ("processes", cores)])
    except RuntimeError as exc:  # no rate confirmed VALID: that is the figure, 0
        say(f"search failed: {exc}")
        return 0.0
    if not qps:  # no confirming run was VALID: that is the figure, 0 (and the verdict)
        log.extend(tuner.report.unconfirmed)
        return 0.0
    log.extend(f"chosen {c.key} = {c.value}" for c in tuner.report.choices["server"])
    return qps


def loadgen_cores_at(qps: float, outdir: Path, seconds: float = 6.0) -> float:
    """The cores LoadGen's own work (issuing, bookkeeping, completing) takes at ``qps``:
    its null SUT's process CPU while running Server at that rate."""
    cores = minimal_sut("server-null", str(qps), str(seconds), str(outdir), "10")["cores"]
    return float(cores)


def measure_digits(args: argparse.Namespace, tmp: Path) -> dict[str, Any]:
    card = load_card(find_paths(), "digits")
    images, _ = validation_split(card)
    images = np.ascontiguousarray(images, dtype=np.float32)
    sess = raw.session(card.onnx_path)
    batch, _ = raw.best_batch(sess, images, [64, 256, 1024], 1.0)
    cores = os.cpu_count() or 1
    # The parallel baseline at its own best batch: one single-threaded session per core.
    core_rates = {b: raw.per_core_throughput(card.onnx_path, images, b, 1.0, cores)
                  for b in (64, 256, 1024)}
    core_batch = max(core_rates, key=lambda b: core_rates[b])
    series: dict[str, list[float]] = {k: [] for k in (
        "raw_samples_per_s", "raw_per_core_samples_per_s", "offline_samples_per_s",
        "offline_ratio", "offline_ratio_per_core", "raw_best_samples_per_s",
        "offline_ratio_best_raw", "raw_ss_p90_us", "raw_binding_ss_p90_us",
        "ss_p90_us", "ss_overhead_us", "ss_overhead_vs_binding_us", "minimal_sut_ss_p90_us",
        "minimal_sut_ss_overhead_us",
        "null_samples_per_s", "loadgen_null_sut_samples_per_s", "null_ratio",
        "offline_ratio_serial_loadgen_model")}
    for repeat in range(args.repeats):  # interleaved: drift hits every figure alike
        raw_rate = raw.throughput(sess, images, batch, args.seconds)
        per_core = raw.per_core_throughput(card.onnx_path, images, core_batch, args.seconds,
                                           cores)
        # Ours at its configured batch (scenarios/offline.toml), what `suite run` uses:
        # each side at its own best. The raw loop's best batch runs its session on all
        # cores; our workers run one single-threaded session each, for which 1024 costs
        # more per sample than 256 (measured: 4.4 against 2.6 us per sample).
        offline = harness("offline", "onnxruntime", {
            "loadgen.min_duration_ms": int(args.seconds * 1000),
            "loadgen.expected_qps": round(max(raw_rate, per_core), 1)}, tmp)
        raw_p90 = raw.single_sample_p90_us(raw.session(card.onnx_path, 1), images, args.seconds)
        binding_p90 = raw.single_sample_p90_us(raw.session(card.onnx_path, 1), images,
                                               args.seconds, binding=True)
        single = harness("singlestream", "onnxruntime", {
            "loadgen.min_duration_ms": int(args.seconds * 1000)}, tmp)
        minimal = minimal_sut("singlestream-ort", str(args.seconds),
                              str(tmp / f"minimal_ss_{repeat}"), str(card.onnx_path))
        null = harness("offline", "null", {"loadgen.min_duration_ms": 1000,
                                           "loadgen.expected_qps": 1_000_000}, tmp)
        ceiling = minimal_sut("offline-null", str(int(null.effective["samples_per_query"])),
                              str(tmp / f"null_sut_{repeat}"))["samples_per_s"]
        assert offline.metric_value and null.metric_value
        ss_p90 = single.latency_ns["90.00_percentile"] / 1e3
        for key, value in (
            ("raw_samples_per_s", raw_rate), ("raw_per_core_samples_per_s", per_core),
            ("offline_samples_per_s", offline.metric_value),
            ("offline_ratio", offline.metric_value / raw_rate),
            ("offline_ratio_per_core", offline.metric_value / per_core),
            # The best raw configuration: one default session or one per core, each at
            # its own best batch.
            ("raw_best_samples_per_s", max(raw_rate, per_core)),
            ("offline_ratio_best_raw", offline.metric_value / max(raw_rate, per_core)),
            ("raw_ss_p90_us", raw_p90), ("ss_p90_us", ss_p90),
            ("ss_overhead_us", ss_p90 - raw_p90), ("raw_binding_ss_p90_us", binding_p90),
            ("ss_overhead_vs_binding_us", ss_p90 - binding_p90),
            ("minimal_sut_ss_p90_us", minimal["p90_us"]),
            ("minimal_sut_ss_overhead_us", minimal["p90_us"] - raw_p90),
            ("null_samples_per_s", null.metric_value),
            ("loadgen_null_sut_samples_per_s", ceiling),
            ("null_ratio", null.metric_value / ceiling),
            # What ours / best raw would be if every sample paid the best raw inference
            # and, on the same cores one after the other, LoadGen's own per-sample cost
            # (its Python null SUT's rate): a model, not a bound, since LoadGen's threads
            # can overlap inference on another core. It says how much of the gap to 1.0
            # is LoadGen's, whatever the SUT does.
            ("offline_ratio_serial_loadgen_model",
             1 / (1 + max(raw_rate, per_core) / ceiling))):
            series[key].append(value)
    figures: dict[str, Any] = {"raw_best_batch": batch, "raw_per_core_threads": cores,
                               "raw_per_core_best_batch": core_batch,
                               "ours_offline_batch": offline_batch("digits")}
    figures |= {key: stats(values) for key, values in series.items()}
    if not args.skip_server:
        # A VALID Server run must get through every stall of a shared VM, so one search
        # says little: ours and the null SUT's are interleaved and repeated too.
        offline_rate = statistics.median(series["offline_samples_per_s"])
        ours_qps, null_qps, lg_cores = [], [], []
        searches: list[list[str]] = []
        target_rate = 0.6 * offline_rate
        for repeat in range(args.repeats):
            searches.append([])
            ours_qps.append(server_max_valid("onnxruntime", offline_rate, tmp / f"srv{repeat}",
                                             3000, searches[-1]))
            null_qps.append(null_server_ceiling(tmp / f"null_srv{repeat}"))
            lg_cores.append(loadgen_cores_at(target_rate, tmp / f"null_cpu{repeat}"))
        qps, null = statistics.median(ours_qps), statistics.median(null_qps)
        figures["server_max_valid_qps"] = stats(ours_qps)
        figures["server_over_offline_ratio"] = qps / offline_rate
        figures["loadgen_null_sut_server_max_valid_qps"] = stats(null_qps)
        figures["server_over_null_sut_server"] = qps / null
        figures["null_sut_server_over_offline_ratio"] = null / offline_rate
        figures["server_searches"] = searches
        # What 0.6 x our Offline rate asks of the machine, from below: inference at the
        # raw one-loop-per-core cost (the least this backend needs per sample) plus what
        # LoadGen's own work took at that rate in its null SUT. Any Python SUT on this
        # backend needs at least this share of the cores, before any queueing headroom.
        lg = statistics.median(lg_cores)
        inference = target_rate * cores / statistics.median(series["raw_per_core_samples_per_s"])
        figures["loadgen_null_sut_cores_at_0.6_offline"] = stats(lg_cores)
        figures["inference_cores_at_0.6_offline"] = inference
        figures["cpu_share_needed_at_0.6_offline"] = (lg + inference) / cores
        # Once, for context: the same ceiling when LoadGen makes one call per query.
        figures["loadgen_null_sut_server_uncoalesced_max_valid_qps"] = null_server_ceiling(
            tmp / "null_srv_uncoalesced", coalesce=False)
    return figures


def measure_resnet50(args: argparse.Namespace, tmp: Path) -> dict[str, Any] | None:
    """ResNet-50-shaped model (random fixed-seed weights): raw loop vs our Offline."""
    from bench_models import build_resnet50_workload

    dataset, model = build_resnet50_workload(tmp / "resnet50")
    data = np.random.default_rng(0).standard_normal((16, 3, 224, 224), dtype=np.float32)
    sess = raw.session(model)
    batch, _, swept = raw.best_batch_until_flat(sess, data, [1, 4, 8], 3.0, limit=128)
    raw_rates, ours, ratios = [], [], []
    for _ in range(args.repeats):
        raw_rates.append(raw.throughput(sess, data, batch, args.seconds * 3))
        perf = harness("offline", "onnxruntime", {
            "data.dataset_dir": json.dumps(str(dataset)), "data.model_path":
            json.dumps(str(model)), "loadgen.min_duration_ms": int(args.seconds * 3000),
            "loadgen.expected_qps": round(raw_rates[-1], 2), "sut.max_batch_size": batch},
            tmp, benchmark="resnet50")
        ours.append(perf.metric_value)
        ratios.append(perf.metric_value / raw_rates[-1])
    return {"raw_best_batch": batch, "raw_batch_sweep": {str(b): round(r, 1)
                                                         for b, r in swept.items()},
            "raw_samples_per_s": stats(raw_rates),
            "offline_samples_per_s": stats(ours), "offline_ratio": stats(ratios)}


def _reference_label(figures: dict[str, Any]) -> str:
    """Where the reference harness's figure in ``figures`` comes from."""
    if "reference_error" in figures:
        return "main.py failed here: see reference_error"
    if str(figures.get("reference_source", "")).startswith("measured"):  # --reference
        return (f"main.py measured here; ours / reference "
                f"{figures['ratio_fixed_over_reference_median']:.2f}")
    return "issue 40's figure, not measured here"


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=3.0, help="per measurement")
    parser.add_argument("--skip-server", action="store_true", help="skip the Server search")
    parser.add_argument("--skip-resnet50", action="store_true")
    parser.add_argument("--skip-simulated", action="store_true",
                        help="skip the Server-at-accelerator-speed search (bench_simulated.py)")
    parser.add_argument("--skip-llm", action="store_true",
                        help="skip tinylm's Offline figures (bench_llm.py; needs torch)")
    parser.add_argument("--skip-endpoint", action="store_true",
                        help="skip the endpoint client's figures (bench_endpoint.py)")
    parser.add_argument("--reference", metavar="PATH_TO_INFERENCE_CHECKOUT", type=Path,
                        help="measure the MLPerf reference harness's fixed cost beside ours "
                             "(digits and ResNet-50 Offline; bench/reference_harness.py)")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results")
    parser.add_argument("--record", default=str(REPO / "bench" / "PERFORMANCE.md"),
                        help="append the headline figures to this file ('': do not)")
    args = parser.parse_args()
    reference = args.reference.resolve() if args.reference else None
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        report: dict[str, Any] = {
            "created_utc": datetime.now(UTC).isoformat(timespec="seconds"),
            "machine": collect(),
            "settings": {"repeats": args.repeats, "seconds": args.seconds},
            "digits": measure_digits(args, tmp),
            "resnet50_shaped": None if args.skip_resnet50 else measure_resnet50(args, tmp),
            "simulated": None if args.skip_simulated else bench_simulated.measure(
                args.seconds, 5, tmp / "simulated"),
            "fixed_cost": bench_fixed_cost.measure(tmp / "fixed_cost", args.repeats,
                                                   reference=reference),
            "fixed_cost_resnet50": None if args.skip_resnet50 else
            bench_fixed_cost_resnet50.measure(tmp / "fixed_cost_resnet50", 3, 500,
                                              reference=reference),
            "checker": bench_checker.measure(tmp / "checker"),
            # tinylm Offline against the best raw static batch, and the harness's CPU
            # share; small settings (about a minute): the Server ladders are bench_llm.py's
            "llm": None if args.skip_llm else bench_llm.measure(
                tmp / "llm", samples=128, batches=(16, 32, 64), repeats=5),
            # the openai backend's client against AIPerf on the synthetic endpoint, and on
            # vLLM against vLLM's own client and AIPerf (where installed)
            "endpoint": None if args.skip_endpoint else _endpoint(tmp / "endpoint"),
            "note": "harness figures are LoadGen's own; raw figures time session.run in a "
                    "plain loop; ratios are formed within this invocation",
        }
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"bench_{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}.json"
    path.write_text(json.dumps(report, indent=2) + "\n")
    rows = _rows(report)
    _print(rows, f"digits, median [min-max] of {report['settings']['repeats']} runs")
    print(f"written: {path}")
    if args.record:
        _append_performance(report, rows, path, Path(args.record))
        print(f"appended to: {args.record}")
    return 0


def _endpoint(tmp: Path) -> dict[str, Any]:
    aiperf = REPO / ".venv-aiperf" / "bin" / "aiperf"
    binary = str(aiperf) if aiperf.is_file() else None
    figures: dict[str, Any] = {"client": bench_endpoint.measure(tmp, rounds=3,
                                                                aiperf_binary=binary)}
    engine = REPO / ".venv-vllm" / "bin" / "python"
    if engine.is_file():
        figures["engine"] = bench_endpoint.engine_comparison(str(engine), tmp, 256, 16, 3,
                                                             binary)
    return figures


class _Rows(list[tuple[str, str]]):
    """The headline figures, in order: printed as a table and appended to PERFORMANCE.md."""

    def add_row(self, figure: str, value: str) -> None:
        self.append((figure, value))


def _print(rows: _Rows, title: str) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    table.add_column("figure")
    table.add_column("value")
    for figure, value in rows:
        table.add_row(figure, value)
    Console().print(table)


def _append_performance(report: dict[str, Any], rows: _Rows, json_path: Path,
                        target: Path) -> None:
    """Append this invocation's headline figures to ``bench/PERFORMANCE.md``, dated and
    with the commit, under "make bench runs" (the JSON keeps every figure)."""
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO,
                            capture_output=True, text=True, check=False).stdout.strip()
    load = os.getloadavg()
    lines = ["", f"### {report['created_utc']} at {commit or 'an unknown commit'}", "",
             f"`make bench` (repeats {report['settings']['repeats']}, "
             f"{report['settings']['seconds']:g} s per measurement; load average "
             f"{load[0]:.1f} at the end; every figure in `{json_path.relative_to(REPO)}`). "
             "Medians [min-max]; ratios formed within this invocation.", "",
             "| figure | value |", "|---|---|"]
    lines += [f"| {figure} | {value} |" for figure, value in rows]
    text = target.read_text(encoding="utf-8") if target.exists() else ""
    heading = "## make bench runs"
    if heading not in text:
        text = text.rstrip("\n") + f"\n\n{heading}\n\nAppended by `make bench`, newest last.\n"
    target.write_text(text.rstrip("\n") + "\n" + "\n".join(lines) + "\n", encoding="utf-8")


def _rows(report: dict[str, Any]) -> _Rows:
    digits = report["digits"]
    table = _Rows()

    def row(name: str, key: str, fmt: str) -> None:
        s = digits[key]
        table.add_row(name, f"{fmt.format(s['median'])} [{fmt.format(s['min'])}-"
                      f"{fmt.format(s['max'])}]")

    table.add_row("raw best batch", str(digits["raw_best_batch"]))
    table.add_row("ours Offline batch (configured)", str(digits["ours_offline_batch"]))
    row("raw onnxruntime samples/s (one loop)", "raw_samples_per_s", "{:,.0f}")
    row(f"raw samples/s ({digits['raw_per_core_threads']} loops, 1 thread each)",
        "raw_per_core_samples_per_s", "{:,.0f}")
    row("ours Offline samples/s", "offline_samples_per_s", "{:,.0f}")
    row("ours / raw (Offline)", "offline_ratio", "{:.3f}")
    row("ours / raw one loop per core (Offline)", "offline_ratio_per_core", "{:.3f}")
    row("ours / best raw (Offline; target >= 0.85)", "offline_ratio_best_raw", "{:.3f}")
    row("raw 1-sample p90 (µs)", "raw_ss_p90_us", "{:.1f}")
    row("ours SingleStream p90 (µs)", "ss_p90_us", "{:.1f}")
    row("SingleStream p90 overhead (µs)", "ss_overhead_us", "{:.1f}")
    row("raw 1-sample p90 through the binding, as our backend calls it (µs)",
        "raw_binding_ss_p90_us", "{:.1f}")
    row("SingleStream p90 overhead over that (µs)", "ss_overhead_vs_binding_us", "{:.1f}")
    row("minimal LoadGen SUT p90 overhead (µs)", "minimal_sut_ss_overhead_us", "{:.1f}")
    row("null backend Offline samples/s", "null_samples_per_s", "{:,.0f}")
    row("LoadGen Python null SUT samples/s", "loadgen_null_sut_samples_per_s", "{:,.0f}")
    row("null / LoadGen null SUT", "null_ratio", "{:.3f}")
    row("best raw with LoadGen's per-sample cost added serially, / best raw (a model)",
        "offline_ratio_serial_loadgen_model", "{:.3f}")
    if "server_max_valid_qps" in digits:
        row("Server max VALID QPS (10 ms)", "server_max_valid_qps", "{:,.0f}")
        table.add_row("Server max / ours Offline", f"{digits['server_over_offline_ratio']:.3f}")
        row("LoadGen null SUT Server max VALID QPS (10 ms)",
            "loadgen_null_sut_server_max_valid_qps", "{:,.0f}")
        table.add_row("ours Server max / null SUT Server max",
                      f"{digits['server_over_null_sut_server']:.3f}")
        table.add_row("null SUT Server max / ours Offline",
                      f"{digits['null_sut_server_over_offline_ratio']:.3f}")
        table.add_row("LoadGen null SUT Server max, uncoalesced (one search)",
                      f"{digits['loadgen_null_sut_server_uncoalesced_max_valid_qps']:,.0f}")
        row("LoadGen null SUT cores at 0.6 x ours Offline",
            "loadgen_null_sut_cores_at_0.6_offline", "{:.2f}")
        table.add_row("inference cores at that rate (raw per-core cost)",
                      f"{digits['inference_cores_at_0.6_offline']:.2f}")
        table.add_row("share of the cores needed at that rate (at least)",
                      f"{digits['cpu_share_needed_at_0.6_offline']:.2f}")
    resnet = report.get("resnet50_shaped")
    if resnet:
        for name, key in (("ResNet-50-shaped raw samples/s", "raw_samples_per_s"),
                          ("ResNet-50-shaped ours Offline samples/s", "offline_samples_per_s"),
                          ("ResNet-50-shaped ours / raw", "offline_ratio")):
            s = resnet[key]
            table.add_row(name, f"{s['median']:.3f} [{s['min']:.3f}-{s['max']:.3f}]")
        table.add_row("ResNet-50-shaped raw best batch", str(resnet["raw_best_batch"]))
    for figures in (report.get("simulated") or {}).values():
        table.add_row(f"simulated {figures['profile']}: Offline samples/s",
                      f"{figures['offline_samples_per_s']:,.0f}")
        table.add_row(f"simulated {figures['profile']}: Server max VALID QPS (15 ms)",
                      f"{figures['server_max_valid_qps']:,.0f}")
        by_model = ", ".join(f"{m} {v['over_offline_ratio']:.3f}" for m, v in
                             figures.get("server_by_worker_model", {}).items())
        table.add_row(f"simulated {figures['profile']}: Server / Offline (target >= 0.8)",
                      f"{figures['server_over_offline_ratio']:.3f} "
                      f"({figures.get('server_worker_model', 'threads')}; {by_model})")
    fixed = report.get("fixed_cost")
    if fixed:
        table.add_row("digits Offline outside the LoadGen test, end to end, s: ours / plain "
                      f"LoadGen harness / reference ({_reference_label(fixed)})",
                      f"{fixed['fixed_cost_s']:.2f} / {fixed.get('plain_loadgen_fixed_s', 0):.2f}"
                      f" / {fixed.get('reference_fixed_s') or 0:.2f} (ours / plain "
                      f"{fixed.get('ratio_fixed_over_plain', 0):.2f}; parent "
                      f"{fixed.get('parent_s', 0):.2f}, child start "
                      f"{fixed.get('child_start_s', 0):.2f}, after {fixed.get('after_s', 0):.2f})")
        stated = fixed.get("stated_rate") or {}
        table.add_row("  null backend at a stated rate: ours / plain",
                      f"{stated.get('fixed_cost_s', 0):.2f} / "
                      f"{stated.get('plain_loadgen_fixed_s', 0):.2f}")
    resnet_fixed = report.get("fixed_cost_resnet50")
    if resnet_fixed:
        table.add_row("ResNet-50 Offline outside the LoadGen test, end to end, s: ours / "
                      f"plain LoadGen harness / reference ({_reference_label(resnet_fixed)})",
                      f"{resnet_fixed['warm_fixed_s']:.2f} / "
                      f"{resnet_fixed['plain_loadgen_fixed_s']:.2f} / "
                      f"{resnet_fixed.get('reference_fixed_s') or 0:.2f} (ours / plain "
                      f"{resnet_fixed.get('ratio_fixed_over_plain_loadgen', 0):.2f})")
    llm = (report.get("llm") or {}).get("offline")
    if llm:
        table.add_row("tinylm Offline tokens/s, ours", f"{llm['ours_tokens_per_s']:,.0f}")
        table.add_row(f"tinylm ours / best raw static batch ({llm['raw_best_static_batch']}; "
                      "target >= 1.0)", f"{llm['ratio_ours_over_best_raw_static']:.3f}")
    endpoint = report.get("endpoint") or {}
    for chunk in ("chunk_1", "chunk_16"):
        figures = (endpoint.get("client") or {}).get(chunk) or {}
        ours = figures.get("ours_0w", {}).get("us_per_request")
        if ours is None:
            continue
        tokens = 1 if chunk == "chunk_1" else 16
        theirs = figures.get("aiperf", {}).get("us_per_request")
        table.add_row(f"endpoint client CPU per request, {tokens}-token chunks (us): ours "
                      "in-process / 1 process / AIPerf",
                      f"{ours:,.0f} / {figures['ours_1w']['us_per_request']:,.0f} / "
                      + (f"{theirs:,.0f} (ours / AIPerf {ours / theirs:.3f})" if theirs
                         else "not installed"))
    engine = endpoint.get("engine")
    if engine:
        over = engine["ours_over"]
        table.add_row("vLLM tinylm output tokens/s, ours / vllm bench serve / AIPerf",
                      " / ".join(f"{v:,.0f}" for v in engine["median_tokens_per_s"].values())
                      + " (" + ", ".join(f"ours/{k} {v:.3f}" for k, v in over.items()) + ")")
    return table


if __name__ == "__main__":
    sys.exit(main())
