"""gpt-oss-120b end to end, one run per test kind: performance and accuracy (Offline, the
23 fixture outputs scored as the reference's eval_mlperf_accuracy.py printed them), TEST07
and TEST09 (constants.py models_TEST07/models_TEST09), each failing once then passing,
package, verify, audit with the re-score and both verdicts re-derived, and a tampered
accuracy log caught by the re-score (tests/support/reasoning_evidence.py)."""

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
    return ev.build("gpt-oss-120b", tmp_path_factory.mktemp("gpt-oss-120b"))


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


def test_the_audit_re_scores_exact_match_and_re_derives_test07_and_test09(
        evidence: ev.Evidence) -> None:
    ev.the_audit_re_scores_exact_match_and_re_derives_test07_and_test09(evidence)


def test_a_tampered_accuracy_log_is_caught_by_the_re_score(evidence: ev.Evidence,
                                                           tmp_path: Path) -> None:
    ev.a_tampered_accuracy_log_is_caught_by_the_re_score(evidence, tmp_path)


@pytest.mark.timing
def test_the_performance_test_is_valid(evidence: ev.Evidence) -> None:
    ev.the_performance_test_is_valid(evidence)


def test_a_failing_attempt_fails_as_the_official_script_says(evidence: ev.Evidence) -> None:
    ev.a_failing_attempt_fails_as_the_official_script_says(evidence)
