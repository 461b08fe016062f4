"""SQuAD v1.1 accuracy from BERT's logits, as ``accuracy-squad.py`` computes it.

The reference (mlcommons/inference ``language/bert/accuracy-squad.py``, then
``evaluate_v1.1.py``, the official SQuAD v1.1 script) does, per question:

* each window's logged bytes are float32 ``[tokens, 2]`` (start, end), padded to
  ``max_seq_length`` with -10000;
* the ``n_best`` (20) highest start and end positions of each window (highest first, the
  lower position first on a tie) pair into candidates, dropped when either end lies outside
  the window's context, the start is not in its max-context window, the end precedes the
  start, or the answer is longer than ``max_answer_length`` (30) pieces;
* the candidates of all windows, ranked by start + end logit (a stable sort: on a tie the
  earlier window, start and end rank first), give the prediction: the best one's pieces,
  ``##`` joined back, projected onto the original words' characters (``get_final_text``);
  a question without a candidate is predicted ``"empty"``;
* exact match and F1 against every reference answer (lower-cased, punctuation, articles
  and extra whitespace removed), the best of the answers per question, then
  ``100 * mean`` over the questions.

``accuracy.txt`` holds the line the reference prints, ``json.dumps`` of
``{"exact_match": EM, "f1": F1}``: the submission checker's ``ACC_PATTERN["F1"]`` reads F1
from it. This module is our implementation of those rules.
"""

from __future__ import annotations

import json
import re
import string
from collections import Counter
from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt

from suite.errors import DatasetError
from suite.tasks.squad_features import Example, Feature, Options
from suite.tasks.squad_text import basic_tokenize

#: The logit that pads a response shorter than ``max_seq_length`` (``load_loadgen_log``).
PAD_LOGIT = -10000.0
#: The prediction of a question none of whose windows gives a valid span.
NO_ANSWER = "empty"

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = frozenset(string.punctuation)


def _best_positions(logits: npt.NDArray[np.float64], n_best: int) -> npt.NDArray[np.intp]:
    return np.argsort(-logits, kind="stable")[:n_best]


