"""The common token events, read by their bytes against a template learned from the stream.

An engine writes every token event of a response the same way but for the token's text
and ids; vLLM's completions, for one::

    data: {"id":"cmpl-…","object":"text_completion","created":…,"model":"…","choices":
    [{"index":0,"text":"<TEXT>","logprobs":null,"finish_reason":null,"stop_reason":null,
    "token_ids":[<IDS>]}]}

Decoding each such event as JSON (a dict with its keys and values, built a token) and
folding it in Python was most of the endpoint client's CPU at reasoning lengths
(thousands of 1-token events a response). So once the exact reader (``sse.read_event``)
has decoded a plain token event (one choice, a text free of quotes, backslashes and
control characters, no finish, usage or error, and its ids where the engine streams
them), that event's own line is cut into a ``Template`` (``learn``): ``head``
(everything before the text), ``middle`` (from the text's closing quote to the ids'
opening bracket; without ids, the rest of the line) and ``tail`` (from the ids' closing
bracket to the line's end).

``Template.read`` takes a whole piece of the body at once (what one read brought, up to
its last blank line), with a few C-level passes and no Python step per event: it is
read only if it is exactly a run of head + text + middle [+ ids + tail] lines, each
followed by a blank line, where a text is a JSON string's content (any character but a
quote, a backslash or a newline, or a backslash and the character it escapes) and ids
are comma-separated decimal integers. Such a line is the learned event with only its
text and ids changed: a string's content cannot end the string early nor hide a key, so
the rest of the line keeps the learned structure and values. The texts are decoded
(orjson: escapes, UTF-8 and control characters checked) only where the run counts text
(``token_source = "tokenizer"``, or an event without ids); with the engine's ids a text
is not validated. Any other piece goes to the exact reader, line by line, which may learn
a new template (vLLM's first event, with ``prompt_token_ids``, differs from the rest).

``Template.framed`` reads the same events in the body's own bytes where the response is
chunked (``http_pool``): a read made of whole chunks, each one event of the template,
each chunk's size line a hex number (no extensions) equal to its event's length, so
the HTTP parser, which never sees them, is at a chunk's start after them as before.
"""

from __future__ import annotations

import re
from itertools import repeat
from operator import add, itemgetter, sub
from typing import Any

IDS_KEY = b'"token_ids":['
TEXT_KEY, CONTENT_KEY = b'"text":"', b'"content":"'  # completions; chat's ``delta``
# a JSON string's content: ends at its closing quote (possessive: never backtracked into)
_TEXT = rb'[^"\\\n]*+(?:\\[^\n][^"\\\n]*+)*+)'
_IDS = rb"[0-9]+(?:,[0-9]+)*)"
_first, _second, _third, _fourth = itemgetter(0), itemgetter(1), itemgetter(2), itemgetter(3)
#: one HTTP/1.1 chunk's size line, no extensions (a chunk with any is read by httptools)
_SIZE = rb"([0-9a-fA-F]{1,8})\r\n"


def _line(head: int, middle: bytes, tail: bytes | None, group: bytes) -> bytes:
    """The pattern of one event line and its blank line; ``group``: b"(" captures the
    head, the text and the ids, b"(?:" does not."""
    ids = group + _IDS + re.escape(tail) if tail is not None else b""
    return (b"^" + group + b"[^\n]{%d})" % head + group + _TEXT + re.escape(middle) + ids
            + b"\n\n")


