"""The LLM system under test: LoadGen's queries into a continuous batcher, tokens back.

Each issued sample becomes a ``Request`` for the ``ContinuousBatcher`` (one thread). When
its first token exists the SUT calls ``FirstTokenComplete`` (not in Offline, where LoadGen
needs none), and when it stops, ``QuerySamplesComplete`` with its int32 token ids and
``n_tokens``. It offers the same surface as ``suite.harness.sut.core.SystemUnderTest`` to the child
process (``issue``/``flush``/``load``/``unload``, ``warmup``/``start``/``stop``/``drain``,
``failures``, ``completer``, the batch profile), so ``suite.harness.child`` runs it unchanged.
"""

from __future__ import annotations

import threading
import time
import traceback
from collections.abc import Callable
from typing import Any

from suite.harness.loadgen import TokenCompleter
from suite.harness.sut.failures import FailureLog
from suite.llm.batcher import ContinuousBatcher, Request
from suite.llm.dataset import LLMDataset
from suite.llm.generation import GenerationBackend, GenerationConfig, generate


class LLMSystemUnderTest:
    """Continuous-batching SUT with token latencies (see the module docstring)."""

    def __init__(self, backend: GenerationBackend, dataset: LLMDataset,
                 config: GenerationConfig, completer: TokenCompleter, *,
                 report_first_token: bool, max_batch: int,
                 on_drain: Callable[[], None] | None = None, static: bool = False) -> None:
        self.backend = backend
        self.dataset = dataset
        self.config = config
        self.completer = completer
        self.report_first_token = report_first_token
        self.failures = FailureLog()
        self.draining = threading.Event()
        self._on_drain = on_drain
        self.issue_calls = 0
        self.issued_samples = 0
        self.derived: dict[str, float] = {}
        self.tokens_out = 0
        #: The process's CPU seconds (every thread: LoadGen's, the batcher, the SUT's) and
        #: the wall seconds from LoadGen's first query to ``stop``: the run's own cost per
        #: token, without start-up and model load (bench_llm's CPU figures read it).
        self._cpu_start: tuple[float, float] | None = None
        self._cpu_spent: tuple[float, float] | None = None
        self._lock = threading.Lock()  # LoadGen calls and drain never interleave
        self.batcher = ContinuousBatcher(
            backend, config, self._first_token if report_first_token else None,
            self._complete, max_batch, static)

    # -- LoadGen's callbacks -----------------------------------------------------------
    def issue(self, ids: list[int], indices: list[int]) -> None:
        self.issue_calls += 1
        self.issued_samples += len(ids)  # the live estimate's backlog (Offline: one call)
        if self._cpu_start is None:
            self._cpu_start = (time.process_time(), time.perf_counter())
        if self.draining.is_set():
            self.completer.complete_empty(ids)
            return
        prompts = self.dataset.prompts
        self.batcher.submit([Request(qid, prompts[i]) for qid, i in zip(ids, indices,
                                                                         strict=True)])

    def flush(self) -> None:
        """Nothing is held back: the batcher admits every request at its next step."""

    def load(self, indices: list[int]) -> None:
        self.dataset.load(indices)

    def unload(self, indices: list[int]) -> None:
        self.dataset.unload(indices)

    # -- the batcher's callbacks (its own thread) --------------------------------------
    def _first_token(self, key: int, token: int) -> None:
        with self._lock:
            if not self.draining.is_set():
                self.completer.first_token(key, token)

    def _complete(self, finished: list[Request]) -> None:
        # Even while draining: these left the batcher in its last step, so the drain (which
        # answers what is still waiting or live once the batcher has stopped) never sees them.
        with self._lock:
            self.completer.complete([(r.key, r.tokens) for r in finished])
            self.tokens_out += sum(len(r.tokens) for r in finished)

    # -- lifecycle ---------------------------------------------------------------------
    def warmup(self) -> None:
        """Generate one sample alone before LoadGen starts (allocators, kernels)."""
        generate(self.backend, self.config, self.dataset.prompts[0], seq=-1)

    def start(self) -> None:
        self.batcher.start()
        threading.Thread(target=self._watch, name="llm-watch", daemon=True).start()

    def _watch(self) -> None:
        """A batcher failure fails the test and answers the outstanding samples."""
        while not self.draining.wait(0.2):
            error = self.batcher.error
            if error is not None:
                trace = "".join(traceback.format_exception(error))
                pending = self.batcher.live + self.batcher.waiting
                self.failures.record("generation failed", f"{type(error).__name__}: {error}",
                                     pending, trace)
                self.drain()  # answers the pending samples (no tokens) and all later ones
                return

    def stop(self) -> None:
        self.batcher.stop()
        if self._cpu_start is not None and self._cpu_spent is None:
            cpu, wall = self._cpu_start
            self._cpu_spent = (time.process_time() - cpu, time.perf_counter() - wall)

    def drain(self) -> None:
        """Answer every outstanding sample now (no tokens) and every later one at once."""
        with self._lock:
            first = not self.draining.is_set()
            self.draining.set()
        self.batcher.stop()
        pending = self.batcher.drain_pending()
        if pending:
            self.completer.complete_empty([r.key for r in pending])
        if first and self._on_drain is not None:
            self._on_drain()

    def abandon(self) -> None:
        """No worker processes to stop: the batcher is a daemon thread."""

    def batch_profile(self) -> dict[str, Any]:
        sizes = self.batcher.step_sizes
        return {"kind": "static" if self.batcher.static else "continuous",
                "decode_steps": len(sizes),
                "mean_live": round(sum(sizes) / len(sizes), 3) if sizes else 0.0,
                "max_live": max(sizes, default=0), "tokens": self.tokens_out,
                **({"cpu_s": round(self._cpu_spent[0], 6), "wall_s": round(self._cpu_spent[1], 6)}
                   if self._cpu_spent else {})}
