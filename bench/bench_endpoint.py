"""``make bench``'s endpoint-client figures: what streaming costs the client, ours and AIPerf's.

On the synthetic streaming endpoint (``suite.serve.synthetic_llm``: no delays, a fixed
output length, 1 or 16 tokens per SSE chunk), each client streams the same number of
requests at the same concurrency:

* **ours**: ``suite run --benchmark tinylm --backend openai --scenario offline`` (LoadGen
  issues every query at once; ``max_in_flight`` is the concurrency), with 0, 1 and 2
  client processes;
* **AIPerf** (``aiperf profile --streaming --concurrency C``), where installed
  (``--aiperf PATH``, default ``.venv-aiperf/bin/aiperf``).

And on the real engine (vLLM serving tinylm, where ``--engine-python`` has it): output
tokens/s of ours (LoadGen's Offline figure, ``max_in_flight`` = the concurrency), of
vLLM's own ``bench serve`` (``bench/vllm_bench_serve.py``) and of AIPerf, the same 256
requests of 128 prompt and 64 output tokens (EOS ignored) at concurrency 16,
interleaved; ratios ours / theirs.

**Client CPU per request and per SSE chunk** counts every client process (LoadGen's
included) by the same method for both: the CPU of the finished command and all the
processes it waited for (``RUSAGE_CHILDREN``), at two request counts; the difference over
the difference in requests is the marginal CPU per request, start-up cancelled. Rounds
are interleaved (ours, AIPerf, ours, AIPerf...) and the median is reported. The figures
are CPU time, not wall time, so they compare across machines; the server's own CPU is
not counted. **Client ceiling** per process is 1 / (CPU per request of one client
process): the requests/s it could drive at a full core.

    python bench/bench_endpoint.py [--rounds 3] [--small 256] [--large 1024] [--concurrency 64]
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

REPO = Path(__file__).resolve().parent.parent
TOKENS = 64  # output tokens per request (tinylm's max_new_tokens)


@contextmanager
def synthetic(chunk_tokens: int) -> Iterator[str]:
    proc = subprocess.Popen([sys.executable, "-m", "suite.serve.synthetic_llm", "--port", "0",
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


def ours_tokens(url: str, requests: int, concurrency: int, runs: Path) -> float:
    """LoadGen's Offline tokens/s for ``requests`` at ``concurrency`` (EOS ignored, as the
    other clients are told, so every request is ``TOKENS`` long)."""
    runs.mkdir(parents=True, exist_ok=True)
    before = set(runs.iterdir())
    done = subprocess.run([
        sys.executable, "-m", "suite", "run", "--benchmark", "tinylm", "--backend", "openai",
        "--url", url, "--scenario", "offline", "--quick", "--runs-dir", str(runs),
        "--set", f"loadgen.min_query_count={requests}",
        "--set", f"backend.openai.max_in_flight={concurrency}",
        "--set", 'backend.openai.extra_body={ignore_eos = true}'], cwd=REPO,
        capture_output=True, text=True, timeout=900)
    [run_dir] = sorted(set(runs.iterdir()) - before)
    result = json.loads((run_dir / "result.json").read_text())
    tokens = (result["tests"][0].get("performance") or {}).get("tokens") or {}
    if done.returncode != 0 or "tokens_per_second" not in tokens:
        raise SystemExit(f"bench_endpoint: our engine run failed: {done.stderr[-300:]}")
    return float(tokens["tokens_per_second"])


def engine_comparison(engine_python: str, tmp: Path, requests: int, concurrency: int,
                      rounds: int, aiperf_binary: str | None) -> dict[str, Any]:
    """Output tokens/s on vLLM serving tinylm: ours (LoadGen's figure) against vLLM's own
    ``bench serve`` and AIPerf, the same requests at the same concurrency, interleaved."""
    from suite import api

    figures: dict[str, list[float]] = {}
    with api.serve_llm("tinylm", "vllm", tmp / "engine", python=engine_python,
                       timeout_s=600) as engine:
        model_dir = tmp / "engine" / "tinylm-hf"
        for index in range(rounds):
            figures.setdefault("ours", []).append(
                ours_tokens(engine.url, requests, concurrency, tmp / "engine-runs"))
            out = tmp / f"vllm_bench_{index}"
            subprocess.run([engine_python, str(REPO / "bench" / "vllm_bench_serve.py"),
                            "--backend", "vllm", "--base-url", engine.url, "--model", "tinylm",
                            "--tokenizer", str(model_dir), "--dataset-name", "random",
                            "--random-input-len", "128", "--random-output-len", str(TOKENS),
                            "--num-prompts", str(requests), "--max-concurrency",
                            str(concurrency), "--ignore-eos", "--save-result", "--result-dir",
                            str(out), "--result-filename", "r.json"],
                           cwd=tmp, capture_output=True, text=True, timeout=900, check=True)
            figures.setdefault("vllm_bench_serve", []).append(
                float(json.loads((out / "r.json").read_text())["output_throughput"]))
            if aiperf_binary:
                artifacts = tmp / f"aiperf_engine_{index}"
                env = {k: v for k, v in os.environ.items() if k != "HF_HUB_OFFLINE"}
                subprocess.run([aiperf_binary, "profile", "--model", "tinylm", "--tokenizer",
                                str(model_dir), "--url", engine.url, "--endpoint-type",
                                "completions", "--streaming", "--concurrency",
                                str(concurrency), "--request-count", str(requests), "--isl",
                                "128", "--osl", str(TOKENS), "--extra-inputs",
                                "ignore_eos:true", "--use-server-token-count", "--ui-type",
                                "simple", "--artifact-dir", str(artifacts)], cwd=tmp, env=env,
                               capture_output=True, text=True, timeout=900, check=True)
                export = json.loads((artifacts / "profile_export_aiperf.json").read_text())
                figures.setdefault("aiperf", []).append(
                    float(export["output_token_throughput"]["avg"]))
    medians = {name: statistics.median(values) for name, values in figures.items()}
    return {"requests": requests, "concurrency": concurrency, "tokens_per_s": figures,
            "median_tokens_per_s": medians,
            "ours_over": {name: medians["ours"] / value for name, value in medians.items()
                          if name != "ours"}}


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--small", type=int, default=256)
    parser.add_argument("--large", type=int, default=1024)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--aiperf", default=str(REPO / ".venv-aiperf" / "bin" / "aiperf"))
    parser.add_argument("--engine-python", default=str(REPO / ".venv-vllm" / "bin" / "python"),
                        help="vLLM's interpreter, for the real-engine comparison")
    parser.add_argument("--skip-client", action="store_true",
                        help="only the real-engine comparison")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results")
    args = parser.parse_args()
    binary = args.aiperf if Path(args.aiperf).is_file() else None
    if binary is None:
        print(f"AIPerf not found at {args.aiperf}: ours only", file=sys.stderr)
    with tempfile.TemporaryDirectory() as name:
        report: dict[str, Any] = {
            "created_utc": datetime.now(UTC).isoformat(timespec="seconds"),
            "endpoint": None if args.skip_client else measure(
                Path(name), args.rounds, args.small, args.large, args.concurrency, binary)}
        if Path(args.engine_python).is_file():
            report["engine"] = engine_comparison(args.engine_python, Path(name), 256, 16,
                                                 args.rounds, binary)
        else:
            print(f"no vLLM at {args.engine_python}: no real-engine comparison",
                  file=sys.stderr)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"bench_endpoint_{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}.json"
    path.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(report, indent=2))
    print(f"written: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
