"""Whisper's response encoding and the reference's word error rate (``suite.tasks.librispeech``).

Owns, as ``mlcommons/inference`` ``speech2text`` defines them:

* the 42-character alphabet (``reference_SUT.py`` / ``accuracy_eval.py`` ``labels``): the
  SUT lower-cases and strips the decoded text, keeps the characters of the alphabet and
  logs their indices as int64 (``array('q')``); the accuracy script maps the indices back;
  the manifest's transcripts go through the same filter (``manifest.py``
  ``parse_transcript``: characters outside the alphabet are dropped);
* the WER of ``accuracy_eval.py``: both sides through whisper's ``EnglishTextNormalizer``
  and split on whitespace; per sample, ``helpers.compute_wer_with_concatenation`` (words
  that match a concatenation of up to 3 words on the other side are aligned as one, then
  a word-level Levenshtein distance); the corpus WER is the summed distances over the
  summed reference words (a sample with no reference words adds its distance, no words);
* the line the script prints, ``Word Error Rate: {wer*100}%, accuracy={(1-wer)*100}%``,
  which the submission checker's ``ACC_PATTERN["ACCURACY"]`` reads.

The normaliser is the Hugging Face port of whisper's (``transformers``, imported lazily;
identical to ``openai-whisper``'s on our test strings), fed with the British-to-American
spelling map whisper ships (``normalizer.json`` in the official model folder).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from suite.errors import DatasetError, SuiteError

#: ``speech2text/accuracy_eval.py`` ``labels``: index -> character.
LABELS: tuple[str, ...] = (" ", *"abcdefghijklmnopqrstuvwxyz", "'", *"0123456789",
                           "$", "%", "+", "-")
_INDEX = {c: i for i, c in enumerate(LABELS)}
#: The response's element type: ``array('q')`` in the SUT, ``--output_dtype int64``.
RESPONSE_DTYPE = np.dtype("<i8")
#: The checker's metric key for whisper (``ACC_PATTERN["ACCURACY"]``).
METRIC = "ACCURACY"

Normalizer = Callable[[str], str]


def filter_text(text: str) -> str:
    """The characters of ``text`` the alphabet holds, in order (the manifest's filter)."""
    return "".join(c for c in text if c in _INDEX)


def encode_response(text: str) -> bytes:
    """The bytes the reference SUT logs for a decoded ``text``."""
    ids = [_INDEX[c] for c in text.lower().strip() if c in _INDEX]
    return np.asarray(ids, dtype=RESPONSE_DTYPE).tobytes()


def decode_response(data: bytes, index: int) -> str:
    """The text a logged response stands for (``__gather_predictions``)."""
    if len(data) % RESPONSE_DTYPE.itemsize:
        raise SuiteError(f"response of sample {index}: {len(data)} bytes is not a whole "
                            f"number of int64 indices",
                            hint="the SUT logs array('q') of alphabet indices")
    ids = np.frombuffer(data, dtype=RESPONSE_DTYPE)
    if ids.size and (ids.min() < 0 or ids.max() >= len(LABELS)):
        raise SuiteError(f"response of sample {index}: index {int(ids.max())} is outside "
                            f"the {len(LABELS)}-character alphabet",
                            hint="the SUT logs indices into speech2text's labels")
    return "".join(LABELS[i] for i in ids.tolist())


def load_normalizer(spelling_map: Path) -> Normalizer:
    """Whisper's ``EnglishTextNormalizer`` with the spelling map at ``spelling_map``."""
    try:
        mapping = json.loads(spelling_map.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DatasetError(f"{spelling_map}: whisper's spelling map not found",
                           hint="copy normalizer.json from the model's Hugging Face folder "
                                "(openai/whisper-large-v3) next to the model") from None
    except (OSError, ValueError) as exc:
        raise DatasetError(f"{spelling_map}: not a JSON object ({exc})",
                           hint="use normalizer.json of openai/whisper-large-v3") from None
    if not isinstance(mapping, dict):
        raise DatasetError(f"{spelling_map}: not a JSON object of word -> word",
                           hint="use normalizer.json of openai/whisper-large-v3")
    try:
        from transformers.models.whisper.english_normalizer import EnglishTextNormalizer
    except ImportError:
        raise SuiteError("whisper's text normaliser needs transformers",
                         hint="pip install 'infersuite[whisper]'") from None
    normalizer: Any = EnglishTextNormalizer(mapping)  # type: ignore[no-untyped-call]
    return lambda text: str(normalizer(text))


def levenshtein(a: Sequence[str], b: Sequence[str]) -> int:
    """Word-level edit distance (unit insert, delete, substitute)."""
    if len(a) > len(b):
        a, b = b, a
    row = list(range(len(a) + 1))
    for i, word_b in enumerate(b, 1):
        prev, row = row, [i] + [0] * len(a)
        for j, word_a in enumerate(a, 1):
            row[j] = min(prev[j] + 1, row[j - 1] + 1, prev[j - 1] + (word_a != word_b))
    return row[-1]


def _joined_match(ref: list[str], hyp: list[str], i: int, j: int) -> tuple[int, int]:
    """How many reference and hypothesis words at ``i``/``j`` align as one: ``k`` words on
    one side spelling the other side's single word, trying k = 1, 2, 3 and the reference
    side first; (1, 1) when none does (a substitution)."""
    for k in range(1, 4):
        if i + k <= len(ref) and "".join(ref[i:i + k]) == hyp[j]:
            return k, 1
        if j + k <= len(hyp) and "".join(hyp[j:j + k]) == ref[i]:
            return 1, k
    return 1, 1


def sample_errors(hyp: list[str], ref: list[str]) -> tuple[int, int]:
    """(word errors, reference words) of one sample, concatenations counted as matches."""
    ref_units: list[str] = []
    hyp_units: list[str] = []
    i = j = 0
    while i < len(ref) and j < len(hyp):
        if ref[i] == hyp[j]:
            di, dj = 1, 1
        else:
            di, dj = _joined_match(ref, hyp, i, j)
        ref_units.append("".join(ref[i:i + di]))
        hyp_units.append("".join(hyp[j:j + dj]))
        i, j = i + di, j + dj
    ref_units += ref[i:]
    hyp_units += hyp[j:]
    return levenshtein(ref_units, hyp_units), len(ref)


def corpus_wer(hypotheses: Sequence[str], references: Sequence[str],
               normalize: Normalizer) -> tuple[float, int, int]:
    """(WER as a fraction, summed errors, summed reference words) over all samples."""
    errors = words = 0
    for hyp, ref in zip(hypotheses, references, strict=True):
        e, w = sample_errors(normalize(hyp).split(), normalize(ref).split())
        errors, words = errors + e, words + w
    if words == 0:
        raise DatasetError("every reference transcript is empty after normalisation: the "
                           "word error rate is undefined",
                           hint="check the manifest's transcripts")
    return errors / words, errors, words


def accuracy_line(wer: float) -> str:
    """The line ``accuracy_eval.py`` prints (Python's float formatting, as it uses)."""
    return f"Word Error Rate: {wer * 100}%, accuracy={(1 - wer) * 100}%"
