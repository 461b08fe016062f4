"""``make bench``'s remote figures: the remote backend against real MLServer replicas.

* **Client overhead**: our remote Offline (LoadGen, ``--backend remote``, gRPC) against
  a raw ``tritonclient`` gRPC loop at the same batch size and concurrency, on the same
  single server. Ratio = ours / raw (target >= 0.9).
* **Server**: the highest VALID Server rate at digits' 10 ms bound over two replicas,
  with the client in worker processes (``sut.worker_model = "processes"``), by
  bisection; each probe is a real LoadGen run.
* **CPU shares**: client and servers share this machine's cores, so each figure comes
  with the CPU seconds each side used (the client: the run's process tree, from
  ``RUSAGE_CHILDREN``; a server: its ``/proc/<pid>/stat``), and the client's CPU per
  request, which sizes a bigger machine: one core issues ``1 / cpu_per_request``.

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

from suite.api import run  # noqa: E402
from suite.config import ConfigRequest  # noqa: E402
from suite.models import load_card  # noqa: E402
from suite.paths import find_paths  # noqa: E402
from suite.serve.launcher import Replica, start_replicas, stop_replicas  # noqa: E402

BATCH = 64        # the served model's max batch: one request per SUT batch
CONCURRENCY = 2   # SUT worker threads / raw client threads
BOUND_MS = 10.0


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


def client_cpu_per_request(url: str, seconds: float) -> dict[str, float]:
    """Client CPU per batch-1 request, ours (``RemoteBackend.predict``: balancer, checks,
    tritonclient) and raw tritonclient, each one thread back to back on one server."""
    import numpy as np
    import tritonclient.grpc as grpcclient

    from suite.backends import create

    card = load_card(find_paths(), "digits")
    backend = create("remote", {"endpoints": [url]})
    backend.load(card, 1)
    sample = np.zeros((1, 1, 8, 8), np.float32)
    client = grpcclient.InferenceServerClient(url.removeprefix("grpc://"))

    def raw() -> None:
        tensor = grpcclient.InferInput("input", [1, 1, 8, 8], "FP32")
        tensor.set_data_from_numpy(sample)
        client.infer("digits", [tensor]).as_numpy("logits")

    figures = {}
    for name, call in (("ours", lambda: backend.predict(sample)), ("raw", raw)):
        for _ in range(20):
            call()
        count, cpu0 = 0, time.process_time()
        stop = time.perf_counter() + seconds / 2
        while time.perf_counter() < stop:
            call()
            count += 1
        figures[f"{name}_cpu_us_per_request"] = round((time.process_time() - cpu0) / count
                                                      * 1e6, 1)
    backend.close()
    client.close()
    return figures


def _suite_run(scenario: str, urls: list[str], runs: Path, seconds: float,
               sets: list[str], replicas: list[Replica]) -> dict[str, Any]:
    cpu0, server0, wall0 = _children_cpu(), _server_cpu(replicas), time.perf_counter()
    request = ConfigRequest(
        benchmark="digits", scenario=scenario, backend="remote", quick=True, runs_dir=runs,
        use_tuned=False,
        sets=["backend.remote.endpoints=" + json.dumps(urls),
              f"loadgen.min_duration_ms={int(seconds * 1000)}", *sets])
    result = run(request)
    wall = time.perf_counter() - wall0
    test = result.tests[0]
    perf = test.performance
    status_path = Path(test.directory) / "status.json"
    status = json.loads(status_path.read_text()) if status_path.is_file() else {}
    requests = int(status.get("batches", {}).get("batches", 0)) or None
    client_cpu = _children_cpu() - cpu0
    return {
        "valid": bool(perf is not None and perf.is_valid),
        "metric": perf.metric_value if perf is not None else None,
        "p99_ms": (perf.latency_ns.get("99.00_percentile", 0) / 1e6
                   if perf is not None and perf.latency_ns else None),
        "requests": requests,
        # The whole child (imports, load, warm-up) is counted: an upper bound.
        "client_cpu_s": round(client_cpu, 3),
        "client_cpu_us_per_request": (round(client_cpu / requests * 1e6, 1)
                                      if requests else None),
        "server_cpu_s": round(_server_cpu(replicas) - server0, 3),
        "wall_s": round(wall, 2),
        "batches": status.get("batches", {}),
        "run_dir": str(result.run_dir),
    }


def measure(seconds: float, tmp: Path, steps: int = 4, processes: int = 2) -> dict[str, Any]:
    """Both figures on fresh replicas under ``tmp``; what ``bench_harness`` calls."""
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
        both = [r.grpc_url for r in replicas]
        per_request = client_cpu_per_request(one[0], seconds)
        lo, hi = 50.0, 800.0
        probes: list[dict[str, Any]] = []
        best: dict[str, Any] | None = None
        for _ in range(steps):
            qps = (lo + hi) / 2
            # At least 1500 queries: early stopping at the 99th percentile needs ~600
            # even when every query meets the bound, and more once a few miss it.
            probe = _suite_run("server", both, tmp / "runs", max(seconds, 1500 / qps), [
                f"loadgen.target_qps={qps:.0f}", f"sut.workers={processes}",
                'sut.worker_model="processes"', "sut.max_batch_size=16"], replicas)
            probe["target_qps"] = round(qps)
            # The client's CPU in the run: requests x its measured CPU per request (the
            # child's own total also holds imports, loading and warm-up); the servers'
            # from /proc. Reported for every probe, VALID or not.
            client_s = (probe["requests"] or 0) * per_request["ours_cpu_us_per_request"] / 1e6
            total = client_s + probe["server_cpu_s"]
            probe["client_cpu_share"] = round(client_s / total, 3) if total else None
            probe["server_cpu_share"] = round(probe["server_cpu_s"] / total, 3) if total else None
            probes.append(probe)
            if probe["valid"]:
                lo, best = qps, probe
            else:
                hi = qps
    finally:
        stop_replicas(replicas)
    ratio = (ours["metric"] or 0.0) / raw["samples_per_s"]
    return {
        "machine_cores": os.cpu_count(),
        # Other tenants' load on the shared cores (1-minute load average at the end).
        "load_average": round(os.getloadavg()[0], 2),
        "client_overhead": {"batch": BATCH, "concurrency": CONCURRENCY, "raw": raw,
                            "ours": ours, "ratio": round(ratio, 3), "target": 0.9},
        "server_10ms_two_replicas": {
            "client_processes": processes,
            "highest_valid_qps": best["target_qps"] if best else None,
            "client_cpu_share": best["client_cpu_share"] if best else None,
            "server_cpu_share": best["server_cpu_share"] if best else None,
            "client_cpu_us_per_request": per_request,
            "one_client_core_requests_per_s": round(
                1e6 / per_request["ours_cpu_us_per_request"]),
            "probes": probes,
        },
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-remote-") as tmp:
        report = measure(args.seconds, Path(tmp), args.steps, args.processes)
    report["date"] = datetime.now(UTC).isoformat(timespec="seconds")
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"bench_remote_{datetime.now(UTC):%Y%m%dT%H%M%SZ}.json"
    path.write_text(json.dumps(report, indent=2) + "\n")
    overhead, server = report["client_overhead"], report["server_10ms_two_replicas"]
    print(f"remote Offline / raw tritonclient gRPC (batch {BATCH}, concurrency "
          f"{CONCURRENCY}): {overhead['ratio']:.2f} (target >= 0.9)")
    print(f"remote Server at 10 ms, 2 replicas, {server['client_processes']} client "
          f"processes: {server['highest_valid_qps']} QPS; CPU client "
          f"{server['client_cpu_share']}, servers {server['server_cpu_share']}; client "
          f"{server['client_cpu_us_per_request']['ours_cpu_us_per_request']} us CPU per request "
          f"(raw tritonclient {server['client_cpu_us_per_request']['raw_cpu_us_per_request']})")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
