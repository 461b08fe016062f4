"""Ours against vLLM's own client and AIPerf on the real engine (vLLM serving tinylm).

Issue 26's item: output tokens/s of ours against ``vllm bench serve`` and AIPerf at the
same concurrency, goal >= 0.95, with TTFT p50 within 5 %. Made fair on a 2-core machine:

* **Pinned.** The engine (``suite.api.serve_llm``) starts through a wrapper that runs it
  under ``taskset -c 0`` with ``VLLM_CPU_OMP_THREADS_BIND=0`` (vLLM CPU's OpenMP threads
  bound to CPU 0 too) and ``--no-enable-prefix-caching``; every client runs under
  ``taskset -c 1``. The masks of every thread of the engine's process tree (at start and
  at the end) and of each client's tree (sampled while it runs) are recorded, from /proc.
* **The same prompts.** The first ``--requests`` prompts of tinylm's dataset: ours reads
  them as a ``data.dataset_dir`` (a ``dataset.json`` of those samples, sent as the
  dataset's own text: ``prompts_to_send``, checked equal to the others' lines before any
  round, ``prompts_equal`` in the record), ``vllm bench serve`` as its ``custom``
  dataset (``{"prompt"}`` lines, in order, no chat template) and AIPerf as
  ``single_turn`` (``{"text"}`` lines, sequential).
  LoadGen picks its samples from the same set; the record says how many were distinct.
  With prefix caching off, a prompt sent twice costs the engine the same both times.
* **The same request.** 64 tokens a request, EOS ignored, greedy (ours: ``extra_body``
  ``ignore_eos``, temperature 0, no ``min_tokens``, prompts as text; vLLM's client
  ``--ignore-eos --temperature 0``, whose default is now the server's sampling; AIPerf
  ``--extra-inputs ignore_eos:true temperature:0.0``). Requests, prompt and output tokens
  are recorded for each client. Sampling and ``min_tokens`` change what the engine does
  for a request (TTFT 8-16 ms against 6-7 ms on vLLM CPU, measured).
* **Throughput**: a closed loop at concurrency 16 (ours: Offline, LoadGen issues every
  sample at once, ``max_in_flight`` = 16; ``--max-concurrency 16 --request-rate inf``;
  AIPerf ``--concurrency 16``): output tokens/s.
* **TTFT**: Poisson arrivals at one rate for all three (``--rate``, default 0.6 x ours'
  requests/s in the throughput part), concurrency capped at 16 (ours: Server,
  ``target_qps``; vLLM's client ``--request-rate R --burstiness 1``; AIPerf
  ``--request-rate R --arrival-pattern poisson --concurrency 16``): TTFT p50 (ours:
  LoadGen's ``result_first_token_50.00_percentile_latency_ns``, counted from the query's
  scheduled issue time; theirs from when each sends a request) and output tokens/s.

Rounds are interleaved (ours, vLLM's client, AIPerf, ours...); the throughput rounds
come first, then the TTFT rounds, after one unrecorded warm-up pass of vLLM's client.
Reported: every figure, the medians, and ours / theirs (of the medians, and the median of
each round's own ratio). For each client run also: the engine's own counters over it
(``/metrics``: requests, prompt and output tokens, so what each client sent is checked on
the server's side; ours includes its two 2-token pre-flight requests, one in the parent
and one in LoadGen's process) and the engine's CPU seconds over it (its tree, from
/proc; near the client's busy time, CPU 0 was saturated).

    python bench/bench_engine_compare.py [--rounds 3] [--requests 256] [--rate R]
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pinning import CLIENT_CPU, SERVER_CPU, Watched, only_on, pinned, tree_affinity, tree_cpu_s

REPO = Path(__file__).resolve().parent.parent
TOKENS = 64  # output tokens per request (tinylm's max_new_tokens)
CONCURRENCY = 16
TTFT_P50 = "result_first_token_50.00_percentile_latency_ns"
TTFT_MEAN = "result_first_token_mean_latency_ns"
CLIENTS = ("ours", "vllm_bench_serve", "aiperf")


def engine_wrapper(tmp: Path, python: str) -> str:
    """An interpreter stand-in that starts vLLM pinned to the server's CPU."""
    script = tmp / "vllm-pinned"
    script.write_text("#!/bin/sh\n"
                      f"export VLLM_CPU_OMP_THREADS_BIND={SERVER_CPU}\n"
                      f"exec taskset -c {SERVER_CPU} {shlex.quote(python)} \"$@\" "
                      "--no-enable-prefix-caching\n")
    script.chmod(0o755)
    return str(script)


