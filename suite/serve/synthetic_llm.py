"""A synthetic OpenAI-compatible streaming endpoint, for client benches and fault tests.

Built on aiohttp's web server. It answers ``/v1/models``, ``/version`` and streaming
``/v1/completions`` with made-up tokens after a fixed or random time to first token,
inter-token delay and output length, one or several tokens per SSE chunk, with
``token_ids`` in each chunk (as vLLM's ``return_token_ids``) and the usage chunk. It is
a stand-in for a server's *timing* and *protocol* only, never for an engine in a test
of accuracy: its tokens mean nothing.

Faults (``--fault``), each applied to every ``--fault-every``-th request (1: all):
``http-500``, ``http-429``, ``cut`` (the connection closes mid-stream), ``bad-json``,
``no-done`` (the stream ends without ``[DONE]``), ``short-usage`` (usage reports one
token more than streamed), ``stall`` (no data after the first chunk), ``die`` (the
process exits mid-stream), ``http-503``. Misbehaviours an engine may have:
``overshoot`` (ignores ``max_tokens``: five times as many tokens, with matching usage),
``endless`` (a stream that never ends), ``abort`` (``finish_reason: "abort"`` after 3
tokens), ``no-ids`` (text without ``token_ids``), ``oov`` (ids past the vocabulary),
``json-sse`` (the events with ``Content-Type: application/json``), ``redirect``
(``/v1/models`` answers 302 to another host). ``GET /synthetic/requests`` says how many
completion requests it received.

``--answers FILE`` (a JSON list of ``[prompt_ids, output_ids]`` pairs) makes it answer a
request whose prompt ids are a listed prompt with that output (cut at ``max_tokens``): a
stand-in that answers from a fixture, for end-to-end tests of accuracy scoring.

``--chat-answers FILE`` (a JSON list of ``[user_text, response, expect]``) serves streaming
``/v1/chat/completions`` as an engine answers a tool-calling request: the request whose
last user message is ``user_text`` gets ``response``'s ``content`` (a few characters an
event) and its ``tool_calls`` (``[{"name", "arguments"}]``, the arguments JSON text as
written, so malformed arguments stay malformed), streamed as OpenAI tool-call deltas (the
first piece of each call with its ``id``, ``type`` and name, then the arguments in pieces),
``finish_reason`` ``tool_calls`` or ``stop`` (``length``, cut, past
``max_completion_tokens`` events), and a usage chunk counting the events. A
request must carry ``expect``'s fields with those values, and ``tools`` naming
``expect["tools"]``: a request that does not is answered 400, saying what differs. Any other
chat request gets ``ok`` (at most ``max_completion_tokens`` events). Without
``--chat-answers`` there is no chat route.

    python -m suite.serve.synthetic_llm --port 0 --ttft-ms 5 --itl-ms 1 --tokens 64
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import random
import sys
from dataclasses import dataclass
from typing import Any

FAULTS = ("none", "http-500", "http-429", "http-503", "cut", "bad-json", "no-done",
          "short-usage", "stall", "die", "overshoot", "endless", "abort", "no-ids", "oov",
          "json-sse", "redirect")


@dataclass
class Behaviour:
    """How the endpoint answers (see the module docstring)."""

    model: str = "tinylm"
    ttft_ms: float = 0.0
    ttft_jitter_ms: float = 0.0
    itl_ms: float = 0.0
    tokens: int = 64
    tokens_jitter: int = 0
    chunk_tokens: int = 1
    vocab: int = 83
    fault: str = "none"
    fault_every: int = 1
    seed: int = 0
    #: prompt ids -> the output ids to stream (``--answers``)
    answers: dict[tuple[int, ...], list[int]] | None = None
    #: last user message -> (response, expected request fields) (``--chat-answers``)
    chat: dict[str, tuple[dict[str, Any], dict[str, Any]]] | None = None


def _dumps() -> Any:
    try:
        import orjson

        return orjson.dumps
    except ImportError:
        import json

        return lambda obj: json.dumps(obj).encode()


def make_app(behaviour: Behaviour) -> Any:
    """The aiohttp application serving ``behaviour``."""
    from aiohttp import web

    dumps = _dumps()
    rng = random.Random(behaviour.seed)
    counter = itertools.count(1)

    received = [0]

    async def requests(request: web.Request) -> web.Response:
        return web.json_response({"requests": received[0]})

    async def models(request: web.Request) -> web.Response:
        if behaviour.fault == "redirect":
            raise web.HTTPFound("http://192.0.2.1:9/v1/models")  # TEST-NET-1: elsewhere
        return web.json_response({"object": "list", "data": [
            {"id": behaviour.model, "object": "model", "owned_by": "synthetic",
             "max_model_len": 192}]})

    async def version(request: web.Request) -> web.Response:
        return web.json_response({"version": "synthetic-1"})

    async def completions(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        received[0] += 1
        number = next(counter)
        fault = behaviour.fault if number % behaviour.fault_every == 0 else "none"
        if body.get("model") != behaviour.model:
            return web.json_response({"error": {"message": f"model {body.get('model')!r} "
                                      "does not exist", "code": 404}}, status=404)
        if fault in ("http-500", "http-429", "http-503"):
            status = int(fault[-3:])
            return web.json_response({"error": {"message": f"synthetic {status}"}},
                                     status=status)
        wanted = int(body.get("max_tokens") or behaviour.tokens)
        count = min(wanted, max(1, behaviour.tokens + rng.randint(-behaviour.tokens_jitter,
                                                                  behaviour.tokens_jitter)))
        if fault == "overshoot":
            count = wanted * 5
        elif fault == "endless":
            count = 1 << 60
        elif fault == "abort":
            count = min(count, 3)
        prompt = body.get("prompt")
        answer = (behaviour.answers or {}).get(tuple(prompt) if isinstance(prompt, list)
                                               else ())
        if answer is not None:
            count = min(wanted, len(answer))
        kind = "application/json" if fault == "json-sse" else "text/event-stream"
        response = web.StreamResponse(headers={"Content-Type": kind})
        await response.prepare(request)
        delay = (behaviour.ttft_ms + rng.uniform(0, behaviour.ttft_jitter_ms)) / 1000
        if delay:
            await asyncio.sleep(delay)
        sent = 0
        while sent < count:
            n = min(behaviour.chunk_tokens, count - sent)
            ids = answer[sent:sent + n] if answer is not None else \
                [(sent + k) % (behaviour.vocab - 1) + 1 for k in range(n)]  # never EOS (0)
            if fault == "oov":
                ids = [behaviour.vocab + 5000 + i for i in ids]
            sent += n
            finish = ("abort" if fault == "abort" else "length") if sent >= count else None
            choice: dict[str, Any] = {"index": 0, "text": "x" * n, "token_ids": ids,
                                      "finish_reason": finish}
            if fault == "no-ids":
                del choice["token_ids"]
            chunk = {"id": f"cmpl-{number}", "object": "text_completion", "choices": [choice]}
            if fault == "bad-json" and sent > n:
                await response.write(b"data: {not json\n\n")
            else:
                await response.write(b"data: " + dumps(chunk) + b"\n\n")
            if sent == n and fault in ("cut", "die", "stall"):
                if fault == "die":
                    os._exit(3)
                if fault == "stall":
                    await asyncio.sleep(3600)
                request.transport.close() if request.transport else None
                return response
            if behaviour.itl_ms and sent < count:
                await asyncio.sleep(behaviour.itl_ms / 1000)
            elif fault == "endless" and sent % 256 == 0:
                await asyncio.sleep(0)  # the loop serves the others meanwhile
        usage = count + (1 if fault == "short-usage" else 0)
        await response.write(b"data: " + dumps({"id": f"cmpl-{number}", "choices": [],
                             "usage": {"prompt_tokens": len(body.get("prompt") or []),
                                       "completion_tokens": usage}}) + b"\n\n")
        if fault != "no-done":
            await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response

    async def chat(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        received[0] += 1
        if body.get("model") != behaviour.model:
            return web.json_response({"error": {"message": f"model {body.get('model')!r} "
                                      "does not exist", "code": 404}}, status=404)
        messages = body.get("messages") or []
        users = [m.get("content") for m in messages if m.get("role") == "user"]
        found = (behaviour.chat or {}).get(users[-1] if users else "")
        wanted = int(body.get("max_completion_tokens") or body.get("max_tokens") or 16)
        if found is not None and (wrong := _unexpected(body, found[1])):
            return web.json_response({"error": {"message": wrong}}, status=400)
        events = _chat_events(found[0] if found else {"content": "ok" * wanted},
                              behaviour.chunk_tokens)
        # an engine stops at max_tokens (each event one token here): "length"
        finish = "length" if found is None or len(events) > wanted else \
            "tool_calls" if found[0].get("tool_calls") else "stop"
        events = events[:wanted] or [{"role": "assistant", "content": ""}]
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        number = next(counter)
        for index, delta in enumerate(events):
            last = index == len(events) - 1
            choice = {"index": 0, "delta": delta, "finish_reason": finish if last else None}
            chunk = {"id": f"chatcmpl-{number}", "object": "chat.completion.chunk",
                     "choices": [choice]}
            await response.write(b"data: " + dumps(chunk) + b"\n\n")
            if behaviour.itl_ms:
                await asyncio.sleep(behaviour.itl_ms / 1000)
        await response.write(b"data: " + dumps({"id": f"chatcmpl-{number}", "choices": [],
                             "usage": {"completion_tokens": len(events)}}) + b"\n\n")
        await response.write(b"data: [DONE]\n\n")
        await response.write_eof()
        return response

    app = web.Application()
    app.router.add_get("/v1/models", models)
    app.router.add_get("/version", version)
    app.router.add_get("/synthetic/requests", requests)
    app.router.add_post("/v1/completions", completions)
    if behaviour.chat is not None:  # the chat route is the fixture's only
        app.router.add_post("/v1/chat/completions", chat)
    return app


def _unexpected(body: dict[str, Any], expect: dict[str, Any]) -> str:
    """What in a chat request differs from the fixture's expectation ("" if nothing)."""
    for key, value in expect.items():
        if key == "tools":
            names = [t.get("function", {}).get("name") for t in body.get("tools") or []]
            if names != value:
                return f"tools name {names}, expected {value}"
        elif body.get(key) != value:
            return f"{key} is {body.get(key)!r}, expected {value!r}"
    return ""


