"""``openai``: an LLM card's samples streamed from OpenAI-compatible servers.

An ``EndpointGenerator`` (``suite.llm.contract``): the registry entry and
``[backend.openai]`` options. An engine (vLLM, SGLang,
TensorRT-LLM, llama.cpp, ``transformers serve``) serves the model; LoadGen issues the
queries and each sample becomes one streaming request (``endpoint_client``). Before
LoadGen starts, ``check`` (``endpoint_check``) makes sure each server answers, lists the
model and round-trips one short request; what the servers say they are is recorded.
Where that request fails as an engine that refuses token ids or ``min_tokens`` fails
(``transformers serve``), the options left at their defaults adapt (``endpoint.adapt``);
the run uses what the probe learned, records it, and names each such option among the
reasons it is not submittable.

The API key is read from the environment variable ``api_key_env`` names, at the moment
it is needed: the options (and so ``config.json``, ``result.json`` and a bundle) hold the
variable's name, never the key.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any, ClassVar, Literal
from urllib.parse import urlsplit

from pydantic import Field, field_validator

from suite.backends.base import BackendOptions
from suite.errors import ConfigError
from suite.llm.card import LLMCard
from suite.llm.contract import EndpointGenerator, ProbePrompt, StatedWeights
from suite.llm.endpoint.client import ClientSettings, TokenSource

if TYPE_CHECKING:
    from suite.llm.endpoint.check import EndpointRecord

#: ``extra_body`` fields that change nothing the engine computes or the run counts; any
#: other (temperature, top_p, top_k, seed, n, max_tokens, min_tokens, stop, ignore_eos,
#: penalties, ...) makes the run not submittable, by name.
NEUTRAL_FIELDS = frozenset({"user", "request_id", "priority", "logprobs", "top_logprobs",
                            "return_token_ids"})


def _sampling(card: LLMCard) -> dict[str, float | int]:
    """A sampling card's request fields (the client asks temperature 0 otherwise), and
    the seed where the card's reference sends one."""
    g = card.generation
    fields: dict[str, float | int] = {"temperature": g.temperature, "top_p": g.top_p} \
        if g.decoding == "sampling" else {}
    return {**fields, "seed": g.seed} if g.seed is not None else fields


#: A tool-calling card's form (qwen3.6-27b): chat messages with tools, to the chat API;
#: output tokens counted with its tokenizer as the reference counts them; no min_tokens
#: (the reference asks none). Its own form, so none of it makes a run unsubmittable.
_TOOL_FORM: dict[str, Any] = {"api": "chat", "prompt_as": "text", "token_source": "tokenizer",
                              "tools": True}


