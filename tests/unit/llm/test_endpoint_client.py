"""The openai backend's pure parts: request bodies, SSE event folding, options, key scrub."""

from __future__ import annotations

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
