"""LLM accuracy from ``mlperf_log_accuracy.json``: ROUGE against the references, tokens/sample.

Each entry's ``data`` is the hex of the sample's generated int32 token ids (EOS included when
the sequence stopped on it). Entries are de-duplicated by ``qsl_idx``; two different outputs
for one sample, or a sample the log does not cover, are errors. The text compared is the
decoded output without EOS. ``accuracy.txt`` is written in the official LLM form, a dict
the checker's ``ROUGE*`` and ``TOKENS_PER_SAMPLE`` patterns parse, then the log's hash.

Targets (the model card): ROUGE-L >= 99 % of the fp32 reference, and the mean tokens per
sample within ``tokens_per_sample_tolerance`` of the reference (the rules' bound).
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from suite.accuracy import read_accuracy_entries
from suite.errors import SuiteError
from suite.llm.card import LLMCard
from suite.logs import ACCURACY_LOG
from suite.models import sha256_file

ACCURACY_TXT = "accuracy.txt"


def decode_outputs(path: Path, total: int) -> list[list[int]]:
    """Per-sample generated token ids (index = QSL index) from the accuracy log."""
    entries = read_accuracy_entries(path)
    outputs: list[list[int] | None] = [None] * total
    for entry in entries:
        index = int(entry["qsl_idx"])
        if not 0 <= index < total:
            raise SuiteError(f"{path}: qsl_idx {index} outside the dataset (0..{total - 1})")
        tokens = np.frombuffer(bytes.fromhex(entry["data"]), dtype="<i4").tolist()
        previous = outputs[index]
        if previous is not None and previous != tokens:
            raise SuiteError(f"{path}: qsl_idx {index} has two different outputs")
        outputs[index] = tokens
    missing = [i for i, o in enumerate(outputs) if o is None]
    if missing:
        raise SuiteError(f"{path}: {len(missing)} of {total} samples have no output "
                         f"(first: qsl_idx {missing[0]})",
                         hint="the accuracy run must cover the whole dataset")
    return [o for o in outputs if o is not None]


def rouge(predictions: Sequence[str], references: Sequence[str]) -> dict[str, float]:
    """Mean ROUGE-1/2/L F-measure x 100 (``rouge-score``, stemming on, as MLPerf's LLMs)."""
    # Imported by name: rouge-score ships no type information (and is needed only here).
    rouge_scorer = importlib.import_module("rouge_score.rouge_scorer")
    scorer = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True)
    totals = {"rouge1": 0.0, "rouge2": 0.0, "rougeL": 0.0}
    for prediction, reference in zip(predictions, references, strict=True):
        scores = scorer.score(reference, prediction)
        for key in totals:
            totals[key] += scores[key].fmeasure
    return {key: round(100.0 * value / len(predictions), 4) for key, value in totals.items()}


@dataclass(frozen=True)
class LLMScore:
    """What ``accuracy.txt`` records, and the verdict against the card's targets."""

    rouge: dict[str, float]
    tokens_per_sample: float
    total: int
    target: float
    tokens_bounds: tuple[float, float]
    passed: bool
    log_sha256: str


def score(outputs: Sequence[Sequence[int]], texts: Sequence[str], references: Sequence[str],
          card: LLMCard, target: float) -> tuple[dict[str, float], float, bool]:
    """ROUGE, mean tokens per sample, and whether both meet their targets."""
    scores = rouge(texts, references)
    per_sample = float(np.mean([len(o) for o in outputs]))
    ref, tol = card.accuracy.tokens_per_sample, card.accuracy.tokens_per_sample_tolerance
    within = ref * (1 - tol) <= per_sample <= ref * (1 + tol)
    return scores, round(per_sample, 4), scores["rougeL"] >= target and within


def score_log(test_dir: Path, card: LLMCard, decode: object, references: Sequence[str],
              target: float) -> LLMScore:
    """Score the accuracy log in ``test_dir``; write ``accuracy.txt`` next to it.

    ``decode`` turns token ids into text (the dataset's tokenizer ``decode``).
    """
    log = test_dir / ACCURACY_LOG
    outputs = decode_outputs(log, len(references))
    assert callable(decode)
    texts = [str(decode(o)) for o in outputs]
    scores, per_sample, passed = score(outputs, texts, references, card, target)
    digest = sha256_file(log)
    record = {**scores, "tokens_per_sample": per_sample, "gen_num": len(outputs)}
    (test_dir / ACCURACY_TXT).write_text(f"{record!r}\nhash={digest}\n", encoding="utf-8")
    ref, tol = card.accuracy.tokens_per_sample, card.accuracy.tokens_per_sample_tolerance
    return LLMScore(scores, per_sample, len(outputs), target,
                    (round(ref * (1 - tol), 4), round(ref * (1 + tol), 4)), passed, digest)


def score_round_log(test_dir: Path, decode: object, references: Sequence[str],
                    targets: dict[str, float], upper_limits: dict[str, float]
                    ) -> tuple[dict[str, object], bool, list[str], str]:
    """A round model's accuracy log scored as the reference evaluates it
    (``round_accuracy``); ``accuracy.txt`` written in the reference's form. Returns the
    result dict, the verdict against the round's targets, a line per check, the log's hash.
    """
    from suite.llm.round import scoring as round_accuracy

    log = test_dir / ACCURACY_LOG
    outputs = decode_outputs(log, len(references))
    assert callable(decode)
    texts = [str(decode(o)) for o in outputs]
    result = round_accuracy.score(outputs, texts, references,
                                  with_tokens="TOKENS_PER_SAMPLE" in targets)
    passed, lines = round_accuracy.verdict(result, targets, upper_limits)
    digest = sha256_file(log)
    (test_dir / ACCURACY_TXT).write_text(f"{result!r}\nhash={digest}\n", encoding="utf-8")
    return result, passed, lines, digest