class Template:
    """One response's plain token event, cut around its text and ids (module docstring)."""

    __slots__ = ("chunk", "chunks", "fixed", "head", "ids", "pattern", "run", "single")

    def __init__(self, head: bytes, middle: bytes, tail: bytes | None) -> None:
        self.head, self.ids = head, tail is not None
        # Any head of the head's length, compared after: the head names the response, and
        # a pattern without it is one an engine's responses share (compiled once, by re).
        # Tried at line starts only (``^``): a piece that is not the template's costs one
        # attempt a line, not one a byte.
        self.pattern = re.compile(_line(len(head), middle, tail, b"("), re.MULTILINE)
        # the same lines, as many as there are from the start (``prefix``)
        self.run = re.compile(b"(?:" + _line(len(head), middle, tail, b"(?:") + b")+",
                              re.MULTILINE)
        self.fixed = len(head) + len(middle) + (len(tail) if tail is not None else 0) + 2
        # The same events, each one HTTP chunk as the body's bytes carry it (``framed``):
        # one (``chunk``, the paced case: a read an event) or any number (``chunks``).
        # ``chunk``'s groups: the size, the head, the text and the ids (empty without).
        line = _line(len(head), middle, tail, b"(")[1:] + b"\r\n"
        # one id (what engines stream an event), so read by one ``int``: an event of
        # several is ``chunks``' or the parser's
        one = line.replace(_IDS, rb"[0-9]+)") if self.ids else line + b"()"
        self.chunk = re.compile(_SIZE + one)
        self.chunks = re.compile(b"^" + _SIZE + line, re.MULTILINE)
        self.single = 2 * self.fixed  # bytes under which a read holds one event at most

    def read(self, piece: bytes) -> tuple[bytes, list[int] | None, int, int] | None:
        """(the texts' bytes joined, the ids or None, events, events with output) of a
        piece made of this template's events only; None for any other piece."""
        found = self.pattern.findall(piece)
        count = len(found)
        if not count or list(map(_first, found)).count(self.head) != count:
            return None
        texts = b"".join(map(_second, found))
        ids = b",".join(map(_third, found)) if self.ids else b""
        # The matches, each of its own length, cover the piece end to end: the piece is
        # these events and nothing else.
        if count * self.fixed + len(texts) + len(ids) - (count - 1) * self.ids != len(piece):
            return None
        if not self.ids:
            return texts, None, count, count - list(map(_second, found)).count(b"")
        return texts, list(map(int, ids.split(b","))), count, count


    def framed(self, data: bytes) -> tuple[bytes, list[int] | None, int, int] | None:
        """``read`` of the body's own bytes where it is chunked (``http_pool``): ``data``
        from a chunk's start, made of whole chunks that are each one of this template's
        events, each chunk's size its event's; None for any other ``data``."""
        if len(data) < self.single:  # one event at most
            match = self.chunk.fullmatch(data)
            if match is None:
                return None
            size, head, text, ids = match.groups()
            if head != self.head or int(size, 16) != self.fixed + len(text) + len(ids):
                return None
            return text, [int(ids)] if ids else None, 1, int(bool(ids or text))
        if not data.endswith(b"\n\n\r\n"):  # a read that ends inside a chunk: cheaply
            return None
        found = self.chunks.findall(data)
        count = len(found)
        if not count or list(map(_second, found)).count(self.head) != count:
            return None
        sizes = list(map(int, map(_first, found), repeat(16)))
        texts = list(map(_third, found))
        ids = list(map(_fourth, found)) if self.ids else []
        # Each chunk's size is its event's, and the chunks cover ``data`` end to end.
        lengths = map(add, map(len, texts), map(len, ids)) if ids else map(len, texts)
        if (list(map(sub, sizes, repeat(self.fixed))) != list(lengths)
                or sum(sizes) + sum(map(len, map(_first, found))) + 4 * count != len(data)):
            return None
        text = b"".join(texts)
        if not self.ids:
            return text, None, count, count - texts.count(b"")
        return text, list(map(int, b",".join(ids).split(b","))), count, count

    def prefix(self, piece: bytes) -> int:
        """How many bytes at the start of ``piece`` are lines of this template's shape
        (their heads unchecked: ``read`` checks them)."""
        match = self.run.match(piece)
        return match.end() if match else 0


def learn(line: bytes, payload: Any, chat: bool) -> Template | None:
    """The template of ``line`` whose decoded event is ``payload``, if it is a plain token
    event (the module docstring) that the template reads back as decoded; else None."""
    if not isinstance(payload, dict) or "error" in payload or payload.get("usage") is not None:
        return None
    choices = payload.get("choices")
    if not (type(choices) is list and len(choices) == 1 and type(choices[0]) is dict):
        return None
    choice = choices[0]
    if choice.get("finish_reason") is not None:
        return None
    if chat:
        delta = choice.get("delta")
        text = delta.get("content") if isinstance(delta, dict) else None
    else:
        text = choice.get("text")
    if not isinstance(text, str) or any(c in text for c in '"\\\n'):
        return None
    key = CONTENT_KEY if chat else TEXT_KEY
    raw = key + text.encode() + b'"'
    at = line.find(raw)
    if at < 0 or line.count(key) != 1:
        return None
    head, closing = line[:at + len(key)], at + len(raw) - 1
    ids = choice.get("token_ids")
    if ids is None and b'"token_ids"' not in line:
        template = Template(head, line[closing:], None)
    elif type(ids) is list and ids and line.count(b'"token_ids"') == 1:
        at_ids = line.rfind(IDS_KEY) + len(IDS_KEY)
        end = line.find(b"]", at_ids)
        if at_ids < closing + len(IDS_KEY) or end < 0:
            return None
        template = Template(head, line[closing:at_ids], line[end:])
    else:
        return None
    read = template.read(line + b"\n\n")
    expected = (text.encode(), ids, 1, 1 if ids or text else 0)
    return template if read == expected else None
