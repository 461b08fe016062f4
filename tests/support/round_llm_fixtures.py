"""Small files in the official formats of the round's LLM datasets, from our own text.

The real datasets and weights are the user's; the tests use these instead:

* a tokenizer directory in the real one's on-disk layout (``tokenizer.json``,
  ``tokenizer_config.json``): a byte-level BPE trained on tinylm's dataset text, with
  ``<s>``/``</s>`` special tokens;
* ``cnn_eval.json`` (llama3.1-8b's format): a JSON list of records with ``instruction``,
  ``input`` (the article), ``tok_input`` (the full prompt's ids) and ``output``;
* ``open_orca_gpt4_tokenized_llama.sampled_24576.pkl`` (llama2-70b's): a pickled pandas
  DataFrame with the reference's columns;
* ``engine_cnn_records`` (for a real engine serving exported tinylm): llama3.1-8b's format
  with tinylm's own text and tokenizer, whose reference outputs are tinylm's in-process
  greedy continuations under llama3.1-8b's generation settings, so that the engine's
  outputs, decoded and scored the round's way, reproduce them.

    python -m tests.support.round_llm_fixtures OUT_DIR [--samples 16]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
TEMPLATE = ("Summarize the following news article in 128 tokens. Please output the summary "
            "only, without any other text.\n\nArticle:\n{input}\n\nSummary:")


def _texts() -> list[dict[str, str]]:
    data = json.loads((REPO / "reference_models" / "tinylm" / "dataset.json").read_text())
    return [{"article": s["prompt"].replace("\u0003", " ").strip(),
             "summary": s["reference"].replace("\u0003", " ").strip() or "Nothing."}
            for s in data["samples"]]


def write_tokenizer(model_dir: Path, vocab_size: int = 400) -> Path:
    """A byte-level BPE ``tokenizer.json`` trained on tinylm's text (seconds, offline)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<unk>", "<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    texts = [t for pair in _texts() for t in (pair["article"], pair["summary"], TEMPLATE)]
    tokenizer.train_from_iterator(texts, trainer)
    model_dir.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(model_dir / "tokenizer.json"))
    (model_dir / "tokenizer_config.json").write_text(json.dumps(
        {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>",
         "tokenizer_class": "PreTrainedTokenizerFast"}, indent=2) + "\n")
    return model_dir / "tokenizer.json"


def _encode(tokenizer_json: Path, text: str) -> list[int]:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_file(str(tokenizer_json))
    return [1, *tokenizer.encode(text).ids]  # BOS first, as the reference's encode()


def cnn_records(tokenizer_json: Path, samples: int) -> list[dict[str, Any]]:
    return [{"instruction": {"llama": TEMPLATE}, "input": t["article"],
             "tok_input": _encode(tokenizer_json, TEMPLATE.format(input=t["article"])),
             "output": t["summary"]} for t in _texts()[:samples]]


def write_cnn(out: Path, tokenizer_json: Path, samples: int) -> Path:
    path = out / "cnn_eval.json"
    path.write_text(json.dumps(cnn_records(tokenizer_json, samples), indent=4,
                               ensure_ascii=False), encoding="utf-8")
    return path


def write_open_orca(out: Path, tokenizer_json: Path, samples: int) -> Path:
    import pandas as pd

    rows = []
    for index, t in enumerate(_texts()[:samples]):
        prompt = f"<s>[INST] {t['article']} [/INST]"
        ids = [*_encode(tokenizer_json, prompt)[1:], 5]  # the reference appends a token too
        rows.append({"id": f"fixture.{index}", "system_prompt": "", "question": t["article"],
                     "output": t["summary"], "input": prompt, "tok_input": ids,
                     "tok_input_length": len(ids), "tok_output_length": 16,
                     "origin": "fixture"})
    path = out / "open_orca_gpt4_tokenized_llama.sampled_24576.pkl"
    pd.DataFrame(rows).to_pickle(path)
    return path


def engine_cnn_records(model_dir: Path, samples: int) -> list[dict[str, Any]]:
    """llama3.1-8b records for exported tinylm (``model_dir``): the last 64 characters of
    tinylm's prompts (64 + llama3.1-8b's 128 output tokens fill tinylm's 192 positions)
    and, as ``output``, the in-process greedy continuation with llama3.1-8b's stop rule
    (128 tokens, at least 1, tinylm's EOS), decoded by the exported tokenizer."""
    from suite.llm.card import load_llm_card
    from suite.llm.dataset import HFTokenizer
    from suite.llm.generation import GenerationConfig, TorchGenerationBackend, generate
    from suite.paths import find_paths

    card = load_llm_card(find_paths(), "tinylm")
    tokenizer = HFTokenizer(model_dir / "tokenizer.json", card.tokenizer.eos_id)
    backend = TorchGenerationBackend(card, max_sequences=1, threads=1)
    backend.config = rule = GenerationConfig(128, 1, card.tokenizer.eos_id)
    data = json.loads((REPO / "reference_models" / "tinylm" / "dataset.json").read_text())
    records: list[dict[str, Any]] = []
    for sample in data["samples"]:
        if len(records) == samples:
            break
        prompt = sample["prompt"][-64:]
        ids = tokenizer.encode(prompt)
        output = generate(backend, rule, ids)
        if len(output) < 2:  # LoadGen needs 2 tokens for TPOT; the round's data has no such
            continue
        records.append({"instruction": {"llama": "{input}"}, "input": prompt,
                        "tok_input": ids, "output": tokenizer.decode(output)})
    return records


def write_engine_cnn(out: Path, model_dir: Path, samples: int) -> Path:
    path = out / "cnn_eval.json"
    out.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(engine_cnn_records(model_dir, samples), indent=1,
                               ensure_ascii=False), encoding="utf-8")
    return path


def build(out: Path, samples: int = 16) -> dict[str, Path]:
    """Every fixture under ``out``; their paths by name."""
    tokenizer = write_tokenizer(out / "model")
    return {"model": out / "model", "cnn": write_cnn(out, tokenizer, samples),
            "orca": write_open_orca(out, tokenizer, samples)}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("--samples", type=int, default=16)
    args = parser.parse_args()
    for name, path in build(args.out, args.samples).items():
        print(f"{name}: {path}")
