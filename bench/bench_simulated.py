"""``make bench``'s Server-at-accelerator-speed figures, on the simulated backend.

For each accelerator profile (``reference_models/simulated/profiles.toml``) it runs
the real ``resnet50`` pipeline (3 x 224 x 224 inputs through the preprocessing cache,
512 synthetic JPEGs) with the ``simulated`` backend:

* Offline at batch 256: our Offline rate on that profile, the best of ``ATTEMPTS`` runs
  (the same method as each Server rate's, so the ratio is not flattered);
* Server at the round's 15 ms bound: the highest target QPS that ends VALID (in one of
  ``ATTEMPTS`` runs), by bisection between 0.3 and 1.0 of that Offline rate (halving
  below 0.3 when that fails), each probe a real LoadGen run;

and reports Server / Offline with each probe's p99, completed rate and batch record
(sizes, seconds per phase, the derived batch cap), the evidence of where a missed
target went. Every figure is LoadGen's, read from the run's ``result.json`` and
``status.json``.

    python bench/bench_simulated.py --seconds 3

``--rates`` probes fixed rates instead (each ``--repeat`` times, rates interleaved, with
``--set`` for an A/B of a setting) and prints each run's LoadGen p99 beside where its
calls' time went on the simulated devices (the backend's run record, ``backend.run``):

    python bench/bench_simulated.py --profile resnet50-4gpu-fp16 --rates 8000,9600 \
        --repeat 3 --set sut.switch_interval_us=500
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

from suite.api import run  # noqa: E402
from suite.config.loader import ConfigRequest  # noqa: E402

PROFILES = ("resnet50-h100-fp16", "resnet50-4gpu-fp16")
#: Runs per Server rate; the rate is sustained when one of them is VALID (see ``valid``).
ATTEMPTS = 2
#: Server's worker models, each searched (``sut.worker_model``): with processes the
#: simulated backend's workers share one node's devices (``SharedDevices``).
WORKER_MODELS = ("threads", "processes")


def _images(directory: Path, count: int) -> Path:
    """``count`` synthetic ImageNet-format JPEGs (the ResNet-50 test fixture's)."""
    from bench_models import fixture_module

    images = directory / "imagenet"
    fixture_module().write_dataset(images, count)
    return images


def _run(scenario: str, profile: str, workers: int, sets: dict[str, Any], env: dict[str, str],
         runs: Path) -> dict[str, Any]:
    """One ``--quick`` resnet50 run on the simulated backend: LoadGen's figures and the
    SUT's batch record."""
    request = ConfigRequest(
        benchmark="resnet50", scenario=scenario, backend="simulated", quick=True,
        runs_dir=runs, use_tuned=False,
        sets=[f'backend.simulated.profile="{profile}"', f"sut.workers={workers}",
              "sut.max_batch_size=256", f'data.dataset_dir="{env["images"]}"',
              f'data.model_path="{env["model"]}"', f'data.cache_dir="{env["cache"]}"',
              *(f"{k}={v}" for k, v in sets.items())])
    result = run(request)
    test = result.tests[0]
    perf = test.performance
    status_path = Path(test.directory) / "status.json"
    status = json.loads(status_path.read_text(encoding="utf-8")) if status_path.is_file() else {}
    return {
        "status": test.status.value if hasattr(test.status, "value") else str(test.status),
        "valid": bool(perf is not None and perf.is_valid),
        "metric": perf.metric_value if perf is not None else None,
        "p99_ms": (perf.latency_ns.get("99.00_percentile", 0) / 1e6
                   if perf is not None and perf.latency_ns else None),
        "derived": status.get("derived", {}),
        "batches": status.get("batches", {}),
        "device": status.get("backend", {}).get("run", {}),
        "run_dir": str(result.run_dir),
    }


def measure_profile(profile: str, seconds: float, steps: int, env: dict[str, str],
                    runs: Path) -> dict[str, Any]:
    from suite.backends.simulated import load_profile

    spec = load_profile(REPO / "reference_models" / "simulated" / "profiles.toml", profile)
    workers = spec.devices * spec.streams
    # Offline is measured as Server is: ATTEMPTS runs, the best kept (one Offline run
    # against the best of Server's searches flattered the ratio). Worker processes are
    # Server's only (an Offline run with them fails at setup, saying so).
    offline_runs = []
    for model in ("threads",):
        for attempt in range(1, ATTEMPTS + 1):
            one = _run("offline", profile, workers, {
                "loadgen.min_duration_ms": int(seconds * 1000), "loadgen.min_query_count": 1,
                "loadgen.expected_qps": round(spec.peak_samples_per_s),
                "sut.worker_model": f'"{model}"'}, env, runs)
            one.update(worker_model=model, attempt=attempt)
            offline_runs.append(one)
    offline = max(offline_runs, key=lambda r: float(r["metric"] or 0.0))
    rate = float(offline["metric"] or 0.0)
    searches = {model: _search(profile, workers, model, rate, seconds, steps, env, runs)
                for model in WORKER_MODELS}
    # The headline is the better worker model, as `suite tune --worker-models` would
    # choose; both searches are recorded.
    model = max(WORKER_MODELS, key=lambda m: searches[m]["server_max_valid_qps"])
    best = searches[model]["server_max_valid_qps"]
    return {"profile": profile, "workers": workers,
            "peak_samples_per_s": spec.peak_samples_per_s,
            "offline": offline, "offline_samples_per_s": rate, "offline_runs": offline_runs,
            "offline_method": f"best of {ATTEMPTS} runs (threads), as each Server rate",
            "server_max_valid_qps": best, "server_worker_model": model,
            "server_over_offline_ratio": best / rate if rate else 0.0,
            "server_by_worker_model": {
                m: {"max_valid_qps": searches[m]["server_max_valid_qps"],
                    "over_offline_ratio": (searches[m]["server_max_valid_qps"] / rate
                                           if rate else 0.0)}
                for m in WORKER_MODELS},
            "server_probes": [p for m in WORKER_MODELS for p in searches[m]["probes"]]}


def _search(profile: str, workers: int, worker_model: str, rate: float, seconds: float,
            steps: int, env: dict[str, str], runs: Path) -> dict[str, Any]:
    """The highest target QPS that ends VALID with ``worker_model``, by bisection
    between 0.3 and 1.0 of the Offline ``rate``, and every probe."""
    probes: list[dict[str, Any]] = []

    def valid(qps: float) -> bool:
        # A rate counts as sustained when one of ATTEMPTS runs is VALID, as a submitter
        # (and `suite tune`'s confirmation) retries: on a shared VM one stall of tens of
        # ms in a 3 s run puts 1-2 % of its queries past the bound at any rate (measured:
        # the same 1,800 QPS probe at p99 6.5 and 11.9 ms back to back), and a single
        # failed probe must not end the search. Every attempt is recorded.
        for attempt in range(1, ATTEMPTS + 1):
            probe = _run("server", profile, workers, {
                "loadgen.target_qps": round(qps, 1),
                "loadgen.min_duration_ms": int(seconds * 1000),
                "loadgen.min_query_count": 100,
                "sut.worker_model": f'"{worker_model}"'}, env, runs)
            probe.update(target_qps=round(qps, 1), attempt=attempt, worker_model=worker_model)
            probes.append(probe)
            print(f"  {profile} Server ({worker_model}) {qps:,.0f} QPS (attempt {attempt}): "
                  f"{probe['status']} p99 {probe['p99_ms'] or 0:.1f} ms, batches "
                  f"{probe['batches'].get('mean_size')}", file=sys.stderr, flush=True)
            if probe["valid"]:
                return True
        return False

    low, high = 0.3 * rate, 1.0 * rate
    best = 0.0
    # A first probe that fails on a busy machine still leaves a figure: halve down to a
    # twentieth of Offline before giving up, then bisect up to Offline. (Bisecting only
    # up to the failed rate let one stall cap the search: threads on the H100 profile
    # failed 3,727 QPS twice at p99 18-22 ms, then passed 1,863 to 3,668, and reported
    # 0.295 where the run before passed 9,983.)
    while not valid(low):
        low = low / 2
        if low < 0.05 * rate:
            low = 0.0
            break
    if low > 0:
        best = low
        for _ in range(steps):
            mid = (low + high) / 2
            if valid(mid):
                best = low = mid
            else:
                high = mid
    return {"server_max_valid_qps": best, "probes": probes}


def _env(tmp: Path) -> dict[str, str]:
    images = _images(tmp / "images", 512)
    model = tmp / "stand-in.onnx"
    model.write_bytes(b"the simulated backend loads no model file")
    return {"images": str(images), "model": str(model), "cache": str(tmp / "cache")}


def measure(seconds: float, steps: int, tmp: Path,
            profiles: tuple[str, ...] = PROFILES) -> dict[str, Any]:
    env = _env(tmp)
    return {name: measure_profile(name, seconds, steps, env, tmp / f"runs-{name}")
            for name in profiles}


def probe_rates(profiles: tuple[str, ...], rates: list[float], repeat: int, seconds: float,
                sets: list[str], tmp: Path) -> list[dict[str, Any]]:
    """Server runs at fixed ``rates``, ``repeat`` rounds, every profile and rate in each."""
    from suite.backends.simulated import load_profile

    env, probes = _env(tmp), []
    extra = dict(item.split("=", 1) for item in sets)
    for attempt in range(1, repeat + 1):
        for profile in profiles:
            spec = load_profile(REPO / "reference_models" / "simulated" / "profiles.toml",
                                profile)
            for qps in rates:
                probe = _run("server", profile, spec.devices * spec.streams, {
                    "loadgen.target_qps": qps, "loadgen.min_duration_ms": int(seconds * 1000),
                    "loadgen.min_query_count": 100, **extra}, env, tmp / f"runs-{profile}")
                probe.update(profile=profile, target_qps=qps, attempt=attempt, sets=sets)
                probes.append(probe)
                device = probe["device"]
                print(f"{profile} {qps:,.0f} QPS: {probe['status']} p99 "
                      f"{probe['p99_ms'] or 0:.1f} ms; batches of mean "
                      f"{probe['batches'].get('mean_size')}; device p99 "
                      f"{device.get('device_ms', {}).get('p99')} ms (queued "
                      f"{device.get('queued_ms', {}).get('p99')}), late return p99 "
                      f"{device.get('late_return_ms', {}).get('p99')} ms", flush=True)
    return probes


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="per LoadGen run")
    parser.add_argument("--steps", type=int, default=5, help="bisection steps")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results")
    parser.add_argument("--profile", action="append", choices=PROFILES,
                        help="measure only this profile (repeatable; default: all)")
    parser.add_argument("--rates", help="probe these Server rates (comma-separated QPS) "
                        "instead of searching")
    parser.add_argument("--repeat", type=int, default=1, help="rounds of --rates")
    parser.add_argument("--set", action="append", default=[], dest="sets",
                        metavar="KEY=VALUE", help="config for the --rates runs (repeatable)")
    args = parser.parse_args()
    if args.rates:
        with tempfile.TemporaryDirectory() as name:
            load_before = os.getloadavg()
            probes = probe_rates(tuple(args.profile or PROFILES),
                                 [float(r) for r in args.rates.split(",")], args.repeat,
                                 args.seconds, args.sets, Path(name))
            record: dict[str, Any] = {
                "created_utc": datetime.now(UTC).isoformat(timespec="seconds"),
                "load_average": {"before": load_before, "after": os.getloadavg()},
                "probes": probes}
        args.out.mkdir(parents=True, exist_ok=True)
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        path = args.out / f"bench_simulated_probes_{stamp}.json"
        path.write_text(json.dumps(record, indent=2) + "\n")
        print(f"written: {path}")
        return 0
    with tempfile.TemporaryDirectory() as name:
        # The load average before and after: the figures are host-bound, and a busy
        # machine (others' jobs on the same cores) moves them more than any change.
        load_before = os.getloadavg()
        figures = measure(args.seconds, args.steps, Path(name),
                          tuple(args.profile or PROFILES))
        report: dict[str, Any] = {"created_utc": datetime.now(UTC).isoformat(timespec="seconds"),
                  "load_average": {"before": load_before, "after": os.getloadavg()},
                  "simulated": figures}
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"bench_simulated_{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}.json"
    path.write_text(json.dumps(report, indent=2) + "\n")
    for profile_figures in figures.values():
        by_model = ", ".join(f"{m} {v['over_offline_ratio']:.3f}" for m, v in
                             profile_figures["server_by_worker_model"].items())
        print(f"{profile_figures['profile']}: Offline "
              f"{profile_figures['offline_samples_per_s']:,.0f} samples/s, Server max VALID "
              f"{profile_figures['server_max_valid_qps']:,.0f} QPS at 15 ms: "
              f"{profile_figures['server_over_offline_ratio']:.3f} of Offline ({by_model})")
    print(f"load average (1, 5, 15 min) before {report['load_average']['before']}, "
          f"after {report['load_average']['after']}")
    print(f"written: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
