"""SQuAD v1.1 questions to BERT's fixed-length input windows, as the reference builds them.

The reference (mlcommons/inference ``language/bert/create_squad_data.py``, run by
``squad_QSL.py`` with ``is_training=False``) reads every question of ``dev-v1.1.json`` in
file order (article, paragraph, question), splits each context into words on space, tab,
CR, LF and U+202F, and tokenizes the question (first ``max_query_length`` pieces kept) and
each context word (WordPiece). A context longer than a window's room
(``max_seq_length - len(question) - 3``) is cut into overlapping spans, each starting
``min(length, doc_stride)`` pieces after the previous one, the last ending at the context's
end. One feature per span: ``[CLS] question [SEP] span [SEP]`` padded with id 0 to
``max_seq_length``; ``input_mask`` 1 on real tokens; ``segment_ids`` 1 from the span to the
last ``[SEP]``. A piece seen by several spans counts only in the span where it has the most
context: the largest ``min(left, right) + 0.01 * span length``, the first such span on a
tie. Features are numbered in that order (10,833 for dev-v1.1); the QSL index is a
feature's position. This module is our implementation of those rules.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from suite.errors import DatasetError
from suite.tasks.squad_text import WordPiece

#: A word of a context: a run of characters other than ``read_squad_examples``'s breaks.
_WORD = re.compile("[^ \t\r\n\u202f]+")


@dataclass(frozen=True)
class Options:
    """The reference's feature and decoding constants (``squad_QSL.py``,
    ``accuracy-squad.py``); a card's ``[task]`` table may restate them."""

    max_seq_length: int = 384
    doc_stride: int = 128
    max_query_length: int = 64
    n_best: int = 20
    max_answer_length: int = 30
    do_lower_case: bool = True


@dataclass(frozen=True)
class Context:
    """One paragraph's context: its words and their WordPiece tokens."""

    words: tuple[str, ...]
    pieces: tuple[str, ...]
    #: for each piece, the index of the word it came from
    piece_word: tuple[int, ...]
    #: the pieces' vocabulary ids
    piece_ids: tuple[int, ...]


@dataclass(frozen=True)
class Example:
    """One question."""

    qas_id: str
    question: str
    context: Context
    answers: tuple[str, ...]


@dataclass(frozen=True)
class Feature:
    """One input window of one question: where its context span sits."""

    example: int
    span: int
    #: where the span starts in the window (after ``[CLS] question [SEP]``)
    offset: int
    #: the span's first piece in the context, and its length in pieces
    start: int
    length: int
    #: for each piece of the span, whether this window gives it the most context
    max_context: tuple[bool, ...]

    @property
    def token_count(self) -> int:
        """Tokens in the window before padding."""
        return self.offset + self.length + 1


@dataclass(frozen=True)
class Features:
    """Every feature of a dataset and its three input arrays (int64, one row each)."""

    examples: tuple[Example, ...]
    features: tuple[Feature, ...]
    input_ids: npt.NDArray[np.int64]
    input_mask: npt.NDArray[np.int64]
    segment_ids: npt.NDArray[np.int64]


def _context(text: str, tokenizer: WordPiece) -> Context:
    words = _WORD.findall(text)
    pieces: list[str] = []
    piece_word: list[int] = []
    for index, word in enumerate(words):
        word_pieces = tokenizer.tokenize(word)
        pieces.extend(word_pieces)
        piece_word.extend([index] * len(word_pieces))
    return Context(tuple(words), tuple(pieces), tuple(piece_word),
                   tuple(tokenizer.ids(pieces)))


def _field(node: Any, key: str, kind: type, path: Path, where: str) -> Any:
    value = node.get(key) if isinstance(node, dict) else None
    if not isinstance(value, kind):
        raise DatasetError(
            f"{path}: {where} has no {kind.__name__} '{key}' (not a SQuAD v1.1 file?)",
            hint="use dev-v1.1.json as downloaded from the SQuAD site")
    return value


