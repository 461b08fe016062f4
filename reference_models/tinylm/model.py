"""Char-level decoder-only transformer (the embedded ``tinylm`` benchmark) with a KV cache.

This file imports nothing but torch: the LLM backend and ``train.py`` load it by file path
(``model.toml`` names it as ``model.py:TinyLM``), so it must not depend on the rest of the
project being importable.

Two ways to run it:

* ``forward(idx)``: the training path, causal attention over a whole (B, T) block.
* ``prefill`` / ``decode``: the generation path. Each sequence owns one row ("slot") of a
  :class:`KVPool`. ``prefill`` runs one prompt and writes its keys/values into its slot;
  ``decode`` advances any set of slots by one token each, every slot at its own position,
  so sequences of different lengths share one batched step and nothing is recomputed.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F


@dataclass(frozen=True)
class TinyLMConfig:
    """Shape of the model; ``model.toml`` [architecture] records the committed values."""

    vocab_size: int
    block_size: int = 192
    n_layer: int = 3
    n_head: int = 4
    d_model: int = 128


class KVPool:
    """Keys and values for up to ``slots`` sequences of up to ``block_size`` tokens.

    Shape per layer: (slots, heads, block_size, head_dim). A slot is one sequence's
    private cache; :meth:`move` lets a batcher keep its live slots packed at the front
    (rows 0..n-1), so a decode step works on a view, not a gathered copy.
    """

    def __init__(self, cfg: TinyLMConfig, slots: int, device: torch.device | str = "cpu") -> None:
        head_dim = cfg.d_model // cfg.n_head
        shape = (cfg.n_layer, slots, cfg.n_head, cfg.block_size, head_dim)
        self.k = torch.zeros(shape, device=device)
        self.v = torch.zeros(shape, device=device)
        self.slots = slots

    def move(self, src: int, dst: int) -> None:
        """Copy slot ``src``'s cache into slot ``dst`` (the source slot is then free)."""
        self.k[:, dst] = self.k[:, src]
        self.v[:, dst] = self.v[:, src]


class Block(nn.Module):
    """Pre-norm transformer block: causal self-attention then a 4x GELU MLP."""

    def __init__(self, cfg: TinyLMConfig) -> None:
        super().__init__()
        self.n_head = cfg.n_head
        self.ln1 = nn.LayerNorm(cfg.d_model)
        self.qkv = nn.Linear(cfg.d_model, 3 * cfg.d_model)
        self.proj = nn.Linear(cfg.d_model, cfg.d_model)
        self.ln2 = nn.LayerNorm(cfg.d_model)
        self.fc = nn.Linear(cfg.d_model, 4 * cfg.d_model)
        self.fc_out = nn.Linear(4 * cfg.d_model, cfg.d_model)

    def _heads(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        shape = (b, t, self.n_head, c // self.n_head)
        return (q.view(shape).transpose(1, 2), k.view(shape).transpose(1, 2),
                v.view(shape).transpose(1, 2))

    def _finish(self, x: torch.Tensor, att: torch.Tensor) -> torch.Tensor:
        b, _, t, _ = att.shape
        x = x + self.proj(att.transpose(1, 2).reshape(b, t, -1))
        return x + self.fc_out(F.gelu(self.fc(self.ln2(x))))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self._heads(x)
        return self._finish(x, F.scaled_dot_product_attention(q, k, v, is_causal=True))

    def prefill(self, x: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
                slot: int) -> torch.Tensor:
        """x: (1, T, C); writes positions 0..T-1 of ``slot``."""
        q, k, v = self._heads(x)
        t = x.shape[1]
        k_cache[slot, :, :t] = k[0]
        v_cache[slot, :, :t] = v[0]
        return self._finish(x, F.scaled_dot_product_attention(q, k, v, is_causal=True))

    def decode(self, x: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor,
               pos: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """x: (B, 1, C) for slots 0..B-1; token b sits at position pos[b]."""
        q, k, v = self._heads(x)
        rows = torch.arange(x.shape[0], device=x.device)
        k_cache[rows, :, pos] = k[:, :, 0]
        v_cache[rows, :, pos] = v[:, :, 0]
        span = mask.shape[-1]
        keys = k_cache[: x.shape[0], :, :span]
        values = v_cache[: x.shape[0], :, :span]
        att = (q @ keys.transpose(-2, -1)) / math.sqrt(q.shape[-1])
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        return self._finish(x, att @ values)


class TinyLM(nn.Module):
    """Token + learned position embeddings, ``n_layer`` blocks, a tied output head."""

    def __init__(self, cfg: TinyLMConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.tok = nn.Embedding(cfg.vocab_size, cfg.d_model)
        self.pos = nn.Embedding(cfg.block_size, cfg.d_model)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.d_model)
        self.apply(self._init)

    @staticmethod
    def _init(module: nn.Module) -> None:
        # GPT-2 style: small normal weights, so the tied head starts near uniform logits.
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            nn.init.zeros_(module.bias)

    def _logits(self, x: torch.Tensor) -> torch.Tensor:
        return self.ln_f(x) @ self.tok.weight.T  # tied weights: no separate head matrix

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        """Logits (B, T, V) for every position of a (B, T) int64 block."""
        t = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(t, device=idx.device))
        for block in self.blocks:
            x = block(x)
        return self._logits(x)

    def new_pool(self, slots: int) -> KVPool:
        return KVPool(self.cfg, slots, self.tok.weight.device)

    @torch.no_grad()
    def prefill(self, prompt: torch.Tensor, pool: KVPool, slot: int) -> torch.Tensor:
        """Run one prompt (1-D int64) into ``slot``; return the last position's logits (V,)."""
        t = prompt.shape[0]
        if t > self.cfg.block_size:
            raise ValueError(f"prompt of {t} tokens exceeds block_size {self.cfg.block_size}")
        x = self.tok(prompt[None]) + self.pos(torch.arange(t, device=prompt.device))
        for i, block in enumerate(self.blocks):
            x = block.prefill(x, pool.k[i], pool.v[i], slot)
        return self._logits(x[0, -1])

    @torch.no_grad()
    def decode(self, tokens: torch.Tensor, pos: torch.Tensor, pool: KVPool) -> torch.Tensor:
        """One step for slots 0..B-1: ``tokens[b]`` at position ``pos[b]``; logits (B, V)."""
        if int(pos.max()) >= self.cfg.block_size:
            raise ValueError(f"decode position {int(pos.max())} exceeds block_size "
                             f"{self.cfg.block_size}")
        span = int(pos.max()) + 1
        # mask[b, 0, 0, j]: slot b may attend to position j (its own past and itself).
        mask = (torch.arange(span, device=pos.device)[None, :] <= pos[:, None])[:, None, None, :]
        x = self.tok(tokens[:, None]) + self.pos(pos[:, None])
        for i, block in enumerate(self.blocks):
            x = block.decode(x, pool.k[i], pool.v[i], pos, mask)
        return self._logits(x[:, 0])
