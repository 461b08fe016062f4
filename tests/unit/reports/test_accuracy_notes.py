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


def test_the_default_table_shows_ttft_and_tpot_p99_beside_their_bounds(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Issue 40, item 3: an LLM Server run's default table showed only tokens/s."""
    import json

    from rich.console import Console

    from suite.reports.table import results_table
    from suite.results import PerformanceSummary

    (tmp_path / "mlperf_log_detail.txt").write_text("".join(
        ":::MLLOG " + json.dumps({"key": key, "value": value, "metadata": {}}) + "\n"
        for key, value in (("requested_server_ttft_latency", 2_000_000_000),
                           ("requested_server_tpot_latency", 100_000_000))))
    perf = PerformanceSummary(
        scenario="server", metric_key="k", metric_name="tokens per second",
        metric_value=1234.0, unit="tokens/s", result_validity="VALID", min_duration_met=True,
        min_queries_met=True, perf_constraints_met=True, early_stopping_met=True,
        early_stopping_result=None, invalid_reason=None, num_errors=0, errors=[],
        query_count=460, latency_ns={}, effective={}, loadgen_version="6.0",
        tokens={"ttft_p99_ns": 45_100_000.0, "tpot_p99_ns": 123_400_000.0,
                "tokens_per_second": 1234.0})
    test = TestResult(mode="performance", directory=str(tmp_path), status=Status.INVALID,
                      exit_code=2, performance=perf)
    result = RunResult.model_construct(benchmark="tinylm", scenario="server", backend="torch-llm",
                                       tests=[test], submittable=False, compliance=None)
    console = Console(width=100, record=True)
    console.print(results_table([result], compact=True))
    text = console.export_text()
    assert "TTFT/TPOT p99 ms" in text
    # the cell wraps at its " / " where 100 columns are too few; no cell is cut
    assert "45.1<2000 /" in text and "123.4>=100" in text, text
    assert "…" not in text, text
    assert max(len(line) for line in text.splitlines()) <= 100
