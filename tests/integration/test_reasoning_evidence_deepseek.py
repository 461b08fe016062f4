"""deepseek-r1 end to end, one run per test kind: performance and accuracy (Offline, the
35 fixture outputs scored as the reference's eval_accuracy.py printed them), TEST06 (the
round requires it: constants.py models_TEST06), package, verify, audit with the re-score,
and a tampered accuracy log caught by it (tests/support/reasoning_evidence.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import reasoning_evidence as ev

pytest.importorskip("aiohttp", reason="the openai backend needs aiohttp (.[openai])")
pytest.importorskip("pandas", reason="the reasoning datasets are pandas files (.[llm])")
pytest.importorskip("sympy", reason="MATH500 grading needs sympy (.[reasoning])")
pytest.importorskip("pylatexenc", reason="MATH500 grading needs pylatexenc (.[reasoning])")
pytest.importorskip("fastparquet", reason="gpt-oss-120b's parquet needs .[reasoning]")


@pytest.fixture(scope="module")
def evidence(tmp_path_factory: pytest.TempPathFactory) -> ev.Evidence:
    return ev.build("deepseek-r1", tmp_path_factory.mktemp("deepseek-r1"))


def test_each_run_ends_as_the_reference_scores_it(evidence: ev.Evidence) -> None:
    ev.each_run_ends_as_the_reference_scores_it(evidence)


def test_the_tree_holds_each_compliance_test_in_the_official_layout(
        evidence: ev.Evidence) -> None:
    ev.the_tree_holds_each_compliance_test_in_the_official_layout(evidence)


def test_check_fails_a_missing_or_failed_compliance_test(evidence: ev.Evidence,
                                                         tmp_path: Path) -> None:
    ev.check_fails_a_missing_or_failed_compliance_test(evidence, tmp_path)


def test_the_bundle_verifies(evidence: ev.Evidence) -> None:
    ev.the_bundle_verifies(evidence)


def test_the_audit_re_scores_exact_match(evidence: ev.Evidence) -> None:
    ev.the_audit_re_scores_exact_match_and_re_derives_test07_and_test09(evidence)


def test_a_tampered_accuracy_log_is_caught_by_the_re_score(evidence: ev.Evidence,
                                                           tmp_path: Path) -> None:
    ev.a_tampered_accuracy_log_is_caught_by_the_re_score(evidence, tmp_path)


@pytest.mark.timing
def test_the_performance_test_is_valid(evidence: ev.Evidence) -> None:
    ev.the_performance_test_is_valid(evidence)
