"""The chunked body read without the HTTP parser (``http_pool.Connection`` handing whole
chunks of template events to ``SseRequest.framed``): whatever the reads a chunked
response arrives in, it folds as decoding each event gives, and chunk framing the
parser refuses is refused still."""

from __future__ import annotations

import random
import time
from itertools import pairwise
from types import SimpleNamespace
from typing import Any

import pytest

from suite.llm.endpoint.client import EndpointClient
from suite.llm.endpoint.http_pool import Connection, Pool
from suite.llm.endpoint.sse import SseRequest
from tests.unit.llm.test_sse_parser import client, event, exact, folded, stream

pytest.importorskip("httptools", reason="the endpoint client needs httptools (.[openai])")

HEAD = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n")


def chunked(body: bytes, size: str = "%x") -> bytes:
    """Each event of ``body`` its own chunk (as engines write them), then the last."""
    events = [e + b"\n\n" for e in body.split(b"\n\n") if e]
    return b"".join((size % len(e)).encode() + b"\r\n" + e + b"\r\n"
                    for e in events) + b"0\r\n\r\n"


_clients: dict[tuple[str, bool], tuple[EndpointClient, list[Any]]] = {}


class _Transport:
    def write(self, data: bytes) -> None:
        pass

    def is_closing(self) -> bool:
        return False

    def close(self) -> None:
        pass


@pytest.fixture
def framed_reads(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """The reads ``framed`` took (it must take some: the tests can fail)."""
    taken: list[bytes] = []
    framed = SseRequest.framed

    def counted(self: SseRequest, data: bytes) -> bytes | None:
        rest = framed(self, data)
        if rest is None:
            taken.append(data)
        return rest

    monkeypatch.setattr(SseRequest, "framed", counted)
    return taken


def read(response: bytes, cuts: list[int], token_source: str = "engine",
         chat: bool = False) -> tuple[Any, ...]:
    """What the request holds after ``response`` arrives in reads cut at ``cuts``."""
    c, seen = _clients.get((token_source, chat)) or client(token_source, chat)
    _clients[token_source, chat] = c, seen
    seen.clear()
    c.watch = c.settle = lambda request: None  # type: ignore[method-assign]
    # no loop runs: the pool only reads its clock here
    pool = Pool("http://h:1", "/v1/completions", {}, False, 1.0, 4.0,
                SimpleNamespace(time=time.monotonic))  # type: ignore[arg-type]
    conn = Connection(pool)
    conn.transport = _Transport()  # type: ignore[assignment]
    request = SseRequest(c, 0, 0, "http://h:1", chat)
    conn.send(request, b"POST")
    for start, end in pairwise([0, *cuts, len(response)]):
        conn.data_received(response[start:end])
    failed = [error for what, error in seen if what == "report" and error is not None]
    if failed:  # the connection aborted: its request reported the error
        return ("error", str(failed[0]).split(":")[0])
    return folded(request.state, token_source), request.done, seen


def paced(response: bytes) -> list[int]:
    """Cuts at every chunk's end: a read a chunk, as an engine's pace gives."""
    cuts, at = [], response.index(b"\r\n\r\n") + 4
    while (line := response.find(b"\r\n", at)) >= 0:
        size = int(response[at:line].split(b";")[0], 16)
        at = line + 2 + size + 2
        if at >= len(response):
            break
        cuts.append(at)
    return cuts


@pytest.mark.parametrize(("chat", "ids", "source"), [
    (False, True, "engine"), (True, True, "engine"), (False, False, "tokenizer"),
    (True, False, "tokenizer"), (False, True, "tokenizer")])
def test_a_chunked_response_cut_anywhere_folds_as_decoding_each_event_does(
        chat: bool, ids: bool, source: str, framed_reads: list[bytes]) -> None:
    body = stream(chat, ids).rsplit(b"not read", 1)[0]
    response = HEAD + chunked(body)
    expected = exact(body, source, chat)
    assert expected[1] is True
    assert read(response, paced(response), source, chat) == expected
    assert len(framed_reads) > 15  # most token events, a read each, without the parser
    for cut in range(len(response) + 1):
        assert read(response, sorted({cut, *paced(response)}), source, chat) == expected, cut
    for cut in range(len(response) + 1):
        assert read(response, [cut], source, chat) == expected, cut


def test_chunks_in_random_reads_fold_the_same(framed_reads: list[bytes]) -> None:
    rng = random.Random(37)
    body = stream(tokens=200).rsplit(b"not read", 1)[0]
    response = HEAD + chunked(body)
    expected = exact(body)
    ends = paced(response)
    for _ in range(200):
        # reads that end at chunk ends, some of several chunks, and some anywhere
        cuts = sorted({*rng.sample(ends, rng.randint(1, len(ends))),
                       *rng.sample(range(1, len(response)), rng.randint(0, 3))})
        assert read(response, cuts) == expected, cuts
    assert max(map(len, framed_reads)) > 1000  # several chunks read at once
    # and reads that end inside a chunk, its start held for the next read
    assert any(not data.endswith(b"\n\n\r\n") for data in framed_reads)


@pytest.mark.parametrize("size", ["%X", "%04x", "%x;ext=1"])
def test_other_chunk_size_lines_are_the_parsers_and_fold_the_same(size: str) -> None:
    body = stream().rsplit(b"not read", 1)[0]
    response = HEAD + chunked(body, size)
    assert read(response, paced(response)) == exact(body)


@pytest.mark.parametrize("change", [+1, -1])
def test_a_chunk_size_that_is_not_its_events_fails_as_the_parser_does(change: int) -> None:
    events = [event(t, [n + 1], False) for n, t in enumerate("abcdefgh")]
    body = b"".join(events) + b"data: [DONE]\n\n"
    response = HEAD + chunked(body)
    sixth = response.index(b"%x\r\n" % len(events[5]) + events[5])
    bad = (response[:sixth] + b"%x" % (len(events[5]) + change)
           + response[sixth + len(b"%x" % len(events[5])):])
    for cuts in (paced(response), [len(bad) - 1]):
        outcome = read(bad, cuts)
        assert outcome[0] == "error", cuts
        assert outcome[1] in ("malformed HTTP response", "malformed JSON in an event"), cuts
