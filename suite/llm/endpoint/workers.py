"""Client worker processes for the ``openai`` backend: the HTTP work off LoadGen's process.

With ``backend.openai.client_workers`` = N > 0, N processes each run an
``EndpointClient`` (its own event loop and connection pool) and LoadGen's process only
hands out samples and completes them, as MLCommons' endpoint client splits its work.
The parent sends each worker lists of (query id, sample index) over a pipe; a worker
holds the prompts (sent once at start) and answers with batches of events: ``f``
(first token), ``d`` (done: ids and where they came from) and ``e`` (an error line).
Events that happen in the same turn of a worker's loop travel together, so a busy worker
sends one message for many completions. Each sample goes to the worker with the fewest
outstanding. A worker that dies (killed, crashed) fails every sample it held at once,
naming it, and so the run; ``cancel`` tells every worker to send nothing more of what it
has queued (the run failed). Workers ignore SIGINT and SIGTERM: a terminal's Ctrl-C
reaches the whole process group, and the parent stops them itself (``close``).

When it stops, each worker reports its own record (``process_record``): its pid, its CPU
(user + system, ``getrusage(RUSAGE_SELF)``) in all and since the first sample it was sent,
the requests it streamed and the SSE events they brought. ``records`` holds them, in
worker order, for the run's record (``EndpointSystemUnderTest.run_record``).
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import os
import resource
import signal
import threading
import time
from collections.abc import Sequence
from multiprocessing.connection import Connection
from typing import Any

from suite.errors import BackendError
from suite.llm.endpoint.client import (
    ClientSettings,
    DoneCallback,
    EndpointClient,
    ErrorCallback,
    FirstCallback,
)
from suite.llm.endpoint.settings import Prompt


def default_workers() -> int:
    """One client process per four cores, at least one, at most eight."""
    return max(1, min(8, (os.cpu_count() or 1) // 4))


def cpu_s() -> float:
    """This process's CPU seconds so far, user + system, over all its threads."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def process_record(role: str, cpu_since: float | None, requests: int, chunks: int,
                   **more: Any) -> dict[str, Any]:
    """One client process's record: its CPU in all (``cpu_s``) and since ``cpu_since``
    (``run_cpu_s``: the CPU when it was handed its first sample; 0 where it was never
    handed one), and what it streamed."""
    now = cpu_s()
    return {"role": role, "pid": os.getpid(), "cpu_s": round(now, 6),
            "run_cpu_s": round(now - cpu_since, 6) if cpu_since is not None else 0.0,
            "requests": requests, "chunks": chunks, **more}


def _worker(conn: Connection, settings: ClientSettings, prompts: list[Prompt],
            spec: tuple[str, Any, int], index: int = 0) -> None:
    """A worker process: stream what the parent sends, send back batches of events."""
    from suite.llm.dataset import tokenizer_from_spec

    # A Ctrl-C or a SIGTERM to the run's process group is the parent's to handle: it
    # stops the workers itself (``close``), and a worker killed by it would look dead.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    tokenizer = tokenizer_from_spec(spec)
    out: list[tuple[Any, ...]] = []
    lock = threading.Lock()
    started: list[float] = []

    def flush() -> None:
        with lock:
            batch = out[:]
            out.clear()
        if batch:
            # The parent stopped (the run is stopping): its pipe is gone, and what is
            # left to say has no reader. Never an error in the worker's loop.
            with contextlib.suppress(OSError):
                conn.send(batch)

    def push(event: tuple[Any, ...]) -> None:
        with lock:
            first = not out
            out.append(event)
        if first:  # one send for everything this turn of the loop produces
            asyncio.get_running_loop().call_soon(flush)

    client = EndpointClient(settings, tokenizer.encode_text, tokenizer.decode,
                            lambda key, ids: push(("f", key, ids[0])),
                            lambda key, ids, source, payload=None:
                            push(("d", key, ids, source, payload)),
                            lambda key, message: push(("e", key, message)))
    client.start()
    conn.send([("ready",)])
    try:
        while True:
            items = conn.recv()
            if items is None:
                break
            if items == "cancel":  # the run failed: nothing queued is sent
                client.cancel()
                continue
            if not started:
                started.append(cpu_s())
            client.submit([(key, sample, prompts[sample]) for key, sample in items])
    except (EOFError, OSError):
        pass  # the parent went away: stop
    finally:
        client.close()
        record = process_record("worker", started[0] if started else None, client.requests,
                                client.chunks, index=index, resent=client.resent,
                                finish_reasons=dict(client.finish_reasons),
                                reconciled=dict(client.reconciled))
        with contextlib.suppress(OSError):
            flush()
            conn.send([("stats", record)])
        conn.close()


