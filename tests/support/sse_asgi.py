"""A minimal ASGI app for uvicorn (the server vLLM and SGLang run on): every POST is
answered by a short SSE stream of token ids, as ``/v1/completions`` with
``return_token_ids`` streams. The HTTP side (keep-alive, its idle timer) is uvicorn's own;
only the endpoint's body is this file's."""

from __future__ import annotations

import json
from typing import Any

EVENTS = [{"choices": [{"index": 0, "text": "ab", "token_ids": [3, 4]}]},
          {"choices": [], "usage": {"completion_tokens": 2}}]


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    while (await receive()).get("more_body"):
        pass
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/event-stream")]})
    for event in EVENTS:
        await send({"type": "http.response.body", "more_body": True,
                    "body": b"data: " + json.dumps(event).encode() + b"\n\n"})
    await send({"type": "http.response.body", "body": b"data: [DONE]\n\n"})
