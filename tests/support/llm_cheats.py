"""Dishonest LLM SUTs for TEST06's tests: the real backend, a completer that cheats.

Named as custom backends (``tests.support.llm_cheats:FirstTokenLiar``), so they run in the real
child process under the real LoadGen; only what they tell LoadGen is wrong.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from suite.harness.loadgen import TokenCompleter
from suite.llm.backend import TorchLLMBackend


class _LyingFirstToken(TokenCompleter):
    def first_token(self, qid: int, token: int) -> None:
        super().first_token(qid, token + 1)  # not the output's first token


class _InflatedCount(TokenCompleter):
    def complete(self, items: Sequence[tuple[int, Sequence[int]]]) -> None:
        import mlperf_loadgen as lg

        payloads = [np.asarray(tokens, dtype=np.int32) for _, tokens in items]
        lg.QuerySamplesComplete([
            lg.QuerySampleResponse(qid, p.ctypes.data, p.nbytes, len(p) + 3)  # claims more
            for (qid, _), p in zip(items, payloads, strict=True)])
        self.completed += len(items)


class FirstTokenLiar(TorchLLMBackend):
    """Reports a first token that differs from the final output's first token."""

    def make_completer(self) -> TokenCompleter:
        return _LyingFirstToken()


class TokenCountInflater(TorchLLMBackend):
    """Reports more tokens (``n_tokens``) than it produced."""

    def make_completer(self) -> TokenCompleter:
        return _InflatedCount()
