"""What the openai backend's probe learns from an engine's refusals (``endpoint.adapt``),
the stream end without ``[DONE]`` and the usage that counts an EOS the text omits
(``endpoint.client``), and the transformers engine's start (``serve.llm_engines``).

The refusals are those ``transformers serve`` 5.24 answered here (``docs/llm-endpoints.md``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from suite.llm.endpoint.adapt import ADAPTABLE, learn
from suite.llm.endpoint.client import ClientSettings, EndpointClient, StreamError, StreamState
from suite.llm.endpoint.sse import SseRequest

URL = "http://h:1/v1/completions: sample 0 (query 0): "
IDS_AND_MIN = URL + ("HTTP 422: {\"detail\":\"Unexpected fields in the request: "
                     "{'min_tokens', 'return_token_ids'}\"}")
MIN = URL + "HTTP 422: {\"detail\":\"Unexpected fields in the request: {'min_tokens'}\"}"
TEXT = URL + "HTTP 400: {\"detail\":\"prompt must be a string.\"}"
NO_DONE = URL + "the stream ended after 3 events without 'data: [DONE]' (cut off)"


def settings(**kw: Any) -> ClientSettings:
    return ClientSettings(urls=("http://h:1",), model="m", min_tokens=2, **kw)


class Engine:
    """Answers as transformers serve does: refuses fields, then id prompts, no [DONE]."""

    def __init__(self) -> None:
        self.tried: list[ClientSettings] = []

    def __call__(self, s: ClientSettings) -> str | None:
        self.tried.append(s)
        if s.token_source == "engine" and s.min_tokens:
            return IDS_AND_MIN
        if s.min_tokens:
            return MIN
        if s.prompt_as == "ids":
            return TEXT
        return None if s.end_without_done else NO_DONE


def test_the_probe_learns_each_refusal_in_the_engines_words() -> None:
    engine, learned, notes = Engine(), {}, []  # type: ignore[var-annotated]
    final, failure = learn(settings(), "transformers serve", ADAPTABLE, engine, learned, notes)
    assert failure is None and len(engine.tried) == 5
    assert (final.prompt_as, final.token_source, final.min_tokens, final.end_without_done) == (
        "text", "tokenizer", 0, True)
    assert learned == {"token_source": "tokenizer", "min_tokens_field": False,
                       "prompt_as": "text", "end_without_done": True}
    assert "prompt must be a string" in notes[2] and "'min_tokens'" in notes[1]


def test_an_option_the_user_chose_is_never_changed() -> None:
    learned: dict[str, Any] = {}
    final, failure = learn(settings(), "transformers serve", ADAPTABLE - {"prompt_as"},
                           Engine(), learned, [])
    assert failure == TEXT and final.prompt_as == "ids" and "prompt_as" not in learned


def test_no_done_is_accepted_only_from_an_engine_known_to_send_none() -> None:
    learned: dict[str, Any] = {}
    final, failure = learn(settings(), "", ADAPTABLE, Engine(), learned, [])
    assert failure == NO_DONE and not final.end_without_done


def client(**kw: Any) -> EndpointClient:
    return EndpointClient(settings(token_source="tokenizer", eos_id=0, **kw),
                          lambda text: [ord(c) - 96 for c in text], lambda ids: "", None,
                          lambda *a: None, lambda *a: None)


def test_usage_that_counts_an_eos_the_text_omits_keeps_the_eos_as_the_reference() -> None:
    c = client()
    ids, _ = c._finish(StreamState(text=["ab"], usage=3, finish_reason="stop"))
    assert ids == [1, 2, 0] and c.reconciled == {"eos_from_usage": 1}
    # only an EOS: a stream cut at its length, or two tokens short, still fails
    for state in (StreamState(text=["ab"], usage=3, finish_reason="length"),
                  StreamState(text=["ab"], usage=4, finish_reason="stop")):
        with pytest.raises(StreamError, match="reports"):
            c._finish(state)


def request(c: EndpointClient) -> tuple[SseRequest, list[BaseException | None]]:
    outcome: list[BaseException | None] = []
    r = SseRequest(c, 0, 0, "http://h:1", chat=False)

    def report(request: SseRequest, error: BaseException | None) -> None:
        request.reported = True  # as the client's own report does
        outcome.append(error)

    c.report = report  # type: ignore[method-assign]
    c.settle = lambda request: None  # type: ignore[method-assign]
    r.status = 200
    return r, outcome


@pytest.mark.parametrize(("known", "events", "ended"), [
    (True, [b'{"choices":[{"text":"a"}]}', b'{"choices":[{"text":"","finish_reason":"stop"}]}'],
     True),
    (True, [b'{"choices":[{"text":"a"}]}'], False),  # no finish_reason: cut off
    (False, [b'{"choices":[{"text":"","finish_reason":"stop"}]}'], False),
])
def test_a_stream_without_done_ends_only_as_the_engine_is_known_to(
        known: bool, events: list[bytes], ended: bool) -> None:
    c = client(end_without_done=known)
    r, outcome = request(c)
    r.body(b"".join(b"data: " + e + b"\n\n" for e in events))
    r.complete()
    assert (outcome == [None]) is ended, outcome
    assert c.reconciled == ({"ended_without_done": 1} if ended else {})


def test_the_engine_starts_under_the_cards_name_in_a_directory_of_its_own(
        tmp_path: Path) -> None:
    from suite.serve.llm_engines import engine_command, served_directory

    model = tmp_path / "tinylm-hf"
    model.mkdir()
    command, env = engine_command("transformers", "/py", model, "tinylm", "127.0.0.1", 9, 192)
    assert command[:5] == ["/py", "-m", "transformers.cli.transformers", "serve", "tinylm"]
    assert "--force-model" not in command and env["HF_HUB_OFFLINE"] == "1"
    served = served_directory(tmp_path / "transformers.log", "tinylm", model)
    assert [p.name for p in served.iterdir()] == ["tinylm"]
    assert (served / "tinylm").resolve() == model.resolve()


def test_vllm_starts_quick_without_a_gpu_and_with_its_own_defaults_when_full(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from suite.backends import base
    from suite.serve import llm_engines as engines

    monkeypatch.delenv("VLLM_ENABLE_V1_MULTIPROCESSING", raising=False)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    quick, quick_env = engines.engine_command("vllm", "/py", tmp_path, "tinylm", "127.0.0.1",
                                              9, 192, "quick")
    full, full_env = engines.engine_command("vllm", "/py", tmp_path, "tinylm", "127.0.0.1",
                                            9, 192, "full")
    assert quick[:len(full)] == full and quick[len(full):] == list(engines.VLLM_QUICK_ARGS)
    assert "--enforce-eager" in quick and "--enforce-eager" not in full
    assert quick_env["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0"
    assert quick_env["OMP_NUM_THREADS"] == "1"
    assert not {"VLLM_ENABLE_V1_MULTIPROCESSING", "OMP_NUM_THREADS"} & set(full_env)
    # the user's own setting wins over the quick start's
    monkeypatch.setenv("VLLM_ENABLE_V1_MULTIPROCESSING", "1")
    assert engines.engine_command("vllm", "/py", tmp_path, "tinylm", "127.0.0.1", 9, 192,
                                  "quick")[1]["VLLM_ENABLE_V1_MULTIPROCESSING"] == "1"
    # auto: quick where no GPU can be used, vLLM's defaults where one can
    monkeypatch.setattr(base, "nvidia_gpu_problem", lambda: "no NVIDIA GPU: test")
    assert engines.resolved_start("auto") == "quick"
    monkeypatch.setattr(base, "nvidia_gpu_problem", lambda: None)
    assert engines.resolved_start("auto") == "full"
    assert engines.resolved_start("quick") == "quick"
    with pytest.raises(engines.EngineError, match="unknown engine start 'fast'"):
        engines.resolved_start("fast")


def test_a_transformers_without_this_cli_is_refused_in_one_line(tmp_path: Path) -> None:
    from suite.serve.llm_engines import EngineError, check_transformers

    fake = tmp_path / "python"
    fake.write_text("#!/bin/sh\necho 4.57.1\necho\n")
    fake.chmod(0o755)
    with pytest.raises(EngineError, match=r"transformers 4\.57\.1 in .*works with "
                                          r"transformers >=5\.24,<6\.0") as caught:
        check_transformers(str(fake))
    assert "\n" not in str(caught.value) and str(fake) in (caught.value.hint or "")


def test_an_engine_that_exits_is_hinted_at_with_the_interpreter_it_ran_in(
        tmp_path: Path) -> None:
    import subprocess
    import sys

    from suite.serve.llm_engines import EngineError, RunningEngine, wait_listed

    process = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    process.wait()
    running = RunningEngine("transformers", "http://127.0.0.1:9", "tinylm", process,
                            tmp_path / "t.log", "/opt/engine/bin/python")
    with pytest.raises(EngineError, match="exited with code 3") as caught:
        wait_listed(running, 5)
    assert "/opt/engine/bin/python" in (caught.value.hint or "")
    assert "make engine-vllm" not in (caught.value.hint or "")
