"""bert's stand-in: a tiny SQuAD v1.1 dataset, its vocabulary and a BERT-shaped ONNX model.

Written offline in well under a second, for runs and tests without the real download:

* ``dev-v1.1.json`` in SQuAD v1.1's format: a few articles whose paragraphs mention
  people by name among filler words; each question asks for the name after a given word,
  and its answer is that name (with ``answer_start``), sometimes with a comma or full stop
  glued to the context word. Some contexts are long enough to need several 384-token
  windows, so the sliding window and max-context rules are exercised;
* ``vocab.txt``: ``[PAD] [UNK] [CLS] [SEP] [MASK]``, the punctuation, the words, and a few
  ``##`` continuation pieces (some context words are split into two pieces);
* ``bert-standin.onnx``: the official inputs (``input_ids``, ``input_mask``,
  ``segment_ids``, int64 ``[-1, 384]``) and outputs (``output_start_logits``,
  ``output_end_logits``, float32 ``[-1, 384]``): a per-token score looked up in two fixed
  tables (first names score high as starts, surnames as ends, everything else low, with
  seeded noise), -10000 outside the context. It runs thousands of windows per second on
  a CPU, and its answers are right for some questions and wrong for others, so accuracy
  mode gives a real, stable F1 (not a high one).
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np

from suite.tasks.base import StandIn
from suite.tasks.squad_features import Options, build_features, read_examples
from suite.tasks.squad_text import SPECIAL_TOKENS, WordPiece, load_vocab

MODEL_FILE = "bert-standin.onnx"
_FIRST = ("marie", "ada", "alan", "grace", "niels", "rosalind", "enrico", "lise",
          "emmy", "srinivasa", "carl", "dorothy")
_LAST = ("curie", "lovelace", "turing", "hopper", "bohr", "franklin", "fermi", "meitner",
         "noether", "ramanujan", "gauss", "hodgkin")
_FILLER = ("the", "a", "of", "in", "and", "was", "with", "by", "from", "city", "river",
           "school", "paper", "study", "result", "theory", "year", "work", "field",
           "prize", "letter", "method", "early", "later", "famous", "small", "new",
           "old", "first", "last", "wrote", "met", "taught", "visited", "read", "found")
#: Context words absent from the vocabulary whole, split into two pieces.
_SPLIT = (("work", "ing"), ("teach", "es"), ("found", "ed"), ("letter", "s"))
_PUNCT = ",.?;'()-"
_MAX_SEQ = Options().max_seq_length


def _vocab() -> list[str]:
    words = [*SPECIAL_TOKENS, *_PUNCT, "which", "name", "comes", "after", "word",
             *_FIRST, *_LAST, *_FILLER, *(stem for stem, _ in _SPLIT)]
    words += sorted({f"##{suffix}" for _, suffix in _SPLIT})
    return list(dict.fromkeys(words))


def _paragraph(rng: random.Random, words: int, names: int) -> tuple[str, list[dict[str, object]]]:
    """A context of about ``words`` words mentioning ``names`` people, and one question
    per mention: the name that follows a given word."""
    mentions = set(rng.sample(range(1, words), names))
    tokens: list[str] = []
    answers: list[tuple[int, str, str]] = []  # (token index of the name, name, word before)
    for position in range(words):
        if position in mentions:
            first, last = rng.choice(_FIRST).title(), rng.choice(_LAST).title()
            answers.append((len(tokens), f"{first} {last}", tokens[-1].rstrip(",.")))
            tokens += [first, last + rng.choice(("", "", ",", "."))]
        if rng.random() < 0.1:
            stem, suffix = rng.choice(_SPLIT)
            tokens.append(stem + suffix)
        else:
            tokens.append(rng.choice(_FILLER))
    text = ""
    starts: list[int] = []
    for index, token in enumerate(tokens):
        starts.append(len(text))
        text += token + ("  " if index % 17 == 16 else " ")  # some double spaces
    questions: list[dict[str, object]] = []
    for index, name, before in answers:
        questions.append({
            "id": "",  # numbered across the file by _dataset
            "question": f"Which name comes after the word '{before}'?",
            "answers": [{"text": name, "answer_start": starts[index]},
                        {"text": name.split()[-1], "answer_start": starts[index + 1]}]})
    return text.rstrip(), questions


def _dataset(seed: int, samples: int, vocab_file: Path, out: Path) -> int:
    """Writes ``dev-v1.1.json`` with at least ``samples`` windows; returns their count."""
    tokenizer = WordPiece(load_vocab(vocab_file))
    rng = random.Random(seed)
    questions = 0
    articles: list[dict[str, object]] = []
    path = out / "dev-v1.1.json"
    windows = 0
    while windows < samples:  # each article's windows counted on its own file
        long = len(articles) % 3 == 1  # every third article needs several windows
        paragraphs = []
        for _ in range(2):
            context, qas = _paragraph(rng, rng.randint(520, 760) if long else
                                      rng.randint(40, 120), rng.randint(2, 4))
            for qa in qas:
                qa["id"] = f"standin-{seed:x}-{questions:05d}"
                questions += 1
            paragraphs.append({"context": context, "qas": qas})
        article: dict[str, object] = {"title": f"Stand_in_{len(articles)}",
                                      "paragraphs": paragraphs}
        articles.append(article)
        path.write_text(json.dumps({"version": "1.1", "data": [article]}), encoding="utf-8")
        windows += len(build_features(read_examples(path, tokenizer), tokenizer,
                                      Options()).features)
    path.write_text(json.dumps({"version": "1.1", "data": articles}, indent=1),
                    encoding="utf-8")
    return windows


def _model(vocab: list[str], rng: np.random.Generator, path: Path) -> None:
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    start = rng.normal(-2.0, 0.5, len(vocab)).astype(np.float32)
    end = rng.normal(-2.0, 0.5, len(vocab)).astype(np.float32)
    for index, token in enumerate(vocab):
        if token in _FIRST:
            start[index] += rng.uniform(3.0, 6.0)
        if token in _LAST:
            end[index] += rng.uniform(3.0, 6.0)
    nodes = [helper.make_node("Gather", ["start_table", "input_ids"], ["start_raw"]),
             helper.make_node("Gather", ["end_table", "input_ids"], ["end_raw"]),
             helper.make_node("Mul", ["input_mask", "segment_ids"], ["context_int"]),
             helper.make_node("Cast", ["context_int"], ["context"], to=TensorProto.FLOAT),
             helper.make_node("Sub", ["context", "one"], ["outside"]),
             helper.make_node("Mul", ["outside", "big"], ["penalty"])]
    for name in ("start", "end"):
        nodes += [helper.make_node("Mul", [f"{name}_raw", "context"], [f"{name}_in"]),
                  helper.make_node("Add", [f"{name}_in", "penalty"],
                                   [f"output_{name}_logits"])]
    batch: list[str | int | None] = ["batch_size", _MAX_SEQ]
    graph = helper.make_graph(
        nodes, "bert_standin",
        [helper.make_tensor_value_info(name, TensorProto.INT64, batch)
         for name in ("input_ids", "input_mask", "segment_ids")],
        [helper.make_tensor_value_info(f"output_{name}_logits", TensorProto.FLOAT, batch)
         for name in ("start", "end")],
        initializer=[numpy_helper.from_array(start, "start_table"),
                     numpy_helper.from_array(end, "end_table"),
                     numpy_helper.from_array(np.array(1.0, np.float32), "one"),
                     numpy_helper.from_array(np.array(10000.0, np.float32), "big")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                              producer_name="infersuite-standin")
    model.ir_version = 8
    onnx.checker.check_model(model)
    path.write_bytes(model.SerializeToString())


def write_stand_in(out: Path, *, samples: int = 48, seed: int = 0) -> StandIn:
    """The stand-in dataset (``out/dev-v1.1.json``, ``out/vocab.txt``) and model
    (``out/bert-standin.onnx``); ``samples`` is the least number of windows."""
    out.mkdir(parents=True, exist_ok=True)
    vocab = _vocab()
    vocab_file = out / "vocab.txt"
    vocab_file.write_text("\n".join(vocab) + "\n", encoding="utf-8")
    windows = _dataset(seed, max(1, samples), vocab_file, out)
    model_path = out / MODEL_FILE
    _model(vocab, np.random.default_rng(seed), model_path)
    return StandIn(dataset_dir=out, model_path=model_path, samples=windows)
