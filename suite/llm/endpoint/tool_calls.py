"""A chat completion's tool calls: streamed deltas assembled, the response recorded.

An engine streams a tool call in pieces: ``delta.tool_calls`` holds partial calls, each
with its ``index``; the first piece of a call carries its ``id``, ``type`` and the
function's ``name``, later pieces append to ``function.arguments`` (a JSON text). They
are assembled as MLCommons' endpoint client assembles them (``core/types.py``
``merge_tool_calls``): per index, in index order, ``id``/``type``/``name`` taken from
the pieces that carry one, ``arguments`` concatenated.

A tool-calling card's response (qwen3.6-27b) is then recorded whole, as the accuracy log's
``data``: the UTF-8 JSON object ``{"content", "reasoning", "tool_calls",
"finish_reason"}`` (``record``), which ``suite.llm.round.bfcl_score`` reads back. Its
output tokens are counted as that client counts an assistant message where it does not
render the model's chat template: the card's tokenizer on the content, the reasoning and
the tool calls' JSON joined by newlines (``output_text``; its ``token_metrics.py``).
"""

from __future__ import annotations

import json
from typing import Any


def merge(calls: dict[int, dict[str, Any]], pieces: Any) -> bool:
    """Fold one event's ``delta.tool_calls`` into ``calls``; False if not a list."""
    if not isinstance(pieces, list):
        return False
    for piece in pieces:
        if not isinstance(piece, dict):
            continue
        index = piece.get("index", 0)
        index = index if isinstance(index, int) else 0
        call = calls.setdefault(index, {"type": "function", "function": {"arguments": ""}})
        if piece.get("id"):
            call["id"] = piece["id"]
        if piece.get("type"):
            call["type"] = piece["type"]
        function = piece.get("function") or {}
        if isinstance(function, dict):
            if function.get("name"):
                call["function"]["name"] = function["name"]
            if isinstance(function.get("arguments"), str):
                call["function"]["arguments"] += function["arguments"]
    return True


def assembled(calls: dict[int, dict[str, Any]] | None) -> list[dict[str, Any]]:
    """The calls in index order (none: an empty list)."""
    return [calls[i] for i in sorted(calls)] if calls else []


def dumps(value: Any) -> str:
    """Compact JSON with text as it is (msgspec's encoding, which the reference uses)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def output_text(content: str, reasoning: str, calls: list[dict[str, Any]]) -> str:
    """What the output tokens are counted on (see the module docstring)."""
    parts = [content or None, reasoning or None, dumps(calls) if calls else None]
    return "\n".join(p for p in parts if p)


def record(content: str, reasoning: str, calls: list[dict[str, Any]],
           finish_reason: str | None) -> bytes:
    """The response as the accuracy log keeps it."""
    return dumps({"content": content, "reasoning": reasoning, "tool_calls": calls,
                  "finish_reason": finish_reason}).encode("utf-8")


class Finisher:
    """A tool-calling card's end of a stream: the output ids counted on ``output_text``
    with the card's tokenizer, and the response recorded (``record``). The engine's own
    count (its usage, or its events where it sends none) is held to the request's
    ``max_tokens``; it is not compared with the tokenizer's count, which is not the
    engine's."""

    def __init__(self, encode: Any, cap: int) -> None:
        self.encode, self.cap = encode, cap

    def text(self, state: Any) -> str:
        return output_text("".join(state.text), "".join(state.reasoning),
                           assembled(state.tool_calls))

    def __call__(self, state: Any) -> tuple[list[int], bytes]:
        from suite.llm.endpoint.http_pool import StreamError

        engine_count = state.usage if state.usage is not None else state.outputs
        if engine_count > self.cap:
            raise StreamError(f"the server generated {engine_count} output tokens, over "
                              f"max_tokens {self.cap} (the card's max_new_tokens)")
        ids = list(self.encode(self.text(state)))
        if not ids:
            raise StreamError("the server returned no content and no tool call")
        return ids, record("".join(state.text), "".join(state.reasoning),
                           assembled(state.tool_calls), state.finish_reason)