def engine_counts(url: str) -> dict[str, float]:
    """The engine's own counters (``/metrics``): requests finished, prompt and output
    tokens. Their change over a client's run is what that client really sent, its own
    probes included (our pre-flight request, ``vllm bench serve``'s test prompt)."""
    names = {"vllm:request_success_total": "requests",
             "vllm:prompt_tokens_total": "prompt_tokens",
             "vllm:generation_tokens_total": "output_tokens",
             # the engine's own TTFT (from a request's arrival at its API server): its
             # mean over a run says what the engine gave, whoever measured on top
             "vllm:time_to_first_token_seconds_sum": "ttft_sum_s",
             "vllm:time_to_first_token_seconds_count": "ttft_count"}
    with urllib.request.urlopen(f"{url}/metrics", timeout=10) as response:
        text = response.read().decode()
    counts = dict.fromkeys(names.values(), 0.0)
    for line in text.splitlines():
        name = line.split("{", 1)[0].split(" ", 1)[0]
        if name in names:
            counts[names[name]] += float(line.rsplit(" ", 1)[1])
    return counts


def write_prompts(tmp: Path, count: int) -> dict[str, Any]:
    """The first ``count`` tinylm prompts, in each client's format."""
    from suite.llm.card import load_llm_card
    from suite.paths import find_paths

    card = load_llm_card(find_paths(), "tinylm")
    samples = json.loads((card.directory / card.dataset.file).read_text())["samples"][:count]
    if len(samples) < count:
        raise SystemExit(f"tinylm's dataset has {len(samples)} samples, not {count}")
    subset = tmp / "prompts"
    subset.mkdir(parents=True, exist_ok=True)
    (subset / card.dataset.file).write_text(json.dumps({"samples": samples}))
    lines = [s["prompt"] for s in samples]
    (tmp / "vllm.jsonl").write_text("".join(json.dumps({"prompt": p}) + "\n" for p in lines))
    (tmp / "aiperf.jsonl").write_text("".join(json.dumps({"text": p}) + "\n" for p in lines))
    return {"dataset_dir": str(subset), "vllm": str(tmp / "vllm.jsonl"),
            "aiperf": str(tmp / "aiperf.jsonl"), "count": count,
            "prompt_chars": sorted({len(p) for p in lines}),
            "prompts_equal": ours_prompts_equal(subset, lines)}


def ours_prompts_equal(dataset_dir: Path, lines: list[str]) -> bool:
    """Whether ours sends exactly ``lines`` (the other clients' prompts), as its SUT picks
    them (``prompts_to_send``) with ``PROMPT_AS``; with ids, whether the ids encode them.
    An unequal set stops the bench: a comparison of unequal requests says nothing."""
    from suite.harness.llm.endpoint_sut import prompts_to_send
    from suite.llm.card import load_llm_card
    from suite.llm.dataset import LLMDataset
    from suite.llm.endpoint.client import ClientSettings
    from suite.paths import find_paths

    dataset = LLMDataset(load_llm_card(find_paths(), "tinylm"), str(dataset_dir))
    settings = ClientSettings(urls=("http://127.0.0.1:1",), model="tinylm",
                              prompt_as=PROMPT_AS[0])  # type: ignore[arg-type]
    sent = list(prompts_to_send(settings, dataset))
    wanted: list[object] = list(lines) if settings.text_prompt else [
        dataset.tokenizer.encode(line) for line in lines]
    if sent != wanted:
        differ = sum(a != b for a, b in zip(sent, wanted, strict=True))
        raise SystemExit(f"bench_engine_compare: ours would send {differ} of {len(lines)} "
                         "prompts unlike the other clients")
    return True


