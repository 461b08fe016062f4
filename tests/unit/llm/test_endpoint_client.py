"""The openai backend's pure parts: request bodies, SSE event folding, options, key scrub."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from suite.llm.endpoint.backend import OpenAIOptions
from suite.llm.endpoint.client import ClientSettings, StreamError, StreamState, read_event, scrub


def settings(**kw: object) -> ClientSettings:
    return ClientSettings(urls=("http://h:1",), model="m", **kw)  # type: ignore[arg-type]


def test_a_completions_body_streams_ids_with_usage_and_the_cards_bounds() -> None:
    body = settings(max_tokens=64, min_tokens=2).body([5, 6, 7])
    assert body["prompt"] == [5, 6, 7] and body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert (body["max_tokens"], body["min_tokens"], body["temperature"]) == (64, 2, 0.0)
    assert body["return_token_ids"] is True


def test_a_chat_body_has_messages_and_tokenizer_mode_asks_for_no_ids() -> None:
    body = settings(api="chat", token_source="tokenizer", extra_body={"top_k": 1}).body("hi")
    assert body["messages"] == [{"role": "user", "content": "hi"}] and "prompt" not in body
    assert "return_token_ids" not in body and "min_tokens" not in body and body["top_k"] == 1
    assert settings(api="chat").path() == "/v1/chat/completions"


def test_events_fold_ids_text_usage_and_finish() -> None:
    state = StreamState()
    assert read_event(state, {"choices": [{"text": "ab", "token_ids": [1, 2]}]}, chat=False)
    assert not read_event(state, {"choices": [{"text": "", "finish_reason": "stop"}]}, False)
    assert not read_event(state, {"choices": [], "usage": {"completion_tokens": 2}}, False)
    assert (state.ids, state.text, state.usage, state.finish_reason, state.chunks) == (
        [1, 2], ["ab"], 2, "stop", 3)
    chat = StreamState()
    assert read_event(chat, {"choices": [{"delta": {"content": "x"}}]}, chat=True)
    assert chat.text == ["x"]


@pytest.mark.parametrize(("payload", "expected"), [
    ([1, 2], "not a JSON object"),
    ({"error": {"message": "overloaded"}}, "error event"),
    ({"id": 1}, "no 'choices' list"),
    ({"choices": [{"token_ids": "1 2"}]}, "not a list of integers"),
])
def test_malformed_events_are_stream_errors(payload: object, expected: str) -> None:
    with pytest.raises(StreamError, match=expected):
        read_event(StreamState(), payload, chat=False)


def test_options_take_base_urls_and_refuse_other_schemes() -> None:
    assert OpenAIOptions(urls=["http://a:8000/v1/", "https://b"]).urls == [
        "http://a:8000", "https://b"]
    with pytest.raises(ValidationError, match="http:// or https://"):
        OpenAIOptions(urls=["a:8000"])
    with pytest.raises(ValidationError):
        OpenAIOptions(api_key_env="not a name")


def test_the_key_is_scrubbed_from_messages() -> None:
    s = settings(api_key="sk-secret")
    assert scrub("401: bad key sk-secret", s) == "401: bad key ***"
    assert "Authorization" in s.headers() and "Authorization" not in settings().headers()


def test_ids_that_are_not_token_ids_fail_the_request() -> None:
    from suite.llm.endpoint.client import EndpointClient

    client = EndpointClient(settings(), lambda text: [], lambda ids: "", None,
                            lambda *a: None, lambda *a: None)
    for bad in ([5, "a", 7], [5, True], [5, 7.0], [5, -1], [5, 1 << 31]):
        state = StreamState(ids=bad)  # type: ignore[arg-type]
        with pytest.raises(StreamError, match="something other than token ids"):
            client._finish(state)
    assert client._finish(StreamState(ids=[5, 6], usage=2)) == ([5, 6], "engine")


def _bos_tokenizer(tmp_path: object) -> object:
    """A Llama-like tokenizer.json: one token per character, and a BOS (id 0) that its
    post-processor puts before every encoded text, as Llama's does."""
    from pathlib import Path

    from tokenizers import Tokenizer, models, processors

    from suite.llm.dataset import HFTokenizer

    vocab = {"<s>": 0, "</s>": 1, "x": 2, "y": 3}
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<s> $A", special_tokens=[("<s>", 0)])
    path = Path(str(tmp_path)) / "tokenizer.json"
    tokenizer.save(str(path))
    loaded = HFTokenizer(path, eos_id=1)
    assert loaded.encode("xx") == [0, 2, 2]  # a prompt gets its BOS
    return loaded


