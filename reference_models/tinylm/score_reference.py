"""Score the committed fp32 weights on the whole dataset: the card's [accuracy] reference.

Generates every sample with the suite's torch generation backend (greedy, the card's stop
rule; continuous batching gives each sample its batch-of-1 output, which the tests check),
then prints ROUGE-1/2/L and the mean tokens per sample for ``model.toml``.

Usage: ``.venv/bin/python reference_models/tinylm/score_reference.py [--out outputs.json]``
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from suite.llm.accuracy import score
from suite.llm.batcher import ContinuousBatcher, Request
from suite.llm.card import load_llm_card
from suite.llm.dataset import LLMDataset
from suite.llm.generation import GenerationConfig, TorchGenerationBackend
from suite.paths import find_paths


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", type=Path, help="write every sample's tokens and text here")
    args = ap.parse_args()
    card = load_llm_card(find_paths(), "tinylm")
    dataset = LLMDataset(card)
    backend = TorchGenerationBackend(card, 16, threads=1)
    outputs: dict[int, list[int]] = {}
    batcher = ContinuousBatcher(backend, GenerationConfig.from_card(card), None,
                                lambda done: outputs.update({r.key: r.tokens for r in done}))
    batcher.submit([Request(i, p) for i, p in enumerate(dataset.prompts)])
    start = time.perf_counter()
    while batcher.live or batcher.waiting:
        batcher.step()
    elapsed = time.perf_counter() - start
    ordered = [outputs[i] for i in range(dataset.total_count)]
    texts = [dataset.tokenizer.decode(o) for o in ordered]
    scores, per_sample, _ = score(ordered, texts, dataset.references, card, 0.0)
    print(json.dumps({**scores, "tokens_per_sample": per_sample,
                      "samples": dataset.total_count,
                      "tokens_per_second": round(sum(map(len, ordered)) / elapsed, 1)}))
    if args.out:
        args.out.write_text(json.dumps([{"tokens": o, "text": t}
                                        for o, t in zip(ordered, texts, strict=True)]) + "\n")


if __name__ == "__main__":
    main()
