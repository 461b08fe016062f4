"""The endpoint client's pooled connections: reuse, the keep-alive bound, and a connection
the server closed while idle (a request must never be written to it)."""

from __future__ import annotations

import http.server
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

pytest.importorskip("httptools", reason="the endpoint client needs httptools (.[openai])")

from suite.llm.endpoint import client as endpoint_client
from suite.llm.endpoint.client import ClientSettings, EndpointClient
from tests.conftest import REPO


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive
    close_after: bool = False
    mode = "ok"  # "stall": nothing for 5 s; "trickle": a comment line every 50 ms, 5 s
    connections: list[int] = []  # noqa: RUF012 (one list per server class, by design)
    #: Requests answered; every later one is read and its connection closed unanswered
    #: (as a server that died holding it). None: all answered.
    answered: int | None = None
    requests: list[int] = []  # noqa: RUF012 (one list per server class, by design)

    def setup(self) -> None:
        super().setup()
        type(self).connections.append(1)

    def do_POST(self) -> None:
        json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append(1)
        if self.answered is not None and len(self.requests) > self.answered:
            self.close_connection = True  # read, then closed unanswered
            return
        if self.mode != "ok":
            self._slow()
            return
        events = [{"choices": [{"index": 0, "text": "ab", "token_ids": [3, 4]}]},
                  {"choices": [], "usage": {"completion_tokens": 2}}]
        body = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events)
        body += b"data: [DONE]\n\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
        self.wfile.flush()
        # Keep-alive promised, then closed: as a server does at its idle limit.
        self.close_connection = type(self).close_after

    def _slow(self) -> None:
        self.close_connection = True
        if self.mode == "stall":
            time.sleep(5)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", "1000000")
        self.end_headers()
        for _ in range(100):
            self.wfile.write(b": ping\n")
            self.wfile.flush()
            time.sleep(0.05)

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def _server(close_after: bool, mode: str = "ok", answered: int | None = None
            ) -> Iterator[tuple[str, list[int]]]:
    class Handler(_Handler):
        pass

    Handler.close_after, Handler.connections, Handler.mode = close_after, [], mode
    Handler.answered, Handler.requests = answered, []
    handler = Handler
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.block_on_close = False  # a stalled handler is not waited for
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", handler.connections
    finally:
        server.shutdown()
        server.server_close()


def _one(client: EndpointClient, done: list[object], key: int) -> object:
    client.submit([(key, key, [1, 2])])
    deadline = time.monotonic() + 10
    while len(done) <= key and time.monotonic() < deadline:
        time.sleep(0.01)
    return done[key]


def _client(url: str, done: list[object], first_byte_timeout_s: float = 60.0,
            total_timeout_s: float = 600.0) -> EndpointClient:
    settings = ClientSettings(urls=(url,), model="m", first_byte_timeout_s=first_byte_timeout_s,
                              total_timeout_s=total_timeout_s)
    client = EndpointClient(settings, lambda t: [],
                            lambda i: "", None, lambda k, ids, src: done.append(ids),
                            lambda k, message: done.append(message))
    client.start()
    return client


def test_a_connection_is_reused_and_one_closed_while_idle_fails_nothing() -> None:
    for close_after, expected in ((False, 1), (True, 3)):
        with _server(close_after) as (url, connections):
            done: list[object] = []
            client = _client(url, done)
            try:
                for key in range(3):
                    assert _one(client, done, key) == [3, 4], done
                    time.sleep(0.2)  # the server's close reaches the idle connection
            finally:
                client.close()
            assert len(connections) == expected


