"""Streaming completions from OpenAI-compatible servers, for the ``openai`` backend.

One asyncio event loop (uvloop where installed) runs on its own thread beside LoadGen;
``http_pool`` keeps kept-alive connections per server (responses parsed by httptools),
and each LoadGen sample becomes one ``stream: true`` request, sent to the server with
the fewest outstanding. The response is Server-Sent Events, folded as it arrives by
``sse.SseRequest``: a ``data:`` line is decoded with orjson where installed, and
``data: [DONE]`` ends it. The first output id, as soon as it is known, reports the first
token (never a made-up one); the end of the stream reports every output token id. This
module owns the settings, the loop thread, the fan-out and the outcome of each request.

Every response is held to the card (``_finish``, and ``sse`` as the events arrive): no
more tokens than the request asked for and never past the card's ``max_new_tokens`` (the
request ends at the first event past it), at least ``min_tokens``, ids inside the card's
vocabulary, and no ``finish_reason`` of ``abort`` or ``error`` (the others are counted in
``finish_reasons``). After the first failure, nothing queued is sent.

Token ids, in this order of preference (``TokenSource``):

* ``engine``: the ids the server streams (vLLM's ``return_token_ids``: ``token_ids`` in
  each choice);
* ``tokenizer``: the card's tokenizer on the streamed text, without special tokens (a
  Llama BOS was never generated), for engines that return no ids (llama.cpp,
  ``transformers serve``).

When the server reports usage (``stream_options.include_usage``), a completion-token
count that differs from the ids received is an error (but
``ClientSettings.with_eos``). Every failure (connection, HTTP status, timeout, malformed
event, a count that disagrees) is reported once, naming the URL and the sample, and
nothing is retried: a silent retry would
hide a server's failure inside its latency. The one request sent again is one the server
never read (a kept-alive connection it closed at its idle limit, ``http_pool``), counted.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections import deque
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from suite.llm.endpoint.http_pool import Pool, StreamError, TransportError
from suite.llm.endpoint.settings import ClientSettings, Prompt, TokenSource
from suite.llm.endpoint.sse import SseRequest, StreamState, read_event
from suite.llm.endpoint.tool_calls import Finisher

__all__ = ["ClientSettings", "EndpointClient", "StreamError", "StreamState", "TokenSource",
           "read_event", "scrub"]


#: (sample key, output token ids so far): the first chunk that carries output.
FirstCallback = Callable[[int, list[int]], None]
class DoneCallback(Protocol):
    """(sample key, every output token id, how the ids were obtained, and a tool-calling
    card's recorded response: ``tool_calls.record``; None for the others)."""

    def __call__(self, key: int, ids: list[int], source: str,
                 payload: bytes | None = None, /) -> None: ...
#: (sample key, one line saying what went wrong, naming the URL).
ErrorCallback = Callable[[int, str], None]


#: How long an idle connection is kept for the next request: under the 5 s after which
#: uvicorn (vLLM's and SGLang's servers) closes an idle one, so a request is never written
#: to a connection the server is closing ("Can not write request body").
KEEPALIVE_S = 4.0
#: How often the requests on connections are checked against their timeouts: one timer
#: for all of them, not one (armed and cancelled) a request; a timeout fires this late at most.
SWEEP_S = 0.1


def _json_dumps() -> Callable[[Any], bytes]:
    try:
        import orjson

        return orjson.dumps
    except ImportError:
        return lambda obj: json.dumps(obj).encode()


def _json_loads() -> Callable[[bytes], Any]:
    try:
        import orjson

        return orjson.loads
    except ImportError:  # the stdlib parser takes bytes too
        return json.loads


class EndpointClient:
    """Streams each submitted prompt from the least busy server; see the module docstring.

    ``submit`` may be called from any thread (LoadGen's); the callbacks run on the
    client's loop thread. ``close`` cancels what is in flight and returns within about
    a second.
    """

    def __init__(self, settings: ClientSettings, encode: Callable[[str], list[int]],
                 decode: Callable[[list[int]], str], on_first: FirstCallback | None,
                 on_done: DoneCallback, on_error: ErrorCallback) -> None:
        self.settings = settings
        self._encode, self._decode = encode, decode
        self._on_first, self._on_done, self._on_error = on_first, on_done, on_error
        self.loads, self._dumps = _json_loads(), _json_dumps()
        self._outstanding = dict.fromkeys(settings.urls, 0)
        self._pending: deque[tuple[int, int, Prompt]] = deque()
        self._in_flight = 0
        self._live: set[SseRequest] = set()  # on a connection: what the sweep checks
        self._sweeping = False
        self._closing = False
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._pools: dict[str, Pool] = {}
        self.timeouts = (settings.first_byte_timeout_s, settings.total_timeout_s)
        self.time: Callable[[], float] = lambda: 0.0  # the loop's clock, once it runs
        self._thread: threading.Thread | None = None
        self.chunks = 0
        self.requests = 0
        #: The cap every response is held to (``max_tokens``: what the card allows).
        self.cap = settings.cap()
        self._tools = Finisher(encode, self.cap) if settings.tools else None
        #: How the completed streams ended (``finish_reason``: "length", "stop", ...).
        self.finish_reasons: dict[str, int] = {}
        self.reconciled: dict[str, int] = {}  # streams taken by ``adapt``'s rules
        self._failed = False  # after the first failure, nothing queued is sent

    # -- the loop thread ---------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self._serve, name="endpoint-client",
                                        daemon=True)
        self._thread.start()
        if not self._ready.wait(30):
            raise StreamError("the endpoint client's event loop did not start")

    def _serve(self) -> None:
        try:
            import uvloop

            loop: asyncio.AbstractEventLoop = uvloop.new_event_loop()
        except ImportError:
            loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        self.time = loop.time
        s = self.settings
        self._pools = {url: Pool(url, s.path(), s.headers(), s.verify_tls, s.connect_timeout_s,
                                 KEEPALIVE_S, loop) for url in s.urls}
        self._ready.set()
        loop.run_forever()
        loop.run_until_complete(self._shut())
        loop.close()

    async def _shut(self) -> None:
        self._closing = True  # what is cut now was cancelled, not failed: nothing reported
        self._pending.clear()
        for pool in self._pools.values():
            pool.close()
        await asyncio.sleep(0)  # the transports' connection_lost

    # -- requests ----------------------------------------------------------------------
    def submit(self, items: Sequence[tuple[int, int, Prompt]]) -> None:
        """Stream each (key, sample index, prompt); thread-safe. The prompt is the
        dataset's ids, or its own text where the settings send text (``prompt_as =
        "text"``, ``api = "chat"``). The index only names the sample in an error."""
        assert self._loop is not None
        self._loop.call_soon_threadsafe(self._spawn, list(items))

    def _spawn(self, items: list[tuple[int, int, Prompt]]) -> None:
        # A queue and a count, not a semaphore and a task per request: at most
        # max_in_flight requests (and so connections) are open at once.
        self._pending.extend(items)
        self._pump()

    def _pump(self) -> None:
        pending, limit = self._pending, self.settings.max_in_flight
        while pending and self._in_flight < limit and not self._closing and not self._failed:
            self._in_flight += 1
            self._begin(*pending.popleft())

    def _pick(self) -> str:
        url = min(self._outstanding, key=self._outstanding.__getitem__)  # least outstanding
        self._outstanding[url] += 1
        return url

    def _begin(self, key: int, index: int, prompt: Prompt) -> None:
        s = self.settings
        request = SseRequest(self, key, index, self._pick(), s.api == "chat")
        self.requests += 1
        try:
            # A run submits the dataset's own text when text is sent: a decode of the ids
            # drops special tokens (tinylm's EOS paragraph separator). Ids reach here in
            # text mode only from the pre-flight's one short request.
            if s.text_prompt and not isinstance(prompt, str | dict):
                prompt = self._decode(list(prompt))
            body = self._dumps(s.body(prompt))
        except Exception as exc:  # the tokenizer's or the encoder's: this request only
            self.report(request, StreamError(f"the request could not be made: "
                                             f"{type(exc).__name__}: {exc}"))
            request.settle()
            return
        self._pools[request.url].request(request, body)

    def cancel(self) -> None:
        """Send nothing more of what is queued (the run failed); thread-safe."""
        if self._loop is not None and self._loop.is_running():
            self._loop.call_soon_threadsafe(self._stop_sending)

    def _stop_sending(self) -> None:
        self._failed = True
        self._pending.clear()

    def report(self, request: SseRequest, error: BaseException | None) -> None:
        """Tell LoadGen's side how ``request`` ended, once."""
        request.reported = True
        if self._closing:
            return
        self.chunks += request.state.chunks
        where = f"{request.url}{self.settings.path()}: sample {request.index} (query {request.key})"
        if error is None:
            try:
                if self._tools is not None:
                    ids, payload = self._tools(request.state)
                    source = "tokenizer"
                else:
                    (ids, source), payload = self._finish(request.state), None
            except StreamError as exc:
                error = exc
            else:
                reason = request.state.finish_reason or "unreported"
                self.finish_reasons[reason] = self.finish_reasons.get(reason, 0) + 1
                if self._on_first is not None and not request.state.first_sent:
                    # LoadGen needs the first token before the sample completes: the
                    # real one, now known (never a made-up id).
                    request.state.first_sent = True
                    self._on_first(request.key, ids)
                if payload is None:
                    self._on_done(request.key, ids, source)
                else:
                    self._on_done(request.key, ids, source, payload)
                return
        # The run fails on this: what is still queued is not sent (it would only load
        # a server that is failing, and its answers are not used).
        self._stop_sending()
        if isinstance(error, StreamError):
            self._on_error(request.key, scrub(f"{where}: {error}", self.settings))
        else:
            self._on_error(request.key, f"{where}: {_describe(error, self.settings)}")

    def watch(self, request: SseRequest) -> None:
        """``request`` is on a connection: its timeouts count from now."""
        self._live.add(request)
        if not self._sweeping and self._loop is not None:
            self._sweeping = True
            self._loop.call_later(SWEEP_S, self._sweep)

    def _sweep(self) -> None:
        now = self.time()
        for request in list(self._live):
            request.check(now)
        # Nothing on a connection, no timer: an idle client does not wake its loop.
        self._sweeping = bool(self._live) and self._loop is not None and not self._closing
        if self._sweeping and self._loop is not None:
            self._loop.call_later(SWEEP_S, self._sweep)

    def settle(self, request: SseRequest) -> None:
        """``request`` no longer holds a connection: the next one may start."""
        self._live.discard(request)
        self._outstanding[request.url] -= 1
        self._in_flight -= 1
        if self._pending:
            self._pump()

    def first(self, request: SseRequest) -> bool:
        """Report the first output token if it is known yet (True once reported): a
        chunk of text without ids waits for the first id, never a made-up one."""
        if self._on_first is None:
            return True
        ids = self._ids(request.state)
        if not ids:
            return False
        self._on_first(request.key, ids)
        return True

    def _ids(self, state: StreamState) -> list[int]:
        if self._tools is not None:
            return self._encode(self._tools.text(state))
        if self.settings.token_source == "engine":
            return state.ids
        return self._encode("".join(state.text))

    def _finish(self, state: StreamState) -> tuple[list[int], str]:
        s = self.settings
        if s.token_source == "engine" and state.text and not state.ids:
            raise StreamError("the server streamed text but no token ids; set "
                              "backend.openai.token_source = \"tokenizer\" for this engine")
        if state.finish_reason in ("abort", "error"):
            raise StreamError(f"the server ended the stream with finish_reason "
                              f"'{state.finish_reason}' after {state.outputs} output events")
        ids = self._ids(state)
        # Checked in C (a set of types, min and max), not element by element in Python.
        if ids and (set(map(type, ids)) != {int} or min(ids) < 0 or max(ids) >= 1 << 31):
            raise StreamError(f"'token_ids' holds something other than token ids: {ids[:20]}")
        if ids and max(ids) >= s.vocab_size:
            raise StreamError(f"token id {max(ids)} is outside the card's vocabulary "
                              f"({s.vocab_size} tokens): the server serves another model")
        s.with_eos(state.finish_reason, state.usage, ids, self.reconciled)
        if state.usage is not None and state.usage != len(ids):
            raise StreamError(f"the server reports {state.usage} completion tokens but "
                              f"streamed {len(ids)} ({s.token_source} ids)")
        if not ids:
            raise StreamError("the server returned no output tokens")
        # The card's generation rule, on every response: what the engine was asked for.
        if len(ids) > self.cap:
            raise StreamError(f"the server returned {len(ids)} output tokens, over "
                              f"max_tokens {self.cap} (the request's, at most the card's)")
        if len(ids) < s.min_tokens:
            raise StreamError(f"the server returned {len(ids)} output tokens, under "
                              f"min_tokens {s.min_tokens} (the card's min_new_tokens)")
        return ids, s.token_source

    @property
    def resent(self) -> int:
        """Requests sent again because the server closed their kept-alive connection
        unanswered (``http_pool``)."""
        return sum(pool.resent for pool in self._pools.values())

    def close(self) -> None:
        """Cancel every request in flight and stop the loop (about a second at most)."""
        loop = self._loop
        if loop is not None and loop.is_running():
            loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(timeout=2.0)


def _describe(exc: BaseException, settings: ClientSettings) -> str:
    """One line for a transport failure; the API key never appears in it."""
    text = str(exc) if isinstance(exc, TransportError) else f"{type(exc).__name__}: {exc}"
    with contextlib.suppress(IndexError):
        text = text.splitlines()[0]
    return scrub(text, settings)


def scrub(text: str, settings: ClientSettings) -> str:
    """``text`` without the API key (a server may echo a request's headers)."""
    return text.replace(settings.api_key, "***") if settings.api_key else text
