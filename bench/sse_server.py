"""The synthetic engine ``bench_sse`` streams from: vLLM-shaped completions events, one
HTTP/1.1 chunk each, prebuilt, so the server costs little per event; it runs in its own
process (``server``), and its CPU is not the client's. ``bench_sse``'s module docstring
describes its cases (how many events it writes at once, and whether it is paced).
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

VOCAB = 83  # tinylm's: the synthetic ids stay inside it
REPO = Path(__file__).resolve().parent.parent
SCRIPT = Path(__file__).resolve().parent / "bench_sse.py"  # whose ``--serve`` runs ``serve``


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

    def __init__(self, burst: int, step_s: float = 0.0) -> None:
        self.middle, self.last, self.head = _events()
        self.burst, self.step_s = burst, step_s
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
            # paced: one decode step every ``step_s`` (at the timer's resolution, a
            # millisecond), each stream's event its own write
            await asyncio.sleep(self.step_s)


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


async def _serve(burst: int, step_s: float) -> None:
    loop = asyncio.get_running_loop()
    engine = _Engine(burst, step_s)
    server = await loop.create_server(lambda: _Connection(engine), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    print(f"http://127.0.0.1:{port}", flush=True)
    await engine.run()


def serve(burst: int, step_s: float = 0.0) -> None:
    try:
        import uvloop

        uvloop.run(_serve(burst, step_s))
    except ImportError:
        asyncio.run(_serve(burst, step_s))


@contextmanager
def server(burst: int = 1, step_ms: float = 0.0) -> Iterator[str]:
    """The server in its own process (its CPU is not the client's); yields its URL."""
    proc = subprocess.Popen([sys.executable, str(SCRIPT), "--serve", str(burst), "--step-ms",
                             str(step_ms)], cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        url = proc.stdout.readline().strip()
        if not url.startswith("http://"):
            raise SystemExit(f"bench_sse: the synthetic server did not start ({url!r})")
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)