class ClientWorkers:
    """N client processes behind the ``EndpointClient`` surface (see the module docstring)."""

    def __init__(self, settings: ClientSettings, count: int,
                 prompts: Sequence[Prompt],
                 tokenizer: tuple[str, Any, int], on_first: FirstCallback | None,
                 on_done: DoneCallback, on_error: ErrorCallback) -> None:
        self._settings, self._count = settings, count
        self._prompts = [p if isinstance(p, str | dict) else list(p) for p in prompts]
        self._tokenizer = tokenizer
        self._on_first, self._on_done, self._on_error = on_first, on_done, on_error
        self._conns: list[Connection] = []
        self._procs: list[Any] = []
        self._readers: list[threading.Thread] = []
        self._outstanding: list[int] = []
        self._owner: dict[int, int] = {}
        self._lock = threading.Lock()
        self.requests = self.chunks = self.resent = 0
        self.finish_reasons: dict[str, int] = {}
        self.reconciled: dict[str, int] = {}
        self._closing = False
        self.worker_cpu_s = 0.0
        #: Each worker's ``process_record`` as it stopped (see the module docstring).
        self.records: list[dict[str, Any]] = []
        self._ready = threading.Barrier(count + 1)

    def start(self) -> None:
        context = multiprocessing.get_context("spawn")  # LoadGen's threads: never fork
        for index in range(self._count):
            parent, child = context.Pipe()
            proc = context.Process(target=_worker, name=f"endpoint-client-{index}",
                                   args=(child, self._settings, self._prompts,
                                         self._tokenizer, index), daemon=True)
            proc.start()
            child.close()
            self._conns.append(parent)
            self._procs.append(proc)
            self._outstanding.append(0)
            reader = threading.Thread(target=self._read, args=(index,), daemon=True,
                                      name=f"endpoint-events-{index}")
            reader.start()
            self._readers.append(reader)
        try:
            self._ready.wait(timeout=120)
        except threading.BrokenBarrierError:
            self.close()
            raise BackendError(f"{self._count} endpoint client process(es) did not start",
                               hint="set backend.openai.client_workers = 0 to stream from "
                                    "LoadGen's process") from None

    def submit(self, items: Sequence[tuple[int, int, Prompt]]) -> None:
        """Hand each (key, index, _) to the worker with the fewest outstanding."""
        by_worker: dict[int, list[tuple[int, int]]] = {}
        with self._lock:
            for key, index, _ in items:
                worker = min(range(self._count), key=self._outstanding.__getitem__)
                self._outstanding[worker] += 1
                self._owner[key] = worker
                by_worker.setdefault(worker, []).append((key, index))
        for worker, batch in by_worker.items():
            try:
                self._conns[worker].send(batch)
            except OSError:  # the worker is dead: its reader reports it (``_died``)
                self._died(worker, [key for key, _ in batch])

    def cancel(self) -> None:
        """Every worker stops sending what it has queued (the run failed)."""
        for conn in self._conns:
            with contextlib.suppress(OSError):
                conn.send("cancel")

    def _died(self, index: int, keys: list[int] | None = None) -> None:
        """Worker ``index`` is gone before it said it stopped: every sample it holds
        fails (and so the run), at once, naming it."""
        if self._closing:
            return
        proc = self._procs[index] if index < len(self._procs) else None
        if proc is not None:
            proc.join(timeout=0.5)  # reaped, and its exit code known
        code = proc.exitcode if proc is not None else None
        message = (f"endpoint client process {index} (pid {getattr(proc, 'pid', '?')}) "
                   f"died (exit code {code})")
        with self._lock:
            held = [key for key, owner in self._owner.items() if owner == index]
            for key in held:
                del self._owner[key]
            self._outstanding[index] = 0
        held += [key for key in keys or [] if key not in held]
        for key in held or [-1]:  # -1: no sample, the run itself
            self._on_error(key, message)

    def _read(self, index: int) -> None:
        conn, ready, received = self._conns[index], False, 0
        try:
            while True:
                events = conn.recv()
                received += 1
                for event in events:
                    kind = event[0]
                    if kind == "f" and self._on_first is not None:
                        self._on_first(event[1], [event[2]])
                    elif kind in ("d", "e"):
                        with self._lock:
                            worker = self._owner.pop(event[1], None)
                            if worker is not None:
                                self._outstanding[worker] -= 1
                        if kind == "d":
                            if event[4] is None:
                                self._on_done(event[1], event[2], event[3])
                            else:  # a tool-calling card's recorded response
                                self._on_done(event[1], event[2], event[3], event[4])
                        else:
                            self._on_error(event[1], event[2])
                    elif kind == "ready":
                        ready = True
                        self._ready.wait(timeout=120)
                    elif kind == "stats":
                        # and the messages (batches of events) the parent read from it
                        record = {**event[1], "messages": received}
                        with self._lock:
                            self.worker_cpu_s += record["run_cpu_s"]
                            self.requests += record["requests"]
                            self.chunks += record["chunks"]
                            self.resent += record["resent"]
                            for reason, n in record["finish_reasons"].items():
                                self.finish_reasons[reason] = (
                                    self.finish_reasons.get(reason, 0) + n)
                            for rule, n in record.get("reconciled", {}).items():
                                self.reconciled[rule] = self.reconciled.get(rule, 0) + n
                            self.records.append(record)
                            self.records.sort(key=lambda r: int(r["index"]))
                        return
        except (EOFError, OSError, threading.BrokenBarrierError):
            if not ready:
                with contextlib.suppress(threading.BrokenBarrierError):
                    self._ready.abort()
            else:  # it ended without its stats: killed, or crashed
                self._died(index)

    def close(self) -> None:
        """Stop every worker (they cancel what is in flight) and collect their stats."""
        self._closing = True
        for conn in self._conns:
            with contextlib.suppress(OSError, BrokenPipeError):
                conn.send(None)
        deadline = time.monotonic() + 1.5
        for reader in self._readers:
            reader.join(timeout=max(0.0, deadline - time.monotonic()))
        for proc in self._procs:
            proc.join(timeout=max(0.0, deadline - time.monotonic()))
            if proc.is_alive():
                proc.kill()
                proc.join(timeout=1.0)
        self._procs.clear()
