"""Kept-alive HTTP/1.1 connections to one server, for the endpoint client's requests.

The endpoint client sends one kind of request, a JSON ``POST`` whose response streams, so
this module owns only that: a pool of asyncio connections per base URL, each request
written as one preformatted byte string (request line, fixed headers, length, body), and
each response parsed by ``httptools`` (llhttp, the parser uvloop's and uvicorn's servers
use; it also undoes the chunked transfer coding). No response parser is written here. A
general client (aiohttp) spent most of a request's CPU on per-request objects (request,
payload, timers, header multidicts) that one fixed request does not need.

A request is an ``Exchange``: the connection calls its ``head``/``body``/``complete`` as
the parser reports them, and ``lost`` if the connection ends first. One read is the
exchange's own before the parser's: where the parser stopped at a chunk's start in a
chunked body (it reports each chunk's end, ``on_chunk_complete``), the read is offered to
``framed`` first, which takes it if it is whole chunks it can read itself (a streamed
response's token events; a chunk cut off at the read's end it holds for the next read),
and the parser, never fed those bytes, is still at a chunk's start after them; any other
read it gives back, with what it held before it, for the parser. At an engine's pace a
read is one event, and this halves the client's Python a read (``bench/PERFORMANCE.md``).
An idle connection is kept ``keepalive_s`` at most (under the server's own idle limit),
and one the server closed while idle is dropped, never written to.

One failure is not the server's answer, and only that one is sent again (once, on a new
connection, counted in ``Pool.resent``): a *reused* connection that closes before a single
byte of the response. The server closed it at its idle limit with the request unread, a
race no client clock can rule out, since a server whose loop stalls runs its idle timer
before it reads (uvicorn on uvloop, measured: a request written 3.9 s into a 5 s limit,
the server stopped for 1.5 s, is answered by a reset). The server never saw the request
(RFC 9110 9.2.2 allows the retry). A new connection that closes unanswered, a response cut
off, a timeout: each is the request's failure, never retried.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable
from functools import partial
from typing import Protocol, cast
from urllib.parse import urlsplit

from suite.errors import BackendError


class TransportError(BackendError):
    """A connection failed; the message is one line, shown as it is."""


class StreamError(BackendError):
    """One request failed; the message names what and is shown as it is. Raised while a
    response is read (``sse``) and while it is recorded (``tool_calls``); defined here,
    below both, so neither imports the other for it."""


class Exchange(Protocol):
    """One request's side of a connection (what the parser reports, in order)."""

    def sent(self, conn: Connection) -> None: ...
    def head(self, status: int, content_type: str) -> None: ...
    def body(self, data: bytes) -> None: ...
    def framed(self, data: bytes) -> bytes | None: ...
    def complete(self) -> None: ...
    def lost(self, exc: BaseException) -> None: ...


class Connection(asyncio.Protocol):
    """One kept-alive connection, one exchange at a time."""

    def __init__(self, pool: Pool) -> None:
        import httptools

        self.pool = pool
        # the body's chunks from one read, handed over at once (None: a chunk's end)
        self.pieces: list[bytes | None] = []
        # httptools' body callback, one call a chunk (an engine writes an event a chunk):
        # the list's own append, a C call, not a Python method a chunk. Set before the
        # parser is made, which looks its callbacks up once.
        self.on_body: Callable[[bytes], None] = self.pieces.append
        # A chunk's end, marked in the same list (also a C call): the parser stopped at a
        # chunk boundary if the last thing it reported was one (``data_received``).
        self.on_chunk_complete: Callable[[], None] = partial(self.pieces.append, None)
        self.boundary = False  # the parser is at a chunk's start in a chunked body
        self.parser = httptools.HttpResponseParser(self)
        self.parser_error = httptools.HttpParserError
        self.transport: asyncio.Transport | None = None
        self.exchange: Exchange | None = None
        self.idle_since = 0.0
        self.served = 0  # responses completed on this connection
        self.answered = False  # a byte of the current exchange's response has arrived
        self.request = b""  # the current exchange's bytes, kept to send again (see above)
        self.content_type = b""  # the current response's Content-Type

    # -- asyncio's side ----------------------------------------------------------------
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.Transport, transport)  # uvloop's is not a subclass

    def data_received(self, data: bytes) -> None:
        if self.exchange is None:  # bytes nobody asked for: the connection is unusable
            self.close()
            return
        self.answered = True
        try:
            # Whole chunks of the response's template events are the exchange's own to
            # read (``SseRequest.framed``), the parser left at the boundary they leave
            # it at; any other bytes go through the parser.
            if self.boundary:
                rest = self.exchange.framed(data)
                if rest is None:
                    return
                data = rest  # with the chunk's start the exchange held, if any
            self.parser.feed_data(data)
            pieces = self.pieces
            if pieces:
                self.boundary = pieces[-1] is None
                self.flush()
            else:  # a chunk's size line, or part of one: not at a boundary now
                self.boundary = False
        except self.parser_error as exc:
            # A callback's own error (a malformed event) arrives as its context.
            cause = exc.__context__ if type(exc).__name__ == "HttpParserCallbackError" else None
            self.abort(cause if isinstance(cause, Exception)
                       else TransportError(f"malformed HTTP response: {exc}"))
        except Exception as exc:  # the exchange's own (a malformed event)
            self.abort(exc)

    def flush(self) -> None:
        """Hand the body read so far to the exchange: one call a read, not one a chunk (a
        server writes each event as its own chunk, and a read often holds several)."""
        pieces = self.pieces
        data = pieces[0] if len(pieces) == 1 else b"".join(filter(None, pieces))
        pieces.clear()
        if data and self.exchange is not None:
            self.exchange.body(data)

    def connection_lost(self, exc: Exception | None) -> None:
        self.pool.forget(self)
        exchange, self.exchange = self.exchange, None
        if exchange is not None and self.served and not self.answered:
            # Closed at the server's idle limit with the request unread (module docstring).
            self.pool.resend(exchange, self.request)
        elif exchange is not None:
            # The exchange words it: mid-stream (cut off) or before any response.
            exchange.lost(exc or ConnectionResetError("the server closed the connection"))

    # -- httptools' side ---------------------------------------------------------------
    def on_header(self, name: bytes, value: bytes) -> None:
        if name.lower() == b"content-type":
            self.content_type = value

    def on_headers_complete(self) -> None:
        if self.exchange is not None:
            self.exchange.head(self.parser.get_status_code(),
                               self.content_type.decode("latin-1"))

    def on_message_complete(self) -> None:
        if self.pieces:
            self.flush()
        exchange, self.exchange = self.exchange, None
        self.served += 1
        self.request = b""
        # Back in the pool before the exchange hears of it: the request it lets start
        # takes this connection, not a new one.
        if self.parser.should_keep_alive():
            self.pool.release(self)
        else:
            self.close()
        if exchange is not None:
            exchange.complete()

    # -- the client's side -------------------------------------------------------------
    def send(self, exchange: Exchange, request: bytes) -> None:
        assert self.transport is not None
        self.exchange, self.request, self.answered = exchange, request, False
        self.content_type, self.boundary = b"", False
        exchange.sent(self)
        self.transport.write(request)

    def abort(self, exc: BaseException) -> None:
        """End the exchange with ``exc`` and the connection with it (its state is unknown)."""
        exchange, self.exchange = self.exchange, None
        self.close()
        if exchange is not None:
            exchange.lost(exc)

    def close(self) -> None:
        self.exchange = None
        self.request = b""
        self.pieces.clear()
        if self.transport is not None:
            self.transport.close()
        self.pool.forget(self)


