"""bert-99 / bert-99.9: SQuAD v1.1 question answering with BERT-Large, as a task.

The dataset directory is laid out as the reference's ``make download_data`` leaves
``build/data`` (mlcommons/inference ``language/bert/Makefile``): ``dev-v1.1.json`` at its
top, and the model's ``vocab.txt`` either beside it or in
``bert_tf_v1_1_large_fp32_384_v2/`` (where the reference's Makefile and ``squad_QSL.py``
put it). One QSL sample is one feature: one 384-token window of one question
(``suite.tasks.squad_features``), 10,833 for dev-v1.1.

* model inputs: ``input_ids``, ``input_mask``, ``segment_ids``, int64 ``[384]``
  (``onnxruntime_SUT.py``; the ONNX export names them so, ``bert_tf_to_pytorch.py``);
* model outputs: ``output_start_logits``, ``output_end_logits``, float32 ``[384]``;
* the logged response: both logits stacked on the last axis, float32 ``[384, 2]``, the
  bytes ``onnxruntime_SUT.py`` and ``pytorch_SUT.py`` send to LoadGen;
* the score: ``accuracy-squad.py`` (``suite.tasks.squad_eval``): F1 and exact match.

A quick run (``count``) opens the first ``count`` features and scores the questions they
reach (the reference always scores all 10,570 questions; a partial log there scores the
missing ones 0). ``SquadTask(cache_dir=...)`` keeps the built features of a dataset in
``cache_dir`` (a pickle keyed by the files' sha256 and the options, ids stored as 16-bit
integers); without one they are built on every ``open``, in pure Python.
"""

from __future__ import annotations

import hashlib
import pickle
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from suite.errors import ConfigError, DatasetError, ModelError
from suite.tasks.base import (
    Arrays,
    ModelCall,
    Packed,
    Scratch,
    StandIn,
    TaskScore,
    pack_rows,
    split,
    stack,
)
from suite.tasks.squad_eval import accuracy_line, decode_logits, evaluate, predict
from suite.tasks.squad_features import Features, Options, build_features, read_examples
from suite.tasks.squad_text import WordPiece, load_vocab

#: The dataset file, as downloaded (``Makefile``'s ``download_data``).
DATASET_FILE = "dev-v1.1.json"
#: The vocabulary: beside the dataset file, or where the reference's Makefile puts it.
VOCAB_FILE = "vocab.txt"
VOCAB_DIR = "bert_tf_v1_1_large_fp32_384_v2"
#: The official tensor names (the ONNX export's ``input_names`` / ``output_names``).
INPUTS = ("input_ids", "input_mask", "segment_ids")
OUTPUTS = ("output_start_logits", "output_end_logits")
#: Bumped when the cached features' layout changes.
_CACHE_FORMAT = 2


def options_from(card: Any) -> Options:
    """The card's ``task_options`` (its ``[task_options]`` table) over the reference's
    defaults. Keys that are not options (notes, sources) are ignored; an option of the
    wrong type is a ``ConfigError`` naming the key."""
    given = getattr(card, "task_options", None) or {}
    defaults = Options()
    values: dict[str, Any] = {}
    for key, value in dict(given).items():
        if key not in {field.name for field in fields(Options)}:
            continue
        default = getattr(defaults, key)
        if type(value) is not type(default):
            raise ConfigError(
                f"model card [task_options] {key} = {value!r}: expected a "
                f"{type(default).__name__} (the reference's value is {default!r})",
                hint="fix the card's [task_options] table")
        values[key] = value
    return Options(**values)


@dataclass
class SquadData:
    """An opened SQuAD dataset: one QSL sample per feature."""

    dataset_file: Path
    vocab_file: Path
    options: Options
    built: Features
    sha256: dict[str, str]

    @property
    def total_count(self) -> int:
        return len(self.built.features)

    def inputs(self, index: int) -> dict[str, npt.NDArray[Any]]:
        return {"input_ids": self.built.input_ids[index],
                "input_mask": self.built.input_mask[index],
                "segment_ids": self.built.segment_ids[index]}

    def describe(self) -> dict[str, Any]:
        return {"name": "squad-v1.1-dev", "total": self.total_count,
                "questions": len(self.built.examples),
                "layout": f"{DATASET_FILE} + {VOCAB_FILE}; one sample per "
                          f"{self.options.max_seq_length}-token window",
                "files": {str(self.dataset_file): self.sha256[DATASET_FILE],
                          str(self.vocab_file): self.sha256[VOCAB_FILE]},
                "options": {field.name: getattr(self.options, field.name)
                            for field in fields(Options)}}


def _locate(dataset_dir: Path) -> tuple[Path, Path]:
    if not dataset_dir.is_dir():
        raise DatasetError(f"SQuAD dataset directory {dataset_dir} does not exist",
                           hint=f"point data.dataset_dir at the folder holding {DATASET_FILE}")
    dataset = dataset_dir / DATASET_FILE
    if not dataset.is_file():
        raise DatasetError(f"{dataset} is missing",
                           hint="download dev-v1.1.json (SQuAD v1.1) into the dataset "
                                "directory (see docs/benchmarks.md)")
    for vocab in (dataset_dir / VOCAB_FILE, dataset_dir / VOCAB_DIR / VOCAB_FILE):
        if vocab.is_file():
            return dataset, vocab
    raise DatasetError(f"{dataset_dir / VOCAB_FILE} is missing (nor in {VOCAB_DIR}/)",
                       hint="put the model's vocab.txt beside dev-v1.1.json")


