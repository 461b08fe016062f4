"""The endpoint client's CPU per streamed SSE event at reasoning lengths (issue 37, item 5).

A synthetic server that costs little per event (``serve``: raw asyncio, every event
prebuilt and vLLM-shaped, one HTTP chunk each as engines write them, each open stream
served in turn, as an engine's decode steps) runs in its own process, and its CPU is not
counted. Its cases (``--cases``): ``16`` writes 16 events at once as fast as it can (the
figure the goal is judged on): the client saturated, as an engine's events pile up in the
socket while a client at its ceiling is busy, so a read holds many of them (coalesced);
``1`` writes one event a write as fast as it can, where a read holds what arrived since
the last one; ``p1`` is paced: one decode step a millisecond (the timer's resolution),
each stream's event its own write, so a read holds one event, as at an engine's pace
(tens of tokens a second a stream), and each read's own cost counts per event. Against
it, ``client`` streams 1-token events with 4,096-token outputs (the goal's shape;
deepseek-r1 averages about 3,900) through the openai backend's own client in two
configurations:

* ``in_process``: one ``EndpointClient`` (``backend.openai.client_workers = 0``);
* ``default``: ``ClientWorkers`` with ``default_workers()`` processes (the backend's
  default, ``client_workers = -1``), the parent reading their batched events;

beside the floor under them (``sse_floor``, ``--floors``): ``bare``, a uvloop Protocol
that only counts the same responses' bytes (what the event loop and the kernel cost a
read), and ``aiohttp``, raw aiohttp streaming them; and, with ``--base REV``, the same two
configurations of another revision's client (``base_in_process``, ``base_default``: its
``suite`` exported by ``git archive`` and imported by those client processes).

Each configuration runs in a fresh process; its CPU is that process's whole tree (itself
and every client process it started, user + system, from ``/proc``), read before and
after a small and a large run on the same warm client, so fixed costs (start-up, imports,
connects) cancel in the marginal: (CPU(large) - CPU(small)) / (events(large) -
events(small)); its read system calls (``syscr``) likewise (``reads_per_event``). Events
are the token events and the usage event of each response (the client's own ``chunks``
count, checked against the responses' length). Configurations alternate within each round;
medians over rounds; each ratio is formed within a round, its median reported. No
LoadGen: this is the client alone.

    python bench/bench_sse.py [--rounds 3] [--tokens 4096] [--small 8] [--large 40]
                              [--cases 16,1,p1] [--floors bare,aiohttp] [--base REV]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
# ``--base``'s client processes import another revision's ``suite`` (exported there).
sys.path.insert(1, os.environ.get("BENCH_SSE_SUITE_ROOT")
                or str(Path(__file__).resolve().parent.parent))
from sse_floor import marginal, read_calls, tree_cpu_s, tree_pids
from sse_server import VOCAB, serve, server

REPO = Path(__file__).resolve().parent.parent
ROOT_ENV = "BENCH_SSE_SUITE_ROOT"
GOAL_US_PER_EVENT = 2.0
GOAL_RATIO = 1.5


# -- the client ------------------------------------------------------------------------
def client(url: str, workers: int, tokens: int, sizes: list[int],
           concurrency: int) -> dict[str, Any]:
    """Warm the client up, then each run size's whole-tree CPU (see the module docstring)."""
    from suite.llm.endpoint.client import ClientSettings, EndpointClient
    from suite.llm.endpoint.workers import ClientWorkers

    settings = ClientSettings(urls=(url,), model="synthetic", max_tokens=tokens,
                              limit=tokens, max_in_flight=concurrency, vocab_size=VOCAB)
    lock, finished = threading.Lock(), threading.Event()
    seen = {"first": 0, "done": 0, "tokens": 0, "want": 0}
    errors: list[str] = []

    def on_first(key: int, ids: list[int]) -> None:
        with lock:
            seen["first"] += 1

    def on_done(key: int, ids: list[int], source: str) -> None:
        with lock:
            seen["done"] += 1
            seen["tokens"] += len(ids)
            if seen["done"] == seen["want"]:
                finished.set()

    def on_error(key: int, message: str) -> None:
        errors.append(message)
        finished.set()

    chars = [chr(32 + i) for i in range(VOCAB)]
    prompts: list[list[int]] = [[1, 2, 3, 4]]
    runner: Any = (ClientWorkers(settings, workers, prompts, ("char", chars, 0), on_first,
                                 on_done, on_error) if workers
                   else EndpointClient(settings, lambda t: [], lambda i: "", on_first,
                                       on_done, on_error))
    runner.start()
    key = 0

    def run(count: int) -> dict[str, float]:
        nonlocal key
        with lock:
            seen.update(first=0, done=0, tokens=0, want=count)
        finished.clear()
        cpu, wall, calls = tree_cpu_s(), time.perf_counter(), read_calls(tree_pids())
        runner.submit([(key + i, 0, prompts[0]) for i in range(count)])
        key += count
        if not finished.wait(600) or errors:
            raise SystemExit(f"bench_sse: the client failed: {errors[:1] or 'timeout'}")
        cpu, wall = tree_cpu_s() - cpu, time.perf_counter() - wall
        calls = read_calls(tree_pids()) - calls
        if seen["first"] != count or seen["tokens"] != count * tokens:
            raise SystemExit(f"bench_sse: {seen} after {count} requests of {tokens} tokens")
        return {"requests": count, "events": count * (tokens + 1), "cpu_s": cpu,
                "wall_s": wall, "reads": calls}

    try:
        run(min(sizes))  # warm: connections open, code paths taken
        measured = [run(n) for n in sizes]
    finally:
        runner.close()
    return marginal(workers, measured, getattr(runner, "chunks", 0))