def _fail(name: str, done: Any) -> SystemExit:
    return SystemExit(f"bench_engine_compare: {name} failed (exit {done.returncode}): "
                      f"{(done.stderr or done.stdout or '').strip()[-600:]}")


#: How ours sends prompts (``backend.openai.prompt_as``): text by default, as the other two
#: clients do (the API server then tokenizes every client's prompt on the engine's core);
#: ``--ours-prompt-as ids`` as a user of tinylm's card would.
PROMPT_AS = ["text"]
#: More ``--set`` for ours. By default the same request as the others': no ``min_tokens``
#: (moot with EOS ignored, and measured to cost vLLM CPU's TTFT: 13.5 against 6.9 ms at
#: 10 requests/s); ``--ours-set`` replaces it, to test what a field costs the engine.
SAME_REQUEST = ["backend.openai.min_tokens_field=false"]
OURS_SETS: list[str] = []


def ours(url: str, prompts: dict[str, Any], runs: Path, rate: float | None) -> dict[str, Any]:
    """One ``suite run`` (Offline, or Server at ``rate``) on CPU 1; LoadGen's figures."""
    from suite.logs import parse_detail_log

    runs.mkdir(parents=True, exist_ok=True)
    before = set(runs.iterdir())
    n = prompts["count"]
    scenario = ["--scenario", "offline"] if rate is None else [
        "--scenario", "server", "--set", f"loadgen.target_qps={rate}"]
    watched = Watched([*pinned(CLIENT_CPU), sys.executable, "-m", "suite", "run",
                       "--benchmark", "tinylm", "--backend", "openai", "--url", url,
                       *scenario, "--quick", "--runs-dir", str(runs),
                       "--set", f"data.dataset_dir={json.dumps(prompts['dataset_dir'])}",
                       "--set", f"loadgen.performance_sample_count={n}",
                       "--set", f"loadgen.min_query_count={n}",
                       "--set", "loadgen.min_duration_ms=0",
                       "--set", f"backend.openai.max_in_flight={CONCURRENCY}",
                       "--set", "backend.openai.extra_body={ignore_eos = true}",
                       "--set", f'backend.openai.prompt_as="{PROMPT_AS[0]}"',
                       *(arg for kv in OURS_SETS for arg in ("--set", kv))], cwd=REPO)
    done = watched.run()
    new = sorted(set(runs.iterdir()) - before)
    if len(new) != 1 or not (new[0] / "result.json").is_file():
        raise _fail("our run", done)
    run_dir = new[0]
    [test] = json.loads((run_dir / "result.json").read_text())["tests"]
    status = json.loads((run_dir / "performance" / "status.json").read_text())
    performance = test.get("performance") or {}
    # LoadGen's output tokens/s: Offline's metric, Server's completed tokens/s
    rate_key = "tokens_per_second" if rate is None else "completed_tokens_per_second"
    tokens = performance.get("tokens") or {}
    # exit 2 (INVALID: early stopping wants more queries than a short run has) still
    # holds LoadGen's figures; a FAILED run does not
    if done.returncode not in (0, 2) or rate_key not in tokens:
        raise _fail("our run", done)
    detail = parse_detail_log(run_dir / "performance" / "mlperf_log_detail.txt")
    ttft = detail.get(TTFT_P50)
    mean = detail.get(TTFT_MEAN)
    run = test["backend"].get("run", {})
    return {"output_tokens_per_s": float(tokens[rate_key]),
            "ttft_mean_ms": float(mean) / 1e6 if isinstance(mean, int | float) else None,
            "requests_per_s": float(performance["metric_value"]) if rate is None else None,
            "ttft_p50_ms": float(ttft) / 1e6 if isinstance(ttft, int | float) else None,
            "requests": status["batches"]["requests"],
            "output_tokens": status["batches"]["tokens"],
            # one id a character; the record's prompt_chars says every prompt's length
            "prompt_tokens": status["batches"]["requests"] * prompts["prompt_chars"][-1]
            if len(prompts["prompt_chars"]) == 1 else None,
            "samples_distinct": run.get("samples_distinct"),
            "status": test["status"], "affinity": watched.affinity, "run_dir": str(run_dir)}


