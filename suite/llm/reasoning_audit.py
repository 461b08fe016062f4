"""The audit of a reasoning card's result (deepseek-r1, gpt-oss-120b): its exact_match
re-scored from the bundle's full accuracy log as the reference scores it, and its TEST07
and TEST09 verdicts re-derived from their own full logs (``suite audit`` step 3); and of
the tool-calling card's (qwen3.6-27b, ``evaluation = "bfcl-v4"``): its log of recorded
JSON responses re-scored by ``bfcl_score`` (the scoring the run used), its ``mAP=`` line
and breakdown compared as the reasoning cards' are (it has no compliance test).

The re-score needs what a bundle does not carry: the auditor's copy of the official
dataset file (its sha256 must be the one the run recorded and the bundle signed), the
model directory (its tokenizer) and, for LiveCodeBench samples, the ``livecodebench``
directory beside the dataset file (``reasoning_log``). The figures are compared with
``accuracy.txt`` as the reference prints them: its first line (what the checker and
TEST07 read: ``'exact_match': 71.964``, or deepseek-r1's dict) must be the re-scored
line to the last printed digit, and its result dict every re-scored value.

TEST07 (``compliance/TEST07/run_verification.py``): the compliance run's log re-scored on
the set it ran on (``evidence/<result>/TEST07/run.json`` names its file and sha256; the
auditor's file of that name is looked for beside ``--dataset-path``, as the official
download keeps ``acc/acc_eval_compliance_gpqa.parquet`` beside ``acc/acc_eval_inputs.parquet``),
its ``'exact_match'`` against ``test07_accuracy_threshold``. TEST09
(``compliance/TEST09/run_verification.py``): the mean output length of the log's entries
within ``test09_min_output_tokens``/``test09_max_output_tokens``. Each check passes only
if the re-derived verdict passes, the packaged ``verify_*.txt`` says the same, and the
log is the one whose sha256 ``TESTxx/accuracy/accuracy.txt`` names.
"""

from __future__ import annotations

import ast
import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from suite.errors import BundleError, SuiteError

if TYPE_CHECKING:
    from suite.config.rules import ModelRules
    from suite.llm.card import LLMCard

_HASH = re.compile(r"^hash=([0-9a-f]{64})$")
#: Where the bundle keeps a result's whole logs (``suite.submission.package.EVIDENCE_DIR``).
_EVIDENCE = "evidence"


@dataclass
class Check:
    """One audit check's outcome: (name, passed, evidence lines, what was found)."""

    name: str
    passed: bool
    evidence: list[str] = field(default_factory=list)
    found: str = ""


def _hash_line(path: Path) -> str:
    lines = [line.strip() for line in path.read_text(encoding="utf-8").splitlines()]
    found = [m.group(1) for line in lines if (m := _HASH.match(line))]
    if not found:
        raise BundleError(f"{path} names no hash= of its accuracy log")
    return found[-1]


def recompute(tree: Path, result: str, info: dict[str, Any], claim: dict[str, Any],
              card: LLMCard, model: ModelRules, dataset_path: str, model_path: str
              ) -> tuple[bool, list[str], str]:
    """(passed, evidence, found) of a reasoning result's accuracy re-score."""
    from suite.llm.dataset import LLMDataset
    from suite.llm.round import reasoning, reasoning_log, scoring

    log = tree / _EVIDENCE / result / "mlperf_log_accuracy.json"
    accuracy_txt = tree / result / "accuracy" / "accuracy.txt"
    lines = [line.strip() for line in accuracy_txt.read_text(encoding="utf-8").splitlines()
             if line.strip() and not line.startswith("hash=")]
    if len(lines) < 2:
        raise BundleError(f"{result}/accuracy/accuracy.txt holds no printed line and dict",
                          hint="package the run again: accuracy.txt carries both")
    stated = ast.literal_eval(lines[-1])
    if not isinstance(stated, dict):
        raise BundleError(f"{result}/accuracy/accuracy.txt's last metric line is no dict")
    dataset = LLMDataset(card, dataset_path, model_path)
    problems = []
    recorded = (info.get("dataset") or {}).get("sha256")
    if recorded != dataset.sha256:
        problems.append(f"dataset {dataset.path} has sha256 {dataset.sha256}; the run "
                        f"recorded {recorded or 'none'}")
    if card.accuracy.evaluation == "bfcl-v4":  # recorded responses, scored as the run did
        from suite.llm.round import bfcl_score

        rescored, metric = bfcl_score.rescore(log, dataset), "mAP"
        line, shown = bfcl_score.printed(rescored), rescored
    else:
        rescored, metric = reasoning_log.rescore(log, dataset, card.accuracy), "exact_match"
        line = reasoning.printed(rescored, reasoning_log.flavor_of(card.accuracy))
        shown = reasoning_log.shown(rescored)
    actual_hash, stated_hash = hashlib.sha256(log.read_bytes()).hexdigest(), \
        _hash_line(accuracy_txt)
    if actual_hash != stated_hash:
        problems.append(f"accuracy log sha256 {actual_hash} != accuracy.txt hash {stated_hash}")
    if lines[0] != line:
        problems.append(f"re-scored line {line} != accuracy.txt's {lines[0]}")
    for key, value in shown.items():
        if stated.get(key) != value:
            problems.append(f"re-scored {key} {value} != accuracy.txt {stated.get(key)}")
    value = float(rescored[metric])
    claimed = claim.get("accuracy")
    if claimed is None or abs(value - float(claimed)) > 0.00005:
        problems.append(f"re-scored {metric} {value} != signed claim {claimed}")
    met, target_lines = scoring.verdict(rescored, model.targets, model.upper_limits)
    verdict = f"reproduced: {'no' if problems else 'yes'}; target met: {'yes' if met else 'no'}"
    evidence = [f"re-scored from the full log ({rescored['gen_num']} samples) as the "
                f"reference scores it: {line}", f"accuracy.txt says {lines[0]}, the signed "
                f"claim {metric} {claimed}", *problems, f"{verdict} ({'; '.join(target_lines)})"]
    return not problems, evidence, f"{metric} {value} ({verdict})"


