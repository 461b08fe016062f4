"""The endpoint client's CPU per streamed SSE event at reasoning lengths (issue 37, item 5).

A synthetic server that costs little per event (``serve``: raw asyncio, every event
prebuilt and vLLM-shaped, one HTTP chunk each as engines write them, each open stream
served in turn, as an engine's decode steps) runs in its own process, and its CPU is not
counted. It writes ``burst`` events at once: 16 (the figure the goal is judged on) keeps
the client saturated, as an engine's events pile up in the socket while a client at its
ceiling is busy, so a read holds many of them; 1 is one event a write, where a read holds
what arrived since the last one (few, when the client keeps up, and each read's own cost
then counts per event). Against it, ``client`` streams 1-token events with 4,096-token outputs
(the goal's shape; deepseek-r1 averages about 3,900) through the openai backend's own
client in two configurations:

* ``in-process``: one ``EndpointClient`` (``backend.openai.client_workers = 0``);
* ``default``: ``ClientWorkers`` with ``default_workers()`` processes (the backend's
  default, ``client_workers = -1``), the parent reading their batched events.

Each configuration runs in a fresh process; its CPU is that process's whole tree (itself
and every client process it started, user + system, from ``/proc``), read before and
after a small and a large run on the same warm client, so fixed costs (start-up, imports,
connects) cancel in the marginal: (CPU(large) - CPU(small)) / (events(large) -
events(small)). Events are the token events and the usage event of each response (the
client's own ``chunks`` count, checked against the responses' length). Configurations
alternate within each round; medians over rounds; the ratio default / in-process is
formed within this invocation. No LoadGen: this is the client alone.

    python bench/bench_sse.py [--rounds 3] [--tokens 4096] [--small 8] [--large 40]
                              [--bursts 16,1]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
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
sys.path.insert(1, str(Path(__file__).resolve().parent.parent))
from pinning import descendants

REPO = Path(__file__).resolve().parent.parent
VOCAB = 83  # tinylm's: the synthetic ids stay inside it
GOAL_US_PER_EVENT = 2.0
GOAL_RATIO = 1.5


# -- the server ------------------------------------------------------------------------
def _chunk(payload: bytes) -> bytes:
    """One SSE event as one HTTP/1.1 chunk (the transfer coding engines' servers use)."""
    data = b"data: " + payload + b"\n\n"
    return b"%x\r\n" % len(data) + data + b"\r\n"


def _events() -> tuple[list[bytes], list[bytes], bytes]:
    """Prebuilt token events (one per id, not last / last) and the response's head, shaped
    as vLLM's completions chunks with ``return_token_ids``."""
    def event(token: int, finish: str) -> bytes:
        return _chunk(json.dumps(
            {"id": "cmpl-0123456789abcdef", "object": "text_completion",
             "created": 1765000000, "model": "synthetic",
             "choices": [{"index": 0, "text": chr(32 + token), "logprobs": None,
                          "finish_reason": finish or None, "stop_reason": None,
                          "token_ids": [token]}]}, separators=(",", ":")).encode())
    head = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream; charset=utf-8\r\n"
            b"Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n\r\n")
    ids = range(1, VOCAB)
    return [event(i, "") for i in ids], [event(i, "length") for i in ids], head


class _Engine:
    """Every open stream gets its next event each step (see the module docstring)."""

    def __init__(self, burst: int) -> None:
        self.middle, self.last, self.head = _events()
        self.burst = burst
        self.streams: list[list[Any]] = []  # [transport, position, count]
        self.wake = asyncio.Event()

    def start(self, transport: asyncio.Transport, body: bytes) -> None:
        request = json.loads(body)
        count = int(request["max_tokens"])
        transport.write(self.head)
        self.streams.append([transport, 0, count])
        self.wake.set()

    async def run(self) -> None:
        middle, last, n, burst = self.middle, self.last, VOCAB - 1, self.burst
        while True:
            if not self.streams:
                self.wake.clear()
                await self.wake.wait()
            for stream in list(self.streams):
                transport, position, count = stream
                if transport.is_closing():
                    self.streams.remove(stream)
                    continue
                if transport.get_write_buffer_size() > 1 << 16:
                    continue  # the client is behind: it reads what is buffered first
                step = min(burst, count - 1 - position)
                if step > 0:
                    transport.write(b"".join(middle[(position + k) % n] for k in range(step)))
                    position += step
                else:
                    usage = json.dumps({"id": "cmpl-0123456789abcdef", "choices": [],
                                        "usage": {"prompt_tokens": 4, "total_tokens": count + 4,
                                                  "completion_tokens": count}})
                    transport.write(last[position % n] + _chunk(usage.encode())
                                    + _chunk(b"[DONE]") + b"0\r\n\r\n")
                    self.streams.remove(stream)
                stream[1] = position
            await asyncio.sleep(0)


class _Connection(asyncio.Protocol):
    """Reads ``POST`` requests (head and ``Content-Length`` body) and starts each stream."""

    def __init__(self, engine: _Engine) -> None:
        self.engine, self.buffer = engine, b""
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while (end := self.buffer.find(b"\r\n\r\n")) >= 0:
            length = 0
            for line in self.buffer[:end].split(b"\r\n")[1:]:
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            if len(self.buffer) < end + 4 + length:
                return
            body = self.buffer[end + 4:end + 4 + length]
            self.buffer = self.buffer[end + 4 + length:]
            assert self.transport is not None
            self.engine.start(self.transport, body)