def test_tokenizer_mode_counts_the_streamed_text_without_a_bos(tmp_path: object) -> None:
    """An engine that streams no ids (``no-ids``): the output ids are the text's, with no
    BOS the engine never generated; the first token reported is the real first one."""
    import threading

    pytest.importorskip("tokenizers", reason="an HF tokenizer needs tokenizers (.[llm])")
    pytest.importorskip("aiohttp", reason="the synthetic endpoint needs aiohttp (.[openai])")
    from suite.llm.endpoint.client import EndpointClient
    from tests.support.llm_endpoints import synthetic

    tokenizer: Any = _bos_tokenizer(tmp_path)
    firsts: list[list[int]] = []
    outcome: list[Any] = []
    done = threading.Event()

    def finish(*args: Any) -> None:
        outcome.append(args)
        done.set()

    with synthetic("--tokens", "5", "--fault", "no-ids") as (url, _):
        client = EndpointClient(
            ClientSettings(urls=(url,), model="tinylm", token_source="tokenizer",
                           max_tokens=8, vocab_size=4),
            tokenizer.encode_text, tokenizer.decode,
            lambda key, ids: firsts.append(list(ids)), finish, finish)
        client.start()
        try:
            client.submit([(7, 0, [2, 3])])
            assert done.wait(30)
        finally:
            client.close()
    # usage (5) agrees with the ids: with a BOS there were 6, and the request failed
    assert outcome == [(7, [2, 2, 2, 2, 2], "tokenizer")], outcome
    assert firsts and firsts[0][0] == 2, firsts  # 'x', not the BOS (0)


def test_a_first_chunk_without_ids_reports_no_made_up_first_token() -> None:
    from suite.llm.endpoint.client import EndpointClient
    from suite.llm.endpoint.sse import SseRequest

    firsts: list[list[int]] = []
    client = EndpointClient(settings(), lambda text: [], lambda ids: "",
                            lambda key, ids: firsts.append(ids), lambda *a: None,
                            lambda *a: None)
    request = SseRequest(client, 1, 0, "http://h:1", chat=False)
    request.state.text.append("x")  # text, its ids not yet streamed
    assert client.first(request) is False and firsts == []
    request.state.ids.append(9)
    assert client.first(request) is True and firsts == [[9]]


@pytest.mark.parametrize(("state", "expected"), [
    (StreamState(ids=[5, 6, 7], usage=3), "3 output tokens, over max_tokens 2"),
    (StreamState(ids=[5], usage=1), "1 output tokens, under min_tokens 2"),
    (StreamState(ids=[5, 90]), "token id 90 is outside the card's vocabulary"),
    (StreamState(ids=[5, 6], finish_reason="abort"), "finish_reason 'abort'"),
    (StreamState(ids=[5, 6], finish_reason="error"), "finish_reason 'error'"),
])
def test_a_response_is_held_to_the_cards_generation_rules(state: StreamState,
                                                          expected: str) -> None:
    from suite.llm.endpoint.client import EndpointClient

    client = EndpointClient(settings(max_tokens=2, min_tokens=2, vocab_size=83),
                            lambda text: [], lambda ids: "", None, lambda *a: None,
                            lambda *a: None)
    with pytest.raises(StreamError, match=expected):
        client._finish(state)
    assert client._finish(StreamState(ids=[5, 6], finish_reason="length")) == ([5, 6],
                                                                               "engine")


def test_options_refuse_a_url_with_credentials_without_echoing_them() -> None:
    from suite.backends import parse_options
    from suite.errors import ConfigError

    with pytest.raises(ConfigError) as raised:  # as config loading reports it
        parse_options("openai", {"urls": ["http://user:s3cret@host:8000/v1"]})
    assert "credentials" in str(raised.value) and "s3cret" not in str(raised.value)


def test_every_option_that_changes_the_engines_work_is_named() -> None:
    from suite.llm.card import load_llm_card
    from suite.llm.endpoint.backend import OpenAIBackend
    from suite.paths import find_paths

    card = load_llm_card(find_paths(), "tinylm")
    backend = OpenAIBackend(OpenAIOptions(
        urls=["http://h:1"], extra_body={"max_tokens": 4, "temperature": 1.0, "user": "me"},
        token_source="tokenizer", min_tokens_field=False, api="chat"))
    reasons = backend.unsubmittable(card)
    for name in ("extra_body.max_tokens", "extra_body.temperature", "token_source",
                 "min_tokens_field", "api = \"chat\""):
        assert any(name in r for r in reasons), (name, reasons)
    assert not any("extra_body.user" in r for r in reasons)  # changes nothing computed
    assert OpenAIBackend(OpenAIOptions(urls=["http://h:1"])).unsubmittable(card) == []