def compliance_checks(tree: Path, result: str, card: LLMCard, model: ModelRules,
                      dataset_path: str, model_path: str) -> list[Check]:
    """TEST07 and TEST09 re-derived, for each the round requires of the result's model."""
    checks = []
    for test in ("TEST07", "TEST09"):
        if test not in model.compliance_tests:
            continue
        name = f"{test} of {result}"
        try:
            checks.append(_rederive(tree, result, test, card, dataset_path, model_path, name))
        except (OSError, ValueError, KeyError, SyntaxError, SuiteError) as exc:
            checks.append(Check(name, False, [f"cannot re-derive: {exc}"], "error"))
    return checks


def _rederive(tree: Path, result: str, test: str, card: LLMCard, dataset_path: str,
              model_path: str, name: str) -> Check:
    from suite.accuracy import read_accuracy_entries
    from suite.llm import test07_09

    test_dir, whole = tree / result / test, tree / _EVIDENCE / result / test
    verify = test_dir / (test07_09.VERIFY_07 if test == test07_09.TEST07
                         else test07_09.VERIFY_09)
    if not verify.is_file():
        return Check(name, False, [f"the bundle holds no {test}/{verify.name} for {result}"],
                     "missing")
    log = whole / "mlperf_log_accuracy.json"
    problems = []
    actual, stated = hashlib.sha256(log.read_bytes()).hexdigest(), \
        _hash_line(test_dir / "accuracy" / "accuracy.txt")
    if actual != stated:
        problems.append(f"{test} log sha256 {actual} != {test}/accuracy/accuracy.txt {stated}")
    if test == test07_09.TEST09:
        entries = read_accuracy_entries(log)
        verdict09 = test07_09.verify_09(entries)
        passed, lines = verdict09.passed, verdict09.lines()
        shown = [f"{len(entries)} entries, mean output tokens {verdict09.mean:.2f} within "
                 f"[{verdict09.minimum}, {verdict09.maximum}]: {passed}"]
    else:
        passed, lines, shown = _test07(whole, log, card, dataset_path, model_path)
    says = "TEST PASS" in verify.read_text(encoding="utf-8")
    if says != passed:
        problems.append(f"{verify.name} says {'TEST PASS' if says else 'no TEST PASS'}; "
                        f"re-derived: {lines[-1]}")
    if not passed:
        problems.append(f"{test} re-derived from its log: {lines[-1]}")
    return Check(name, not problems, [*shown, *problems], lines[-1])


def _test07(whole: Path, log: Path, card: LLMCard, dataset_path: str, model_path: str
            ) -> tuple[bool, list[str], list[str]]:
    """TEST07's verdict on its log, re-scored on the set the compliance run recorded."""
    import json

    from suite.llm import test07_09
    from suite.llm.dataset import LLMDataset
    from suite.llm.round import reasoning, reasoning_log
    from suite.models import sha256_file

    described = json.loads((whole / "run.json").read_text(encoding="utf-8")).get("dataset") or {}
    recorded, named = described.get("sha256"), Path(str(described.get("file", ""))).name
    given = Path(dataset_path) if dataset_path else None
    candidates = [] if given is None else [given, given.parent / named]
    found = next((c for c in candidates if c.is_file() and sha256_file(c) == recorded), None)
    if found is None:
        raise BundleError(f"TEST07 ran on {named or 'an unrecorded set'} (sha256 {recorded}); "
                          "no such file at or beside --dataset-path",
                          hint="put the compliance set beside the --dataset-path file")
    dataset = LLMDataset(card, str(found), model_path)
    rescored = reasoning_log.rescore(log, dataset, card.accuracy)
    verdict = test07_09.verify_07(
        reasoning.printed(rescored, reasoning_log.flavor_of(card.accuracy)) + "\n")
    shown = [f"re-scored on {found.name} ({rescored['num-samples']} samples): "
             f"'exact_match' {verdict.score} against the threshold {verdict.threshold}"]
    return verdict.passed, verdict.lines(), shown