def _best_span(features: Sequence[Feature], logits: Sequence[npt.NDArray[np.float64]],
               options: Options) -> tuple[int, int, int] | None:
    """(window, start, end) of the best-scoring valid candidate, or None."""
    best: tuple[int, int, int] | None = None
    best_score = -np.inf
    for window, (feature, pair) in enumerate(zip(features, logits, strict=True)):
        starts = _best_positions(pair[:, 0], options.n_best)
        ends = _best_positions(pair[:, 1], options.n_best)
        first, last = feature.offset, feature.offset + feature.length - 1
        max_context = np.zeros(len(pair), dtype=bool)
        max_context[first:last + 1] = feature.max_context
        start_ok = (starts >= first) & (starts <= last) & max_context[starts]
        end_ok = (ends >= first) & (ends <= last)
        span = ends[None, :] - starts[:, None] + 1
        valid = (start_ok[:, None] & end_ok[None, :] & (span >= 1)
                 & (span <= options.max_answer_length))
        candidates = np.flatnonzero(valid)  # row-major: start rank, then end rank
        if not len(candidates):
            continue
        scores = (pair[starts, 0][:, None] + pair[ends, 1][None, :]).ravel()[candidates]
        chosen = int(np.argmax(scores))  # the first of equal scores, as the stable sort
        flat, score = int(candidates[chosen]), float(scores[chosen])
        if best is None or score > best_score:
            best_score = score
            best = (window, int(starts[flat // len(ends)]), int(ends[flat % len(ends)]))
    return best


def _spaceless(text: str) -> tuple[str, list[int]]:
    """``text`` without spaces, and each kept character's index in ``text``."""
    kept = [index for index, char in enumerate(text) if char != " "]
    return "".join(text[index] for index in kept), kept


def final_text(predicted: str, original: str, lower_case: bool = True) -> str:
    """The predicted pieces' text projected onto the original words (``get_final_text``):
    the original characters aligned with the prediction in the basic-tokenized original,
    or the whole original text when the alignment fails."""
    tokenized = " ".join(basic_tokenize(original, lower_case))
    begin = tokenized.find(predicted)
    if begin == -1:
        return original
    end = begin + len(predicted) - 1
    original_chars, original_map = _spaceless(original)
    tokenized_chars, tokenized_map = _spaceless(tokenized)
    if len(original_chars) != len(tokenized_chars):
        return original
    spaceless_at = {position: index for index, position in enumerate(tokenized_map)}
    if begin not in spaceless_at or end not in spaceless_at:
        return original
    return original[original_map[spaceless_at[begin]]:original_map[spaceless_at[end]] + 1]


def predict(example: Example, features: Sequence[Feature],
            logits: Sequence[npt.NDArray[np.float64]], options: Options) -> str:
    """One question's predicted answer text from its windows' logits ([tokens, 2])."""
    best = _best_span(features, logits, options)
    if best is None:
        return NO_ANSWER
    window, start, end = best
    feature = features[window]
    context = example.context
    first = feature.start + start - feature.offset
    last = feature.start + end - feature.offset
    pieces = " ".join(context.pieces[first:last + 1])
    pieces = " ".join(pieces.replace(" ##", "").replace("##", "").split())
    words = context.words[context.piece_word[first]:context.piece_word[last] + 1]
    return final_text(pieces, " ".join(words), options.do_lower_case)


def decode_logits(data: bytes, max_seq_length: int, index: int = -1) -> npt.NDArray[np.float64]:
    """Sample ``index``'s response: float32 [tokens, 2] logits, padded to
    ``max_seq_length`` rows. A length that is not whole rows, or more rows than a
    window, is a ``DatasetError`` naming the sample."""
    if len(data) % 8 or len(data) // 8 > max_seq_length:
        raise DatasetError(
            f"the response of sample {index} is {len(data)} bytes, expected float32 "
            f"[<= {max_seq_length}, 2] ({max_seq_length * 8} bytes)",
            hint="the SUT must log start and end logits stacked as float32 [384, 2], as "
                 "the reference's SUT does")
    values = np.frombuffer(data, dtype=np.float32)
    logits = np.full((max_seq_length, 2), PAD_LOGIT)
    logits[:len(values) // 2] = values.reshape(-1, 2)
    return logits


def normalize_answer(text: str) -> str:
    """SQuAD's normalisation: lower case, no punctuation, no articles, single spaces."""
    text = "".join(char for char in text.lower() if char not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def f1_score(prediction: str, truth: str) -> float:
    """Token-overlap F1 of two answers after normalisation."""
    predicted, expected = normalize_answer(prediction).split(), normalize_answer(truth).split()
    same = sum((Counter(predicted) & Counter(expected)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(predicted), same / len(expected)
    return 2 * precision * recall / (precision + recall)


def exact_match(prediction: str, truth: str) -> bool:
    """Whether two answers are equal after normalisation."""
    return normalize_answer(prediction) == normalize_answer(truth)


def evaluate(examples: Sequence[Example], predictions: Mapping[str, str]) -> dict[str, float]:
    """``{"exact_match", "f1"}`` in percent over ``examples``; a question without a
    prediction scores 0; no question at all is a ``DatasetError``."""
    if not examples:
        raise DatasetError("no SQuAD question to score",
                           hint="the dataset opened no window: check dev-v1.1.json")
    matched = f1 = 0.0
    for example in examples:
        prediction = predictions.get(example.qas_id)
        if prediction is None or not example.answers:
            continue
        matched += max(exact_match(prediction, truth) for truth in example.answers)
        f1 += max(f1_score(prediction, truth) for truth in example.answers)
    return {"exact_match": 100.0 * matched / len(examples),
            "f1": 100.0 * f1 / len(examples)}


def accuracy_line(scores: Mapping[str, float]) -> str:
    """The line ``evaluate_v1.1.py`` prints, which ``accuracy.txt`` holds."""
    return json.dumps({"exact_match": scores["exact_match"], "f1": scores["f1"]})
