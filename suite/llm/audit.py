"""The audit's LLM accuracy check: ROUGE and tokens per sample recomputed from a bundle's
full accuracy log (``suite audit`` step 3 calls it). tinylm's dataset ships with its card;
a round model's (llama3.1-8b, llama2-70b) is the auditor's copy of the official file
(``--dataset-path``, ``--model-path``), whose sha256 must equal the one the run recorded
and the bundle signed, and is scored as the round's evaluation scores it (a reasoning
card's exact_match, and its TEST07/TEST09 verdicts; qwen3.6-27b's BFCL mAP from its log of
recorded responses: ``reasoning_audit``).

Two verdicts, said apart: *reproduced* (the recomputed figures equal accuracy.txt's and the
signed claim: the step's pass) and *target met* (the recomputed figures against the round's
targets: a result reproduced at ROUGE-L 0.0 is reproduced, and misses its target)."""

from __future__ import annotations

import ast
import hashlib
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from suite.errors import BundleError
from suite.paths import Paths

if TYPE_CHECKING:
    from suite.config.rules import ModelRules, RuleSet

_HASH = re.compile(r"^hash=([0-9a-f]{64})$")

#: accuracy.txt's LLM keys (``suite.llm.accuracy``) by the checker's metric names.
KEYS = {"ROUGE1": "rouge1", "ROUGE2": "rouge2", "ROUGEL": "rougeL",
        "TOKENS_PER_SAMPLE": "tokens_per_sample"}


def recompute_accuracy(tree: Path, paths: Paths, result: str, info: dict[str, Any],
                       claim: dict[str, Any], dataset_path: str = "",
                       model_path: str = "") -> tuple[bool, list[str], str]:
    """(passed, evidence, found): every recomputed score must equal accuracy.txt's, the
    log's sha256 its ``hash=`` line, and the round's metric the signed claim.

    Raises ``OSError``, ``StopIteration``, ``KeyError``, ``ValueError`` or ``SyntaxError``
    (``ast.literal_eval``), or a ``SuiteError``, when the bundle gives nothing to
    recompute from.
    """
    from suite.config.rules import load_rules
    from suite.llm.accuracy import decode_outputs, score
    from suite.llm.card import card_name, load_llm_card
    from suite.llm.dataset import LLMDataset

    log = tree / "evidence" / result / "mlperf_log_accuracy.json"
    lines = [line.strip() for line in (tree / result / "accuracy" / "accuracy.txt")
             .read_text().splitlines() if line.strip()]
    stated = ast.literal_eval(next(line for line in lines if line.startswith("{")))
    stated_hash = next(m.group(1) for line in lines if (m := _HASH.match(line)))
    if not isinstance(stated, dict):
        raise BundleError(f"{result}/accuracy/accuracy.txt holds no metrics dict",
                          hint="the packaged accuracy.txt must carry the ROUGE dict")
    benchmark = str(info["benchmark"])
    rules = load_rules(paths, str(info["round"]))
    metric = rules.benchmark(benchmark).accuracy_metric
    card = load_llm_card(paths, card_name(benchmark))
    if card.accuracy.evaluation:  # a reasoning card: exact_match, as its reference scores it
        from suite.llm.reasoning_audit import recompute

        return recompute(tree, result, info, claim, card, _model_rules(rules, benchmark,
                                                                       info), dataset_path,
                         model_path)
    problems = []
    if card.dataset.format == "tinylm-json":
        dataset = LLMDataset(card)  # the card's dataset, never the bundle's
        outputs = decode_outputs(log, dataset.total_count)
        texts = [dataset.tokenizer.decode(o) for o in outputs]
        target = rules.benchmark(benchmark).accuracy_target
        scores, per_sample, met = score(outputs, texts, dataset.references, card, target)
        recomputed: dict[str, Any] = {**scores, "tokens_per_sample": per_sample}
        ref, tol = card.accuracy.tokens_per_sample, card.accuracy.tokens_per_sample_tolerance
        target_lines = [f"rougeL {scores['rougeL']} >= {target}",
                        f"tokens_per_sample {per_sample} within "
                        f"[{ref * (1 - tol):.4f}, {ref * (1 + tol):.4f}]"]
    else:
        from suite.llm.round import scoring as round_accuracy

        dataset = LLMDataset(card, dataset_path, model_path)
        recorded = (info.get("dataset") or {}).get("sha256")
        if recorded != dataset.sha256:
            problems.append(f"dataset {dataset.path} has sha256 {dataset.sha256}; the run "
                            f"recorded {recorded or 'none'}")
        targets = _model_rules(rules, benchmark, info)
        metric = next(iter(targets.targets))  # the checker states (and the claim signs) it
        outputs = decode_outputs(log, dataset.total_count)
        texts = [dataset.tokenizer.decode(o) for o in outputs]
        recomputed = round_accuracy.score(outputs, texts, dataset.references,
                                          with_tokens="TOKENS_PER_SAMPLE" in targets.targets)
        met, target_lines = round_accuracy.verdict(recomputed, targets.targets,
                                                   targets.upper_limits)
    actual_hash = hashlib.sha256(log.read_bytes()).hexdigest()
    if actual_hash != stated_hash:
        problems.append(f"accuracy log sha256 {actual_hash} != accuracy.txt hash {stated_hash}")
    for key, value in recomputed.items():
        if key not in stated or abs(float(stated[key]) - float(value)) > 0.00005:
            problems.append(f"recomputed {key} {value} != accuracy.txt {stated.get(key)}")
    value = float(recomputed[_key(metric)])
    claimed = claim.get("accuracy")
    if claimed is None or abs(value - float(claimed)) > 0.00005:
        problems.append(f"recomputed {metric} {value} != signed claim {claimed}")
    reproduced = "yes" if not problems else "no"
    verdict = f"reproduced: {reproduced}; target met: {'yes' if met else 'no'}"
    evidence = [f"recomputed from the full log ({len(outputs)} samples): "
                + ", ".join(f"{k} {v}" for k, v in recomputed.items()),
                f"accuracy.txt says {stated}, the signed claim {metric} {claimed}", *problems,
                f"{verdict} ({'; '.join(target_lines)})"]
    return not problems, evidence, f"{metric} {value} ({verdict})"


