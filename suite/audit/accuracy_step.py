"""Audit step 3: each result's accuracy recomputed from the bundle's full accuracy log.

The recomputation is the benchmark's kind's (``_ACCURACY_BY_KIND``): top-1 against the
dataset's labels for a classification card, the card's task's own score for a task card
(``task_step``: the reference script's, as the run scored it), ROUGE and tokens per
sample (or the round's targets) for a text-generation card (``suite.llm.audit``). Each is
compared with the result's ``accuracy.txt`` and the signed claim.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

import numpy as np

from suite.audit.inputs import AuditData
from suite.audit.report import AuditReport
from suite.errors import SuiteError
from suite.models import Kind, card_kind
from suite.paths import Paths

__all__ = ["accuracy_step"]

_ACC = re.compile(r"^accuracy=([\d.]+)%")
_HASH = re.compile(r"^hash=([0-9a-f]{64})$")


def accuracy_step(report: AuditReport, tree: Path, paths: Paths, claim: dict[str, Any],
                  info: dict[str, Any], data: AuditData) -> None:
    """Recompute one result's accuracy (``info``: its evidence's run.json) and report it."""
    kind = card_kind(paths, str(info["benchmark"]))
    if kind is Kind.TENSOR and _is_task_card(paths, str(info["benchmark"])):
        from suite.audit.task_step import task_accuracy

        task_accuracy(report, tree, paths, claim, info, data)
        return
    _ACCURACY_BY_KIND[kind](report, tree, paths, claim, info, data)


def _is_task_card(paths: Paths, benchmark: str) -> bool:
    """Whether the benchmark's card is a task card (``suite.tasks``): re-scored by its task."""
    from suite.models import load_card

    try:
        return load_card(paths, benchmark).is_task_card
    except SuiteError:  # no card: the top-1 path says so in its own evidence
        return False


def _top1_accuracy(report: AuditReport, tree: Path, paths: Paths, claim: dict[str, Any],
                   info: dict[str, Any], data: AuditData) -> None:
    """Top-1, recomputed from the full accuracy log and the dataset's labels."""
    from suite import datasets
    from suite.accuracy import decode_accuracy_log
    from suite.models import load_card
    from suite.postprocess import make_postprocess

    result = claim["result"]
    try:
        log = tree / "evidence" / result / "mlperf_log_accuracy.json"
        lines = (tree / result / "accuracy" / "accuracy.txt").read_text().splitlines()
        stated = next(float(m.group(1)) for line in lines if (m := _ACC.match(line)))
        stated_hash = next(m.group(1) for line in lines if (m := _HASH.match(line.strip())))
        card = load_card(paths, info["benchmark"])
        labels = datasets.create(card).labels
        _, dtype = make_postprocess(card)
        predictions = decode_accuracy_log(log, dtype, len(labels))
    except (OSError, StopIteration, KeyError, ValueError, SuiteError) as exc:
        report.add(3, f"accuracy of {result}", False, [f"cannot recompute: {exc}"], result)
        return
    good = int(np.sum(predictions == labels))
    value = round(100.0 * good / len(labels), 3)
    actual_hash = hashlib.sha256(log.read_bytes()).hexdigest()
    claimed = claim.get("accuracy")
    problems = []
    if actual_hash != stated_hash:
        problems.append(f"accuracy log sha256 {actual_hash} != accuracy.txt hash {stated_hash}")
    if abs(value - stated) > 0.0005:
        problems.append(f"recomputed {value:.3f}% != accuracy.txt {stated:.3f}%")
    if claimed is None or abs(value - float(claimed)) > 0.0005:
        problems.append(f"recomputed {value:.3f}% != signed claim {claimed}")
    evidence = [f"recomputed top-1 {value:.3f}% ({good}/{len(labels)}) from the full log",
                f"accuracy.txt says {stated:.3f}%, the signed claim {claimed}", *problems]
    report.add(3, f"accuracy of {result}", not problems, evidence, f"{value:.3f}%")


def _llm_accuracy(report: AuditReport, tree: Path, paths: Paths, claim: dict[str, Any],
                  info: dict[str, Any], data: AuditData) -> None:
    """ROUGE and tokens per sample, recomputed from the full accuracy log (``suite.llm.audit``)."""
    from suite.llm.audit import recompute_accuracy

    result = claim["result"]
    try:
        passed, evidence, found = recompute_accuracy(tree, paths, result, info, claim,
                                                     data.dataset_path, data.model_path)
    except (OSError, StopIteration, KeyError, ValueError, SyntaxError, SuiteError) as exc:
        report.add(3, f"accuracy of {result}", False, [f"cannot recompute: {exc}"], result)
        return
    report.add(3, f"accuracy of {result}", passed, evidence, found)
    _reasoning_compliance(report, tree, paths, result, info, data)


def _reasoning_compliance(report: AuditReport, tree: Path, paths: Paths, result: str,
                          info: dict[str, Any], data: AuditData) -> None:
    """A reasoning card's TEST07 and TEST09, re-derived from their full logs (each a check
    of its own; ``suite.llm.reasoning_audit``)."""
    from suite.llm.audit import reasoning_compliance

    try:
        checks = reasoning_compliance(tree, paths, result, info, data.dataset_path,
                                      data.model_path)
    except (OSError, KeyError, ValueError, SuiteError) as exc:
        report.add(3, f"compliance of {result}", False, [f"cannot re-derive: {exc}"], result)
        return
    for name, passed, evidence, found in checks:
        report.add(3, name, passed, evidence, found)


#: Step 3's recomputation for each kind of benchmark (``suite.models.Kind``).
_ACCURACY_BY_KIND = {Kind.TENSOR: _top1_accuracy, Kind.TEXT_GENERATION: _llm_accuracy}