async def _serve(burst: int) -> None:
    loop = asyncio.get_running_loop()
    engine = _Engine(burst)
    server = await loop.create_server(lambda: _Connection(engine), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    print(f"http://127.0.0.1:{port}", flush=True)
    await engine.run()


def serve(burst: int) -> None:
    try:
        import uvloop

        uvloop.run(_serve(burst))
    except ImportError:
        asyncio.run(_serve(burst))


@contextmanager
def server(burst: int = 1) -> Iterator[str]:
    """The server in its own process (its CPU is not the client's); yields its URL."""
    proc = subprocess.Popen([sys.executable, __file__, "--serve", str(burst)], cwd=REPO,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        if not url.startswith("http://"):
            raise SystemExit(f"bench_sse: the synthetic server did not start ({url!r})")
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


# -- the client ------------------------------------------------------------------------
def _tree_cpu_s() -> float:
    """This process's CPU (``getrusage``: to the microsecond) and its live descendants'
    (the client processes: ``/proc``, in clock ticks)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    me, ticks = os.getpid(), 0
    for pid in descendants(me):
        if pid != me:
            with contextlib.suppress(OSError):
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                ticks += int(fields[11]) + int(fields[12])  # utime, stime
    return usage.ru_utime + usage.ru_stime + ticks / os.sysconf("SC_CLK_TCK")


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
        cpu, wall = _tree_cpu_s(), time.perf_counter()
        runner.submit([(key + i, 0, prompts[0]) for i in range(count)])
        key += count
        if not finished.wait(600) or errors:
            raise SystemExit(f"bench_sse: the client failed: {errors[:1] or 'timeout'}")
        cpu, wall = _tree_cpu_s() - cpu, time.perf_counter() - wall
        if seen["first"] != count or seen["tokens"] != count * tokens:
            raise SystemExit(f"bench_sse: {seen} after {count} requests of {tokens} tokens")
        return {"requests": count, "events": count * (tokens + 1), "cpu_s": cpu,
                "wall_s": wall}

    try:
        run(min(sizes))  # warm: connections open, code paths taken
        measured = [run(n) for n in sizes]
    finally:
        runner.close()
    chunks = getattr(runner, "chunks", 0)
    small, large = measured[0], measured[-1]
    return {"workers": workers, "runs": measured, "client_chunks": chunks,
            "us_per_event": (large["cpu_s"] - small["cpu_s"])
            / (large["events"] - small["events"]) * 1e6}


def _client_process(url: str, workers: int, tokens: int, sizes: list[int],
                    concurrency: int) -> dict[str, Any]:
    done = subprocess.run([sys.executable, __file__, "--client", url, "--workers",
                           str(workers), "--tokens", str(tokens), "--sizes",
                           ",".join(map(str, sizes)), "--concurrency", str(concurrency)],
                          cwd=REPO, capture_output=True, text=True, timeout=1200)
    if done.returncode != 0:
        raise SystemExit(f"bench_sse: the client run failed (exit {done.returncode}): "
                         f"{done.stderr.strip()[-600:]}")
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def measure(*, rounds: int = 3, tokens: int = 4096, small: int = 8, large: int = 40,
            concurrency: int = 16, bursts: tuple[int, ...] = (16, 1)) -> dict[str, Any]:
    """Every figure of the module docstring, for each server burst."""
    from suite.llm.endpoint.workers import default_workers

    configs = {"in_process": 0, "default": default_workers()}
    report: dict[str, Any] = {
        "tokens_per_request": tokens, "events_per_request": tokens + 1,
        "requests": [small, large], "concurrency": concurrency, "rounds": rounds,
        "workers_default": configs["default"], "load_average": [os.getloadavg()[0]]}
    for burst in bursts:
        per: dict[str, list[dict[str, Any]]] = {name: [] for name in configs}
        with server(burst) as url:
            for index in range(rounds):
                names = list(configs) if index % 2 == 0 else list(reversed(configs))
                for name in names:
                    per[name].append(_client_process(url, configs[name], tokens,
                                                     [small, large], concurrency))
                report["load_average"].append(os.getloadavg()[0])
        medians = {name: statistics.median(r["us_per_event"] for r in rows)
                   for name, rows in per.items()}
        ratios = [d["us_per_event"] / i["us_per_event"]
                  for d, i in zip(per["default"], per["in_process"], strict=True)]
        report[f"burst_{burst}"] = {
            "us_per_event": medians, "default_over_in_process": statistics.median(ratios),
            "ratios_by_round": ratios,
            "goal_met": max(medians.values()) <= GOAL_US_PER_EVENT
            and statistics.median(ratios) <= GOAL_RATIO, "runs": per}
    report["goal"] = {"us_per_event": GOAL_US_PER_EVENT, "ratio": GOAL_RATIO,
                      "judged_on": f"burst_{bursts[0]}"}
    return report


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=4096, help="output tokens a request")
    parser.add_argument("--small", type=int, default=8, help="requests in the small run")
    parser.add_argument("--large", type=int, default=40, help="requests in the large run")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--bursts", default="16,1",
                        help="events the server writes at once, per run (the first judges "
                             "the goal)")
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "results")
    parser.add_argument("--serve", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--client", default="", help=argparse.SUPPRESS)
    parser.add_argument("--workers", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--sizes", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        serve(args.serve)
        return 0
    if args.client:
        sizes = [int(s) for s in args.sizes.split(",")]
        print(json.dumps(client(args.client, args.workers, args.tokens, sizes,
                                args.concurrency)))
        return 0
    report = {"created_utc": datetime.now(UTC).isoformat(timespec="seconds"),
              **measure(rounds=args.rounds, tokens=args.tokens, small=args.small,
                        large=args.large, concurrency=args.concurrency,
                        bursts=tuple(int(b) for b in args.bursts.split(",")))}
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
