"""Text prompts are the dataset's prompts (issue 36, item 10). With ``prompt_as = "text"``
(or ``api = "chat"``) the engine gets the dataset's own text, not the tokenizer's decode of
its ids: tinylm's prompts use the EOS character as a paragraph separator, which a decode
drops. A real HTTP server on loopback (the synthetic endpoint's aiohttp app, in a thread)
records every request body; the SUT streams through the real client, in its own thread and
in a client process. No LoadGen: the completer records."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator, Sequence
from typing import Any

import pytest

pytest.importorskip("aiohttp", reason="the openai backend needs aiohttp (the [openai] extra)")
from aiohttp import web

from suite.harness.llm.endpoint_sut import EndpointSystemUnderTest
from suite.llm.card import load_llm_card
from suite.llm.dataset import LLMDataset
from suite.llm.endpoint.client import ClientSettings
from suite.paths import find_paths
from suite.serve.synthetic_llm import Behaviour, make_app


class _Completer:
    def __init__(self) -> None:
        self.done: list[int] = []
        self.empty: list[int] = []

    def first_token(self, qid: int, token: int) -> None:
        pass

    def complete(self, items: Sequence[tuple[int, Sequence[int]]]) -> None:
        self.done += [qid for qid, _ in items]

    def complete_empty(self, ids: Sequence[int]) -> None:
        self.empty += list(ids)


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[str, list[dict[str, Any]]]]:
    bodies: list[dict[str, Any]] = []

    @web.middleware
    async def record(request: web.Request, handler: Any) -> web.StreamResponse:
        if request.method == "POST":
            bodies.append(await request.json())  # aiohttp keeps the body for the handler
        return await handler(request)  # type: ignore[no-any-return]

    app = make_app(Behaviour(tokens=2))
    app.middlewares.append(record)
    completions = next(r.handler for r in app.router.routes() if r.method == "POST")
    app.router.add_post("/v1/chat/completions", completions)
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(app)
    loop.run_until_complete(runner.setup())
    site = web.TCPSite(runner, "127.0.0.1", 0)
    loop.run_until_complete(site.start())
    port = runner.addresses[0][1]
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{port}", bodies
    loop.call_soon_threadsafe(loop.stop)
    thread.join(5)
    loop.run_until_complete(runner.cleanup())
    loop.close()


def _sent_prompt(body: dict[str, Any]) -> str:
    if "messages" in body:
        return str(body["messages"][0]["content"])
    return str(body["prompt"])


@pytest.mark.parametrize(("api", "workers"), [("completions", 0), ("completions", 1),
                                              ("chat", 0)])
def test_text_prompts_are_the_datasets_text(server: tuple[str, list[dict[str, Any]]],
                                            api: str, workers: int) -> None:
    url, bodies = server
    bodies.clear()
    card = load_llm_card(find_paths(), "tinylm")
    dataset = LLMDataset(card)
    eos = dataset.tokenizer.chars[card.tokenizer.eos_id]
    # samples whose text holds the EOS character (a decode of their ids drops it)
    chosen = [i for i, text in enumerate(dataset.prompts_text) if eos in text][:6]
    assert len(chosen) == 6
    settings = ClientSettings(urls=(url,), model="tinylm", api=api,  # type: ignore[arg-type]
                              prompt_as="text", max_tokens=2, min_tokens=0)
    completer = _Completer()
    sut = EndpointSystemUnderTest(settings, dataset, completer,  # type: ignore[arg-type]
                                  report_first_token=False, workers=workers)
    sut.warmup()  # starts the client (its loop thread, or its process)
    try:
        sut.issue(list(range(100, 106)), chosen)
        deadline = time.monotonic() + 30
        while len(completer.done) + len(completer.empty) < 6 and time.monotonic() < deadline:
            time.sleep(0.02)
    finally:
        sut.stop()
    assert sorted(completer.done) == list(range(100, 106)), sut.failures
    sent = sorted(_sent_prompt(b) for b in bodies)
    assert sent == sorted(dataset.prompts_text[i] for i in chosen)
    assert all(eos in text for text in sent)
