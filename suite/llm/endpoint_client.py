"""Streaming completions from OpenAI-compatible servers, for the ``openai`` backend.

One asyncio event loop (uvloop where installed) runs on its own thread beside LoadGen;
aiohttp keeps a pool of kept-alive connections per server, and each LoadGen sample
becomes one ``stream: true`` request. The response is Server-Sent Events: aiohttp
splits it into lines (no object per byte), a ``data:`` line is decoded with orjson where
installed, and ``data: [DONE]`` ends it. The first chunk that carries output reports
the first token; the end of the stream reports every output token id.

Token ids, in this order of preference (``TokenSource``):

* ``engine``: the ids the server streams (vLLM's ``return_token_ids``: ``token_ids`` in
  each choice);
* ``tokenizer``: the card's tokenizer on the streamed text, for engines that return no
  ids (llama.cpp, ``transformers serve``).

When the server reports usage (``stream_options.include_usage``), a completion-token
count that differs from the ids received is an error, not a warning. Every failure
(connection, HTTP status, timeout, malformed event, a count that disagrees) is reported
once, naming the URL and the sample, and nothing is retried: a silent retry would hide
a server's failure inside its latency.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from suite.errors import BackendError

TokenSource = Literal["engine", "tokenizer"]

#: (sample key, output token ids so far): the first chunk that carries output.
FirstCallback = Callable[[int, list[int]], None]
#: (sample key, every output token id, how the ids were obtained).
DoneCallback = Callable[[int, list[int], str], None]
#: (sample key, one line saying what went wrong, naming the URL).
ErrorCallback = Callable[[int, str], None]

ERROR_BODY_LIMIT = 2048  # bytes of an error response shown: evidence, not a flood
MAX_EVENT_BYTES = 1 << 22  # one SSE line: a server that never ends a line is refused


#: How long an idle connection is kept for the next request: under the 5 s after which
#: uvicorn (vLLM's and SGLang's servers) closes an idle one, so a request is never written
#: to a connection the server is closing ("Can not write request body").
KEEPALIVE_S = 4.0


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


@dataclass(frozen=True)
class ClientSettings:
    """What the client needs from the backend's options (see ``openai_backend``)."""

    urls: tuple[str, ...]
    model: str
    api: Literal["completions", "chat"] = "completions"
    prompt_as: Literal["ids", "text"] = "ids"
    token_source: TokenSource = "engine"
    max_tokens: int = 64
    min_tokens: int = 0
    api_key: str | None = None
    verify_tls: bool = True
    connect_timeout_s: float = 10.0
    first_byte_timeout_s: float = 60.0
    total_timeout_s: float = 600.0
    max_in_flight: int = 128
    extra_body: dict[str, Any] = field(default_factory=dict)

    def headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return headers

    def path(self) -> str:
        return "/v1/chat/completions" if self.api == "chat" else "/v1/completions"

    def body(self, prompt: Sequence[int] | str) -> dict[str, Any]:
        """One streaming request for ``prompt`` (ids, or text where ``prompt_as`` says)."""
        body: dict[str, Any] = {"model": self.model, "stream": True, "temperature": 0.0,
                                "max_tokens": self.max_tokens,
                                "stream_options": {"include_usage": True}}
        if self.api == "chat":
            body["messages"] = [{"role": "user", "content": prompt}]
        else:
            body["prompt"] = list(prompt) if not isinstance(prompt, str) else prompt
        if self.min_tokens:
            body["min_tokens"] = self.min_tokens
        if self.token_source == "engine":
            body["return_token_ids"] = True
        body.update(self.extra_body)
        return body


class StreamError(BackendError):
    """One request failed; the message names what and is shown as it is."""


@dataclass
class StreamState:
    """What one response has carried so far."""

    ids: list[int] = field(default_factory=list)
    text: list[str] = field(default_factory=list)
    usage: int | None = None
    finish_reason: str | None = None
    chunks: int = 0
    first_sent: bool = False


