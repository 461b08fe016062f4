"""One streamed response's Server-Sent Events, folded as the bytes arrive.

``SseRequest`` is the endpoint client's side of one request on a pooled connection
(``http_pool.Exchange``): the parser hands it each piece of the body (what one read
brought), it splits the piece into lines (one Python-level step per piece, not per byte)
and folds each ``data:`` line into a ``StreamState``, and ``data: [DONE]`` ends it (or,
for an engine known to send none, the response's end after an event with
``finish_reason``: ``Client.end_without_done``). A line of the response's plain token
event is read by its bytes against the template learned from an earlier one
(``template``); any other is decoded (orjson where installed) and folded by
``read_event``, the exact reader, which the template reproduces. Where the response is
chunked, a read that is whole chunks of the template's events comes to ``framed`` before
the connection's HTTP parser sees it, and is folded the same way with the chunk framing
checked (``Template.framed``); a read of one event (an engine's pace) is matched inline.
Output is held to the cap and the first token reported once a piece is folded
(``_carried``). It also judges the request's timeouts when its client's sweep asks
(``check``): no data for the first-byte timeout, or longer than the total, aborts the
connection (``framed`` reads no clock: the sweep sees its events arrive, so that timeout
may fire one sweep later). How a request ended goes to its client once (``report``);
when it no longer holds a connection it is ``settle``d.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from suite.llm.endpoint import tool_calls
from suite.llm.endpoint.http_pool import StreamError, TransportError
from suite.llm.endpoint.template import Template, learn

if TYPE_CHECKING:
    from suite.llm.endpoint.http_pool import Connection

ERROR_BODY_LIMIT = 2048  # bytes of an error response shown: evidence, not a flood
MAX_EVENT_BYTES = 1 << 22  # one SSE line: a server that never ends a line is refused
STREAM_TYPE = "text/event-stream"
TEMPLATES = 8  # templates learned a response at most: an engine whose events all differ
TEXT_PIECES = 256  # text pieces kept before they are joined: a long output's memory


@dataclass
class StreamState:
    """What one response has carried so far."""

    ids: list[int] = field(default_factory=list)
    text: list[str] = field(default_factory=list)
    usage: int | None = None
    finish_reason: str | None = None
    chunks: int = 0
    #: events that carried output: each carries one token at least, so more of them than
    #: the cap proves a response past it even where the ids come later (tokenizer mode)
    outputs: int = 0
    first_sent: bool = False
    #: a chat completion's reasoning deltas (``reasoning_content``) and tool calls,
    #: assembled by index (``tool_calls``); None until a tool call arrives
    reasoning: list[str] = field(default_factory=list)
    tool_calls: dict[int, dict[str, Any]] | None = None


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
        delta = (choice.get("delta") or {}) if chat else {}
        text = delta.get("content") if chat else choice.get("text")
        if text:
            state.text.append(text)
            carried = True
        if chat and (delta.get("tool_calls") or delta.get("reasoning_content")):
            carried = _chat_extras(state, delta) or carried
        if choice.get("finish_reason"):
            state.finish_reason = choice["finish_reason"]
    state.chunks += 1
    state.outputs += carried
    return carried


def _chat_extras(state: StreamState, delta: dict[str, Any]) -> bool:
    """A chat delta's tool-call pieces and reasoning (``tool_calls``); True if any."""
    carried = False
    reasoning = delta.get("reasoning_content")
    if isinstance(reasoning, str) and reasoning:
        state.reasoning.append(reasoning)
        carried = True
    pieces = delta.get("tool_calls")
    if pieces:
        if state.tool_calls is None:
            state.tool_calls = {}
        if not tool_calls.merge(state.tool_calls, pieces):
            raise StreamError(f"'tool_calls' is not a list: {str(pieces)[:200]}")
        carried = True
    return carried


class Settings(Protocol):
    """What this module reads of the client's settings (``client.ClientSettings``)."""

    @property
    def token_source(self) -> str: ...
    @property
    def end_without_done(self) -> bool: ...  # the engine is known to send no [DONE]


class Client(Protocol):
    """What a request needs of its client (``endpoint_client.EndpointClient``)."""

    loads: Callable[[bytes], Any]
    time: Callable[[], float]  # the loop's clock
    timeouts: tuple[float, float]  # (first byte, total), seconds
    cap: int  # the most output tokens a response may carry (the card's max_new_tokens)
    @property
    def settings(self) -> Settings: ...
    reconciled: dict[str, int]  # streams taken by ``adapt``'s rules, by rule

    def first(self, request: SseRequest) -> bool: ...
    def watch(self, request: SseRequest) -> None: ...
    def report(self, request: SseRequest, error: BaseException | None) -> None: ...
    def settle(self, request: SseRequest) -> None: ...


