"""``suite audit``'s re-derivation of TEST07 and TEST09 (``suite.llm.reasoning_audit``)
on hand-built bundle trees: a check passes only when the verdict re-derived from the
whole log passes, the packaged verify file says the same, and the log is the one its
``accuracy.txt`` hashes; TEST07 needs the set it ran on beside ``--dataset-path``.
(The passing path through real runs: tests/support/reasoning_evidence.py.)"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from suite.config.rules import load_rules
from suite.llm.card import load_llm_card
from suite.llm.reasoning_audit import compliance_checks
from suite.paths import find_paths

PATHS = find_paths()
CARD = load_llm_card(PATHS, "gpt-oss-120b")
MODEL = load_rules(PATHS, "v6.1").models["gpt-oss-120b"]
RESULT = "closed/ORG/results/box/gpt-oss-120b/Offline"


def _tree(root: Path, tokens: int, says: str) -> Path:
    """A tree whose TEST09 log holds 3 outputs of ``tokens`` ids, its verify file ending
    ``says``, and a TEST07 whose run.json names a set nobody has."""
    log = json.dumps([{"seq_id": i, "qsl_idx": i, "data": "01000000" * tokens}
                      for i in range(3)]).encode()
    for test, verify, text in (("TEST09", "verify_output_len.txt", f"{says}\n"),
                               ("TEST07", "verify_accuracy.txt", "TEST PASS\n")):
        (root / RESULT / test / "accuracy").mkdir(parents=True)
        (root / RESULT / test / verify).write_text(text)
        (root / RESULT / test / "accuracy" / "accuracy.txt").write_text(
            f"hash={hashlib.sha256(log).hexdigest()}\n")
        whole = root / "evidence" / RESULT / test
        whole.mkdir(parents=True)
        (whole / "mlperf_log_accuracy.json").write_bytes(log)
        (whole / "run.json").write_text(json.dumps(
            {"dataset": {"file": "/x/acc_eval_compliance_gpqa.parquet", "sha256": "0" * 64}}))
    return root


def _checks(tree: Path, dataset: str = "") -> dict[str, tuple[bool, str, str]]:
    return {c.name.split()[0]: (c.passed, c.found, " ".join(c.evidence))
            for c in compliance_checks(tree, RESULT, CARD, MODEL, dataset, "")}


def test_test09_re_derived_from_its_log(tmp_path: Path) -> None:
    passed, found, evidence = _checks(_tree(tmp_path / "a", 1278, "TEST PASS"))["TEST09"]
    assert passed and found == "TEST PASS"
    assert "mean output tokens 1278.00 within [1150.38, 1406.02]" in evidence


def test_a_test09_pass_its_log_contradicts_fails(tmp_path: Path) -> None:
    passed, found, evidence = _checks(_tree(tmp_path / "a", 100, "TEST PASS"))["TEST09"]
    assert not passed and found == "TEST FAIL"
    assert "verify_output_len.txt says TEST PASS; re-derived: TEST FAIL" in evidence


def test_a_log_other_than_the_hashed_one_fails(tmp_path: Path) -> None:
    tree = _tree(tmp_path / "a", 1278, "TEST PASS")
    whole = tree / "evidence" / RESULT / "TEST09" / "mlperf_log_accuracy.json"
    whole.write_text(whole.read_text().replace("[", "[ ", 1))  # same verdict, other bytes
    passed, _, evidence = _checks(tree)["TEST09"]
    assert not passed and "TEST09 log sha256" in evidence


def test_test07_without_the_set_it_ran_on_cannot_be_re_derived(tmp_path: Path) -> None:
    given = tmp_path / "acc" / "acc_eval_inputs.parquet"
    given.parent.mkdir()
    given.write_bytes(b"PAR1")
    passed, found, evidence = _checks(_tree(tmp_path / "a", 1278, "TEST PASS"),
                                      str(given))["TEST07"]
    assert not passed and found == "error"
    assert "TEST07 ran on acc_eval_compliance_gpqa.parquet" in evidence
    assert "no such file at or beside --dataset-path" in evidence
