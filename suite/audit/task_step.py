"""Audit step 3 for a task card (``suite.tasks``): the accuracy re-scored from the
bundle's full accuracy log by the card's task, the scoring the run itself used (the
reference script's, ``TensorTask.score``).

The task needs its dataset to score (SQuAD's answers, COCO's boxes, KiTS19's labels):

* a stand-in run's (``config.stand_in``) is written again here from its seed, as
  ``suite run --stand-in`` writes it, into this machine's stand-in cache;
* a real run's is the auditor's copy (``suite audit --dataset-path``; whisper's
  tokenizer beside ``--model-path``).

Either way, what the run recorded of its dataset (``run.json``'s ``dataset``: digests,
counts, options) must be what is opened here, paths aside, or nothing is scored. The
re-score then matches ``accuracy.txt`` line for line, its ``hash=`` the log's sha256, and
its value the signed claim.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

from suite.audit.inputs import AuditData
from suite.audit.report import AuditReport
from suite.errors import SuiteError
from suite.paths import Paths

__all__ = ["task_accuracy"]

_HASH = re.compile(r"^hash=([0-9a-f]{64})$")
#: The claim is the checker's reading of an ``accuracy.txt`` line, printed by the task
#: (the reference script's format: three decimals at the coarsest, "mAP=12.345%").
_CLAIM_TOLERANCE = 0.0005


def task_accuracy(report: AuditReport, tree: Path, paths: Paths, claim: dict[str, Any],
                  info: dict[str, Any], data: AuditData) -> None:
    """Re-score one task card's result and report it (step 3)."""
    from suite.accuracy import decode_response_bytes
    from suite.harness.kinds.task import load_task
    from suite.models import load_card

    result = claim["result"]
    try:
        log = tree / "evidence" / result / "mlperf_log_accuracy.json"
        lines = (tree / result / "accuracy" / "accuracy.txt").read_text().splitlines()
        stated_hash = next(m.group(1) for line in lines if (m := _HASH.match(line.strip())))
        stated = [line for line in lines if line.strip() and not _HASH.match(line.strip())]
        card = load_card(paths, str(info["benchmark"]))
        task = load_task(card)
        dataset_dir, model_path, source = _dataset(paths, card, task, info, data)
        card = card.with_model_path(model_path) if model_path else card
        opened = task.open(dataset_dir, card)
        differs = _record_differs(info.get("dataset"), opened.describe())
        if differs:
            raise SuiteError(f"the dataset opened here ({source}) is not the run's: "
                             f"{differs}", hint="audit with the run's dataset (--dataset-path)")
        score = task.score(opened, decode_response_bytes(log, opened.total_count))
    except (OSError, StopIteration, KeyError, ValueError, IndexError, SuiteError) as exc:
        report.add(3, f"accuracy of {result}", False, [f"cannot recompute: {exc}"], result)
        return
    actual_hash = hashlib.sha256(log.read_bytes()).hexdigest()
    claimed = claim.get("accuracy")
    problems = []
    if actual_hash != stated_hash:
        problems.append(f"accuracy log sha256 {actual_hash} != accuracy.txt hash {stated_hash}")
    if list(score.lines) != stated:
        problems.append(f"re-scored {list(score.lines)} != accuracy.txt {stated}")
    if claimed is None or abs(score.value - float(claimed)) > _CLAIM_TOLERANCE:
        problems.append(f"re-scored {score.metric} {score.value:.5f} != signed claim {claimed}")
    evidence = [f"re-scored {score.metric} {score.value:.5f} by task '{task.name}' from the "
                f"full log ({opened.total_count} samples; dataset: {source})",
                f"accuracy.txt says {' | '.join(stated)}; the signed claim {claimed}", *problems]
    report.add(3, f"accuracy of {result}", not problems, evidence,
               f"{score.metric} {score.value:.5f}")


def _dataset(paths: Paths, card: Any, task: Any, info: dict[str, Any],
             data: AuditData) -> tuple[Path, str, str]:
    """(dataset directory, model path or "", where it came from) for the re-score."""
    config = info.get("config") or {}
    if config.get("stand_in") is True:
        from suite.config.model import STAND_IN_SEED
        from suite.harness.kinds.task import ensure_stand_in
        from suite.paths import stand_in_dir

        root = stand_in_dir(paths.cache, card.name, STAND_IN_SEED)
        ensure_stand_in(task, card, root, STAND_IN_SEED)
        return root / "dataset", str(root / "model.onnx"), f"the stand-in, written again at {root}"
    if not data.dataset_path:
        raise SuiteError(f"re-scoring {card.name} needs its dataset ({card.dataset.name})",
                         hint="give suite audit --dataset-path DIR (and --model-path where "
                              "the task reads files beside the model: whisper's tokenizer)")
    return Path(data.dataset_path), data.model_path, f"--dataset-path {data.dataset_path}"


def _record_differs(recorded: Any, opened: dict[str, Any]) -> str:
    """Where the run's dataset record and the opened dataset's differ ("" if nowhere),
    paths aside: the two machines keep the same files in different places. Only the
    task's own keys count (the pipeline adds its staging and the stand-in mark)."""
    if not isinstance(recorded, dict):
        return "the bundle's run.json records no dataset"
    ours, theirs = _content(opened), _content({k: v for k, v in recorded.items()
                                               if k in opened})
    if ours == theirs:
        return ""
    keys = sorted(k for k in set(ours) | set(theirs) if ours.get(k) != theirs.get(k))
    first = keys[0]
    return f"{first}: recorded {theirs.get(first)!r}, opened {ours.get(first)!r}"


def _content(record: Any, prefix: str = "") -> dict[str, Any]:
    """A record flattened to dotted keys: an absolute path as a key becomes its file name
    (SQuAD's digests by file), as a value "<path>" (where the files lie is no content)."""
    if isinstance(record, dict):
        flat: dict[str, Any] = {}
        for key, value in record.items():
            name = Path(str(key)).name if str(key).startswith("/") else str(key)
            flat.update(_content(value, f"{prefix}{name}."))
        return flat
    if isinstance(record, (list, tuple)):
        return {prefix.rstrip("."): [_content(v) for v in record]}
    path = isinstance(record, str) and record.startswith("/")
    return {prefix.rstrip("."): "<path>" if path else record}