class Pool:
    """Connections to one base URL: idle ones reused newest first, new ones on demand."""

    def __init__(self, url: str, path: str, headers: dict[str, str], verify_tls: bool,
                 connect_timeout_s: float, keepalive_s: float,
                 loop: asyncio.AbstractEventLoop) -> None:
        parts = urlsplit(url + path)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise TransportError(f"{url}: not an http(s) URL")
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.ssl: ssl.SSLContext | None = None
        if parts.scheme == "https":
            self.ssl = ssl.create_default_context()
            if not verify_tls:  # ``insecure``: asked for by name, never the default
                self.ssl.check_hostname = False
                self.ssl.verify_mode = ssl.CERT_NONE
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        netloc = parts.netloc.rpartition("@")[2]
        lines = [f"POST {target} HTTP/1.1", f"Host: {netloc}",
                 *(f"{k}: {v}" for k, v in headers.items()), "Content-Length: "]
        # Everything but the length, encoded once: a request is then three concatenations.
        self.head = "\r\n".join(lines).encode("latin-1")
        self.connect_timeout_s, self.keepalive_s = connect_timeout_s, keepalive_s
        self.loop = loop
        self.time = loop.time
        self.idle: list[Connection] = []
        self.open: set[Connection] = set()
        self.connecting: set[asyncio.Task[None]] = set()
        self.resent = 0  # requests sent again after an idle close (module docstring)
        self.closed = False

    def request(self, exchange: Exchange, body: bytes) -> None:
        """Send ``body`` on an idle connection, or on a new one; failures go to ``lost``."""
        data = self.head + str(len(body)).encode() + b"\r\n\r\n" + body
        idle, now = self.idle, self.time()
        while idle:
            conn = idle.pop()
            transport = conn.transport
            if (now - conn.idle_since < self.keepalive_s and transport is not None
                    and not transport.is_closing()):
                conn.send(exchange, data)
                return
            conn.close()  # idle too long: the server may be closing it right now
        self._open_new(exchange, data)

    def resend(self, exchange: Exchange, data: bytes) -> None:
        """Send ``data`` again on a new connection: its reused one closed unanswered."""
        if self.closed:  # the client is cancelling everything: nothing to report
            return
        self.resent += 1
        self._open_new(exchange, data)

    def _open_new(self, exchange: Exchange, data: bytes) -> None:
        task = self.loop.create_task(self._connect(exchange, data))
        self.connecting.add(task)
        task.add_done_callback(self.connecting.discard)

    async def _connect(self, exchange: Exchange, data: bytes) -> None:
        factory: Callable[[], Connection] = lambda: Connection(self)  # noqa: E731
        try:
            _, conn = await asyncio.wait_for(
                self.loop.create_connection(factory, self.host, self.port, ssl=self.ssl,
                                            server_hostname=self.host if self.ssl else None),
                self.connect_timeout_s)
        except asyncio.CancelledError:
            raise
        except TimeoutError:
            exchange.lost(TransportError(f"cannot connect to {self.host}:{self.port} within "
                                         f"{self.connect_timeout_s:g} s (timeout)"))
            return
        except Exception as exc:  # refused, unreachable, TLS: one line each
            exchange.lost(TransportError(f"cannot connect to {self.host}:{self.port}: "
                                         f"{type(exc).__name__}: {exc}"))
            return
        self.open.add(conn)
        conn.send(exchange, data)

    def release(self, conn: Connection) -> None:
        conn.idle_since = self.time()
        self.idle.append(conn)

    def forget(self, conn: Connection) -> None:
        self.open.discard(conn)
        if conn in self.idle:
            self.idle.remove(conn)

    def close(self) -> None:
        """Cancel connects under way and close every connection. Exchanges hear nothing:
        this is the client cancelling them, not a failure to report."""
        self.closed = True
        for task in list(self.connecting):
            task.cancel()
        for conn in list(self.open):
            conn.close()
        self.idle.clear()

