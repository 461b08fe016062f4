"""Audit step 3 on an LLM result (issue 36, item 12): reproducing accuracy.txt is not
meeting the target. A tinylm log whose every output is EOS scores ROUGE-L 0.0; the audit
reproduces that figure exactly and must say both: reproduced yes, target met no."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from suite.audit import steps
from suite.audit.inputs import AuditData
from suite.audit.report import AuditReport
from suite.llm.accuracy import score
from suite.llm.card import load_llm_card
from suite.llm.dataset import LLMDataset
from suite.models import sha256_file
from suite.paths import find_paths

RESULT = "closed/ORG/results/box/tinylm/Offline"


def _tree(tmp_path: Path) -> Path:
    paths = find_paths()
    card = load_llm_card(paths, "tinylm")
    dataset = LLMDataset(card)
    eos = card.tokenizer.eos_id
    outputs = [[eos]] * dataset.total_count
    log = tmp_path / "evidence" / RESULT / "mlperf_log_accuracy.json"
    log.parent.mkdir(parents=True)
    log.write_text(json.dumps([{"seq_id": i, "qsl_idx": i,
                                "data": np.array(o, dtype="<i4").tobytes().hex()}
                               for i, o in enumerate(outputs)]))
    texts = [dataset.tokenizer.decode(o) for o in outputs]
    scores, per_sample, _ = score(outputs, texts, dataset.references, card, 0.0)
    acc = tmp_path / RESULT / "accuracy" / "accuracy.txt"
    acc.parent.mkdir(parents=True)
    acc.write_text(f"{ {**scores, 'tokens_per_sample': per_sample}!r}\n"
                   f"hash={sha256_file(log)}\n")
    (log.parent / "run.json").write_text(json.dumps({
        "benchmark": "tinylm", "scenario": "offline", "backend": "torch-llm",
        "round": "v6.1", "model_sha256": "", "config": {}}))
    return tmp_path


def test_step3_says_reproduced_and_target_not_met_for_rouge_zero(tmp_path: Path) -> None:
    tree = _tree(tmp_path)
    report = AuditReport(bundle="b", bundle_sha256="0" * 64)
    steps._accuracy(report, tree, find_paths(), {"result": RESULT, "accuracy": 0.0},
                    AuditData())
    (check,) = [c for c in report.checks if c.step == 3]
    # the figure is reproduced (the step's pass), and the verdict says the target is missed
    assert check.passed, check.evidence
    assert "reproduced: yes" in (check.found or "")
    assert "target met: no" in (check.found or ""), check.found
    assert any("target met: no" in line and "rougeL 0.0" in line for line in check.evidence)
