"""The openai backend's client on the synthetic endpoint: what each client process spends.

**Client ceiling per process** (issue 26). On the synthetic streaming endpoint
(``suite.serve.synthetic_llm``: no delays, 64 tokens a request, 16 or 1 tokens per SSE
event, so 5 or 65 events with the usage event) pinned to CPU 0, ``suite run --backend
openai`` (Offline, ``max_in_flight`` = the concurrency) on CPU 1 streams ``--requests``
requests with ``backend.openai.client_workers`` = 0, 1 and 2. Each run records what every
client process spent (``result.json`` ``tests[0].backend.run``, written by
``EndpointSystemUnderTest.run_record``): LoadGen's process (``parent``: its CPU from the
first issued sample to the end, LoadGen's own threads included, and the samples it
completed) and each worker (its CPU from the first sample it was handed, ``getrusage``,
its requests and SSE events). From those records alone (``derive``):

* CPU per request and per SSE event, in the parent and in each worker;
* each process's ceiling at a full core: 1 / its CPU per request (requests/s) and
  1 / its CPU per event (events/s, at this event size);
* the predicted client ceiling with n workers: min(parent ceiling, n x worker ceiling),
  from the 1-worker run for n = 1 and from the 2-worker run for n = 2 (the parent's
  share grows with a second worker's messages), and the 2-worker figure predicted from
  the 1-worker run;
* from the two event sizes, each process's cost split into a part per request and a
  part per event (a + b x events).

The wall requests/s of each run is recorded too, but on this machine every client process
shares CPU 1, so it cannot show the scaling; the prediction is the figure. Rounds are
interleaved; medians are reported.

**Real engine**: ``bench_engine_compare.py`` (ours against ``vllm bench serve`` and
AIPerf on vLLM serving tinylm, pinned, the same prompts), run after the client part
unless ``--skip-engine``. ``measure`` (the older comparison of every client process's CPU
against AIPerf's, by differencing two request counts, unpinned) stays for ``make bench``
and ``--aiperf-cpu``.

    python bench/bench_endpoint.py [--rounds 3] [--requests 4096] [--skip-engine]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pinning import CLIENT_CPU, SERVER_CPU, Watched, only_on, pinned

REPO = Path(__file__).resolve().parent.parent
TOKENS = 64  # output tokens per request (tinylm's max_new_tokens)


@contextmanager
def synthetic(chunk_tokens: int, pin: bool = False) -> Iterator[str]:
    """The synthetic endpoint (on the server's CPU where ``pin``); yields its URL."""
    proc = subprocess.Popen([*(pinned(SERVER_CPU) if pin else []), sys.executable, "-m",
                             "suite.serve.synthetic_llm", "--port", "0",
                             "--tokens", str(TOKENS), "--chunk-tokens", str(chunk_tokens)],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                            text=True)
    try:
        assert proc.stdout is not None
        yield proc.stdout.readline().strip()
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def children_cpu(command: list[str], env: dict[str, str] | None = None,
                 cwd: Path = REPO) -> tuple[float, float, subprocess.CompletedProcess[str]]:
    """(CPU seconds of the command and every process it waited for, wall seconds, result)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=900)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall, done


def ours(url: str, requests: int, concurrency: int, workers: int, runs: Path) -> dict[str, Any]:
    runs.mkdir(parents=True, exist_ok=True)
    before = set(runs.iterdir())
    cpu, wall, done = children_cpu([
        sys.executable, "-m", "suite", "run", "--benchmark", "tinylm", "--backend", "openai",
        "--url", url, "--scenario", "offline", "--quick", "--runs-dir", str(runs),
        "--set", f"loadgen.min_query_count={requests}",
        "--set", f"backend.openai.max_in_flight={concurrency}",
        "--set", f"backend.openai.client_workers={workers}"])
    [run_dir] = sorted(set(runs.iterdir()) - before)
    status = json.loads((run_dir / "performance" / "status.json").read_text())
    profile = status["batches"]
    if done.returncode != 0 or profile.get("requests") != requests:
        raise SystemExit(f"bench_endpoint: our run failed (exit {done.returncode}): "
                         f"{done.stderr.strip()[-300:]}")
    shutil.rmtree(run_dir)
    return {"cpu_s": cpu, "wall_s": wall, "events": profile["sse_events"],
            "inner_cpu_s": profile.get("cpu_s"), "inner_wall_s": profile.get("wall_s")}


def aiperf(binary: str, url: str, requests: int, concurrency: int, tokenizer: Path,
           out: Path) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k != "HF_HUB_OFFLINE"}
    cpu, wall, done = children_cpu([
        binary, "profile", "--model", "tinylm", "--tokenizer", str(tokenizer), "--url", url,
        "--endpoint-type", "completions", "--streaming", "--concurrency", str(concurrency),
        "--request-count", str(requests), "--isl", "128", "--osl", str(TOKENS),
        "--use-server-token-count", "--ui-type", "simple",
        "--artifact-dir", str(out)], env=env, cwd=out.parent)
    if done.returncode != 0:
        raise SystemExit(f"bench_endpoint: aiperf failed (exit {done.returncode}): "
                         f"{(done.stderr or done.stdout).strip()[-500:]}")
    return {"cpu_s": cpu, "wall_s": wall}


def measure(tmp: Path, rounds: int = 3, small: int = 256, large: int = 1024,
            concurrency: int = 64, aiperf_binary: str | None = None) -> dict[str, Any]:
    """Every figure of the module docstring; AIPerf's only where ``aiperf_binary`` runs."""
    tokenizer = tmp / "tinylm-hf"
    if aiperf_binary:
        subprocess.run([sys.executable, "-m", "suite", "export", "tinylm", "--format", "hf",
                        str(tokenizer), "--verify-samples", "0"], cwd=REPO, check=True,
                       capture_output=True)
    report: dict[str, Any] = {"requests": [small, large], "concurrency": concurrency,
                              "tokens_per_request": TOKENS, "rounds": rounds}
    for chunk in (1, 16):
        per: dict[str, list[float]] = {}
        with synthetic(chunk) as url:
            for index in range(rounds):
                clients: list[tuple[str, Any]] = [
                    (f"ours_{w}w", lambda n, w=w: ours(url, n, concurrency, w, tmp / "runs"))
                    for w in (0, 1, 2)]
                if aiperf_binary:
                    clients.append(("aiperf", lambda n, i=index, c=chunk: aiperf(
                        aiperf_binary, url, n, concurrency, tokenizer,
                        tmp / f"aiperf_{c}_{i}_{n}")))
                for name, client in clients:
                    a, b = client(small), client(large)
                    per.setdefault(name, []).append((b["cpu_s"] - a["cpu_s"]) / (large - small))
                    per.setdefault(f"{name}_rps", []).append(large / b["wall_s"])
        events = TOKENS // chunk + 1  # token chunks, then the usage event
        report[f"chunk_{chunk}"] = {
            name: {"us_per_request": statistics.median(v) * 1e6,
                   "us_per_event": statistics.median(v) * 1e6 / events,
                   "all": [x * 1e6 for x in v]} if not name.endswith("_rps") else
            {"requests_per_s_wall": statistics.median(v)}
            for name, v in per.items()}
    return report


def ours_record(url: str, requests: int, concurrency: int, workers: int,
                runs: Path) -> dict[str, Any]:
    """One Offline run on the client CPU: its ``backend.run`` record, wall requests/s and
    the CPU masks its processes had."""
    runs.mkdir(parents=True, exist_ok=True)
    before = set(runs.iterdir())
    watched = Watched([*pinned(CLIENT_CPU), sys.executable, "-m", "suite", "run",
                       "--benchmark", "tinylm", "--backend", "openai", "--url", url,
                       "--scenario", "offline", "--quick", "--runs-dir", str(runs),
                       "--set", f"loadgen.min_query_count={requests}",
                       "--set", f"backend.openai.max_in_flight={concurrency}",
                       "--set", f"backend.openai.client_workers={workers}"], cwd=REPO)
    done = watched.run()
    new = sorted(set(runs.iterdir()) - before)
    if done.returncode != 0 or len(new) != 1:
        raise SystemExit(f"bench_endpoint: our run failed (exit {done.returncode}): "
                         f"{done.stderr.strip()[-300:]}")
    [test] = json.loads((new[0] / "result.json").read_text())["tests"]
    shutil.rmtree(new[0])
    run = test["backend"]["run"]
    return {"run": run, "requests_per_s": float(test["performance"]["metric_value"]),
            "affinity": watched.affinity}


def _per(cpu: float, count: float) -> float | None:
    return cpu / count if count else None


def derive(run: dict[str, Any]) -> dict[str, Any]:
    """CPU per request and per event of each process, their ceilings at a full core and
    the predicted client ceiling, from one run's ``backend.run`` record."""
    parent, workers = run["parent"], run["workers"]
    if run.get("workers_reported", 0) != run.get("client_workers", 0):
        # a worker killed at close sent no record: its requests and CPU would be missing
        raise SystemExit(f"bench_endpoint: {run.get('workers_reported')} of "
                         f"{run.get('client_workers')} client workers reported; no figures")
    requests = sum(w["requests"] for w in workers) if workers else parent["streamed"]
    events = sum(w["chunks"] for w in workers) if workers else parent["chunks"]

    def process(cpu: float, n_requests: int, n_events: int) -> dict[str, Any]:
        per_request, per_event = _per(cpu, n_requests), _per(cpu, n_events)
        return {"cpu_s": cpu, "requests": n_requests, "events": n_events,
                "us_per_request": per_request * 1e6 if per_request else None,
                "us_per_event": per_event * 1e6 if per_event else None,
                "ceiling_requests_per_s": 1 / per_request if per_request else None,
                "ceiling_events_per_s": 1 / per_event if per_event else None}

    out: dict[str, Any] = {
        "requests": requests, "events": events, "samples_completed": parent["requests"],
        "parent": process(parent["run_cpu_s"], parent["requests"], events),
        "workers": [process(w["run_cpu_s"], w["requests"], w["chunks"]) for w in workers]}
    ceilings = [w["ceiling_requests_per_s"] for w in out["workers"]
                if w["ceiling_requests_per_s"]]
    parent_ceiling = out["parent"]["ceiling_requests_per_s"]
    if ceilings and parent_ceiling:
        per_worker = statistics.mean(ceilings)
        out["worker_ceiling_requests_per_s"] = per_worker
        out["predicted_requests_per_s"] = {
            str(n): min(parent_ceiling, n * per_worker) for n in (1, 2)}
        out["predicted_events_per_s"] = {  # at this run's events a request
            n: r * events / requests for n, r in out["predicted_requests_per_s"].items()}
    return out


def split_per_event(small: dict[str, Any], large: dict[str, Any]) -> dict[str, Any] | None:
    """A process's CPU a request as a + b x events, from two event sizes (``derive``'s
    figures for the same process at few and at many events a request)."""
    (x1, e1), (x2, e2) = [(f["us_per_request"], f["events"] / f["requests"])
                          for f in (small, large)]
    if None in (x1, x2) or e1 == e2:
        return None
    b = (x2 - x1) / (e2 - e1)
    return {"us_per_request_alone": x1 - b * e1, "us_per_event": b}


def ceiling(tmp: Path, *, rounds: int = 3, requests: int = 4096,
            concurrency: int = 64) -> dict[str, Any]:
    """Every client-ceiling figure of the module docstring."""
    report: dict[str, Any] = {"requests": requests, "concurrency": concurrency,
                              "tokens_per_request": TOKENS, "rounds": rounds,
                              "server_cpu": SERVER_CPU, "client_cpu": CLIENT_CPU}
    for chunk in (16, 1):
        runs: dict[str, list[dict[str, Any]]] = {}
        with synthetic(chunk, pin=True) as url:
            for _ in range(rounds):
                for workers in (0, 1, 2):
                    measured = ours_record(url, requests, concurrency, workers, tmp / "runs")
                    runs.setdefault(f"{workers}w", []).append(
                        {**measured, "derived": derive(measured["run"])})
        report[f"chunk_{chunk}"] = {name: _summary(rows) for name, rows in runs.items()}
    report["split"] = {}
    for name in ("0w", "1w", "2w"):
        small, large = report["chunk_16"][name], report["chunk_1"][name]
        parts = {"parent": split_per_event(small["parent"], large["parent"])}
        if small["workers"]:
            parts["worker"] = split_per_event(small["workers"], large["workers"])
        report["split"][name] = parts
    report["pinning_held"] = all(
        only_on(row["affinity"], CLIENT_CPU) for chunk in ("chunk_1", "chunk_16")
        for summary in report[chunk].values() for row in summary["rounds"])
    return report


def _summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Medians over rounds of a worker count's derived figures (workers pooled)."""
    derived = [r["derived"] for r in rows]

    def med(values: list[Any]) -> float | None:
        kept = [v for v in values if v is not None]
        return statistics.median(kept) if kept else None

    def pooled(figures: list[dict[str, Any]]) -> dict[str, Any]:
        keys = ("us_per_request", "us_per_event", "ceiling_requests_per_s",
                "ceiling_events_per_s")
        return {**{k: med([f[k] for f in figures]) for k in keys},
                "requests": sum(f["requests"] for f in figures),
                "events": sum(f["events"] for f in figures)}

    workers = [w for d in derived for w in d["workers"]]
    return {"parent": pooled([d["parent"] for d in derived]),
            "workers": pooled(workers) if workers else {},
            "worker_ceiling_requests_per_s": med(
                [d.get("worker_ceiling_requests_per_s") for d in derived]),
            **{key: {n: med([d.get(key, {}).get(n) for d in derived]) for n in ("1", "2")}
               for key in ("predicted_requests_per_s", "predicted_events_per_s")},
            "wall_requests_per_s": med([r["requests_per_s"] for r in rows]),
            "rounds": list(rows)}


def engine_comparison(engine_python: str, tmp: Path, requests: int, concurrency: int,
                      rounds: int, aiperf_binary: str | None) -> dict[str, Any]:
    """``bench_engine_compare.compare`` (concurrency is its fixed 16), with the closed-loop
    medians and ratios also under the names ``make bench`` reads."""
    import bench_engine_compare

    if concurrency != bench_engine_compare.CONCURRENCY:
        raise SystemExit(f"the engine comparison runs at concurrency "
                         f"{bench_engine_compare.CONCURRENCY}, not {concurrency}")
    report = bench_engine_compare.compare(engine_python, tmp, requests=requests,
                                          rounds=rounds, aiperf_binary=aiperf_binary)
    closed = report["throughput"]["output_tokens_per_s"]
    return {**report, "median_tokens_per_s": closed["median"],
            "ours_over": closed.get("ours_over", {})}


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--requests", type=int, default=4096,
                        help="requests a run in the client-ceiling part")
    parser.add_argument("--concurrency", type=int, default=64,
                        help="requests in flight in the client-ceiling part")
    parser.add_argument("--engine-requests", type=int, default=256)
    parser.add_argument("--rate", type=float, default=None,
                        help="the engine part's Poisson requests/s (default: 0.6 x ours' "
                             "closed-loop requests/s)")
    parser.add_argument("--aiperf", default=str(REPO / ".venv-aiperf" / "bin" / "aiperf"))
    parser.add_argument("--engine-python", default=str(REPO / ".venv-vllm" / "bin" / "python"),
                        help="vLLM's interpreter, for the real-engine comparison")
    parser.add_argument("--skip-client", action="store_true", help="no client-ceiling part")
    parser.add_argument("--skip-engine", action="store_true", help="no real-engine part")
    parser.add_argument("--aiperf-cpu", action="store_true",
                        help="also the older CPU comparison against AIPerf (``measure``)")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results")
    args = parser.parse_args()
    binary = args.aiperf if Path(args.aiperf).is_file() else None
    if binary is None:
        print(f"AIPerf not found at {args.aiperf}: ours only", file=sys.stderr)
    report: dict[str, Any] = {"created_utc": datetime.now(UTC).isoformat(timespec="seconds")}
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        if not args.skip_client:
            report["ceiling"] = ceiling(tmp / "ceiling", rounds=args.rounds,
                                        requests=args.requests, concurrency=args.concurrency)
        if args.aiperf_cpu:
            report["endpoint"] = measure(tmp / "aiperf-cpu", args.rounds,
                                         concurrency=args.concurrency, aiperf_binary=binary)
        if args.skip_engine:
            pass
        elif Path(args.engine_python).is_file():
            import bench_engine_compare

            report["engine"] = bench_engine_compare.compare(
                args.engine_python, tmp / "engine", requests=args.engine_requests,
                rounds=args.rounds, rate=args.rate, aiperf_binary=binary)
        else:
            print(f"no vLLM at {args.engine_python}: no real-engine comparison",
                  file=sys.stderr)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"bench_endpoint_{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}.json"
    path.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(headline(report), indent=2))
    print(f"written: {path}")
    return 0