def _model_rules(rules: RuleSet, benchmark: str, info: dict[str, Any]) -> ModelRules:
    """The round's row of the benchmark's model (its targets and compliance tests)."""
    model = rules.models.get(rules.benchmark(benchmark).checker_model)
    if model is None:
        raise BundleError(f"round {info['round']} has no accuracy targets for {benchmark}")
    return model


def reasoning_compliance(tree: Path, paths: Paths, result: str, info: dict[str, Any],
                         dataset_path: str = "", model_path: str = ""
                         ) -> list[tuple[str, bool, list[str], str]]:
    """A reasoning card's TEST07/TEST09 re-derived from their logs (``reasoning_audit``),
    as (name, passed, evidence, found); none for any other card."""
    from suite.config.rules import load_rules
    from suite.llm.card import card_name, load_llm_card
    from suite.llm.reasoning_audit import compliance_checks

    benchmark = str(info["benchmark"])
    card = load_llm_card(paths, card_name(benchmark))
    if not card.accuracy.evaluation:
        return []
    rules = load_rules(paths, str(info["round"]))
    checks = compliance_checks(tree, result, card, _model_rules(rules, benchmark, info),
                               dataset_path, model_path)
    return [(c.name, c.passed, c.evidence, c.found) for c in checks]


def _key(metric: str) -> str:
    """accuracy.txt's key of a checker metric name."""
    from suite.llm.round.scoring import METRIC_KEYS

    return KEYS.get(metric.upper()) or METRIC_KEYS.get(metric.upper(), "rougeL")