class OpenAIOptions(BackendOptions):
    """``[backend.openai]`` options."""

    urls: list[str] = Field(default_factory=list, description="base URLs of the servers "
                            "(http://host:port, without /v1); several: each request goes to "
                            "the one with the fewest requests outstanding")
    model: str = Field(default="", description="the model name the server serves "
                       "(as /v1/models lists it); empty: the card's name")
    api: Literal["completions", "chat"] = Field(
        default="completions", description="/v1/completions (prompt as token ids or text) "
        "or /v1/chat/completions (the server applies the model's chat template)")
    prompt_as: Literal["ids", "text"] = Field(
        default="ids", description="send the prompt as the card tokenizer's ids (vLLM, "
        "llama.cpp) or as text")
    token_source: TokenSource = Field(
        default="engine", description="output token ids: 'engine' (the ids the server "
        "streams: vLLM's return_token_ids) or 'tokenizer' (the card's tokenizer on the "
        "streamed text, for engines that return no ids)")
    min_tokens_field: bool = Field(default=True, description="send the card's minimum "
                                   "output length as min_tokens (vLLM, SGLang); engines "
                                   "that reject unknown fields need false")
    extra_body: dict[str, Any] = Field(default_factory=dict, description="fields added to "
                                       "every request body (engine-specific)")
    api_key_env: str = Field(default="", pattern=r"^[A-Za-z_][A-Za-z0-9_]*$|^$",
                             description="the environment variable holding the API key "
                                         "(the key itself is never written anywhere)")
    insecure: bool = Field(default=False, description="skip TLS certificate verification "
                           "(the run is then not submittable)")
    connect_timeout_s: float = Field(default=10.0, gt=0)
    first_byte_timeout_s: float = Field(default=120.0, gt=0, description="longest wait for "
                                        "the response or for the next data of a stream")
    total_timeout_s: float = Field(default=600.0, gt=0, description="longest one request")
    max_in_flight: int = Field(default=256, ge=1, le=65536, description="requests in "
                               "flight at once, over all servers (per client process)")
    stated_weights_sha256: str = Field(
        default="", pattern=r"^[0-9a-f]{64}$|^$", description="the sha256 of the reference "
        "weights the engine's model was made from, as the submitter states it (the suite "
        "cannot see a remote engine's weights: recorded as 'stated by the submitter, not "
        "verified'); empty: the run is open division")
    stated_precision: str = Field(default="", description="the weights' data type the "
                                  "engine runs (fp16, bf16, fp8, ...), as the submitter "
                                  "states it; empty: not recorded (packaging refuses)")
    stated_quantization: str = Field(default="", description="what was done to the "
                                     "reference weights ('none', 'fp8 per-tensor', ...), as "
                                     "the submitter states it; empty: not recorded")
    client_workers: int = Field(default=-1, ge=-1, le=64, description="client processes "
                                "that stream the requests, each with its own event loop and "
                                "connections; 0: a thread in LoadGen's process; -1: one per "
                                "four cores (at least one)")

    @field_validator("urls")
    @classmethod
    def _urls(cls, urls: list[str]) -> list[str]:
        out = []
        for url in urls:
            url = url.rstrip("/")
            if url.endswith("/v1"):
                url = url[:-3]
            if not url.startswith(("http://", "https://")):
                raise ValueError(f"{url!r}: a URL starts with http:// or https://")
            netloc = urlsplit(url).netloc
            if "@" in netloc:
                # Refused, not redacted: the URL is written to config.json, result.json,
                # the child's spec and status.json, and a bundle. Named without its secret.
                host = netloc.rpartition("@")[2]
                raise ValueError(f"a URL with credentials (user:password@{host}) is refused: "
                                 "they would be written to the run's records; give the key "
                                 "with backend.openai.api_key_env")
            out.append(url)
        return out