def headline(report: dict[str, Any]) -> dict[str, Any]:
    """The figures issue 26 asks for, out of the whole report."""
    out: dict[str, Any] = {}
    for chunk in ("chunk_16", "chunk_1"):
        for name, summary in (report.get("ceiling") or {}).get(chunk, {}).items():
            out[f"ceiling.{chunk}.{name}"] = {
                "parent_us_per_request": summary["parent"]["us_per_request"],
                "parent_us_per_event": summary["parent"]["us_per_event"],
                "worker_us_per_request": summary["workers"].get("us_per_request"),
                "worker_us_per_event": summary["workers"].get("us_per_event"),
                "worker_ceiling_requests_per_s": summary["worker_ceiling_requests_per_s"],
                "worker_ceiling_events_per_s": summary["workers"].get("ceiling_events_per_s"),
                "predicted_requests_per_s": summary["predicted_requests_per_s"],
                "predicted_events_per_s": summary["predicted_events_per_s"],
                "wall_requests_per_s": summary["wall_requests_per_s"]}
    if report.get("ceiling"):
        out["ceiling.split"] = report["ceiling"]["split"]
        out["ceiling.pinning_held"] = report["ceiling"]["pinning_held"]
    engine = report.get("engine")
    if engine:
        out["engine.closed_loop_tokens_per_s"] = engine["throughput"]["output_tokens_per_s"]
        out["engine.poisson_rate_per_s"] = engine["poisson"]["rate_per_s"]
        out["engine.ttft_p50_ms"] = engine["poisson"]["ttft_p50_ms"]
        out["engine.poisson_tokens_per_s"] = engine["poisson"]["output_tokens_per_s"]
        out["engine.pinning_held"] = engine["pinning_held"]
    return out


if __name__ == "__main__":
    sys.exit(main())
