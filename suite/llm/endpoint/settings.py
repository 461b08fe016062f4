"""What the endpoint client needs from the ``openai`` backend's options (``ClientSettings``).

The servers, the model's name, which API and prompt form, where output ids come from, the
card's output bounds, the timeouts and the request body each sample is sent as (``body``).
``client`` re-exports it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

TokenSource = Literal["engine", "tokenizer"]
#: One sample as sent: the dataset's ids, its text, or (a tool-calling card) the chat
#: messages, tools and tool_choice of its request.
Prompt = Sequence[int] | str | dict[str, Any]


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
    #: Output ids at or above it are not the card tokenizer's (an engine serving another
    #: model, or garbage): the request fails.
    vocab_size: int = 1 << 31
    #: The card's ``max_new_tokens``, which no response may pass whatever a request asked
    #: (0: ``max_tokens``; the pre-flight asks for fewer).
    limit: int = 0
    eos_id: int = -1  # the card's EOS id (-1: none; ``with_eos``)
    end_without_done: bool = False  # the engine is known to send no [DONE] (``adapt``)
    #: each prompt is chat messages with tools (a dict); responses recorded whole
    #: (``tool_calls``), counted with the card's tokenizer
    tools: bool = False

    def cap(self) -> int:
        """The most output tokens a response may carry: what the request asked for
        (``extra_body`` may ask for fewer), never past the card's limit."""
        asked = self.extra_body.get("max_tokens", self.max_tokens)
        limit = self.limit or self.max_tokens
        return min(asked, limit) if isinstance(asked, int) and asked > 0 else limit

    def with_eos(self, finish_reason: str | None, usage: int | None, ids: list[int],
                 counts: dict[str, int]) -> None:
        """Append EOS to ``ids`` where the engine's usage counted it and its text omitted
        it (``adapt``'s module docstring), counted in ``counts`` (``eos_from_usage``): the
        one usage reconciliation."""
        if (self.token_source == "tokenizer" and self.eos_id >= 0
                and finish_reason == "stop" and usage == len(ids) + 1):
            ids.append(self.eos_id)
            counts["eos_from_usage"] = counts.get("eos_from_usage", 0) + 1

    def headers(self) -> dict[str, str]:
        headers = {"Content-Type": "application/json", "Accept": "text/event-stream"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return headers

    def path(self) -> str:
        return "/v1/chat/completions" if self.api == "chat" else "/v1/completions"

    @property
    def text_prompt(self) -> bool:
        """Whether prompts are sent as text (``prompt_as = "text"``, or the chat API)."""
        return self.prompt_as == "text" or self.api == "chat"

    def body(self, prompt: Prompt) -> dict[str, Any]:
        """One streaming request for ``prompt`` (ids, or text where ``prompt_as`` says)."""
        body: dict[str, Any] = {"model": self.model, "stream": True, "temperature": 0.0,
                                "max_tokens": self.max_tokens,
                                "stream_options": {"include_usage": True}}
        if isinstance(prompt, dict):  # the card's messages, tools and tool_choice
            body.update(prompt)
        elif self.api == "chat":
            body["messages"] = [{"role": "user", "content": prompt}]
        else:
            body["prompt"] = list(prompt) if not isinstance(prompt, str) else prompt
        if self.min_tokens:
            body["min_tokens"] = self.min_tokens
        if self.token_source == "engine":
            body["return_token_ids"] = True
        if self.tools:  # the reference's field (endpoints' chat adapter)
            body["max_completion_tokens"] = body.pop("max_tokens")
        body.update(self.extra_body)
        return body