def _chat_events(response: dict[str, Any], chunk: int) -> list[dict[str, Any]]:
    """The deltas that stream ``response``: its content a few characters at a time, then
    each tool call (``chunk`` characters of arguments an event, at least 4)."""
    size = max(4, chunk)
    content = str(response.get("content") or "")
    events: list[dict[str, Any]] = [{"role": "assistant", "content": content[i:i + size]}
                                    for i in range(0, len(content), size)]
    for index, call in enumerate(response.get("tool_calls") or []):
        events.append({"tool_calls": [{"index": index, "id": f"call_{index}",
                                       "type": "function", "function": {
                                           "name": call["name"], "arguments": ""}}]})
        arguments = str(call.get("arguments", ""))
        events += [{"tool_calls": [{"index": index, "function": {
            "arguments": arguments[i:i + size]}}]} for i in range(0, len(arguments), size)]
    return events


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0: a free port (printed)")
    parser.add_argument("--model", default="tinylm")
    parser.add_argument("--ttft-ms", type=float, default=0.0)
    parser.add_argument("--ttft-jitter-ms", type=float, default=0.0)
    parser.add_argument("--itl-ms", type=float, default=0.0)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--tokens-jitter", type=int, default=0)
    parser.add_argument("--chunk-tokens", type=int, default=1)
    parser.add_argument("--fault", choices=FAULTS, default="none")
    parser.add_argument("--fault-every", type=int, default=1)
    parser.add_argument("--answers", default="", help="JSON [[prompt_ids, output_ids], ...]")
    parser.add_argument("--chat-answers", default="",
                        help="JSON [[user_text, response, expect], ...]")
    args = parser.parse_args(argv)
    chat = None
    if args.chat_answers:
        import json
        from pathlib import Path

        chat = {text: (response, expect)
                for text, response, expect in json.loads(Path(args.chat_answers).read_text())}
    answers = None
    if args.answers:
        import json
        from pathlib import Path

        answers = {tuple(p): list(o) for p, o in json.loads(Path(args.answers).read_text())}
    behaviour = Behaviour(model=args.model, ttft_ms=args.ttft_ms,
                          ttft_jitter_ms=args.ttft_jitter_ms, itl_ms=args.itl_ms,
                          tokens=args.tokens, tokens_jitter=args.tokens_jitter,
                          chunk_tokens=args.chunk_tokens, fault=args.fault,
                          fault_every=max(1, args.fault_every), answers=answers, chat=chat)
    return asyncio.run(_serve(behaviour, args.host, args.port))


async def _serve(behaviour: Behaviour, host: str, port: int) -> int:
    from aiohttp import web

    runner = web.AppRunner(make_app(behaviour), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    bound = runner.addresses[0][1]
    print(f"http://{host}:{bound}", flush=True)  # the first line: the URL
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)
