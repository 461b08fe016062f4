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

from suite.llm import endpoint_client
from suite.llm.endpoint_client import ClientSettings, EndpointClient


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive
    close_after: bool = False
    mode = "ok"  # "stall": nothing for 5 s; "trickle": a comment line every 50 ms, 5 s
    connections: list[int] = []  # noqa: RUF012 (one list per server class, by design)

    def setup(self) -> None:
        super().setup()
        type(self).connections.append(1)

    def do_POST(self) -> None:
        json.loads(self.rfile.read(int(self.headers["Content-Length"])))
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
        self.send_header("Content-Length", "1000000")
        self.end_headers()
        for _ in range(100):
            self.wfile.write(b": ping\n")
            self.wfile.flush()
            time.sleep(0.05)

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def _server(close_after: bool, mode: str = "ok") -> Iterator[tuple[str, list[int]]]:
    class Handler(_Handler):
        pass

    Handler.close_after, Handler.connections, Handler.mode = close_after, [], mode
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
