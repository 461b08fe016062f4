"""Before LoadGen starts: each server answers, lists the model, and streams one request.

``check(settings, prompt)`` asks every URL for ``/v1/models``, finds the model there,
streams one short completion of ``prompt`` through the same client code a run uses,
and asks for the engine's version where the engine says it (vLLM: ``/version``). Where
the request fails in a way ``adapt`` recognises (an engine that refuses token ids or
``min_tokens``, ``transformers serve``), the options left at their defaults adapt and the
request is tried again; what was learned is recorded with the engine's own words. Any
other failure is one ``BackendError`` naming the URL and what was wrong. What the servers
said goes into the run's record (``ServerRecord``): nothing about the server is
assumed or hard-coded.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from suite.errors import BackendError
from suite.llm.endpoint.client import ClientSettings, EndpointClient, scrub

HINT = ("start the engine (`suite serve --benchmark tinylm --engine vllm` prints a URL) or fix "
        "backend.openai.urls / --url")
#: A server that answers with an HTTP error is running: starting it is not the fix.
ANSWERED_HINT = ("the server is running and refused the request: read its log (overloaded, "
                 "still loading, or another model?) and retry when it serves")

#: A server that answered 200 but not as the run needs (no stream, past max_tokens, ...).
MISBEHAVED_HINT = ("the server answered, but not as an OpenAI-compatible engine serving this "
                   "card must: check its options (streaming, max_tokens, the model it serves)")


@dataclass
class ServerRecord:
    """What one server said about itself."""

    url: str
    model: str
    owned_by: str = ""
    engine_version: str = ""
    server_header: str = ""
    max_model_len: int | None = None
    #: Where the engine loaded the weights from, as ``/v1/models`` says (vLLM's and
    #: SGLang's ``root``: the path or hub id); "" where it does not say.
    root: str = ""
    #: The engine, where its ``/v1/models`` entry identifies it ("transformers serve":
    #: the ``status`` object it adds, not an OpenAI field); "" where it does not.
    engine: str = ""


@dataclass
class EndpointRecord:
    """What the run records about its servers and its client."""

    servers: list[ServerRecord] = field(default_factory=list)
    client_host: str = field(default_factory=socket.gethostname)
    token_source: str = ""
    prompt_as: str = ""
    api: str = ""
    #: where the servers are, from the addresses the URLs' hosts resolve to
    #: (``suite.backends.remote.server_location``: loopback, remote, mixed, unknown)
    server_location: str = ""
    server_location_from: str = ""
    #: The options the probe changed (``adapt``), and why, in the engine's words.
    learned: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    #: Whether the card's min_new_tokens is asked of the engine (``min_tokens``).
    min_tokens_asked: bool = True

    def details(self) -> dict[str, str]:
        """``BackendInfo.details`` (strings): one line per fact."""
        first = self.servers[0] if self.servers else ServerRecord("", "")
        engines = sorted({s.engine or s.owned_by or "unreported" for s in self.servers})
        versions = sorted({s.engine_version or "unreported" for s in self.servers})
        roots = sorted({s.root or "unreported" for s in self.servers})
        return {"urls": ", ".join(s.url for s in self.servers),
                "replicas": str(len(self.servers)), "model": first.model,
                "model_root": ", ".join(roots),
                "engine": ", ".join(engines), "engine_version": ", ".join(versions),
                "server_header": first.server_header or "unreported",
                "max_model_len": str(first.max_model_len or "unreported"),
                "api": self.api, "prompt_as": self.prompt_as,
                "token_source": self.token_source, "client_host": self.client_host,
                "server_location": self.server_location or "unknown",
                "server_location_from": self.server_location_from or "not derived",
                "min_tokens": "asked of the engine" if self.min_tokens_asked else
                "not asked of the engine (backend.openai.min_tokens_field = false)",
                "stream_end": "response end after finish_reason (the engine sends no "
                "[DONE])" if self.learned.get("end_without_done") else "data: [DONE]",
                "probe_learned": " | ".join(self.notes) or "nothing"}

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def check(settings: ClientSettings, prompt: list[int] | dict[str, Any], encode: Any, decode: Any,
          timeout_s: float = 30.0, adaptable: frozenset[str] = frozenset()
          ) -> EndpointRecord:
    """Check every server (see the module docstring); the record of what they said and
    of what the probe learned (``learned``: the options to run with), changing only the
    options in ``adaptable``."""
    from suite.backends.remote import server_location
    from suite.llm.endpoint.adapt import learn

    location, derivation = server_location(settings.urls)
    record = EndpointRecord(api=settings.api, server_location=location,
                            server_location_from=derivation)
    for url in settings.urls:
        server = _describe(settings, url, timeout_s)
        record.servers.append(server)

        def attempt(tried: ClientSettings, url: str = url) -> str | None:
            # asks for min_tokens as the run does (at most the 2 tokens asked for)
            return _try(replace(tried, urls=(url,), max_tokens=2,
                                min_tokens=min(tried.min_tokens, 2)),
                        prompt, encode, decode, timeout_s)

        settings, failure = learn(settings, server.engine, adaptable, attempt,
                                  record.learned, record.notes)
        if failure is not None:
            _refuse(replace(settings, urls=(url,)), url, failure, timeout_s)
    record.token_source, record.prompt_as = settings.token_source, settings.prompt_as
    record.min_tokens_asked = settings.min_tokens > 0 or "min_tokens_field" not in record.learned
    return record


def _describe(settings: ClientSettings, url: str, timeout_s: float) -> ServerRecord:
    import aiohttp

    async def ask() -> ServerRecord:
        timeout = aiohttp.ClientTimeout(total=timeout_s, sock_connect=settings.connect_timeout_s)
        headers = settings.headers()
        async with aiohttp.ClientSession(timeout=timeout, headers=headers) as session:
            ssl = settings.verify_tls
            # Redirects are not followed: the answers recorded are this URL's, never
            # another host's.
            async with session.get(f"{url}/v1/models", ssl=ssl,
                                   allow_redirects=False) as response:
                if 300 <= response.status < 400:
                    raise BackendError(
                        f"{url}/v1/models: HTTP {response.status} redirects to "
                        f"{response.headers.get('Location', '(no Location)')!r}; redirects "
                        "are not followed", hint="give the server's own URL with --url")
                if response.status != 200:
                    body = (await response.content.read(500)).decode("utf-8", "replace")
                    raise BackendError(f"{url}/v1/models: HTTP {response.status}: "
                                       f"{body.strip()[:300]}", hint=ANSWERED_HINT)
                listed = await response.json(content_type=None)
                server_header = response.headers.get("Server", "")
            models = [m for m in (listed or {}).get("data", []) if isinstance(m, dict)]
            match = next((m for m in models if m.get("id") == settings.model), None)
            if match is None:
                names = ", ".join(str(m.get("id")) for m in models) or "none"
                raise BackendError(f"{url}/v1/models does not list the model "
                                   f"{settings.model!r} (it lists: {names})",
                                   hint="set backend.openai.model to the served name")
            version = ""
            try:  # vLLM answers /version; other engines may not, and that is recorded
                async with session.get(f"{url}/version", ssl=ssl,
                                       allow_redirects=False) as response:
                    if response.status == 200:
                        data = await response.json(content_type=None)
                        version = str(data.get("version", "")) if isinstance(data, dict) else ""
            except (aiohttp.ClientError, ValueError):
                version = ""
            status = match.get("status")
            engine = ("transformers serve" if isinstance(status, dict) and "value" in status
                      else "")
            return ServerRecord(url=url, model=settings.model, engine=engine,
                                owned_by=str(match.get("owned_by", "")),
                                engine_version=version, server_header=server_header,
                                max_model_len=match.get("max_model_len"),
                                root=str(match.get("root") or ""))

    try:
        return asyncio.run(ask())
    except BackendError as exc:
        raise BackendError(scrub(str(exc), settings), hint=exc.hint) from None
    except Exception as exc:
        raise BackendError(scrub(f"{url}: the server does not answer: "
                                 f"{type(exc).__name__}: {exc}", settings), hint=HINT) from None


def _try(settings: ClientSettings, prompt: list[int] | dict[str, Any], encode: Any, decode: Any,
         timeout_s: float) -> str | None:
    """Stream one short completion through the run's own client code; why it failed,
    or None."""
    done = threading.Event()
    outcome: list[str] = []

    def on_done(key: int, ids: list[int], source: str, payload: bytes | None = None,
                /) -> None:
        done.set()

    def on_error(key: int, message: str) -> None:
        outcome.append(message)
        done.set()

    client = EndpointClient(settings, encode, decode, None, on_done, on_error)
    client.start()
    try:
        client.submit([(0, 0, prompt)])
        if not done.wait(timeout_s):
            return TIMED_OUT
    finally:
        client.close()
    return outcome[0] if outcome else None


TIMED_OUT = "one short request did not finish"


def _refuse(settings: ClientSettings, url: str, failure: str, timeout_s: float) -> None:
    """The probe's failure as one ``BackendError``."""
    if failure == TIMED_OUT:
        raise BackendError(f"{url}: {TIMED_OUT} in {timeout_s:g} s", hint=HINT)
    unreachable = any(word in failure for word in (
        "cannot connect", "closed before a response", "(timeout)"))
    answered = f"{settings.path()}: sample 0 (query 0): HTTP " in failure
    raise BackendError(f"the pre-flight request failed: {failure}",
                       hint=HINT if unreachable else ANSWERED_HINT if answered
                       else MISBEHAVED_HINT)
