"""A failed accuracy target is explained under the results table (issue 40, item 11)."""

from __future__ import annotations

from suite.reports.table import accuracy_reasons, run_notes
from suite.results import AccuracyResult, RunResult, Status, TestResult


def _acc(**update: object) -> AccuracyResult:
    base = AccuracyResult(metric="ROUGEL", value=0.0, target=43.6, passed=False, good=8,
                          total=8, log_sha256="0" * 64, loadgen_errors=[])
    return base.model_copy(update=update)


def test_a_missed_target_names_the_score_and_the_target() -> None:
    (reason,) = accuracy_reasons(_acc())
    assert reason == ("ROUGEL 0.0000 is below the round's target 43.6000 (8 of 8 samples "
                      "scored)")


def test_tokens_per_sample_out_of_bounds_is_its_own_reason() -> None:
    acc = _acc(value=44.0, details={"tokens_per_sample": 12.0, "tokens_per_sample_min": 264.0,
                                    "tokens_per_sample_max": 323.0})
    (reason,) = accuracy_reasons(acc)
    assert "tokens per sample 12.0 is outside the round's bounds 264.0-323.0" in reason


def test_a_top1_miss_is_in_percent_and_reaches_the_run_notes() -> None:
    acc = AccuracyResult(metric="acc", value=70.0, target=75.6954, passed=False, good=350,
                         total=500, log_sha256="0" * 64, loadgen_errors=[])
    test = TestResult(mode="accuracy", directory="/nonexistent", status=Status.INVALID,
                      exit_code=2, accuracy=acc)
    result = RunResult.model_construct(benchmark="resnet50", scenario="offline", tests=[test],
                                       compliance=None, division="closed",
                                       non_submittable_reasons=[])
    notes = run_notes([result])
    assert ("resnet50 offline accuracy: accuracy FAIL because top-1 70.0000% is below the "
            "round's target 75.6954% (350 of 500 samples scored)") in notes


def test_a_passing_result_has_no_reason_to_print() -> None:
    acc = _acc(value=50.0, passed=True)
    test = TestResult(mode="accuracy", directory="/nonexistent", status=Status.VALID,
                      exit_code=0, accuracy=acc)
    result = RunResult.model_construct(benchmark="tinylm", scenario="offline", tests=[test],
                                       compliance=None, division="closed",
                                       non_submittable_reasons=[])
    assert not [n for n in run_notes([result]) if "accuracy FAIL" in n]
