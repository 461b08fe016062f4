"""The generation backend seam and its torch implementation.

A generation backend advances sequences one token at a time and keeps each sequence's state
(its KV cache) between calls:

* ``prefill(seq, prompt)``: start sequence ``seq``; return its first generated token;
* ``decode()``: one step for every live sequence; return ``{seq: next token}``;
* ``release(seq)``: forget a finished sequence.

The batcher owns scheduling (who joins, who stops); the backend owns the arithmetic. Torch
on CPU implements it here; torch on CUDA is the same class with ``device="cuda"``; a remote
OpenAI-compatible or KServe streaming endpoint fits the same three calls (a stream per
sequence: open, read the next chunk, close).

Decoding is greedy. EOS is masked until a sequence has ``min_new_tokens`` tokens, because
LoadGen rejects ``n_tokens <= 1``.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from suite.errors import BackendError
from suite.llm.card import LLMCard, verify_weights

if TYPE_CHECKING:
    import torch


@dataclass(frozen=True)
class GenerationConfig:
    """The card's stop rule: EOS (kept in the output) or ``max_new_tokens``."""

    max_new_tokens: int
    min_new_tokens: int
    eos_id: int

    @classmethod
    def from_card(cls, card: LLMCard) -> GenerationConfig:
        return cls(card.generation.max_new_tokens, card.generation.min_new_tokens,
                   card.tokenizer.eos_id)

    def finished(self, tokens: Sequence[int]) -> bool:
        return len(tokens) >= self.max_new_tokens or (
            len(tokens) >= self.min_new_tokens and tokens[-1] == self.eos_id)


class GenerationBackend(Protocol):
    """Token-at-a-time generation with per-sequence state (see the module docstring)."""

    max_sequences: int

    def prefill(self, seq: int, prompt: Sequence[int]) -> int: ...

    def decode(self) -> dict[int, int]: ...

    def release(self, seq: int) -> None: ...


def _load_module(card: LLMCard) -> Any:
    file_name, _, class_name = card.model.torch_module.partition(":")
    path = card.directory / file_name
    module_name = f"_suite_llm_{card.name}_model"
    spec = importlib.util.spec_from_file_location(module_name, path)
    if spec is None or spec.loader is None:
        raise BackendError(f"cannot load {path} (named by {card.card_path})")
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module, class_name


def load_torch_model(card: LLMCard, device: str = "cpu") -> Any:
    """The card's model with its verified weights, in eval mode."""
    import torch

    verify_weights(card)
    module, class_name = _load_module(card)
    cfg = getattr(module, card.model.config_class)(**card.arch.model_dump(
        include={"vocab_size", "block_size", "n_layer", "n_head", "d_model"}))
    model = getattr(module, class_name)(cfg)
    state = torch.load(card.state_dict_path, map_location=device, weights_only=True)
    model.load_state_dict(state)
    return model.to(device).eval()


class TorchGenerationBackend:
    """Greedy generation on a ``model.py`` with ``prefill``/``decode`` over a KV pool.

    Live sequences occupy pool rows 0..n-1, so a decode step always runs on a contiguous
    view. A released row is left as a hole until the next step, which then refills each
    hole with the last live row's cache (one row copied each): rows released from the end
    cost nothing, so a wave of sequences that stop together (tinylm's outputs nearly all
    run to max_new_tokens) moves no cache at all, where refilling at each release copied
    a row for nearly every release but the last row's.
    """

    def __init__(self, card: LLMCard, max_sequences: int, device: str = "cpu",
                 threads: int = 0) -> None:
        import torch

        if threads:
            torch.set_num_threads(threads)
        self._torch = torch
        self.card = card
        self.config = GenerationConfig.from_card(card)
        self.device = device
        self.max_sequences = max_sequences
        self.model = load_torch_model(card, device)
        self.pool = self.model.new_pool(max_sequences)
        self._seqs: list[int | None] = []  # row -> seq (None: a hole, until _compact)
        self._holes = 0
        self._row: dict[int, int] = {}
        self._pos = torch.zeros(max_sequences, dtype=torch.long, device=device)
        self._last = torch.zeros(max_sequences, dtype=torch.long, device=device)
        #: Tokens so far of the rows still below ``min_new_tokens`` (EOS masked for them):
        #: only those, so a decode step's bookkeeping does not walk every live row.
        self._young: dict[int, int] = {}

    @property
    def live(self) -> int:
        return len(self._row)

    def _pick(self, logits: torch.Tensor, early: list[int]) -> torch.Tensor:
        """Greedy tokens for rows of ``logits`` (B, V); EOS masked in the ``early`` rows."""
        if early:
            logits = logits.clone()
            logits[early, self.config.eos_id] = float("-inf")
        return logits.argmax(dim=-1)

    def prefill(self, seq: int, prompt: Sequence[int]) -> int:
        torch = self._torch
        if seq in self._row:
            raise BackendError(f"sequence {seq} is already live")
        if self._holes:
            self._compact()
        if len(self._seqs) >= self.max_sequences:
            raise BackendError(f"no free slot: {self.max_sequences} sequences are live")
        row = len(self._seqs)
        ids = torch.tensor(list(prompt), dtype=torch.long, device=self.device)
        with torch.inference_mode():
            logits = self.model.prefill(ids, self.pool, row)
            token = self._pick(logits[None], [0] if self.config.min_new_tokens > 0 else [])[0]
        self._seqs.append(seq)
        self._row[seq] = row
        self._pos[row] = len(prompt)
        self._last[row] = token
        if self.config.min_new_tokens > 1:
            self._young[row] = 1
        return int(token)

    def decode(self) -> dict[int, int]:
        if self._holes:
            self._compact()
        n = len(self._seqs)
        if n == 0:
            return {}
        young = self._young
        with self._torch.inference_mode():
            logits = self.model.decode(self._last[:n], self._pos[:n], self.pool)
            tokens = self._pick(logits, list(young))
        self._pos[:n] += 1
        self._last[:n] = tokens
        for row in list(young):
            young[row] += 1
            if young[row] >= self.config.min_new_tokens:
                del young[row]
        return dict(zip(self._seqs, tokens.tolist(), strict=True))  # type: ignore[arg-type]

    def release(self, seq: int) -> None:
        row = self._row.pop(seq)
        self._young.pop(row, None)
        self._seqs[row] = None
        self._holes += 1
        self._trim()

    def _trim(self) -> None:
        """Drop the holes at the end of the rows: nothing needs to move into them."""
        seqs = self._seqs
        while seqs and seqs[-1] is None:
            seqs.pop()
            self._holes -= 1

    def _compact(self) -> None:
        """Fill each hole with the last live row, so rows 0..n-1 are the live ones."""
        seqs, young = self._seqs, self._young
        row = 0
        while row < len(seqs):
            if seqs[row] is None:
                last = len(seqs) - 1  # live: _trim keeps the last row live
                moved = seqs.pop()
                assert moved is not None
                self.pool.move(last, row)
                self._pos[row] = self._pos[last]
                self._last[row] = self._last[last]
                if last in young:
                    young[row] = young.pop(last)
                seqs[row] = moved
                self._row[moved] = row
                self._holes -= 1
                self._trim()
            row += 1


def generate(backend: GenerationBackend, config: GenerationConfig, prompt: Sequence[int],
             seq: int = -1) -> list[int]:
    """One sequence alone (batch of 1), from prefill to its stop rule: the reference path."""
    tokens = [backend.prefill(seq, prompt)]
    while not config.finished(tokens):
        tokens.append(backend.decode()[seq])
    backend.release(seq)
    return tokens