def read_examples(path: Path, tokenizer: WordPiece) -> list[Example]:
    """Every question of a SQuAD v1.1 file, in file order, contexts tokenized."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise DatasetError(f"{path}: not UTF-8 text (byte {exc.start})",
                           hint="use dev-v1.1.json as downloaded") from None
    except json.JSONDecodeError as exc:
        raise DatasetError(f"{path}: not valid JSON (line {exc.lineno}: {exc.msg})",
                           hint="the download is truncated or damaged: fetch it again") from None
    except OSError as exc:
        raise DatasetError(f"{path} cannot be read: {exc.strerror or exc}",
                           hint="check the file's permissions") from None
    examples: list[Example] = []
    for a, article in enumerate(_field(document, "data", list, path, "the file")):
        for p, paragraph in enumerate(_field(article, "paragraphs", list, path, f"data[{a}]")):
            where = f"data[{a}].paragraphs[{p}]"
            context = _context(_field(paragraph, "context", str, path, where), tokenizer)
            for q, qa in enumerate(_field(paragraph, "qas", list, path, where)):
                here = f"{where}.qas[{q}]"
                answers = _field(qa, "answers", list, path, here)
                texts = tuple(_field(answer, "text", str, path, f"{here}.answers[{i}]")
                              for i, answer in enumerate(answers))
                examples.append(Example(str(_field(qa, "id", str, path, here)),
                                        _field(qa, "question", str, path, here),
                                        context, texts))
    return examples


def _spans(pieces: int, room: int, stride: int) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    start = 0
    while start < pieces:
        length = min(pieces - start, room)
        spans.append((start, length))
        if start + length == pieces:
            break
        start += min(length, stride)
    return spans


def _best_spans(spans: Sequence[tuple[int, int]], pieces: int) -> npt.NDArray[np.intp]:
    """For each context piece, the span giving it the most context (first on a tie)."""
    if len(spans) == 1:
        return np.zeros(pieces, dtype=np.intp)
    position = np.arange(pieces)
    scores = np.full((len(spans), pieces), -np.inf)
    for index, (start, length) in enumerate(spans):
        end = start + length - 1
        inside = (position >= start) & (position <= end)
        score = np.minimum(position - start, end - position) + 0.01 * length
        scores[index] = np.where(inside, score, -np.inf)
    best: npt.NDArray[np.intp] = np.argmax(scores, axis=0)
    return best


def build_features(examples: Sequence[Example], tokenizer: WordPiece, options: Options,
                   limit: int | None = None) -> Features:
    """The reference's features of ``examples`` (the first ``limit`` of them)."""
    cls_id, sep_id = tokenizer.vocab["[CLS]"], tokenizer.vocab["[SEP]"]
    features: list[Feature] = []
    heads: list[list[int]] = []
    context_ids: dict[int, npt.NDArray[np.int64]] = {}  # by id(Context): shared per paragraph
    truncated = False
    for index, example in enumerate(examples):
        if limit is not None and len(features) >= limit:
            truncated = True
            break
        query = tokenizer.tokenize(example.question)[:options.max_query_length]
        room = options.max_seq_length - len(query) - 3
        if room < 1:
            raise DatasetError(
                f"max_seq_length {options.max_seq_length} leaves no room for a context "
                f"after a {len(query)}-piece question ({example.qas_id})",
                hint="max_seq_length must exceed max_query_length + 3 (the card's [task])")
        context = example.context
        spans = _spans(len(context.pieces), room, options.doc_stride)
        if not spans:
            continue  # an empty context has no window; its question is scored "empty"
        context_ids.setdefault(id(context), np.array(context.piece_ids, dtype=np.int64))
        best = _best_spans(spans, len(context.pieces))
        head = [cls_id, *tokenizer.ids(query), sep_id]
        for span_index, (start, length) in enumerate(spans):
            features.append(Feature(
                index, span_index, len(head), start, length,
                tuple((best[start:start + length] == span_index).tolist())))
            heads.append(head)
    if limit is not None and len(features) > limit:
        truncated = True
        features, heads = features[:limit], heads[:limit]
    shape = (len(features), options.max_seq_length)
    input_ids = np.zeros(shape, dtype=np.int64)
    input_mask = np.zeros(shape, dtype=np.int64)
    segment_ids = np.zeros(shape, dtype=np.int64)
    for row, (feature, head) in enumerate(zip(features, heads, strict=True)):
        end = feature.offset + feature.length
        input_ids[row, :feature.offset] = head
        input_ids[row, feature.offset:end] = context_ids[id(
            examples[feature.example].context)][feature.start:feature.start + feature.length]
        input_ids[row, end] = sep_id
        input_mask[row, :end + 1] = 1
        segment_ids[row, feature.offset:end + 1] = 1
    covered = len(examples)
    if truncated:  # a quick run scores only the questions its windows reach
        covered = features[-1].example + 1 if features else 0
    return Features(tuple(examples[:covered]), tuple(features),
                    input_ids, input_mask, segment_ids)
