"""'Explain this INVALID': condition, evidence, knob and direction, from the detail log."""

from __future__ import annotations

import json
from pathlib import Path

from suite.explain import explain
from suite.logs import parse_detail_log
from suite.results import summarize_performance
from suite.scenarios import Scenario


def _summary(tmp_path: Path, scenario: Scenario, values: dict[str, object]):  # type: ignore[no-untyped-def]
    lines = [":::MLLOG " + json.dumps({"key": k, "value": v, "metadata": {"is_error": False}})
             for k, v in values.items()]
    (tmp_path / "d.txt").write_text("\n".join(lines) + "\n")
    return summarize_performance(parse_detail_log(tmp_path / "d.txt"), scenario)


def test_server_over_the_bound_says_lower_target_qps(tmp_path: Path) -> None:
    perf = _summary(tmp_path, Scenario.SERVER, {
        "result_validity": "INVALID", "result_perf_constraints_met": False,
        "early_stopping_met": False, "effective_target_qps": 800,
        "effective_target_latency_ns": 15_000_000, "effective_target_latency_percentile": 0.99,
        "result_99.00_percentile_latency_ns": 31_000_000, "num_errors": 0,
        "result_completed_samples_per_sec": 799.5,  # kept up: the tail was the problem
        "early_stopping_result": " * Run unsuccessful.\n * Would need 500 more queries",
    })
    [latency, early] = explain(perf)
    assert "p99 31.00 ms > 15 ms bound at 800 QPS" in latency.evidence
    assert "lower loadgen.target_qps to about 400" in latency.advice
    assert "Would need 500 more queries" in early.evidence


def test_offline_too_fast_says_raise_expected_qps(tmp_path: Path) -> None:
    perf = _summary(tmp_path, Scenario.OFFLINE, {
        "result_validity": "INVALID", "result_min_duration_met": False,
        "result_samples_per_second": 50_000.0, "effective_samples_per_query": 22_000,
        "effective_min_duration_ms": 1000, "effective_target_qps": 20_000, "num_errors": 0,
    })
    [duration] = explain(perf)
    assert "0.44 s < 1 s" in duration.evidence
    assert "raise loadgen.expected_qps to about 50,000" in duration.advice


def test_single_stream_out_of_queries_says_lower_expected_latency(tmp_path: Path) -> None:
    perf = _summary(tmp_path, Scenario.SINGLE_STREAM, {
        "result_validity": "INVALID", "result_min_duration_met": False,
        "result_query_count": 2001, "result_mean_latency_ns": 77_800,
        "effective_min_duration_ms": 1000, "num_errors": 0,
    })
    [duration] = explain(perf)
    assert "ran out of generated queries after 2001" in duration.evidence
    assert "lower loadgen.expected_latency_ms to about 0.0778" in duration.advice


def test_a_valid_run_needs_no_explanation(tmp_path: Path) -> None:
    perf = _summary(tmp_path, Scenario.OFFLINE, {
        "result_validity": "VALID", "result_min_duration_met": True,
        "result_min_queries_met": True, "early_stopping_met": True, "num_errors": 0,
    })
    assert explain(perf) == []


def test_server_that_fell_behind_says_step_back_to_what_it_completed(tmp_path: Path) -> None:
    perf = _summary(tmp_path, Scenario.SERVER, {
        "result_validity": "INVALID", "result_perf_constraints_met": False,
        "early_stopping_met": True, "effective_target_qps": 300_000,
        "effective_target_latency_ns": 10_000_000, "effective_target_latency_percentile": 0.99,
        "result_99.00_percentile_latency_ns": 588_000_000, "num_errors": 0,
        "result_completed_samples_per_sec": 251_000.0,
    })
    [latency] = explain(perf)
    assert "completed only 251,000 samples/s" in latency.evidence
    # 0.9 x what it completed, not 300k x 10/588 (about 5,100)
    assert "lower loadgen.target_qps to about 225,900" in latency.advice


def test_server_stopped_by_max_duration_names_it(tmp_path: Path) -> None:
    perf = _summary(tmp_path, Scenario.SERVER, {
        "result_validity": "INVALID", "result_min_duration_met": False,
        "result_query_count": 310, "effective_min_duration_ms": 2000,
        "effective_max_duration_ms": 300, "num_errors": 0,
    })
    [duration] = explain(perf)
    assert "max_duration_ms = 0.3 s < min_duration 2 s" in duration.evidence
    assert "raise loadgen.max_duration_ms" in duration.advice
    assert "expected_latency_ms" not in duration.advice  # SingleStream's advice, not Server's
