"""Continuous batching on the committed tinylm weights (real torch, no LoadGen).

Sequences join the running batch at the next decode step and leave when they stop; each
one's tokens must equal its batch-of-1 output, and the KV pool must stay packed.
"""

from __future__ import annotations

from functools import cache

import pytest

from suite.llm.batcher import ContinuousBatcher, Request, static_generate
from suite.llm.card import load_llm_card
from suite.llm.dataset import LLMDataset
from suite.llm.generation import GenerationConfig, TorchGenerationBackend, generate
from suite.paths import find_paths

pytest.importorskip("torch", reason="the LLM backend needs torch (pip install -e '.[torch]')")

N = 10


@cache
def _setup() -> tuple[TorchGenerationBackend, LLMDataset, GenerationConfig, list[list[int]]]:
    card = load_llm_card(find_paths(), "tinylm")
    dataset = LLMDataset(card)
    backend = TorchGenerationBackend(card, 8, threads=1)
    config = GenerationConfig.from_card(card)
    alone = [generate(backend, config, dataset.prompts[i]) for i in range(N)]
    return backend, dataset, config, alone


def test_sequences_join_and_leave_mid_batch_with_their_batch_of_1_output() -> None:
    backend, dataset, config, alone = _setup()
    done: dict[int, list[int]] = {}
    firsts: dict[int, int] = {}
    finished_at: dict[int, int] = {}
    batcher = ContinuousBatcher(
        backend, config, lambda key, tok: firsts.setdefault(key, tok),
        lambda reqs: done.update({r.key: list(r.tokens) for r in reqs}), max_batch=4)
    batcher.submit([Request(i, dataset.prompts[i]) for i in range(3)])
    steps = 0
    for _ in range(3):  # three sequences decode alone for a while
        steps += 1
        batcher.step()
    assert batcher.live == 3
    batcher.submit([Request(i, dataset.prompts[i]) for i in range(3, N)])
    while batcher.live or batcher.waiting:
        steps += 1
        for request in batcher.step():
            finished_at[request.key] = steps
    assert done == {i: alone[i] for i in range(N)}
    assert firsts == {i: alone[i][0] for i in range(N)}
    # Joined mid-batch: the 4th sequence shared steps with sequences already decoding.
    assert batcher.step_sizes[:3] == [3, 3, 3] and batcher.step_sizes[3] == 4
    # Left mid-batch: sequences stop at different steps and their slots are reused.
    assert len(set(finished_at.values())) > 1
    assert len({len(t) for t in alone}) > 1, "the prompts should stop at different lengths"
    assert backend.live == 0


def test_eos_stops_a_sequence_and_is_its_last_token() -> None:
    _, _, config, alone = _setup()
    for tokens in alone:
        assert 2 <= len(tokens) <= config.max_new_tokens
        assert config.eos_id not in tokens[:-1]
        assert tokens[-1] == config.eos_id or len(tokens) == config.max_new_tokens
    assert any(t[-1] == config.eos_id for t in alone), "no prompt stopped on EOS"


def test_static_batching_baseline_gives_the_same_outputs() -> None:
    backend, dataset, config, alone = _setup()
    assert static_generate(backend, config, dataset.prompts[:N], 4) == alone
    assert backend.live == 0


def test_min_new_tokens_masks_eos_on_the_first_token() -> None:
    config = GenerationConfig(max_new_tokens=5, min_new_tokens=2, eos_id=0)
    assert not config.finished([0])  # an EOS first token does not stop the sequence
    assert config.finished([3, 0])
    assert config.finished([1, 2, 3, 4, 5])
    backend, _, _, _ = _setup()
    import torch

    logits = torch.zeros(2, 83)
    logits[:, 0] = 10.0  # EOS is the argmax of both rows
    picked = backend._pick(logits, [0])  # row 0 is below min_new_tokens, row 1 is not
    assert picked.tolist()[0] != 0 and picked.tolist()[1] == 0


def test_eos_masking_follows_each_row_when_rows_move() -> None:
    """A stop token the model often picks ('e'), masked for the first 4 tokens: rows join
    and leave mid-batch (so young rows are moved into holes), and every output must still
    equal its batch-of-1 output with no stop token among its first 3 tokens."""
    card = load_llm_card(find_paths(), "tinylm")
    dataset = LLMDataset(card)
    backend = TorchGenerationBackend(card, 4, threads=1)
    config = GenerationConfig(max_new_tokens=12, min_new_tokens=4,
                              eos_id=dataset.tokenizer.encode("e")[0])
    backend.config = config  # the backend masks by its own config
    alone = [generate(backend, config, dataset.prompts[i]) for i in range(N)]
    assert any(config.eos_id in t for t in alone), "the stop token should occur"
    assert all(config.eos_id not in t[:3] for t in alone)
    done: dict[int, list[int]] = {}
    batcher = ContinuousBatcher(backend, config, None,
                                lambda reqs: done.update({r.key: list(r.tokens) for r in reqs}))
    for i in range(N):  # one joins per step, so young and old rows share every step
        batcher.submit([Request(i, dataset.prompts[i])])
        batcher.step()
    while batcher.live or batcher.waiting:
        batcher.step()
    assert done == {i: alone[i] for i in range(N)}
    assert len({len(t) for t in alone}) > 1, "the outputs should stop at different lengths"


def test_rows_released_together_move_no_cache_and_holes_are_refilled() -> None:
    """A wave that stops together leaves nothing to move; a hole in the middle is
    refilled from the last live row before the next step, and every output still equals
    its batch-of-1 output."""
    backend, dataset, _, alone = _setup()
    moves: list[tuple[int, int]] = []
    move = backend.pool.move

    def counted(src: int, dst: int) -> None:
        moves.append((src, dst))
        move(src, dst)

    backend.pool.move = counted  # type: ignore[method-assign]
    try:
        for seq in range(4):
            backend.prefill(seq, dataset.prompts[seq])
        for seq in range(4):  # the whole wave stops at once: no row is moved
            backend.release(seq)
        assert moves == [] and backend.live == 0
        tokens = {seq: [backend.prefill(seq, dataset.prompts[seq])] for seq in range(3)}
        backend.release(0)  # a hole at row 0: filled by row 2 before the next step
        del tokens[0]
        while any(len(t) < len(alone[s]) for s, t in tokens.items()):
            for seq, token in backend.decode().items():
                tokens[seq].append(token)
            for seq in [s for s, t in tokens.items() if len(t) == len(alone[s])]:
                backend.release(seq)
                assert tokens[seq] == alone[seq]
                tokens[seq].append(-1)  # done: stop comparing
        assert moves[0] == (2, 0) and backend.live == 0
    finally:
        backend.pool.move = move  # type: ignore[method-assign]
