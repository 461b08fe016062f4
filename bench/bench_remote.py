"""``make bench``'s remote figures: the remote backend against real MLServer replicas.

* **Client overhead**: our remote Offline (LoadGen, ``--backend remote``, gRPC) against
  a raw ``tritonclient`` gRPC loop at the same batch size and concurrency, on the same
  single server. Ratio = ours / raw (target >= 0.9).
* **Server**: the highest VALID Server rate at digits' 10 ms bound over two replicas,
  with the client in worker processes (``sut.worker_model = "processes"``; ``threads``
  with ``--worker-model``). The rate is halved from ``--start-qps`` until a probe is
  VALID or ``--floor-qps`` is passed, then bisected; each probe is a real LoadGen run.
  With none VALID, the lowest probe's p99 is reported.
* **CPU shares**: client and servers share this machine's cores. While LoadGen runs,
  a sampler reads ``/proc/<pid>/stat`` (utime + stime + reaped children) of the
  replicas' process trees and of the suite's own processes (the run's child and its
  worker processes), and ``/proc/stat`` for the whole machine (other tenants).
* **Where a request's time goes**: the client CPU of one batch-1 request, ours and raw
  ``tritonclient``, over gRPC and REST JSON; and a raw ``tritonclient`` batch-1 loop's
  latency percentiles against one replica, beside the model's own time (onnxruntime in
  this process). The raw loop's p99 is the floor under any Server run's p99.

    python bench/bench_remote.py --seconds 3
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench_remote_cpu import TreeCpu, cpu_per_request, latency_loop  # noqa: E402

from suite.api import run  # noqa: E402
from suite.config.loader import ConfigRequest  # noqa: E402
from suite.models import load_card  # noqa: E402
from suite.paths import find_paths  # noqa: E402
from suite.serve.launcher import Replica, start_replicas, stop_replicas  # noqa: E402

BATCH = 64        # the served model's max batch: one request per SUT batch
CONCURRENCY = 2   # SUT worker threads / raw client threads
BOUND_MS = 10.0
#: The Server probes' ``sut.worker_model`` (``--worker-model``).
WORKER_MODEL = ["processes"]


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _server_cpu(replicas: list[Replica]) -> float:
    """CPU seconds the replicas' processes used so far (utime + stime, clock ticks)."""
    total = 0
    for replica in replicas:
        fields = Path(f"/proc/{replica.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def raw_loop(url: str, seconds: float, batch: int, threads: int) -> dict[str, Any]:
    """``threads`` tritonclient gRPC clients sending batch-``batch`` requests back to back."""
    import numpy as np
    import tritonclient.grpc as grpcclient

    client = grpcclient.InferenceServerClient(url.removeprefix("grpc://"))
    data = np.random.default_rng(0).random((batch, 1, 8, 8), dtype=np.float32)
    counts = [0] * threads
    stop = time.perf_counter() + seconds

    def work(n: int) -> None:
        tensor = grpcclient.InferInput("input", list(data.shape), "FP32")
        tensor.set_data_from_numpy(data)
        wanted = [grpcclient.InferRequestedOutput("logits")]
        while time.perf_counter() < stop:
            client.infer("digits", [tensor], outputs=wanted).as_numpy("logits")
            counts[n] += 1

    warm = grpcclient.InferInput("input", list(data.shape), "FP32")
    warm.set_data_from_numpy(data)
    for _ in range(20):  # connection, server-side allocations: as the SUT's warm-up
        client.infer("digits", [warm])
    cpu0, wall0 = time.process_time(), time.perf_counter()
    workers = [threading.Thread(target=work, args=(n,)) for n in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    client.close()
    requests = sum(counts)
    return {"samples_per_s": requests * batch / wall, "requests": requests,
            "client_cpu_us_per_request": cpu / requests * 1e6, "client_cpu_s": cpu,
            "wall_s": wall}


def _new_run(runs: Path, before: set[Path]) -> Path | None:
    fresh = [p for p in runs.glob("*") if p.is_dir() and p not in before]
    return fresh[0] if len(fresh) == 1 else None


def _suite_run(scenario: str, urls: list[str], runs: Path, seconds: float,
               sets: list[str], replicas: list[Replica]) -> dict[str, Any]:
    """One real run; the CPU of each side while LoadGen ran (``TreeCpu``), and the run's
    own record of what each endpoint served (``status.json``: ``backend.run``)."""
    runs.mkdir(parents=True, exist_ok=True)
    before = set(runs.glob("*"))
    cpu0, server0, wall0 = _children_cpu(), _server_cpu(replicas), time.perf_counter()
    request = ConfigRequest(
        benchmark="digits", scenario=scenario, backend="remote", quick=True, runs_dir=runs,
        use_tuned=False,
        sets=["backend.remote.endpoints=" + json.dumps(urls),
              f"loadgen.min_duration_ms={int(seconds * 1000)}", *sets])
    tree = TreeCpu([r.process.pid for r in replicas])

    def loadgen_running() -> bool:  # from its detail log's start to the child's status
        run_dir = _new_run(runs, before)
        return run_dir is not None and any(run_dir.glob("*/mlperf_log_detail.txt")) and \
            not any(run_dir.glob("*/status.json"))

    tree.mark = loadgen_running
    with tree:
        result = run(request)
    wall = time.perf_counter() - wall0
    test = result.tests[0]
    perf = test.performance
    status_path = Path(test.directory) / "status.json"
    status = json.loads(status_path.read_text()) if status_path.is_file() else {}
    # Batches the run completed (not warm-up); each is one request (batch <= the model's).
    requests = int(status.get("batches", {}).get("batches", 0)) or None
    window = tree.window()
    client_cpu = _children_cpu() - cpu0
    per_request = (window["client_cpu_s"] / requests * 1e6 if window and requests else None)
    record = status.get("backend", {}).get("run", {})
    return {
        "valid": bool(perf is not None and perf.is_valid),
        "metric": perf.metric_value if perf is not None else None,
        "p99_ms": (perf.latency_ns.get("99.00_percentile", 0) / 1e6
                   if perf is not None and perf.latency_ns else None),
        "requests": requests,
        # The whole child (imports, load, warm-up) is counted: an upper bound.
        "client_cpu_s_whole_run": round(client_cpu, 3),
        "server_cpu_s_whole_run": round(_server_cpu(replicas) - server0, 3),
        # While LoadGen ran: each side's CPU and share of the machine.
        "loadgen_window": window,
        "client_cpu_us_per_request_in_run": round(per_request, 1) if per_request else None,
        # The run's own record (status.json backend.run) where the child writes it.
        "endpoints": record.get("endpoints"),
        "client_processes_record": record.get("client_processes"),
        "wall_s": round(wall, 2),
        "batches": status.get("batches", {}),
        "run_dir": str(result.run_dir),
    }


def _server_probe(qps: float, both: list[str], tmp: Path, seconds: float, processes: int,
                  replicas: list[Replica]) -> dict[str, Any]:
    # At least 1500 queries: early stopping at the 99th percentile needs ~600 even when
    # every query meets the bound, and more once a few miss it.
    probe = _suite_run("server", both, tmp / "runs", max(seconds, 1500 / qps), [
        f"loadgen.target_qps={qps:.0f}", f"sut.workers={processes}",
        f'sut.worker_model="{WORKER_MODEL[0]}"', "sut.max_batch_size=16"], replicas)
    probe["target_qps"] = round(qps)
    window = probe["loadgen_window"] or {}
    total = window.get("client_cpu_s", 0.0) + window.get("server_cpu_s", 0.0)
    probe["client_cpu_share"] = round(window["client_cpu_s"] / total, 3) if total else None
    probe["server_cpu_share"] = round(window["server_cpu_s"] / total, 3) if total else None
    print(f"  Server {qps:.0f} QPS: {'VALID' if probe['valid'] else 'INVALID'}, p99 "
          f"{probe['p99_ms']} ms, CPU client/server {probe['client_cpu_share']}/"
          f"{probe['server_cpu_share']}", flush=True)
    return probe


def search_server(both: list[str], tmp: Path, seconds: float, processes: int,
                  replicas: list[Replica], start: float, floor: float,
                  steps: int) -> tuple[dict[str, Any] | None, list[dict[str, Any]]]:
    """Halve from ``start`` until a probe is VALID or ``floor`` is passed; then bisect
    between the VALID rate and the INVALID one above it for ``steps`` probes."""
    probes: list[dict[str, Any]] = []
    best: dict[str, Any] | None = None
    qps, hi = start, 0.0
    while qps >= floor:
        probe = _server_probe(qps, both, tmp, seconds, processes, replicas)
        probes.append(probe)
        if probe["valid"]:
            best = probe
            break
        hi, qps = qps, qps / 2
    if best is None or not hi:
        return best, probes
    lo = float(best["target_qps"])
    for _ in range(steps):
        qps = (lo + hi) / 2
        probe = _server_probe(qps, both, tmp, seconds, processes, replicas)
        probes.append(probe)
        if probe["valid"]:
            lo, best = qps, probe
        else:
            hi = qps
    return best, probes


def measure(seconds: float, tmp: Path, steps: int = 3, processes: int = 2,
            start_qps: float = 400.0, floor_qps: float = 50.0) -> dict[str, Any]:
    """Every figure on fresh replicas under ``tmp``."""
    card = load_card(find_paths(), "digits")
    replicas = start_replicas(card, 2, tmp / "replicas", max_batch_size=BATCH)
    try:
        one = [replicas[0].grpc_url]
        raw = raw_loop(one[0], seconds, BATCH, CONCURRENCY)
        ours = _suite_run("offline", one, tmp / "runs", seconds, [
            f"sut.max_batch_size={BATCH}", f"sut.workers={CONCURRENCY}",
            # LoadGen sizes the query from this: above the raw rate, so the run lasts
            # at least ``seconds`` (a shorter one is INVALID, though its rate is real).
            f"loadgen.expected_qps={2 * raw['samples_per_s']:.0f}"], replicas[:1])
        # Other tenants' load drifts within seconds here: the raw loop runs again after
        # ours, and ours is compared with the mean of the two.
        raw_after = raw_loop(one[0], seconds, BATCH, CONCURRENCY)
        per_request = cpu_per_request(one[0], replicas[0].http_url, seconds)
        latency = latency_loop(one[0], replicas[0].http_url, seconds)
        print(f"  raw tritonclient batch-1 loop p99: gRPC {latency['grpc']['p99_ms']} ms, "
              f"REST JSON {latency['rest_json']['p99_ms']} ms, onnxruntime in process "
              f"{latency['onnxruntime_in_process']['p99_ms']} ms", flush=True)
        both = [r.grpc_url for r in replicas]
        best, probes = search_server(both, tmp, seconds, processes, replicas, start_qps,
                                     floor_qps, steps)
    finally:
        stop_replicas(replicas)
    raw_mean = (raw["samples_per_s"] + raw_after["samples_per_s"]) / 2
    ratio = (ours["metric"] or 0.0) / raw_mean
    lowest = min(probes, key=lambda p: p["target_qps"])
    return {
        "machine_cores": os.cpu_count(),
        # Other tenants' load on the shared cores (1-minute load average at the end).
        "load_average": round(os.getloadavg()[0], 2),
        "client_overhead": {"batch": BATCH, "concurrency": CONCURRENCY, "raw": raw,
                            "raw_after": raw_after, "ours": ours, "ratio": round(ratio, 3),
                            "target": 0.9},
        "raw_request_latency_one_replica": latency,
        "server_10ms_two_replicas": {
            "client_processes": processes,
            "worker_model": WORKER_MODEL[0],
            "highest_valid_qps": best["target_qps"] if best else None,
            "client_cpu_share": best["client_cpu_share"] if best else None,
            "server_cpu_share": best["server_cpu_share"] if best else None,
            "lowest_probe": {"target_qps": lowest["target_qps"], "p99_ms": lowest["p99_ms"],
                             "valid": lowest["valid"]},
            "client_cpu_us_per_request": per_request,
            "one_client_core_requests_per_s": round(
                1e6 / per_request["ours_grpc_cpu_us_per_request"]),
            "probes": probes,
        },
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--steps", type=int, default=3,
                        help="bisection probes after the first VALID rate")
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--start-qps", type=float, default=400.0)
    parser.add_argument("--floor-qps", type=float, default=50.0,
                        help="halve the rate from --start-qps down to this at most")
    parser.add_argument("--worker-model", choices=["processes", "threads"],
                        default="processes", help="the Server probes' sut.worker_model")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results")
    args = parser.parse_args()
    WORKER_MODEL[0] = args.worker_model
    with tempfile.TemporaryDirectory(prefix="bench-remote-") as tmp:
        report = measure(args.seconds, Path(tmp), args.steps, args.processes,
                         args.start_qps, args.floor_qps)
    report["date"] = datetime.now(UTC).isoformat(timespec="seconds")
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"bench_remote_{datetime.now(UTC):%Y%m%dT%H%M%SZ}.json"
    path.write_text(json.dumps(report, indent=2) + "\n")
    overhead, server = report["client_overhead"], report["server_10ms_two_replicas"]
    print(f"remote Offline / raw tritonclient gRPC (batch {BATCH}, concurrency "
          f"{CONCURRENCY}): {overhead['ratio']:.2f} (target >= 0.9)")
    cpu = server["client_cpu_us_per_request"]
    lowest = server["lowest_probe"]
    print(f"remote Server at 10 ms, 2 replicas, {server['client_processes']} client "
          f"processes: highest VALID {server['highest_valid_qps']} QPS (CPU client "
          f"{server['client_cpu_share']}, servers {server['server_cpu_share']}); lowest "
          f"probe {lowest['target_qps']} QPS p99 {lowest['p99_ms']} ms")
    print(f"client CPU per batch-1 request: gRPC ours {cpu['ours_grpc_cpu_us_per_request']} "
          f"us, raw {cpu['raw_grpc_cpu_us_per_request']} us; REST JSON ours "
          f"{cpu['ours_rest_json_cpu_us_per_request']} us, raw "
          f"{cpu['raw_rest_json_cpu_us_per_request']} us")
    latency = report["raw_request_latency_one_replica"]
    print("raw tritonclient batch-1 loop, one replica: " + "; ".join(
        f"{name} p50 {v['p50_ms']} p99 {v['p99_ms']} ms" for name, v in latency.items()))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