def vllm_client(python: str, url: str, model_dir: Path, prompts: dict[str, Any], out: Path,
                rate: float | None) -> dict[str, Any]:
    """``vllm bench serve`` on CPU 1 (the engine's interpreter); its own figures."""
    watched = Watched([*pinned(CLIENT_CPU), python, str(REPO / "bench" / "vllm_bench_serve.py"),
                       "--backend", "vllm", "--base-url", url, "--model", "tinylm",
                       "--tokenizer", str(model_dir), "--dataset-name", "custom",
                       "--dataset-path", prompts["vllm"], "--skip-chat-template",
                       "--disable-shuffle", "--custom-output-len", str(TOKENS),
                       "--num-prompts", str(prompts["count"]),
                       "--max-concurrency", str(CONCURRENCY),
                       "--request-rate", "inf" if rate is None else str(rate),
                       "--burstiness", "1.0", "--ignore-eos",
                       # greedy, as ours and tinylm's card (its default is the server's
                       # sampling, a different sampler on the engine's core)
                       "--temperature", "0",
                       "--percentile-metrics", "ttft,tpot,itl,e2el",
                       "--metric-percentiles", "50,99", "--save-result",
                       "--result-dir", str(out), "--result-filename", "r.json"],
                      cwd=out.parent, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    done = watched.run()
    if done.returncode != 0 or not (out / "r.json").is_file():
        raise _fail("vllm bench serve", done)
    result = json.loads((out / "r.json").read_text())
    return {"output_tokens_per_s": float(result["output_throughput"]),
            "requests_per_s": float(result["request_throughput"]),
            "ttft_p50_ms": float(result["median_ttft_ms"]),
            "ttft_mean_ms": float(result["mean_ttft_ms"]),
            "requests": result["completed"], "output_tokens": result["total_output_tokens"],
            "prompt_tokens": result["total_input_tokens"], "affinity": watched.affinity}


def aiperf_client(binary: str, url: str, model_dir: Path, prompts: dict[str, Any],
                  out: Path, rate: float | None) -> dict[str, Any]:
    """``aiperf profile`` on CPU 1; its own figures."""
    env = {k: v for k, v in os.environ.items() if k != "HF_HUB_OFFLINE"}
    load = ["--concurrency", str(CONCURRENCY)]
    if rate is not None:
        load += ["--request-rate", str(rate), "--arrival-pattern", "poisson"]
    watched = Watched([*pinned(CLIENT_CPU), binary, "profile", "--model", "tinylm",
                       "--tokenizer", str(model_dir), "--url", url,
                       "--endpoint-type", "completions", "--streaming",
                       "--input-file", prompts["aiperf"], "--custom-dataset-type",
                       "single_turn", "--dataset-sampling-strategy", "sequential",
                       "--request-count", str(prompts["count"]), "--osl", str(TOKENS),
                       "--extra-inputs", "ignore_eos:true", "--extra-inputs",
                       "temperature:0.0", "--use-server-token-count",
                       *load, "--ui-type", "simple", "--artifact-dir", str(out)],
                      cwd=out.parent, env=env)
    done = watched.run()
    export = out / "profile_export_aiperf.json"
    if done.returncode != 0 or not export.is_file():
        raise _fail("aiperf", done)
    result = json.loads(export.read_text())

    def stat(name: str, key: str = "avg") -> float | None:
        value = (result.get(name) or {}).get(key)
        return float(value) if isinstance(value, int | float) else None

    count = stat("request_count")
    osl, isl = stat("output_sequence_length"), stat("input_sequence_length")
    return {"output_tokens_per_s": stat("output_token_throughput"),
            "requests_per_s": stat("request_throughput"),
            "ttft_p50_ms": stat("time_to_first_token", "p50"),
            "ttft_mean_ms": stat("time_to_first_token"),
            "requests": count, "output_tokens": osl * count if osl and count else None,
            "prompt_tokens": isl * count if isl and count else None,
            "affinity": watched.affinity}


def _medians(rows: list[dict[str, Any]], key: str) -> dict[str, Any]:
    """Per client: every round's ``key``, the median, and ours / theirs (of the medians
    and the median of each round's own ratio)."""
    values = {c: [r[c][key] for r in rows if r.get(c, {}).get(key) is not None]
              for c in CLIENTS}
    medians = {c: statistics.median(v) for c, v in values.items() if v}
    out: dict[str, Any] = {"all": values, "median": medians}
    if "ours" in medians:
        out["ours_over"] = {c: medians["ours"] / m for c, m in medians.items() if c != "ours"}
        out["ours_over_by_round"] = {
            c: statistics.median([r["ours"][key] / r[c][key] for r in rows
                                  if r.get(c, {}).get(key) and r["ours"].get(key)])
            for c in medians if c != "ours"}
    return out


def compare(engine_python: str, tmp: Path, *, requests: int = 256, rounds: int = 3,
            rate: float | None = None, aiperf_binary: str | None = None,
            skip_throughput: bool = False) -> dict[str, Any]:
    """Every figure of the module docstring."""
    from suite import api

    prompts = write_prompts(tmp, requests)
    report: dict[str, Any] = {"requests": requests, "concurrency": CONCURRENCY,
                              "output_tokens": TOKENS, "rounds": rounds, "prompts": prompts,
                              "engine_cpu": SERVER_CPU, "client_cpu": CLIENT_CPU}
    wrapper = engine_wrapper(tmp, engine_python)
    # full: vLLM's own defaults (compiled, one process per part), as these figures were taken
    with api.serve_llm("tinylm", "vllm", tmp / "engine", python=wrapper,
                       timeout_s=600, start="full") as engine:
        pid = engine.process.pid
        report["engine_affinity_at_start"] = tree_affinity(pid)
        model_dir = tmp / "engine" / "tinylm-hf"
        runners: dict[str, Callable[[str, float | None], dict[str, Any]]] = {
            "ours": lambda tag, r: ours(engine.url, prompts, tmp / "runs", r),
            "vllm_bench_serve": lambda tag, r: vllm_client(
                engine_python, engine.url, model_dir, prompts, tmp / f"vllm_{tag}", r)}
        if aiperf_binary:
            runners["aiperf"] = lambda tag, r: aiperf_client(
                aiperf_binary, engine.url, model_dir, prompts, tmp / f"aiperf_{tag}", r)
        runners["vllm_bench_serve"]("warmup", None)  # the engine's first batches: not kept

        def one_round(tag: str, r: float | None) -> dict[str, Any]:
            row: dict[str, Any] = {}
            for name, run in runners.items():
                counts, cpu = engine_counts(engine.url), tree_cpu_s(pid)
                start = time.perf_counter()
                row[name] = run(f"{tag}_{name}", r)
                row[name]["wall_s"] = round(time.perf_counter() - start, 3)
                row[name]["engine_cpu_s"] = round(tree_cpu_s(pid) - cpu, 3)
                after = engine_counts(engine.url)
                counted = {k: after[k] - counts[k] for k in counts}
                row[name]["engine_counted"] = counted
                # What the client measured over what the engine measured, as means (the
                # engine keeps a coarse histogram, but an exact sum and count): the
                # client's own share of the TTFT it reports
                engine_ms = 1000 * counted["ttft_sum_s"] / max(counted["ttft_count"], 1)
                row[name]["engine_ttft_mean_ms"] = round(engine_ms, 3)
                if row[name].get("ttft_mean_ms") is not None:
                    row[name]["client_over_engine_ttft_ms"] = round(
                        row[name]["ttft_mean_ms"] - engine_ms, 3)
                print(f"{tag} {name}: {row[name]['output_tokens_per_s']:.0f} tokens/s, "
                      f"TTFT p50 {row[name]['ttft_p50_ms']} ms", file=sys.stderr)
            return row

        throughput = [one_round(f"closed{i}", None) for i in range(rounds)
                      if rate is None or not skip_throughput]
        if rate is None:
            rate = round(0.6 * statistics.median(r["ours"]["requests_per_s"]
                                                 for r in throughput), 2)
        poisson = [one_round(f"poisson{i}", rate) for i in range(rounds)]
        report["engine_affinity_at_end"] = tree_affinity(pid)
    report["throughput"] = {"rounds": throughput,
                            "output_tokens_per_s": _medians(throughput, "output_tokens_per_s")}
    report["poisson"] = {"rate_per_s": rate, "rounds": poisson,
                         "ttft_p50_ms": _medians(poisson, "ttft_p50_ms"),
                         "ttft_mean_ms": _medians(poisson, "ttft_mean_ms"),
                         "engine_ttft_mean_ms": _medians(poisson, "engine_ttft_mean_ms"),
                         "client_over_engine_ttft_ms": {
                             c: statistics.median(v) for c in CLIENTS if (v := [
                                 r[c]["client_over_engine_ttft_ms"] for r in poisson
                                 if r.get(c, {}).get("client_over_engine_ttft_ms")
                                 is not None])},
                         "output_tokens_per_s": _medians(poisson, "output_tokens_per_s")}
    everyone = [row[c] for row in throughput + poisson for c in row]
    report["pinning_held"] = {
        "engine": all(only_on(report[k], SERVER_CPU)
                      for k in ("engine_affinity_at_start", "engine_affinity_at_end")),
        "clients": all(only_on(run["affinity"], CLIENT_CPU) for run in everyone)}
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--requests", type=int, default=256)
    parser.add_argument("--rate", type=float, default=None,
                        help="Poisson requests/s of the TTFT part (default: 0.6 x ours' "
                             "closed-loop requests/s)")
    parser.add_argument("--aiperf", default=str(REPO / ".venv-aiperf" / "bin" / "aiperf"))
    parser.add_argument("--engine-python", default=str(REPO / ".venv-vllm" / "bin" / "python"))
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results")
    parser.add_argument("--ours-prompt-as", choices=("ids", "text"), default="text",
                        help="how ours sends prompts (the others send text)")
    parser.add_argument("--skip-throughput", action="store_true",
                        help="with --rate: only the Poisson (TTFT) part")
    parser.add_argument("--ours-set", action="append", default=None, metavar="KEY=VALUE",
                        help="--set for ours' runs (repeatable; default: "
                             f"{' '.join(SAME_REQUEST)})")
    args = parser.parse_args()
    PROMPT_AS[0] = args.ours_prompt_as
    OURS_SETS.extend(SAME_REQUEST if args.ours_set is None else args.ours_set)
    binary = args.aiperf if Path(args.aiperf).is_file() else None
    with tempfile.TemporaryDirectory() as name:
        report = {"created_utc": datetime.now(UTC).isoformat(timespec="seconds"),
                  "engine": compare(args.engine_python, Path(name), requests=args.requests,
                                    rounds=args.rounds, rate=args.rate, aiperf_binary=binary,
                                    skip_throughput=args.skip_throughput),
                  "ours_prompt_as": args.ours_prompt_as, "ours_sets": OURS_SETS}
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"bench_engine_compare_{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}.json"
    path.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps({k: v for k, v in report["engine"].items() if k not in
                      ("prompts",)}, indent=2)[:20000])
    print(f"written: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
