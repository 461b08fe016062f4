"""The floor under the endpoint client's CPU per SSE event: the same responses read by less.

``bench_sse`` measures the backend's client against its synthetic server; this module
holds the two clients it is compared with, on the same server, sizes and concurrency, so
what the event loop and the kernel cost per read is known apart from what our parsing
costs:

* ``bare``: a uvloop ``asyncio.Protocol`` per connection that writes the same request and
  only counts the response's bytes, ending it at the chunked body's last chunk (no HTTP
  parser, no SSE, no callbacks beyond ``data_received``): a client can cost no less per
  read with this event loop;
* ``aiohttp``: raw aiohttp (``ClientSession.post``, the body read with
  ``content.iter_any()``, bytes counted, nothing decoded): a general client's floor.

Each returns ``bench_sse.client``'s record (each run size's CPU and events), so its
marginal CPU per event is formed the same way.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import resource
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

END = b"0\r\n\r\n"  # the chunked body's last chunk (the server sends no trailers)


def read_calls(pids: list[int]) -> int:
    """The read system calls (``syscr`` of ``/proc/PID/io``: read, recv and the like) the
    processes made so far: a client's wakeups, which the kernel's cost follows."""
    calls = 0
    for pid in pids:
        try:
            text = Path(f"/proc/{pid}/io").read_text()
        except OSError:
            continue
        calls += int(text.split("syscr:", 1)[1].split()[0])
    return calls


def tree_pids() -> list[int]:
    """This process and its live descendants (a client's worker processes)."""
    from pinning import descendants

    return descendants(os.getpid())


def tree_cpu_s() -> float:
    """This process's CPU (``getrusage``: to the microsecond) and its live descendants'
    (the client processes: ``/proc``, in clock ticks)."""
    me, ticks = os.getpid(), 0
    for pid in tree_pids():
        if pid != me:
            with contextlib.suppress(OSError):
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                ticks += int(fields[11]) + int(fields[12])  # utime, stime
    return _cpu_s() + ticks / os.sysconf("SC_CLK_TCK")


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _body(tokens: int) -> bytes:
    return json.dumps({"model": "synthetic", "prompt": [1, 2, 3, 4], "max_tokens": tokens,
                       "stream": True}).encode()


def _loop() -> asyncio.AbstractEventLoop:
    try:
        import uvloop

        return uvloop.new_event_loop()
    except ImportError:
        return asyncio.new_event_loop()


def _measure(sizes: list[int], tokens: int, run: Callable[[int], Awaitable[int]],
             close: Callable[[], Awaitable[None]] | None = None) -> dict[str, Any]:
    """``run(count)`` streams ``count`` responses and returns the bytes read; warm once
    at the smallest size, then each size's CPU (``bench_sse.client``'s record); ``close``
    last, on the same loop."""
    loop = _loop()
    measured = []
    try:
        loop.run_until_complete(run(min(sizes)))
        for count in sizes:
            cpu, wall, calls = _cpu_s(), time.perf_counter(), read_calls([os.getpid()])
            read = loop.run_until_complete(run(count))
            cpu, wall = _cpu_s() - cpu, time.perf_counter() - wall
            measured.append({"requests": count, "events": count * (tokens + 1),
                             "cpu_s": cpu, "wall_s": wall, "bytes": read,
                             "reads": read_calls([os.getpid()]) - calls})
    finally:
        if close is not None:
            loop.run_until_complete(close())
        loop.close()
    return marginal(0, measured, 0)


def marginal(workers: int, measured: list[dict[str, Any]], chunks: int) -> dict[str, Any]:
    """A client's record: its runs, and per event of the large run over the small one
    its CPU (``us_per_event``) and its read calls (``reads_per_event``)."""
    small, large = measured[0], measured[-1]
    events = large["events"] - small["events"]
    return {"workers": workers, "runs": measured, "client_chunks": chunks,
            "us_per_event": (large["cpu_s"] - small["cpu_s"]) / events * 1e6,
            "reads_per_event": (large["reads"] - small["reads"]) / events}


class _Counter(asyncio.Protocol):
    """One kept-alive connection: writes a request, counts its response's bytes."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.done: asyncio.Future[int] | None = None
        self.read = 0
        self.tail = b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.read += len(data)
        # The last chunk, possibly split across reads (a short read joins the tail).
        end = data[-5:] if len(data) >= 5 else (self.tail + data)[-5:]
        self.tail = end
        if end == END and self.done is not None:
            self.done.set_result(self.read)

    def send(self, request: bytes) -> asyncio.Future[int]:
        assert self.transport is not None
        self.read, self.tail = 0, b""
        self.done = asyncio.get_running_loop().create_future()
        self.transport.write(request)
        return self.done


def bare(url: str, tokens: int, sizes: list[int], concurrency: int) -> dict[str, Any]:
    """The bare protocol's record (module docstring)."""
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 80
    body = _body(tokens)
    request = (b"POST /v1/completions HTTP/1.1\r\nHost: %s:%d\r\nContent-Type: "
               b"application/json\r\nContent-Length: %d\r\n\r\n"
               % (host.encode(), port, len(body)) + body)
    conns: list[_Counter] = []

    async def run(count: int) -> int:
        loop = asyncio.get_running_loop()
        while len(conns) < concurrency:
            _, conn = await loop.create_connection(_Counter, host, port)
            conns.append(conn)
        left = [count]

        async def stream(conn: _Counter) -> int:
            read = 0
            while left[0] > 0:
                left[0] -= 1
                read += await conn.send(request)
            return read

        return sum(await asyncio.gather(*(stream(c) for c in conns)))

    return _measure(sizes, tokens, run)


def raw_aiohttp(url: str, tokens: int, sizes: list[int], concurrency: int) -> dict[str, Any]:
    """Raw aiohttp's record (module docstring)."""
    import aiohttp

    body = _body(tokens)
    sessions: list[Any] = []

    async def run(count: int) -> int:
        if not sessions:
            sessions.append(aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=concurrency)))
        session, left = sessions[0], [count]

        async def stream() -> int:
            read = 0
            while left[0] > 0:
                left[0] -= 1
                async with session.post(url + "/v1/completions", data=body, headers={
                        "Content-Type": "application/json"}) as response:
                    async for data in response.content.iter_any():
                        read += len(data)
            return read

        return sum(await asyncio.gather(*(stream() for _ in range(concurrency))))

    async def close() -> None:
        for session in sessions:
            await session.close()

    return _measure(sizes, tokens, run, close)
