"""The LLM system under test for the ``openai`` backend: LoadGen's samples as streams.

Each issued sample becomes one streaming request (``suite.llm.endpoint.client``). The
first chunk that carries output calls LoadGen's ``FirstTokenComplete`` (not in Offline),
the end of the stream ``QuerySamplesComplete`` with every output token id and its count,
so LoadGen computes TTFT, TPOT and tokens/s itself. A failed request fails the test: it
is recorded (URL, sample, what went wrong), and every outstanding sample, and every
later one, is answered at once with no tokens, so LoadGen ends within moments.

It offers the surface of ``LLMSystemUnderTest`` (issue/flush/load/unload, warmup/start/
stop/drain/abandon, ``failures``, ``completer``, the batch profile), so
``suite.harness.child`` runs it unchanged.

**What each client process spent** (``run_record``): when the run stops, LoadGen's process
(``parent``: the CPU of all its threads, LoadGen's own included, and the samples it
completed) and each client worker process (``workers``: its CPU, requests and SSE events,
as ``endpoint_workers`` reports them), with the samples LoadGen issued. It becomes the
backend record's ``run`` (``backend_record``, the dict the child writes to ``status.json``
``backend``, which ``result.json`` keeps), so ``bench/bench_endpoint.py`` derives the
client's CPU per request and per event, and its ceiling, from the run's own record.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from suite.harness.loadgen import TokenCompleter
from suite.harness.sut.failures import FailureLog
from suite.llm.dataset import LLMDataset, tokenizer_spec
from suite.llm.endpoint.client import ClientSettings, EndpointClient
from suite.llm.endpoint.workers import ClientWorkers, cpu_s, process_record


def prompts_to_send(settings: ClientSettings, dataset: LLMDataset
                    ) -> Sequence[Sequence[int] | str | dict[str, Any]]:
    """What the engine gets for each sample: the dataset's ids, or, where the settings send
    text, the dataset's own prompt text, never a decode of its ids (a decode drops special
    tokens: tinylm's EOS paragraph separator); a tool-calling card's chat messages and
    tools (``requests``)."""
    if settings.tools:
        return dataset.requests
    return dataset.prompts_text if settings.text_prompt else dataset.prompts


class EndpointSystemUnderTest:
    """Streams every sample from the servers (see the module docstring)."""

    def __init__(self, settings: ClientSettings, dataset: LLMDataset,
                 completer: TokenCompleter, *, report_first_token: bool,
                 on_drain: Callable[[], None] | None = None, workers: int = 0) -> None:
        self.dataset = dataset
        self.completer = completer
        self.report_first_token = report_first_token
        self.failures = FailureLog()
        self.draining = threading.Event()
        self._on_drain = on_drain
        self.issue_calls = 0
        self.derived: dict[str, float] = {}
        self.tokens_out = 0
        self.sources: dict[str, int] = {}
        self._outstanding: set[int] = set()
        self._lock = threading.Lock()  # completions, drain and issue never interleave
        self._cpu_start: tuple[float, float] | None = None
        self._cpu_spent: tuple[float, float] | None = None
        self.issued_samples = 0
        self._indices: set[int] = set()
        self.completed = 0
        #: The backend's record (``status.json`` ``backend``): ``stop`` sets its ``run``.
        self.backend_record: dict[str, Any] | None = None
        tokenizer = dataset.tokenizer
        first = self._first if report_first_token else None
        self.workers = workers
        self.prompts = prompts_to_send(settings, dataset)
        self.client: EndpointClient | ClientWorkers = (
            ClientWorkers(settings, workers, self.prompts, tokenizer_spec(tokenizer),
                          first, self._done, self._error) if workers
            else EndpointClient(settings, tokenizer.encode_text, tokenizer.decode, first,
                                self._done, self._error))
        self._stopped = False  # LoadGen has returned: nothing more reaches it

    # -- LoadGen's callbacks -----------------------------------------------------------
    def issue(self, ids: list[int], indices: list[int]) -> None:
        self.issue_calls += 1
        if self._cpu_start is None:
            self._cpu_start = (cpu_s(), time.perf_counter())
        with self._lock:
            self.issued_samples += len(ids)
            self._indices.update(indices)
            if self.draining.is_set():
                self.completer.complete_empty(ids)
                return
            self._outstanding.update(ids)
        prompts = self.prompts
        self.client.submit([(qid, i, prompts[i]) for qid, i in zip(ids, indices, strict=True)])

    def flush(self) -> None:
        """Nothing is held back: every sample is on its way when issued."""

    def load(self, indices: list[int]) -> None:
        self.dataset.load(indices)

    def unload(self, indices: list[int]) -> None:
        self.dataset.unload(indices)

    # -- the client's callbacks (its loop thread) --------------------------------------
    def _first(self, key: int, ids: list[int]) -> None:
        with self._lock:
            if key in self._outstanding and not self._stopped:
                self.completer.first_token(key, ids[0])

    def _done(self, key: int, ids: list[int], source: str, payload: bytes | None = None,
              /) -> None:
        with self._lock:
            if key not in self._outstanding or self._stopped:
                return  # answered by a drain already
            self._outstanding.discard(key)
            if payload is None:
                self.completer.complete([(key, ids)])
            else:  # the response as recorded, with its output tokens' count
                self.completer.complete_response(key, payload, len(ids))
            self.tokens_out += len(ids)
            self.completed += 1
            self.sources[source] = self.sources.get(source, 0) + 1

    def _error(self, key: int, message: str) -> None:
        with self._lock:
            # -1: not a sample's failure but the client's (a client process died idle)
            known = key in self._outstanding or (key == -1 and not self._stopped)
        if not known:
            return
        self.failures.record("endpoint request failed", message, 1)
        self.drain()

    # -- lifecycle ---------------------------------------------------------------------
    def warmup(self) -> None:
        """Start the client (its loop, its connection pool); the parent already checked
        that every server answers and streams."""
        self.client.start()

    def start(self) -> None:
        """Nothing more: requests start as LoadGen issues them."""

    def stop(self) -> None:
        with self._lock:
            self._stopped = True
        if self._cpu_start is not None and self._cpu_spent is None:
            cpu, wall = self._cpu_start
            self._cpu_spent = (cpu_s() - cpu, time.perf_counter() - wall)
        self.client.close()
        record = self.backend_record
        if record is not None and "parent" not in record.get("run", {}):
            # One assignment to a key that exists: a status written from another thread
            # at this moment sees the old record or the new one, never a dict resized.
            record["run"] = self.run_record()

    def run_record(self) -> dict[str, Any]:
        """What each client process spent and streamed (see the module docstring)."""
        start = self._cpu_start
        in_process = not self.workers
        workers = list(getattr(self.client, "records", []))
        return {
            "client_workers": self.workers,
            "wall_s": round(self._cpu_spent[1], 6) if self._cpu_spent else 0.0,
            "samples_issued": self.issued_samples,
            "samples_distinct": len(self._indices),
            # sent again after a server closed their kept-alive connection unanswered
            "requests_resent": self.client.resent,
            # LoadGen's process: the samples it completed; the SSE events it parsed
            # itself (none where worker processes stream)
            "parent": process_record(
                "loadgen", start[0] if start else None, self.completed,
                self.client.chunks if in_process else 0,
                streamed=self.client.requests if in_process else 0),
            "workers": workers,
            "workers_reported": len(workers),
            # how the completed streams ended, as the server said (finish_reason)
            "finish_reasons": dict(self.client.finish_reasons),
            # streams taken as the engine sent them, by rule (endpoint client)
            "reconciled": dict(self.client.reconciled),
            "errors": self._errors(),
        }

    def _errors(self) -> dict[str, int]:
        """The run's error figures: requests that failed, and those sent again (each
        one a connection the server closed unanswered)."""
        return {"requests_failed": len(self.failures.failures),
                "requests_resent": self.client.resent}

    def final_record(self) -> dict[str, Any]:
        """The run's record when the status is written: a run that ends without LoadGen
        returning (a failed Server run past its drain grace) stops the client here, so
        its processes' counts are in it too."""
        record = self.backend_record or {}
        if "parent" not in record.get("run", {}):
            self.stop()
        return dict(record.get("run", {}))

    def drain(self) -> None:
        """Answer every outstanding sample now (no tokens) and every later one at once."""
        with self._lock:
            first = not self.draining.is_set()
            self.draining.set()
            pending = sorted(self._outstanding)
            self._outstanding.clear()
            if pending:
                self.completer.complete_empty(pending)
        if first:
            self.client.cancel()  # nothing queued is sent any more
        if first and self._on_drain is not None:
            self._on_drain()

    def abandon(self) -> None:
        """Stop the client's loop (requests in flight are cancelled)."""
        self.client.close()

    def batch_profile(self) -> dict[str, Any]:
        worker_cpu = float(getattr(self.client, "worker_cpu_s", 0.0))
        return {"kind": "endpoint", "client_workers": self.workers,
                "requests": self.client.requests, "sse_events": self.client.chunks,
                "requests_resent": self.client.resent,
                "finish_reasons": dict(self.client.finish_reasons),
                "errors": self._errors(),
                "tokens": self.tokens_out, "token_ids_from": dict(self.sources),
                # CPU seconds of every client process (LoadGen's included) over the run
                **({"cpu_s": round(self._cpu_spent[0] + worker_cpu, 6),
                    "loadgen_process_cpu_s": round(self._cpu_spent[0], 6),
                    "wall_s": round(self._cpu_spent[1], 6)} if self._cpu_spent else {})}