class OpenAIBackend(EndpointGenerator):
    """Streams completions from OpenAI-compatible servers (see the module docstring)."""

    name = "openai"
    Options = OpenAIOptions
    # httptools parses the streamed responses; aiohttp serves the pre-flight probe.
    requires: ClassVar[tuple[tuple[str, str], ...]] = (("httptools", "httptools"),
                                                        ("aiohttp", "aiohttp"))
    extra = "openai"

    #: What the last probe learned (``endpoint.adapt``): option name -> value.
    learned: dict[str, Any] | None = None

    @property
    def opts(self) -> OpenAIOptions:
        """The options, with what the probe learned applied (``probe``)."""
        assert isinstance(self.options, OpenAIOptions)
        options = {k: v for k, v in (self.learned or {}).items() if k in OpenAIOptions.model_fields}
        return self.options.model_copy(update=options) if options else self.options

    def api_key(self) -> str | None:
        """The key from ``api_key_env``; a named variable that is unset is an error."""
        name = self.opts.api_key_env
        if not name:
            return None
        key = os.environ.get(name)
        if not key:
            raise ConfigError(f"backend.openai.api_key_env = {name!r}, but ${name} is not "
                              "set", hint=f"export {name}=... before the run")
        return key

    def settings(self, card: LLMCard) -> ClientSettings:
        """The client's settings for ``card`` (its output length bounds, its name)."""
        o = self.opts
        if not o.urls:
            raise ConfigError("backend.openai.urls is empty",
                              hint="give the server: --url http://127.0.0.1:8000 (or set "
                                   "backend.openai.urls)")
        settings = ClientSettings(
            urls=tuple(o.urls), model=o.model or card.name, api=o.api, prompt_as=o.prompt_as,
            token_source=o.token_source, max_tokens=card.generation.max_new_tokens,
            min_tokens=card.generation.min_new_tokens if o.min_tokens_field else 0,
            api_key=self.api_key(), verify_tls=not o.insecure,
            connect_timeout_s=o.connect_timeout_s, first_byte_timeout_s=o.first_byte_timeout_s,
            total_timeout_s=o.total_timeout_s, max_in_flight=o.max_in_flight,
            extra_body={**_sampling(card), **o.extra_body},
            vocab_size=card.architecture.vocab_size if card.architecture else 1 << 31,
            limit=card.generation.max_new_tokens, eos_id=card.tokenizer.eos_id,
            end_without_done=bool((self.learned or {}).get("end_without_done")))
        return replace(settings, **_TOOL_FORM, min_tokens=0) if card.tool_calling else settings

    def probe(self, card: LLMCard, prompt: ProbePrompt,
              encode: Callable[[str], list[int]],
              decode: Callable[[list[int]], str]) -> EndpointRecord:
        """``check``, adapting the options the user left at their defaults to what the
        servers refuse (``endpoint.adapt``); the run then uses what it learned."""
        from suite.llm.endpoint.adapt import ADAPTABLE
        from suite.llm.endpoint.check import check

        assert isinstance(self.options, OpenAIOptions)
        self.learned = None  # each probe learns afresh, so its record says it all
        # left at its default (the run's config holds every option, so "set" cannot be
        # told from "default"): a value the user chose otherwise is never changed
        fields = OpenAIOptions.model_fields
        adaptable = frozenset(name for name in ADAPTABLE
                              if getattr(self.options, name) == fields[name].default)
        record = check(self.settings(card), prompt, encode, decode, adaptable=adaptable)
        self.learned = dict(record.learned)
        return record

    @property
    def client_workers(self) -> int:
        return self.opts.client_workers

    @property
    def stated(self) -> StatedWeights:
        o = self.opts
        return StatedWeights(o.stated_weights_sha256, o.stated_precision.strip(),
                             o.stated_quantization.strip())

    def preflight(self, card: LLMCard, prompt: ProbePrompt,
                  encode: Callable[[str], list[int]],
                  decode: Callable[[list[int]], str]) -> list[str]:
        """Every server answers, lists the model and streams one request (a
        ``BackendError``, exit 1, otherwise); the reasons the options make the run not
        submittable."""
        self.probe(card, prompt, encode, decode)
        return self.unsubmittable(card)

    def unsubmittable(self, card: LLMCard) -> list[str]:
        """Why these options make the run not submittable: each one that changes what
        the engine computes or how the output is counted, by its name."""
        o = self.opts
        reasons = [f"backend.openai.extra_body.{key} = {value!r}: it changes what the "
                   f"engine computes (the card: {card.generation.decoding}, "
                   f"{card.generation.min_new_tokens} to {card.generation.max_new_tokens} "
                   "tokens)" for key, value in o.extra_body.items()
                   if key not in NEUTRAL_FIELDS]
        if card.tool_calling:  # the card's own form: chat, text, tokenizer counts
            return reasons + (["backend.openai.insecure = true: the servers' TLS "
                               "certificates were not verified"] if o.insecure else [])
        if o.api == "chat":
            reasons.append("backend.openai.api = \"chat\": the server applies a chat "
                           "template, so the prompt is not the dataset's")
        if o.prompt_as == "text" and card.dataset.tokens_field:
            reasons.append("backend.openai.prompt_as = \"text\": the card's prompts are "
                           f"token ids ({card.dataset.tokens_field}); the server "
                           "tokenizes text itself")
        if o.token_source == "tokenizer":
            reasons.append("backend.openai.token_source = \"tokenizer\": the output ids "
                           "are the card tokenizer's reading of the text, not the engine's")
        if not o.min_tokens_field:
            reasons.append("backend.openai.min_tokens_field = false: the card's "
                           f"min_new_tokens ({card.generation.min_new_tokens}) is not asked of "
                           "the engine")
        if o.insecure:
            reasons.append("backend.openai.insecure = true: the servers' TLS certificates "
                           "were not verified")
        return reasons