def _client_process(url: str, kind: str, workers: int, tokens: int, sizes: list[int],
                    concurrency: int, root: str = "") -> dict[str, Any]:
    env = {**os.environ, ROOT_ENV: root} if root else None
    done = subprocess.run([sys.executable, __file__, "--client", url, "--kind", kind,
                           "--workers", str(workers), "--tokens", str(tokens), "--sizes",
                           ",".join(map(str, sizes)), "--concurrency", str(concurrency)],
                          cwd=REPO, capture_output=True, text=True, timeout=1200, env=env)
    if done.returncode != 0:
        raise SystemExit(f"bench_sse: the client run failed (exit {done.returncode}): "
                         f"{done.stderr.strip()[-600:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


@contextmanager
def exported(rev: str) -> Iterator[str]:
    """``rev``'s ``suite`` package in a temporary directory (``--base``)."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="bench_sse_base_") as tmp:
        archive = subprocess.run(["git", "archive", rev, "suite"], cwd=REPO, check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        yield tmp


def measure(*, rounds: int = 3, tokens: int = 4096, small: int = 8, large: int = 40,
            concurrency: int = 16, cases: tuple[str, ...] = ("16", "1", "p1"),
            floors: tuple[str, ...] = ("bare", "aiohttp"), base: str = "") -> dict[str, Any]:
    """Every figure of the module docstring, for each server burst."""
    from suite.llm.endpoint.workers import default_workers

    # name: (client kind, worker processes, suite root: "" this tree, else ``base``'s)
    configs: dict[str, tuple[str, int, str]] = {
        "in_process": ("ours", 0, ""), "default": ("ours", default_workers(), "")}
    configs.update({name: (name, 0, "") for name in floors})
    report: dict[str, Any] = {
        "tokens_per_request": tokens, "events_per_request": tokens + 1,
        "requests": [small, large], "concurrency": concurrency, "rounds": rounds,
        "workers_default": default_workers(), "base": base,
        "load_average": [os.getloadavg()[0]]}
    with contextlib.ExitStack() as stack:
        if base:
            root = stack.enter_context(exported(base))
            configs.update({"base_in_process": ("ours", 0, root),
                            "base_default": ("ours", default_workers(), root)})
        for case in cases:
            name, burst, step_ms = _case(case)
            report[name] = _burst(burst, step_ms, configs, rounds, tokens, small, large,
                                  concurrency, report["load_average"])
    report["goal"] = {"us_per_event": GOAL_US_PER_EVENT, "ratio": GOAL_RATIO,
                      "judged_on": _case(cases[0])[0]}
    return report


def _case(spec: str) -> tuple[str, int, float]:
    """``N``: the server writes N events at once, as fast as it can (``burst_N``);
    ``pM``: one event a stream every M ms, each its own write (``paced_Mms``)."""
    if spec.startswith("p"):
        return f"paced_{spec[1:]}ms", 1, float(spec[1:])
    return f"burst_{spec}", int(spec), 0.0


def _burst(burst: int, step_ms: float, configs: dict[str, tuple[str, int, str]],
           rounds: int, tokens: int, small: int, large: int, concurrency: int,
           load: list[float]) -> dict[str, Any]:
    """One server case's rounds, every configuration in each (order alternating)."""
    per: dict[str, list[dict[str, Any]]] = {name: [] for name in configs}
    with server(burst, step_ms) as url:
        for index in range(rounds):
            names = list(configs) if index % 2 == 0 else list(reversed(configs))
            for name in names:
                kind, workers, root = configs[name]
                per[name].append(_client_process(url, kind, workers, tokens, [small, large],
                                                 concurrency, root))
            load.append(os.getloadavg()[0])
    medians = {name: statistics.median(r["us_per_event"] for r in rows)
               for name, rows in per.items()}
    reads = {name: statistics.median(r["reads_per_event"] for r in rows)
             for name, rows in per.items()}

    def ratio(top: str, bottom: str) -> dict[str, Any]:
        # within each round (both measured back to back), then the median
        each = [t["us_per_event"] / b["us_per_event"]
                for t, b in zip(per[top], per[bottom], strict=True)]
        return {"median": statistics.median(each), "by_round": each}

    ratios = {"default_over_in_process": ratio("default", "in_process")}
    ratios.update({f"in_process_over_{f}": ratio("in_process", f)
                   for f in ("bare", "aiohttp") if f in per})
    if "base_in_process" in per:
        ratios.update(in_process_over_base=ratio("in_process", "base_in_process"),
                      default_over_base=ratio("default", "base_default"))
    ours = (medians["in_process"], medians["default"])
    return {"us_per_event": medians, "reads_per_event": reads, "ratios": ratios,
            "goal_met": max(ours) <= GOAL_US_PER_EVENT
            and ratios["default_over_in_process"]["median"] <= GOAL_RATIO, "runs": per}


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=4096, help="output tokens a request")
    parser.add_argument("--small", type=int, default=8, help="requests in the small run")
    parser.add_argument("--large", type=int, default=40, help="requests in the large run")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--cases", default="16,1,p1",
                        help="server cases: N events written at once as fast as it can, "
                             "or pM: one event a stream every M ms (the first judges the "
                             "goal)")
    parser.add_argument("--floors", default="bare,aiohttp",
                        help="floor clients measured beside ours (sse_floor; '' for none)")
    parser.add_argument("--base", default="",
                        help="a git revision whose client is measured beside this tree's")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results")
    parser.add_argument("--serve", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--step-ms", type=float, default=0.0, help=argparse.SUPPRESS)
    parser.add_argument("--client", default="", help=argparse.SUPPRESS)
    parser.add_argument("--kind", default="ours", help=argparse.SUPPRESS)
    parser.add_argument("--workers", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--sizes", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve, args.step_ms / 1000)
        return 0
    if args.client:
        sizes = [int(s) for s in args.sizes.split(",")]
        if args.kind == "ours":
            record = client(args.client, args.workers, args.tokens, sizes, args.concurrency)
        else:
            import sse_floor

            reader = sse_floor.bare if args.kind == "bare" else sse_floor.raw_aiohttp
            record = reader(args.client, args.tokens, sizes, args.concurrency)
        print(json.dumps(record))
        return 0
    report = {"created_utc": datetime.now(UTC).isoformat(timespec="seconds"),
              **measure(rounds=args.rounds, tokens=args.tokens, small=args.small,
                        large=args.large, concurrency=args.concurrency,
                        cases=tuple(args.cases.split(",")),
                        floors=tuple(f for f in args.floors.split(",") if f),
                        base=args.base)}
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"bench_sse_{datetime.now(UTC).strftime('%Y%m%dT%H%M%SZ')}.json"
    path.write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps({key: ({k: v for k, v in value.items() if k != "runs"}
                            if isinstance(value, dict) else value)
                      for key, value in report.items()}, indent=2))
    print(f"written: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