def read_event(state: StreamState, payload: Any, chat: bool) -> bool:
    """Fold one decoded ``data:`` event into ``state``; True if it carried output."""
    if not isinstance(payload, dict):
        raise StreamError(f"an event is not a JSON object: {str(payload)[:200]}")
    if "error" in payload:
        raise StreamError(f"the server sent an error event: {str(payload['error'])[:300]}")
    usage = payload.get("usage")
    if isinstance(usage, dict) and isinstance(usage.get("completion_tokens"), int):
        state.usage = usage["completion_tokens"]
    choices = payload.get("choices")
    if not isinstance(choices, list):
        raise StreamError(f"an event has no 'choices' list: {str(payload)[:200]}")
    carried = False
    for choice in choices:
        if not isinstance(choice, dict):
            raise StreamError(f"a choice is not a JSON object: {str(choice)[:200]}")
        ids = choice.get("token_ids")
        if ids:
            # The elements are checked once, when the ids become LoadGen's int32 payload.
            if type(ids) is not list:
                raise StreamError(f"'token_ids' is not a list of integers: {str(ids)[:200]}")
            state.ids.extend(ids)
            carried = True
        text = (choice.get("delta") or {}).get("content") if chat else choice.get("text")
        if text:
            state.text.append(text)
            carried = True
        if choice.get("finish_reason"):
            state.finish_reason = choice["finish_reason"]
    state.chunks += 1
    return carried


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
        self._loads, self._dumps = _json_loads(), _json_dumps()
        self._outstanding = dict.fromkeys(settings.urls, 0)
        self._tasks: set[asyncio.Task[None]] = set()
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._session: Any = None
        self._limit: asyncio.Semaphore | None = None
        self._urls: dict[str, Any] = {}
        self._thread: threading.Thread | None = None
        self.chunks = 0
        self.requests = 0

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
        loop.run_until_complete(self._open())
        self._ready.set()
        loop.run_forever()
        loop.run_until_complete(self._shut())
        loop.close()

    async def _open(self) -> None:
        import aiohttp
        from yarl import URL

        s = self.settings
        connector = aiohttp.TCPConnector(limit=s.max_in_flight, ssl=s.verify_tls,
                                         keepalive_timeout=KEEPALIVE_S)
        timeout = aiohttp.ClientTimeout(total=s.total_timeout_s, sock_connect=s.connect_timeout_s,
                                        sock_read=s.first_byte_timeout_s)
        # No cookies, no compression (an SSE stream is not compressed), no redirects to
        # re-quote: each is per-request work a benchmark client does not need.
        self._session = aiohttp.ClientSession(connector=connector, timeout=timeout,
                                              headers=s.headers(), auto_decompress=False,
                                              cookie_jar=aiohttp.DummyCookieJar(),
                                              requote_redirect_url=False)
        self._urls = {url: URL(url + s.path()) for url in s.urls}
        self._limit = asyncio.Semaphore(s.max_in_flight)

    async def _shut(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.wait(list(self._tasks), timeout=1.0)
        if self._session is not None:
            await self._session.close()

    # -- requests ----------------------------------------------------------------------
    def submit(self, items: Sequence[tuple[int, int, Sequence[int]]]) -> None:
        """Stream each (key, sample index, prompt ids); thread-safe. The index only names
        the sample in an error."""
        assert self._loop is not None
        self._loop.call_soon_threadsafe(self._spawn, list(items))

    def _spawn(self, items: list[tuple[int, int, Sequence[int]]]) -> None:
        for key, index, prompt in items:
            task = asyncio.ensure_future(self._request(key, index, prompt))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    def _pick(self) -> str:
        url = min(self._outstanding, key=self._outstanding.__getitem__)  # least outstanding
        self._outstanding[url] += 1
        return url

    async def _request(self, key: int, index: int, prompt: Sequence[int]) -> None:
        assert self._limit is not None
        async with self._limit:
            url = self._pick()
            where = f"{url}{self.settings.path()}: sample {index} (query {key})"
            try:
                ids, source = await self._stream(url, key, prompt)
            except asyncio.CancelledError:
                raise
            except StreamError as exc:
                self._on_error(key, scrub(f"{where}: {exc}", self.settings))
                return
            except Exception as exc:  # aiohttp's and the socket's: one line each
                self._on_error(key, f"{where}: {_describe(exc, self.settings)}")
                return
            finally:
                self._outstanding[url] -= 1
            self._on_done(key, ids, source)

    async def _stream(self, url: str, key: int, prompt: Sequence[int]) -> tuple[list[int], str]:
        s = self.settings
        text_prompt = s.prompt_as == "text" or s.api == "chat"
        body = s.body(self._decode(list(prompt)) if text_prompt else prompt)
        self.requests += 1
        # The body as bytes (orjson where installed); the session sends the JSON header.
        async with self._session.post(self._urls[url], data=self._dumps(body),
                                      allow_redirects=False) as response:
            if response.status != 200:
                raw = await response.content.read(ERROR_BODY_LIMIT)
                raise StreamError(f"HTTP {response.status}: "
                                  f"{raw.decode('utf-8', 'replace').strip()[:500]}")
            state = StreamState()
            chat, done, rest = s.api == "chat", False, b""
            # Whatever the socket delivered, split into lines at once (an SSE event is a
            # "data:" line and a blank one; a read often holds several events): one
            # Python-level step per read, not per line or byte.
            async for chunk in response.content.iter_any():
                lines = (rest + chunk).split(b"\n")
                rest = lines.pop()
                if len(rest) > MAX_EVENT_BYTES:
                    raise StreamError(f"an event is longer than {MAX_EVENT_BYTES} bytes")
                for line in lines:
                    if not line.startswith(b"data:"):
                        continue  # blank separators, comments, other fields
                    data = line[5:].strip()
                    if data == b"[DONE]":
                        done = True
                        break
                    try:
                        payload = self._loads(data)
                    except ValueError as exc:
                        raise StreamError(f"malformed JSON in an event: {data[:200]!r}") from exc
                    if read_event(state, payload, chat) and not state.first_sent:
                        state.first_sent = True
                        if self._on_first is not None:
                            self._on_first(key, self._ids(state) or [0])
                if done:
                    break
            self.chunks += state.chunks
            if not done:
                raise StreamError(f"the stream ended after {state.chunks} events without "
                                  "'data: [DONE]' (cut off)")
        return self._finish(state)

    def _ids(self, state: StreamState) -> list[int]:
        if self.settings.token_source == "engine":
            return state.ids
        return self._encode("".join(state.text))

    def _finish(self, state: StreamState) -> tuple[list[int], str]:
        s = self.settings
        if s.token_source == "engine" and state.text and not state.ids:
            raise StreamError("the server streamed text but no token ids; set "
                              "backend.openai.token_source = \"tokenizer\" for this engine")
        ids = self._ids(state)
        # Checked in C (a set of types, min and max), not element by element in Python.
        if ids and (set(map(type, ids)) != {int} or min(ids) < 0 or max(ids) >= 1 << 31):
            raise StreamError(f"'token_ids' holds something other than token ids: {ids[:20]}")
        if state.usage is not None and state.usage != len(ids):
            raise StreamError(f"the server reports {state.usage} completion tokens but "
                              f"streamed {len(ids)} ({s.token_source} ids)")
        if not ids:
            raise StreamError("the server returned no output tokens")
        return ids, s.token_source

    def close(self) -> None:
        """Cancel every request in flight and stop the loop (about a second at most)."""
        loop = self._loop
        if loop is not None and loop.is_running():
            loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(timeout=2.0)


def _describe(exc: BaseException, settings: ClientSettings) -> str:
    """One line for a transport failure; the API key never appears in it."""
    if isinstance(exc, asyncio.TimeoutError | TimeoutError):
        text = (f"no response data within {settings.first_byte_timeout_s:g} s, or the "
                f"request took over {settings.total_timeout_s:g} s (timeout)")
    elif type(exc).__name__ in ("ClientPayloadError", "ServerDisconnectedError"):
        text = f"the connection closed mid-stream (cut off): {type(exc).__name__}: {exc}"
    else:
        text = f"{type(exc).__name__}: {exc}"
    with contextlib.suppress(IndexError):
        text = text.splitlines()[0]
    return scrub(text, settings)


def scrub(text: str, settings: ClientSettings) -> str:
    """``text`` without the API key (a server may echo a request's headers)."""
    return text.replace(settings.api_key, "***") if settings.api_key else text
