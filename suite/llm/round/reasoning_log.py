"""A reasoning LLM's accuracy log scored as its reference evaluation scores it.

The log's entries (``qsl_idx``, the hex of the int32 output ids) in the order LoadGen wrote
them, decoded as the card's reference decodes them (deepseek-r1: special tokens skipped;
gpt-oss-120b: kept), scored by ``reasoning``. LiveCodeBench samples need the problems'
tests: the directory ``livecodebench`` beside the dataset file (``livecodebench``'s files).
``accuracy.txt`` holds the line the reference prints (what the checker and TEST07 read),
the result dict, and the log's hash. A tool-calling card's log (qwen3.6-27b:
``evaluation = "bfcl-v4"``) holds recorded responses, not ids: ``score_log`` hands it to
``bfcl_score``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from suite.accuracy import read_accuracy_entries
from suite.errors import DatasetError, SuiteError
from suite.llm.round import livecodebench, reasoning, scoring
from suite.logs import ACCURACY_LOG
from suite.models import sha256_file

if TYPE_CHECKING:
    from suite.llm.card import LLMAccuracySpec
    from suite.llm.dataset import LLMDataset

ACCURACY_TXT = "accuracy.txt"
#: Where the LiveCodeBench files are looked for, beside the dataset file.
LCB_DIRECTORY = "livecodebench"


def log_samples(path: Path, decode: Callable[[list[int]], str]) -> list[reasoning.Sample]:
    """Every entry of the accuracy log, in its order, decoded."""
    import numpy as np

    samples = []
    for entry in read_accuracy_entries(path):
        try:
            ids = np.frombuffer(bytes.fromhex(entry["data"]), dtype="<i4").tolist()
            samples.append(reasoning.Sample(int(entry["qsl_idx"]), decode(ids), len(ids)))
        except (KeyError, ValueError, TypeError) as exc:
            raise SuiteError(f"{path}: an entry is not a LoadGen accuracy record ({exc})",
                             hint="run the accuracy test again") from None
    return samples


def code_judge(dataset_path: Path, subsets: Sequence[str], release: str,
               directory: Path | None = None) -> reasoning.CodeJudge | None:
    """The LiveCodeBench judge, where the dataset has LiveCodeBench samples."""
    if not any("livecodebench" in s.lower() for s in subsets):
        return None
    if not release:
        raise DatasetError("the card names no LiveCodeBench release",
                           hint="set accuracy.livecodebench_release in the card")
    where = directory or dataset_path.parent / LCB_DIRECTORY
    return reasoning.CodeJudge(livecodebench.load(where, release))


def flavor_of(accuracy: LLMAccuracySpec) -> reasoning.Flavor:
    """Which reference evaluation scores the card (its ``accuracy.evaluation``)."""
    return "deepseek-r1" if accuracy.evaluation == "deepseek-r1" else "gpt-oss-120b"


def rescore(log: Path, dataset: LLMDataset, accuracy: LLMAccuracySpec) -> dict[str, Any]:
    """The reference's result dict for an accuracy log (every entry, in its order) over
    ``dataset`` (its sub-datasets, ground truths, tokenizer and LiveCodeBench files),
    with ``gen_num`` (the checker's sample count) added."""
    flavor = flavor_of(accuracy)
    if dataset.subsets is None:
        raise DatasetError(f"{dataset.path}: the card names no sub-dataset field",
                           hint="set dataset.subset_field in the card")
    tokenizer: Any = dataset.tokenizer
    decode = tokenizer.decode if flavor == "deepseek-r1" else tokenizer.decode_special
    samples = log_samples(log, decode)
    judge = code_judge(dataset.path, dataset.subsets, accuracy.livecodebench_release)
    result = reasoning.score(samples, dataset.subsets, dataset.references, flavor, judge)
    result["gen_num"] = result["num-samples"]
    return result


def shown(result: dict[str, Any]) -> dict[str, Any]:
    """The result dict as accuracy.txt's second line holds it (no per-sample verdicts)."""
    return {k: v for k, v in result.items() if k != "correct"}


def score_log(test_dir: Path, dataset: LLMDataset, accuracy: LLMAccuracySpec,
              targets: dict[str, float], upper_limits: dict[str, float]
              ) -> tuple[dict[str, object], bool, list[str], str]:
    """The result dict, the verdict against the round's targets, a line per check, and the
    log's hash (the shape of ``suite.llm.accuracy.score_round_log``)."""
    if accuracy.evaluation == "bfcl-v4":
        from suite.llm.round import bfcl_score

        return bfcl_score.score_log(test_dir, dataset, targets, upper_limits)
    flavor = flavor_of(accuracy)
    log = test_dir / ACCURACY_LOG
    result = rescore(log, dataset, accuracy)
    passed, lines = scoring.verdict(result, targets, upper_limits)
    digest = sha256_file(log)
    (test_dir / ACCURACY_TXT).write_text(
        f"{reasoning.printed(result, flavor)}\n{shown(result)!r}\nhash={digest}\n",
        encoding="utf-8")
    return result, passed, lines, digest