def _sha256(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError as exc:
        raise DatasetError(f"{path} cannot be read: {exc.strerror or exc}",
                           hint="check the file's permissions") from None


class SquadTask:
    """SQuAD v1.1 with BERT (``TensorTask``); ``cache_dir`` keeps built features."""

    name: ClassVar[str] = "question-answering"

    def __init__(self, cache_dir: Path | None = None) -> None:
        self.cache_dir = cache_dir

    def open(self, dataset_dir: Path, card: Any, *, count: int | None = None) -> SquadData:
        options = options_from(card)
        dataset, vocab_file = _locate(Path(dataset_dir))
        sha = {DATASET_FILE: _sha256(dataset), VOCAB_FILE: _sha256(vocab_file)}
        built = self._cached(sha, options, count)
        if built is None:
            tokenizer = WordPiece(load_vocab(vocab_file), options.do_lower_case)
            examples = read_examples(dataset, tokenizer)
            built = build_features(examples, tokenizer, options, count)
            if not built.features:
                raise DatasetError(f"{dataset}: no question with a context to answer from",
                                   hint="use dev-v1.1.json as downloaded")
            self._store(sha, options, count, built)
        return SquadData(dataset, vocab_file, options, built, sha)

    def _cache_path(self, sha: Mapping[str, str], options: Options,
                    count: int | None) -> Path | None:
        if self.cache_dir is None:
            return None
        key = hashlib.sha256(repr((_CACHE_FORMAT, sorted(sha.items()), options,
                                   count)).encode()).hexdigest()[:24]
        return self.cache_dir / f"squad-features-{key}.pickle"

    def _cached(self, sha: Mapping[str, str], options: Options,
                count: int | None) -> Features | None:
        path = self._cache_path(sha, options, count)
        if path is None or not path.is_file():
            return None
        try:
            with path.open("rb") as handle:
                stored = pickle.load(handle)  # our own file, keyed by the inputs' sha256
            examples, features, ids, mask, segments = stored
            return Features(examples, features, ids.astype(np.int64),
                            mask.astype(np.int64), segments.astype(np.int64))
        except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError,
                TypeError, ValueError):
            return None  # unreadable or from another layout: rebuilt and rewritten

    def _store(self, sha: Mapping[str, str], options: Options, count: int | None,
               built: Features) -> None:
        path = self._cache_path(sha, options, count)
        if path is None:
            return
        ids = built.input_ids  # stored narrow: a vocabulary of 30,522 fits 16 bits
        narrow = ids.astype(np.uint16) if ids.size and ids.max() < 1 << 16 else ids
        stored = (built.examples, built.features, narrow,
                  built.input_mask.astype(np.uint8), built.segment_ids.astype(np.uint8))
        path.parent.mkdir(parents=True, exist_ok=True)
        partial = path.with_suffix(".partial")
        with partial.open("wb") as handle:
            pickle.dump(stored, handle, protocol=pickle.HIGHEST_PROTOCOL)
        partial.replace(path)

    def infer(self, call: ModelCall, samples: Sequence[Arrays]) -> Sequence[Arrays]:
        outputs = call(stack(samples))
        missing = [name for name in OUTPUTS if name not in outputs]
        if missing:
            raise ModelError(
                f"the model returned {sorted(outputs)}, not {', '.join(missing)}",
                hint="a BERT SQuAD model has outputs output_start_logits and "
                     "output_end_logits (the reference's ONNX export)")
        return split({name: outputs[name] for name in OUTPUTS}, len(samples))

    def response(self, index: int, outputs: Arrays) -> bytes:
        logits = np.stack([outputs[OUTPUTS[0]], outputs[OUTPUTS[1]]], axis=-1)
        return np.ascontiguousarray(logits, dtype=np.float32).tobytes()

    def pack(self, indices: Sequence[int], outputs: Arrays, out: Scratch) -> Packed:
        """``response`` of a whole batch at once: the same bytes, interleaved into ``out``
        by two strided assignments (``np.stack(..., out=)`` took 1.4-3x as long per
        sample at batches of 1-128, measured on the 2-core machine)."""
        start, end = outputs[OUTPUTS[0]], outputs[OUTPUTS[1]]
        logits = out((*start.shape, 2), np.float32)
        logits[..., 0] = start
        logits[..., 1] = end
        return pack_rows(logits)

    def score(self, data: Any, responses: Mapping[int, bytes]) -> TaskScore:
        if not isinstance(data, SquadData):
            raise DatasetError(f"a question-answering score needs SquadTask's data, "
                               f"not {type(data).__name__}",
                               hint="open the dataset with SquadTask.open")
        built, options = data.built, data.options
        windows: dict[int, list[int]] = defaultdict(list)
        for index, feature in enumerate(built.features):
            if index in responses:  # a missing window is skipped, as the reference does
                windows[feature.example].append(index)
        predictions: dict[str, str] = {}
        for number, example in enumerate(built.examples):
            indexes = windows.get(number, [])
            logits = [decode_logits(responses[index], options.max_seq_length, index)
                      for index in indexes]
            predictions[example.qas_id] = predict(
                example, [built.features[i] for i in indexes], logits, options)
        scores = evaluate(built.examples, predictions)
        return TaskScore(metric="F1", value=scores["f1"], lines=(accuracy_line(scores),),
                         details={"exact_match": scores["exact_match"], "f1": scores["f1"],
                                  "questions": float(len(built.examples)),
                                  "windows": float(len(built.features))})

    def write_stand_in(self, out: Path, *, samples: int = 48, seed: int = 0) -> StandIn:
        from suite.tasks.squad_standin import write_stand_in

        return write_stand_in(Path(out), samples=samples, seed=seed)
