"""Decode ``mlperf_log_accuracy.json`` ourselves and score it against the target.

Each entry's ``data`` is the hex of one response (the postprocessed class index in
the card's ``response_dtype``). Entries are de-duplicated by ``qsl_idx``; two
different responses for one sample are an error, and so is a sample the log does
not cover. ``accuracy.txt`` is written in the format the official checker parses:
``accuracy=NN.NNN%, good=G, total=T`` then ``hash=<sha256 of the full log>``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from suite.errors import InputTooLarge, SuiteError
from suite.logs import ACCURACY_LOG
from suite.models import sha256_file
from suite.paths import ACCURACY_LOG_LIMIT, regular_file_problem
from suite.results import AccuracyResult

ACCURACY_TXT = "accuracy.txt"


def read_accuracy_entries(path: Path) -> list[dict[str, Any]]:
    """The entries of a LoadGen ``mlperf_log_accuracy.json``; one clear error when the
    file is missing or not JSON (a crashed run leaves a lone ``[``)."""
    try:
        if (problem := regular_file_problem(path, ACCURACY_LOG_LIMIT)) is not None:
            raise InputTooLarge(f"accuracy log {path} is {problem}",
                                hint="check the path: it should name LoadGen's accuracy log")
        entries: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SuiteError(f"accuracy log {path} is missing") from None
    except json.JSONDecodeError as exc:
        raise SuiteError(f"accuracy log {path} is not valid JSON (truncated run?): {exc}",
                         hint="re-run the test; a crashed run leaves a lone '['") from None
    return entries


def decode_accuracy_log(path: Path, response_dtype: np.dtype[Any],
                        total: int) -> npt.NDArray[np.int64]:
    """Per-sample predictions (index = QSL index) from the accuracy log."""
    entries = read_accuracy_entries(path)
    predictions = np.full(total, -1, dtype=np.int64)
    for entry in entries:
        index = int(entry["qsl_idx"])
        if not 0 <= index < total:
            raise SuiteError(f"{path}: qsl_idx {index} outside the dataset (0..{total - 1})")
        values = np.frombuffer(bytes.fromhex(entry["data"]), dtype=response_dtype)
        if len(values) != 1:
            raise SuiteError(f"{path}: qsl_idx {index} has {len(values)} values, expected 1")
        value = int(values[0])
        if predictions[index] not in (-1, value):
            raise SuiteError(f"{path}: qsl_idx {index} has two different responses "
                             f"({predictions[index]} and {value})")
        predictions[index] = value
    missing = np.flatnonzero(predictions < 0)
    if len(missing):
        raise SuiteError(
            f"{path}: {len(missing)} of {total} samples have no response "
            f"(first: qsl_idx {int(missing[0])})",
            hint="the accuracy run must cover the whole dataset",
        )
    return predictions


def decode_response_bytes(path: Path, total: int) -> dict[int, bytes]:
    """Each sample's response bytes (QSL index -> bytes) from the accuracy log, for a task
    card: de-duplicated by ``qsl_idx`` (two different responses for one sample are an
    error), every sample of ``0..total-1`` present."""
    entries = read_accuracy_entries(path)
    responses: dict[int, bytes] = {}
    for entry in entries:
        index = int(entry["qsl_idx"])
        if not 0 <= index < total:
            raise SuiteError(f"{path}: qsl_idx {index} outside the dataset (0..{total - 1})")
        data = bytes.fromhex(entry["data"])
        if responses.setdefault(index, data) != data:
            raise SuiteError(f"{path}: qsl_idx {index} has two different responses")
    if len(responses) < total:
        first = next(k for k in range(total) if k not in responses)
        raise SuiteError(f"{path}: {total - len(responses)} of {total} samples have no "
                         f"response (first: qsl_idx {first})",
                         hint="the accuracy run must cover the whole dataset")
    return responses


def write_accuracy_txt(test_dir: Path, lines: tuple[str, ...] | list[str]) -> str:
    """``accuracy.txt``: ``lines`` (a task's score, in its reference script's format),
    then ``hash=<sha256 of the accuracy log>``; returns that sha256."""
    digest = sha256_file(test_dir / ACCURACY_LOG)
    text = "".join(f"{line}\n" for line in lines) + f"hash={digest}\n"
    (test_dir / ACCURACY_TXT).write_text(text, encoding="utf-8")
    return digest


def score_top1(test_dir: Path, labels: npt.NDArray[np.int64], response_dtype: np.dtype[Any],
               target: float, loadgen_errors: list[str]) -> AccuracyResult:
    """Top-1 in percent; writes ``accuracy.txt`` next to the log."""
    log = test_dir / ACCURACY_LOG
    predictions = decode_accuracy_log(log, response_dtype, len(labels))
    good = int(np.sum(predictions == labels))
    total = len(labels)
    value = 100.0 * good / total
    digest = sha256_file(log)
    (test_dir / ACCURACY_TXT).write_text(
        f"accuracy={value:.3f}%, good={good}, total={total}\nhash={digest}\n", encoding="utf-8"
    )
    return AccuracyResult(
        metric="acc",
        value=round(value, 3),
        target=target,
        passed=value >= target and not loadgen_errors,
        good=good,
        total=total,
        log_sha256=digest,
        loadgen_errors=loadgen_errors[:20],
    )
