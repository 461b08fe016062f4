"""Continuous batching over a ``GenerationBackend`` (and the static baseline it must beat).

``ContinuousBatcher.step()`` is one scheduling round: waiting requests join (prefill, and
their first token is reported at once) while there is room, then every live sequence
advances one decode step together, and each one that meets its stop rule leaves at once,
freeing its slot for the next round. A new request therefore joins at the next decode step,
never waiting for the batch to finish, and no sequence's KV cache is ever recomputed.

``start()`` runs ``step()`` on one thread until ``stop()``; tests drive ``step()`` directly.
The baselines: ``static=True`` admits a new batch only when the running one has finished
(a static-batching server), and ``static_generate`` decodes fixed batches offline.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from suite.llm.generation import GenerationBackend, GenerationConfig


@dataclass
class Request:
    """A prompt to complete; ``key`` is the caller's id (LoadGen's query sample id)."""

    key: int
    prompt: Sequence[int]
    tokens: list[int] = field(default_factory=list)


#: (key, first token), called as soon as a sequence's first token exists.
FirstTokenCallback = Callable[[int, int], None]
#: The requests that finished in one step, with their tokens.
CompleteCallback = Callable[[list[Request]], None]


class ContinuousBatcher:
    """Sequences join and leave the running batch at every decode step."""

    def __init__(self, backend: GenerationBackend, config: GenerationConfig,
                 on_first_token: FirstTokenCallback | None, on_complete: CompleteCallback,
                 max_batch: int | None = None, static: bool = False) -> None:
        self.backend = backend
        #: The baseline policy: admit a new batch only once every live sequence stopped.
        self.static = static
        self.config = config
        self.on_first_token = on_first_token
        self.on_complete = on_complete
        self.max_batch = min(max_batch or backend.max_sequences, backend.max_sequences)
        self._waiting: deque[Request] = deque()
        self._live: dict[int, Request] = {}
        self._next_seq = 0
        self._cond = threading.Condition()
        self._stopping = False
        self._thread: threading.Thread | None = None
        #: Live sequences in each decode step (for the batch profile and the tests).
        self.step_sizes: list[int] = []
        self.error: BaseException | None = None

    def submit(self, requests: Sequence[Request]) -> None:
        with self._cond:
            self._waiting.extend(requests)
            self._cond.notify()

    @property
    def live(self) -> int:
        return len(self._live)

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def step(self) -> list[Request]:
        """Admit what fits, decode once, retire what stopped; return the finished requests."""
        finished: list[Request] = []
        admitting = not (self.static and self._live)  # static: only into an empty batch
        while admitting and len(self._live) < self.max_batch:
            with self._cond:
                if not self._waiting:
                    break
                request = self._waiting.popleft()
            seq, self._next_seq = self._next_seq, self._next_seq + 1
            request.tokens = [self.backend.prefill(seq, request.prompt)]
            if self.on_first_token is not None:
                self.on_first_token(request.key, request.tokens[0])
            if self.config.finished(request.tokens):
                self.backend.release(seq)
                finished.append(request)
            else:
                self._live[seq] = request
        if self._live:
            live = self._live
            self.step_sizes.append(len(live))
            # GenerationConfig.finished, inlined: this loop runs once per generated token
            longest, shortest = self.config.max_new_tokens, self.config.min_new_tokens
            eos = self.config.eos_id
            for seq, token in self.backend.decode().items():
                request = live[seq]
                tokens = request.tokens
                tokens.append(token)
                if len(tokens) >= longest or (token == eos and len(tokens) >= shortest):
                    del live[seq]
                    self.backend.release(seq)
                    finished.append(request)
        if finished:
            self.on_complete(finished)
        return finished

    def drain_pending(self) -> list[Request]:
        """Remove and return every waiting and live request (a stop or a failure)."""
        with self._cond:
            pending = list(self._waiting)
            self._waiting.clear()
        for seq, request in list(self._live.items()):
            self.backend.release(seq)
            pending.append(request)
        self._live.clear()
        return pending

    def _loop(self) -> None:
        try:
            while True:
                with self._cond:
                    while not self._stopping and not self._waiting and not self._live:
                        self._cond.wait()
                    if self._stopping:
                        return
                self.step()
        except BaseException as exc:
            self.error = exc
            with self._cond:
                self._stopping = True

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="llm-batcher", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        with self._cond:
            self._stopping = True
            self._cond.notify_all()
        if self._thread is not None:
            self._thread.join(timeout)


def static_generate(backend: GenerationBackend, config: GenerationConfig,
                    prompts: Sequence[Sequence[int]], batch: int) -> list[list[int]]:
    """The baseline: fixed batches of ``batch`` prompts, each decoded until all stop.

    A finished sequence keeps its slot (and is still computed) until the whole batch is
    done, as a static-batching server would; its extra tokens are discarded.
    """
    outputs: list[list[int]] = []
    for start in range(0, len(prompts), batch):
        group = list(range(start, min(start + batch, len(prompts))))
        tokens = {i: [backend.prefill(i, prompts[i])] for i in group}
        while not all(config.finished(t) for t in tokens.values()):
            for seq, token in backend.decode().items():
                if not config.finished(tokens[seq]):
                    tokens[seq].append(token)
        for i in group:
            backend.release(i)
            outputs.append(tokens[i])
    return outputs