class SseRequest:
    """One sample's request and response (see the module docstring)."""

    __slots__ = ("chat", "client", "conn", "done", "error_body", "held", "index", "key",
                 "last", "learned", "reported", "rest", "settled", "start", "state",
                 "status", "swept", "template", "texts", "url")

    def __init__(self, client: Client, key: int, index: int, url: str,
                 chat: bool) -> None:
        self.client, self.key, self.index, self.url, self.chat = client, key, index, url, chat
        self.state = StreamState()
        self.template: Template | None = None
        self.learned = 0
        # The text counts where the ids are the tokenizer's; with the engine's ids, only
        # an event without ids keeps its text (``EndpointClient._finish``'s check).
        self.texts = client.settings.token_source != "engine"
        self.rest = self.error_body = b""
        self.held = b""  # a chunk cut off at a read's end, not yet parsed (``framed``)
        self.status = 0
        self.done = self.reported = self.settled = False
        self.conn: Connection | None = None
        self.start = self.last = 0.0
        self.swept = 0  # the events folded when the sweep last looked (``check``)

    # -- the connection's side (http_pool.Exchange) ------------------------------------
    def sent(self, conn: Connection) -> None:
        # Sent again on a new connection (``Pool.resend``): the total timeout still
        # counts from the first send.
        self.last = conn.pool.time()
        if self.conn is None:
            self.start = self.last
        self.conn = conn
        self.client.watch(self)

    def head(self, status: int, content_type: str) -> None:
        self.status = status
        self.last = self.client.time()
        if status == 200 and content_type.partition(";")[0].strip().lower() != STREAM_TYPE:
            # A JSON body (or anything else) shaped like events is not a stream: a
            # server that ignores ``stream: true`` answers so.
            raise StreamError(f"the server answered 200 with Content-Type "
                              f"{content_type or '(none)'!r}, not a stream ({STREAM_TYPE})")

    def body(self, data: bytes) -> None:
        self.last = self.client.time()
        if self.reported:
            return  # the end of a response already reported: drained for the connection
        if self.status != 200:
            if len(self.error_body) < ERROR_BODY_LIMIT:
                self.error_body += data
            return
        buf = self.rest + data if self.rest else data
        end = buf.rfind(b"\n") + 1  # the complete lines; the rest waits for its end
        self.rest = buf[end:]
        if len(self.rest) > MAX_EVENT_BYTES:
            raise StreamError(f"an event is longer than {MAX_EVENT_BYTES} bytes")
        at, outputs, resume = 0, self.state.outputs, True
        while at < end and not self.reported:
            if self.template is not None and resume:
                at, resume = self._templated(buf, at, end)
            if at < end:
                at, resume = self._exact(buf, at, end, resume)
        if self.state.outputs > outputs and not self.reported:
            self._carried()

    def framed(self, data: bytes) -> bytes | None:
        """Fold ``data``, the body's own bytes from a chunk's start (``http_pool``), if
        it is whole chunks of the template's events (``Template.framed``), and the
        connection's parser never sees them: None. A chunk cut off at the read's end is
        held for the next read (``held``), so a large read is taken too. Else the bytes
        the parser is to read, from the chunk's start: those held, then ``data``. A read
        of one event (an engine's pace) then costs this call, one match and the fold, not
        the HTTP parser's pass and the line split of ``body``."""
        template = self.template
        held = self.held
        if template is None or self.rest or self.reported or self.status != 200:
            return self._release(data)
        state = self.state
        if held or len(data) >= template.single:
            buf = held + data if held else data
            end = buf.rfind(b"\n\n\r\n") + 4  # after the last whole chunk, if any is
            if end < 4 or len(buf) - end >= template.single:
                return self._release(data)
            read = template.framed(buf if end == len(buf) else buf[:end])
            if read is None:
                return self._release(data)
            self.held = buf[end:]
            self._fold(*read)
        else:  # ``Template.framed``'s one event, inline: the paced case's every read
            match = template.chunk.fullmatch(data)
            if match is None:
                return data
            size, head, text, ids = match.groups()
            if head != template.head or int(size, 16) != template.fixed + len(text) + len(
                    ids):
                return data
            state.chunks += 1
            if ids:
                state.ids.append(int(ids))
            if text and (not ids or self.texts):
                self._fold(text, None, 0, 0)
            if not (ids or text):
                return None
            state.outputs += 1
        # No clock read: the sweep sees the events arrive (``check``). ``_carried``'s
        # checks, inline: one call less a read.
        cap = self.client.cap
        if (not state.first_sent or len(state.ids) > cap or state.outputs > cap
                or len(state.text) > TEXT_PIECES):
            self._carried()
        return None

    def _release(self, data: bytes) -> bytes:
        """The bytes held (a chunk's start) and ``data``, for the parser to read."""
        held, self.held = self.held, b""
        return held + data if held else data

    def _exact(self, buf: bytes, at: int, end: int, resume: bool) -> tuple[int, bool]:
        """Decode and fold the lines of ``buf[at:end]``, to ``end`` or to [DONE] (reported
        now): (where it stopped, whether the template is to be tried there). It stops
        early where a template is learned, and (``resume``: the template has not missed
        in this piece, so a miss costs one attempt a piece) where the template's head
        starts the next line."""
        state, plain, head = self.state, None, self.template.head if self.template else b""
        while at < end:
            if resume and head and buf.startswith(head, at):
                return at, True
            stop = buf.index(b"\n", at, end)
            line, at = buf[at:stop], stop + 1
            if not line.startswith(b"data:"):
                continue  # blank separators, comments, other fields
            event = line[5:].strip()
            if event == b"[DONE]":
                if state.outputs:
                    self._carried()
                # Reported now; the connection is given back at the response's end.
                self.done = True
                self.client.report(self, None)
                return end, False
            try:
                payload = self.client.loads(event)
            except ValueError as exc:
                raise StreamError(f"malformed JSON in an event: {event[:200]!r}") from exc
            if read_event(state, payload, self.chat):
                plain = (line, payload)
                # Not from the first event (vLLM's carries the prompt's ids): from the
                # next, and the template reads the rest of this piece.
                if (not head or not resume) and state.chunks > 1 and self._learn(*plain):
                    return at, True
        if plain is not None:
            self._learn(*plain)  # the last event with output: the next piece is most like it
        return at, False

    def _learn(self, line: bytes, payload: Any) -> bool:
        if self.learned >= TEMPLATES:
            return False
        self.learned += 1
        self.template = learn(line, payload, self.chat) or self.template
        return self.template is not None

    def _templated(self, buf: bytes, at: int, end: int) -> tuple[int, bool]:
        """Fold the template's events at the start of ``buf[at:end]``: (where they end,
        whether there were any)."""
        assert self.template is not None
        while at < end and buf[at] == 10:  # the blank line of an event before
            at += 1
        stop = buf.rfind(b"\n\n", at, end) + 2
        if stop < 2:
            return at, False
        read = self.template.read(buf[at:stop])
        if read is None:  # an event not the template's: its events before it, if any
            stop = at + self.template.prefix(buf[at:stop])
            read = self.template.read(buf[at:stop]) if stop > at else None
            if read is None:
                return at, False
        self._fold(*read)
        return stop, True

    def _fold(self, texts: bytes, ids: list[int] | None, events: int, outputs: int) -> None:
        """Fold what the template read (``Template.read``)."""
        state = self.state
        state.chunks += events
        state.outputs += outputs
        if ids is not None:
            state.ids += ids
        if texts and (ids is None or self.texts):
            try:  # the texts as one JSON string: escapes, UTF-8, control characters
                state.text.append(self.client.loads(b'"' + texts + b'"'))
            except ValueError as exc:
                raise StreamError(f"malformed JSON in an event's text: {texts[:200]!r}"
                                  ) from exc

    def _carried(self) -> None:
        """Output arrived: held to the cap, and the first token reported once known."""
        state, cap = self.state, self.client.cap
        if len(state.ids) > cap or state.outputs > cap:
            # Ended now, not at [DONE]: an endless stream must not grow memory.
            raise StreamError(f"the server streamed more than {cap} output tokens "
                              f"(max_tokens: the request's, at most the card's)")
        if len(state.text) > TEXT_PIECES:
            state.text[:] = ["".join(state.text)]
        if not state.first_sent:
            state.first_sent = self.client.first(self)

    def complete(self) -> None:
        if (not self.reported and self.status == 200 and self.client.settings.end_without_done
                and self.state.finish_reason and not self.rest.strip()):
            # The engine's known end (no [DONE]): its last event said how it finished.
            counts = self.client.reconciled
            counts["ended_without_done"] = counts.get("ended_without_done", 0) + 1
            self.client.report(self, None)
        if not self.reported:
            self.client.report(self, self._http_error() or StreamError(
                f"the stream ended after {self.state.chunks} events without "
                "'data: [DONE]' (cut off)"))
        self.settle()

    def lost(self, exc: BaseException) -> None:
        if not self.reported:
            if not isinstance(exc, StreamError | TransportError):
                exc = (TransportError(f"the connection closed mid-stream (cut off): "
                                      f"{type(exc).__name__}: {exc}") if self.status
                       else TransportError(f"the connection closed before a response: "
                                           f"{type(exc).__name__}: {exc}"))
            self.client.report(self, self._http_error() or exc)
        self.settle()

    # -- the client's side -------------------------------------------------------------
    def _http_error(self) -> StreamError | None:
        if self.status in (0, 200):
            return None
        text = self.error_body[:ERROR_BODY_LIMIT].decode("utf-8", "replace").strip()[:500]
        return StreamError(f"HTTP {self.status}: {text}")

    def check(self, now: float) -> None:
        """Abort the request if it is past a timeout (the client's sweep calls this)."""
        if self.settled or self.conn is None:
            return
        first_byte, total = self.client.timeouts
        if self.state.chunks != self.swept:  # events since the last sweep (``framed``)
            self.swept, self.last = self.state.chunks, now
        if now - self.start >= total:
            error = TransportError(f"the request took over {total:g} s (timeout)")
        elif now - self.last >= first_byte:
            error = TransportError(f"no response data within {first_byte:g} s (timeout)")
        else:
            return
        self.conn.abort(error)  # its lost() reports and settles this request

    def settle(self) -> None:
        if self.settled:
            return
        self.settled = True
        self.client.settle(self)
