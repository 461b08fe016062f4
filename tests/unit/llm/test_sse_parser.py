"""The endpoint client's SSE reader (``endpoint.sse``, ``endpoint.template``): whatever the
pieces a response arrives in, and whichever reader takes them (the learned template or
the exact JSON reader), a response folds into what decoding each event as JSON gives."""

from __future__ import annotations

import json
import random
from itertools import pairwise
from typing import Any

import pytest

from suite.llm.endpoint import template as template_module
from suite.llm.endpoint.client import ClientSettings, EndpointClient, StreamError
from suite.llm.endpoint.sse import TEXT_PIECES, SseRequest, StreamState, read_event

HEAD = {"id": "cmpl-7", "object": "text_completion", "created": 1765000000, "model": "m"}
# plain, a quote, a backslash, a newline, non-ASCII, an empty text (half a character)
TEXTS = ["a", "b", '"', "c", "\\", "\n", "é", "d", "", "🙂", "e", "f", "g", "h", "i", "j"]


def event(text: str, ids: list[int] | None, chat: bool, finish: str | None = None,
          first: bool = False, separators: tuple[str, str] = (",", ":")) -> bytes:
    """One vLLM-shaped token event (``first``: with ``prompt_token_ids``, as its first)."""
    choice: dict[str, Any] = {"index": 0}
    if chat:
        choice["delta"] = {"content": text}
    else:
        choice["text"] = text
    choice.update(logprobs=None, finish_reason=finish, stop_reason=None)
    if first:
        choice["prompt_token_ids"] = [1, 2, 3]
    if ids is not None:
        choice["token_ids"] = ids
    body = json.dumps({**HEAD, "choices": [choice]}, separators=separators,
                      ensure_ascii=False)
    return b"data: " + body.encode() + b"\n\n"


def stream(chat: bool = False, ids: bool = True, tokens: int = 24) -> bytes:
    """A whole response: token events, a keep-alive comment, the finish, usage, [DONE]
    and bytes after it (never read)."""
    parts = []
    for n in range(tokens):
        text = TEXTS[n % len(TEXTS)]
        parts.append(event(text, [n + 1] if ids else None, chat, first=n == 0))
        if n == 5:
            parts.append(b": keep-alive\n\n")
    parts.append(event("z", [99] if ids else None, chat, finish="length"))
    usage = {**HEAD, "choices": [], "usage": {"prompt_tokens": 3,
                                             "completion_tokens": tokens + 1}}
    parts.append(b"data: " + json.dumps(usage).encode() + b"\n\n")
    return b"".join(parts) + b"data: [DONE]\n\nnot read"


def client(token_source: str = "engine", chat: bool = False,
           cap: int = 1 << 20) -> tuple[EndpointClient, list[Any]]:
    seen: list[Any] = []
    settings = ClientSettings(urls=("http://h:1",), model="m", max_tokens=cap,
                              api="chat" if chat else "completions",
                              token_source=token_source)  # type: ignore[arg-type]
    c = EndpointClient(settings, lambda text: [ord(ch) for ch in text], lambda ids: "",
                       lambda key, ids: seen.append(("first", ids[0])),
                       lambda *a: None, lambda *a: None)

    def report(request: SseRequest, error: BaseException | None) -> None:
        request.reported = True
        seen.append(("report", error))

    c.report = report  # type: ignore[method-assign]
    return c, seen


_clients: dict[tuple[str, bool, int], tuple[EndpointClient, list[Any]]] = {}


def fed(body: bytes, pieces: list[int], token_source: str = "engine",
        chat: bool = False, cap: int = 1 << 20) -> tuple[Any, ...]:
    """What ``SseRequest`` holds after ``body`` arrives cut at ``pieces`` (offsets)."""
    c, seen = _clients.get((token_source, chat, cap)) or client(token_source, chat, cap)
    _clients[token_source, chat, cap] = c, seen
    seen.clear()
    r = SseRequest(c, 0, 0, "http://h:1", chat)
    r.status = 200
    cuts = [0, *pieces, len(body)]
    try:
        for start, end in pairwise(cuts):
            r.body(body[start:end])
    except StreamError as exc:
        return ("error", str(exc).split(":")[0])
    return folded(r.state, token_source), r.done, seen


def folded(state: StreamState, token_source: str) -> tuple[Any, ...]:
    # The text counts with the tokenizer's ids, or where no event carried ids.
    text = "".join(state.text) if token_source == "tokenizer" or not state.ids else None
    return state.ids, text, state.usage, state.finish_reason, state.chunks, state.outputs


def exact(body: bytes, token_source: str = "engine", chat: bool = False) -> tuple[Any, ...]:
    """The reference: every ``data:`` line decoded as JSON and folded, up to [DONE]."""
    state, done, first = StreamState(), False, []
    try:
        for line in body.split(b"\n"):
            if not line.startswith(b"data:"):
                continue
            payload = line[5:].strip()
            if payload == b"[DONE]":
                done = True
                break
            if read_event(state, json.loads(payload), chat) and not first:
                ids = (state.ids if token_source == "engine"
                       else [ord(ch) for ch in "".join(state.text)])
                first = [("first", ids[0])] if ids else []
    except (ValueError, StreamError) as exc:
        return ("error", "malformed JSON" if isinstance(exc, ValueError)
                else str(exc).split(":")[0])
    return folded(state, token_source), done, [*first, ("report", None)] if done else first


