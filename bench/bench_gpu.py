"""``make bench-gpu``: the GPU tests, then ResNet-50 fp16 on torch CUDA, ours against raw.

One command for a machine with an NVIDIA GPU:

1. ``pytest -m gpu`` in a subprocess; its return code and summary line are recorded;
2. ResNet-50 v1.5 with fixed-seed random weights (``reference_models/resnet50/model.py``,
   through ``bench/gpu_resnet50.py``) on the resnet50 fixture images
   (``make_fixture.py``), fp16 on ``cuda``, through the real CLI and LoadGen:
   Offline at ``--offline-batch``, and Server: the highest VALID target QPS at the
   benchmark's 15 ms bound, by bisection over ``--probes`` runs;
3. a raw torch loop (the same module, dtype and batch sizes, no harness), the best of
   1 and 2 threads, each with its own CUDA stream, eager or replaying a captured CUDA
   graph (ours runs with the backend's ``cuda_graphs`` unless ``--no-cuda-graphs``).

Every harness figure is LoadGen's, read from the run's ``result.json``; only the raw
loop is timed here. One JSON file goes to ``bench/results/bench_gpu_<UTC>.json``. On
a machine without a usable GPU it prints one line saying so and exits 1.

    python bench/bench_gpu.py --seconds 5 --probes 6
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from suite.backends.base import nvidia_gpu_problem  # noqa: E402

BACKEND = "bench.gpu_resnet50:RandomResNet50Torch"
BOUND_MS = 15.0  # resnet50's Server latency bound (run_rules), what VALID is judged at


def gpu_problem() -> str | None:
    """Why this machine cannot run the bench, or None."""
    if (problem := nvidia_gpu_problem()) is not None:
        return problem
    try:
        import torch
    except ImportError:
        return "torch is not installed"
    if not torch.cuda.is_available():
        return f"torch {torch.__version__} cannot use CUDA here (CPU build or no usable GPU)"
    return None


def env() -> dict[str, str]:
    """Subprocess environment: the repository importable (no pip install needed)."""
    out = dict(os.environ)
    out["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), out.get("PYTHONPATH", "")]))
    return out


def pytest_gpu() -> dict[str, Any]:
    proc = subprocess.run([sys.executable, "-m", "pytest", "-m", "gpu", "-q", "-rs"],
                          cwd=REPO, env=env(), capture_output=True, text=True)
    lines = proc.stdout.strip().splitlines()
    summary = next((line.strip("= ") for line in reversed(lines)
                    if re.search(r"\d+ (passed|failed|skipped|errors?|deselected)", line)),
                   "no summary line (see tail)")
    return {"returncode": proc.returncode, "summary": summary, "tail": lines[-30:]}


def suite_run(scenario: str, workload: dict[str, Path], runs: Path, args: argparse.Namespace,
              *extra: str) -> dict[str, Any]:
    """One ``python -m suite run``; its figures from result.json (LoadGen's)."""
    runs.mkdir(parents=True)
    prefix = f"backend.{BACKEND}."
    sets = {"data.dataset_dir": json.dumps(str(workload["dataset"])),
            "data.model_path": json.dumps(str(workload["weights"])),
            f"{prefix}device": '"cuda"', f"{prefix}dtype": '"fp16"',
            f"{prefix}channels_last": "true" if args.channels_last else "false",
            "loadgen.min_duration_ms": str(int(args.seconds * 1000))}
    if args.cuda_graphs:  # one graph per padded bucket size, as the raw loop replays one
        sets.update({f"{prefix}cuda_graphs": "true", f"{prefix}shapes": '"buckets"'})
    command = [sys.executable, "-m", "suite", "run", "--benchmark", "resnet50", "--scenario",
               scenario, "--backend", BACKEND, "--quick", "--runs-dir", str(runs),
               "--workers", str(args.workers), *extra]
    for key, value in sets.items():
        command += ["--set", f"{key}={value}"]
    proc = subprocess.run(command, cwd=REPO, env=env(), capture_output=True, text=True)
    dirs = [p for p in runs.iterdir() if (p / "result.json").is_file()]
    if len(dirs) != 1:  # a missing record is a failure, never a figure
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
        raise SystemExit(f"bench-gpu: {scenario} run left no result.json (exit "
                         f"{proc.returncode}): {' | '.join(tail)}")
    result = json.loads((dirs[0] / "result.json").read_text())
    test = result["tests"][0]
    status_path = dirs[0] / "performance" / "status.json"
    # Where a Server run's latency went: the derived batch cap and wait (from the warm-up's
    # fitted batch cost) and the batches the workers formed, with seconds per phase.
    status = json.loads(status_path.read_text()) if status_path.is_file() else {}
    perf = test.get("performance") or {}
    return {"exit_code": proc.returncode, "status": result["status"],
            "validity": perf.get("result_validity"), "metric": perf.get("metric_name"),
            "value": perf.get("metric_value"), "latency_ns": perf.get("latency_ns", {}),
            "invalid_reason": perf.get("invalid_reason"),
            # a FAILED run says why in the report, not only in a temporary run directory
            "failures": [f.get("message") for f in test.get("failures") or []][:3],
            "derived": status.get("derived"), "batches": status.get("batches"),
            "backend": test.get("backend", {}), "run_dir": str(dirs[0])}


def raw_rate(batch: int, threads: int, seconds: float, channels_last: bool,
             cuda_graphs: bool = False) -> float:
    """Samples/s of a plain loop: host batch -> device -> fp16 forward -> argmax -> host
    (with ``cuda_graphs``, the forward and argmax replayed from one captured graph per
    thread, the host batch copied into the graph's static input)."""
    import torch

    from bench.gpu_resnet50 import resnet50_class

    torch.manual_seed(0)
    model = resnet50_class()(classes=1001).eval().to("cuda", torch.float16)
    if channels_last:
        model = model.to(memory_format=torch.channels_last)
    host = torch.randn((batch, 3, 224, 224)).pin_memory()
    done = [0] * threads

    def forward(x: Any) -> Any:
        x = x.half()
        if channels_last:
            x = x.contiguous(memory_format=torch.channels_last)
        return torch.argmax(model(x), dim=1)

    def step() -> None:
        forward(host.to("cuda", non_blocking=True)).cpu()  # the copy back synchronises

    def graphed_step() -> Any:
        static_in = torch.empty(host.shape, device="cuda")
        for _ in range(3):  # warm on this stream before capture, as torch's docs require
            forward(static_in)
        torch.cuda.current_stream().synchronize()
        graph = torch.cuda.CUDAGraph()
        # thread_local: the other thread's eager work during this capture is not an error
        with torch.cuda.graph(graph, stream=torch.cuda.current_stream(),
                              capture_error_mode="thread_local"):
            static_out = forward(static_in)

        def replay() -> None:
            static_in.copy_(host, non_blocking=True)
            graph.replay()
            static_out.cpu()
        return replay

    def loop(index: int, until: float) -> None:
        with torch.inference_mode(), torch.cuda.stream(torch.cuda.Stream()):
            run = graphed_step() if cuda_graphs else step
            while time.perf_counter() < until:
                run()
                done[index] += batch

    with torch.inference_mode():
        for _ in range(3):
            step()  # warm: kernel selection for this shape
    start = time.perf_counter()
    workers = [threading.Thread(target=loop, args=(i, start + seconds)) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    return sum(done) / (time.perf_counter() - start)


def server_search(workload: dict[str, Path], tmp: Path, args: argparse.Namespace,
                  ceiling: float, worker_model: str) -> dict[str, Any]:
    """Bisect the target QPS between 0 and ``ceiling`` (ours Offline) on VALID, with
    Server workers as ``worker_model`` (threads, or processes each holding the model)."""
    low, high, probes = 0.0, ceiling, []
    for index in range(args.probes):
        qps = round((low + high) / 2, 1)
        run = suite_run("server", workload, tmp / f"server_{worker_model}_{index}", args,
                        "--target-qps", str(qps), "--batch-size", str(args.server_batch),
                        "--set", f'sut.worker_model="{worker_model}"')
        valid = run["validity"] == "VALID"
        p99 = run["latency_ns"].get("99.00_percentile")
        probes.append({"target_qps": qps, "validity": run["validity"],
                       "p99_ms": None if p99 is None else p99 / 1e6,
                       "invalid_reason": run["invalid_reason"], "derived": run["derived"],
                       "batches": run["batches"], "run_dir": run["run_dir"]})
        print(f"server probe ({worker_model}) {qps:,.1f} QPS: {run['validity']}",
              file=sys.stderr, flush=True)
        low, high = (qps, high) if valid else (low, qps)
    return {"bound_ms": BOUND_MS, "max_valid_qps": low, "batch": args.server_batch,
            "worker_model": worker_model, "probes": probes, "backend": run["backend"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="per LoadGen run / raw loop")
    parser.add_argument("--offline-batch", type=int, default=64)
    # 32 and CUDA graphs: the configuration that held 0.75 of Offline on an H200 (eager
    # launches at batch 16 could not keep up; bench/PERFORMANCE.md, 2026-11-28)
    parser.add_argument("--server-batch", type=int, default=32)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--probes", type=int, default=6, choices=range(1, 21),
                        metavar="1-20", help="Server bisection steps")
    parser.add_argument("--runs-dir", type=Path, default=None,
                        help="keep the run directories here (default: temporary)")
    parser.add_argument("--worker-models", default="threads,processes",
                        help="Server searches, one per sut.worker_model (comma-separated); "
                        "the best is the headline, every search is recorded")
    parser.add_argument("--channels-last", action="store_true")
    parser.add_argument("--cuda-graphs", action=argparse.BooleanOptionalAction, default=True,
                        help="ours with backend cuda_graphs (shapes 'buckets'); the raw side "
                        "is then the best of eager and one captured graph per thread")
    parser.add_argument("--skip-pytest", action="store_true")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results")
    args = parser.parse_args()
    if (problem := gpu_problem()) is not None:
        print(f"bench-gpu needs an NVIDIA GPU and none is usable here: {problem}",
              file=sys.stderr)
        return 1
    from bench.gpu_resnet50 import write_weights
    from suite.system import collect

    report: dict[str, Any] = {
        "created_utc": datetime.now(UTC).isoformat(timespec="seconds"), "machine": collect(),
        "settings": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "pytest_gpu": None if args.skip_pytest else pytest_gpu(),
    }
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        if args.runs_dir:
            tmp = args.runs_dir.resolve() / datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
            tmp.mkdir(parents=True)
        spec = importlib.util.spec_from_file_location(
            "make_fixture", REPO / "reference_models" / "resnet50" / "make_fixture.py")
        assert spec is not None and spec.loader is not None
        fixture = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(fixture)
        workload = {"dataset": tmp / "imagenet", "weights": tmp / "resnet50_random.pt"}
        fixture.write_dataset(workload["dataset"])
        write_weights(workload["weights"])
        # the best raw configuration: 1 or 2 threads, eager or (with --cuda-graphs) graphed
        raw = {f"batch_{b}": max(raw_rate(b, t, args.seconds, args.channels_last, graphs)
                                 for t in (1, 2) for graphs in {False, args.cuda_graphs})
               for b in sorted({args.offline_batch, args.server_batch})}
        offline = suite_run("offline", workload, tmp / "offline", args,
                            "--batch-size", str(args.offline_batch),
                            "--expected-qps", str(round(raw[f"batch_{args.offline_batch}"])))
        report["raw_samples_per_s"] = raw
        report["offline"] = offline
        if offline["value"]:
            report["offline_over_raw"] = offline["value"] / raw[f"batch_{args.offline_batch}"]
            searches = [server_search(workload, tmp, args, float(offline["value"]), model)
                        for model in args.worker_models.split(",") if model.strip()]
            report["server_by_worker_model"] = searches
            report["server"] = max(searches, key=lambda s: s["max_valid_qps"])
            report["server_over_offline"] = (report["server"]["max_valid_qps"]
                                             / offline["value"])
    report["note"] = ("harness figures are LoadGen's (result.json); raw figures time a plain "
                      "torch loop here, best of 1 and 2 threads; run directories under "
                      + (str(args.runs_dir) if args.runs_dir else "a temporary directory"))
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"bench_gpu_{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}.json"
    path.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps({k: report.get(k) for k in ("pytest_gpu", "raw_samples_per_s",
                                                  "offline_over_raw", "server_over_offline")},
                     indent=2, default=str))
    print(f"written: {path}")
    pytest_failed = report["pytest_gpu"] is not None and report["pytest_gpu"]["returncode"]
    return 1 if pytest_failed or not offline["value"] else 0


if __name__ == "__main__":
    sys.exit(main())