def test_an_idle_connection_is_kept_keepalive_s_at_most(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(endpoint_client, "KEEPALIVE_S", 0.1)
    with _server(False) as (url, connections):
        done: list[object] = []
        client = _client(url, done)
        try:
            assert _one(client, done, 0) == [3, 4]
            time.sleep(0.3)  # past the bound: a new connection, not the idle one
            assert _one(client, done, 1) == [3, 4]
        finally:
            client.close()
        assert len(connections) == 2


@pytest.mark.parametrize(("mode", "expected"), [
    ("stall", "no response data within 0.3 s (timeout)"),
    ("trickle", "the request took over 0.6 s (timeout)"),
])
def test_the_first_byte_and_total_timeouts_fail_the_request(mode: str, expected: str) -> None:
    with _server(False, mode) as (url, _):
        done: list[object] = []
        client = _client(url, done, first_byte_timeout_s=0.3, total_timeout_s=0.6)
        try:
            start = time.monotonic()
            message = _one(client, done, 0)
            assert expected in str(message) and "sample 0" in str(message), message
            assert time.monotonic() - start < 2
        finally:
            client.close()


@contextmanager
def _never_accepting() -> Iterator[str]:
    """A loopback port whose accept queue is full: the kernel drops every further SYN, so
    a connect neither succeeds nor is refused (as a host behind a silent firewall)."""
    import socket

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(0)
        port = listener.getsockname()[1]
        fillers = []
        for _ in range(4):  # more than the queue holds: the extra ones wait in SYN-SENT
            filler = socket.socket()
            filler.setblocking(False)
            filler.connect_ex(("127.0.0.1", port))
            fillers.append(filler)
        time.sleep(0.1)
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            for filler in fillers:
                filler.close()


def test_a_connect_that_never_completes_fails_the_request_at_its_timeout() -> None:
    with _never_accepting() as url:
        done: list[object] = []
        settings = ClientSettings(urls=(url,), model="m", connect_timeout_s=0.3)
        client = EndpointClient(settings, lambda t: [], lambda i: "", None,
                                lambda k, ids, src: done.append(ids),
                                lambda k, message: done.append(message))
        client.start()
        try:
            start = time.monotonic()
            message = str(_one(client, done, 0))
            assert time.monotonic() - start < 2
        finally:
            client.close()
    port = url.rsplit(":", 1)[1]
    assert f"cannot connect to 127.0.0.1:{port} within 0.3 s (timeout)" in message, message
    assert "sample 0" in message, message


def test_close_cancels_a_request_in_flight_within_a_second() -> None:
    with _server(False, "stall") as (url, _):
        done: list[object] = []
        client = _client(url, done)
        client.submit([(0, 0, [1, 2])])
        time.sleep(0.2)
        start = time.monotonic()
        client.close()
        assert time.monotonic() - start < 1.5
        assert done == []  # cancelled, not failed


@contextmanager
def _uvicorn(keepalive_s: int) -> Iterator[tuple[str, int]]:
    """(URL, pid) of uvicorn on uvloop and httptools (vLLM's server stack) serving
    ``tests.support.sse_asgi``, closing idle connections after ``keepalive_s``."""
    import socket
    import subprocess
    import sys

    pytest.importorskip("uvicorn", reason="uvicorn (installed with the [remote] extra's "
                                          "mlserver) is the server under test")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    server = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "tests.support.sse_asgi:app", "--host", "127.0.0.1",
         "--port", str(port), "--loop", "uvloop", "--http", "httptools",
         "--timeout-keep-alive", str(keepalive_s), "--log-level", "warning"],
        cwd=str(REPO))
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert server.poll() is None and time.monotonic() < deadline, "no uvicorn"
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}", server.pid
    finally:
        server.kill()
        server.wait()


def test_a_request_the_server_closed_unread_at_its_idle_limit_is_sent_again_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The race no client clock rules out: the request is written to a kept-alive
    connection inside the server's idle limit, but the server's loop stalls (here: stopped)
    past it, and on waking runs its idle timer before it reads; it closes the connection
    with the request unread. The request is sent again on a new connection, once, and
    counted; the stream then completes."""
    import os
    import signal

    monkeypatch.setattr(endpoint_client, "KEEPALIVE_S", 60.0)  # the client always reuses
    with _uvicorn(keepalive_s=1) as (url, pid):
        done: list[object] = []
        client = _client(url, done)
        try:
            assert _one(client, done, 0) == [3, 4], done
            time.sleep(0.2)  # the server has armed its idle timer (microseconds after)
            os.kill(pid, signal.SIGSTOP)  # the server's loop stalls, its timer running
            time.sleep(0.1)
            client.submit([(1, 1, [1, 2])])
            time.sleep(1.5)  # the server is past its 1 s idle limit before it reads
            os.kill(pid, signal.SIGCONT)
            assert _one(client, done, 1) == [3, 4], done
            assert client.resent == 1
            assert _one(client, done, 2) == [3, 4], done  # the new connection is kept
            assert client.resent == 1
        finally:
            os.kill(pid, signal.SIGCONT)
            client.close()


def test_a_new_connection_closed_unanswered_fails_the_request_without_a_resend() -> None:
    """Only a reused connection's unanswered close is sent again, once: on a new
    connection it is the server's failure, reported (so a resend that fails too is)."""
    for answered, expected_resent in ((0, 0), (1, 1)):
        with _server(False, answered=answered) as (url, _):
            done: list[object] = []
            client = _client(url, done)
            try:
                if answered:
                    assert _one(client, done, 0) == [3, 4], done
                message = str(_one(client, done, answered))
                assert "the connection closed before a response" in message, message
                assert f"sample {answered}" in message, message
                assert client.resent == expected_resent
            finally:
                client.close()