@pytest.fixture
def template_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many pieces the template read (it must have read some: the test can fail)."""
    reads: list[int] = []
    read = template_module.Template.read

    def counted(self: template_module.Template, piece: bytes) -> Any:
        out = read(self, piece)
        if out is not None:
            reads.append(out[2])
        return out

    monkeypatch.setattr(template_module.Template, "read", counted)
    return reads


@pytest.mark.parametrize(("chat", "ids", "source"), [
    (False, True, "engine"), (True, True, "engine"), (False, False, "tokenizer"),
    (True, False, "tokenizer"), (False, True, "tokenizer")])
def test_a_response_cut_at_every_byte_folds_as_decoding_each_event_does(
        chat: bool, ids: bool, source: str, template_reads: list[int]) -> None:
    body = stream(chat, ids)
    expected = exact(body, source, chat)
    assert expected[1] is True and expected[0][4] == 26  # 25 token events and usage
    assert fed(body, [], source, chat) == expected
    # and cut again where the token events end: a piece of token events only, which
    # the template reads once it learned it from the piece before
    tokens_end = body.index(b'"length"')
    tokens_end = body.rindex(b"data:", 0, tokens_end)
    for cut in range(len(body) + 1):
        assert fed(body, [cut], source, chat) == expected, cut
    for cut in range(0, len(body) + 1, 7):  # every offset within an event, over the events
        assert fed(body, sorted([cut, tokens_end]), source, chat) == expected, cut
    assert max(template_reads) > 15  # the template read most of a response at once


def test_a_response_in_random_pieces_folds_the_same(template_reads: list[int]) -> None:
    rng = random.Random(37)
    body = stream(tokens=300)
    expected = exact(body)
    for _ in range(300):
        cuts = sorted(rng.sample(range(1, len(body)), rng.randint(1, 60)))
        assert fed(body, cuts) == expected, cuts
    byte_by_byte = list(range(1, len(body)))
    assert fed(body, byte_by_byte) == expected
    assert template_reads


def lines_like_the_template(chat: bool = False) -> list[bytes]:
    """Events that share the learned template's head and tail but are not its events."""
    plain = event("q", [5], chat)
    return [
        plain.replace(b"[5]", b"[5.5]"),  # a float
        plain.replace(b"[5]", b"[]"),  # no ids
        plain.replace(b"[5]", b"[5, 6]"),  # another spacing
        plain.replace(b'"text":"q"', b'"text":"q","error":{"message":"x"}'),  # a key
        plain.replace(b'"text":"q"', b'"text":"q"}],"usage":{"completion_tokens":9},'
                      b'"x":[{"y":"z"'),  # the choice closed early: usage, and more
        plain.replace(b'"created":1765000000', b'"error":{"x":123456}'),  # a head as long
        plain.replace(b"data: ", b"data:"),  # another spacing before the event
        plain.replace(b"\n\n", b"\r\n\r\n"),  # another line end
    ]


@pytest.mark.parametrize("odd", range(len(lines_like_the_template())))
def test_an_event_unlike_the_template_is_read_exactly(odd: int) -> None:
    body = b"".join(event(t, [n], False) for n, t in enumerate("abcd"))
    body += lines_like_the_template()[odd] + event("e", [7], False)
    done_at = len(body)  # cut there too: the odd event in a piece of token events only
    body += b"data: [DONE]\n\n"
    expected = exact(body)
    for cut in range(len(body) + 1):
        assert fed(body, sorted({cut, done_at})) == expected, cut


def test_a_malformed_text_fails_as_decoding_it_does() -> None:
    plain = event("a", None, False) + event("b", None, False)
    bad = event("c", None, False).replace(b'"c"', b'"\\q"') + event("d", None, False)
    body = plain + bad + b"data: [DONE]\n\n"
    assert exact(body, "tokenizer")[0] == "error"
    for cuts in ([], [len(plain)], [len(plain), len(plain + bad)]):  # the last: templated
        outcome = fed(body, cuts, "tokenizer")
        assert outcome[0] == "error" and outcome[1].startswith("malformed JSON in an event")


def test_keep_alives_and_comments_alone_fold_nothing() -> None:
    body = b": ping\n\n:\n\nevent: ping\n\nretry: 5\n\n"
    assert fed(body, [7]) == (([], "", None, None, 0, 0), False, [])


def test_a_templated_piece_past_the_cap_ends_the_request() -> None:
    body = b"".join(event("a", [n + 1], False) for n in range(40))
    assert fed(body, [400], cap=30) == ("error", "the server streamed more than 30 "
                                        "output tokens (max_tokens")


@pytest.mark.parametrize("source", ["engine", "tokenizer"])
def test_a_long_output_keeps_its_text_in_few_pieces(source: str) -> None:
    c, _ = client(source)
    r = SseRequest(c, 0, 0, "http://h:1", False)
    r.status = 200
    most = 0
    for n in range(12_000):
        r.body(event("ab", [n % 80 + 1], False))
        most = max(most, len(r.state.text))
    assert r.state.outputs == 12_000 and len(r.state.ids) == 12_000
    if source == "engine":
        assert most <= 2  # read by the template, the engine's ids: no text kept
    else:
        assert most <= TEXT_PIECES + 1 and "".join(r.state.text) == "ab" * 12_000


def test_the_template_reads_on_after_an_event_it_does_not_fit(
        template_reads: list[int]) -> None:
    first = b"".join(event("a", [n + 1], False) for n in range(4))
    later = b"".join(event("b", [n + 5], False) for n in range(10))
    body = first + later + b": keep-alive\n\n" + later + event("\\", [9], False) + later
    body += b"data: [DONE]\n\n"
    assert fed(body, [len(first)]) == exact(body)
    # the first piece: two events decoded, the template learned from the second, two read;
    # the next: ten events, the comment decoded, ten, the escaped text (the template's
    # too) and ten: each run read at once
    assert [n for n in template_reads if n > 1] == [2, 10, 21]
