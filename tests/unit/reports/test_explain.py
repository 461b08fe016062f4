"""'Explain this INVALID': condition, evidence, knob and direction, from the detail log."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from suite.logs import parse_detail_log
from suite.reports.explain import explain
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


#: One INVALID condition each: (scenario, detail-log values, evidence, advice, not in advice).
_SINGLE_CONDITION = {
    "offline too fast: raise expected_qps": (Scenario.OFFLINE, {
        "result_validity": "INVALID", "result_min_duration_met": False,
        "result_samples_per_second": 50_000.0, "effective_samples_per_query": 22_000,
        "effective_min_duration_ms": 1000, "effective_target_qps": 20_000, "num_errors": 0,
    }, ["0.44 s < 1 s"], ["raise loadgen.expected_qps to about 50,000"], []),
    "singlestream out of queries: lower expected_latency": (Scenario.SINGLE_STREAM, {
        "result_validity": "INVALID", "result_min_duration_met": False,
        "result_query_count": 2001, "result_mean_latency_ns": 77_800,
        "effective_min_duration_ms": 1000, "num_errors": 0,
    }, ["ran out of generated queries after 2001"],
        ["lower loadgen.expected_latency_ms to about 0.0778"], []),
    # 0.9 x what it completed, not 300k x 10/588 (about 5,100)
    "server fell behind: step back to what it completed": (Scenario.SERVER, {
        "result_validity": "INVALID", "result_perf_constraints_met": False,
        "early_stopping_met": True, "effective_target_qps": 300_000,
        "effective_target_latency_ns": 10_000_000, "effective_target_latency_percentile": 0.99,
        "result_99.00_percentile_latency_ns": 588_000_000, "num_errors": 0,
        "result_completed_samples_per_sec": 251_000.0,
    }, ["completed only 251,000 samples/s"], ["lower loadgen.target_qps to about 225,900"], []),
    # SingleStream's advice (expected_latency_ms) is not Server's
    "server stopped by max_duration: names it": (Scenario.SERVER, {
        "result_validity": "INVALID", "result_min_duration_met": False,
        "result_query_count": 310, "effective_min_duration_ms": 2000,
        "effective_max_duration_ms": 300, "num_errors": 0,
    }, ["max_duration_ms = 0.3 s < min_duration 2 s"], ["raise loadgen.max_duration_ms"],
        ["expected_latency_ms"]),
}


@pytest.mark.parametrize(("scenario", "values", "evidence", "advice", "not_advised"),
                         list(_SINGLE_CONDITION.values()), ids=list(_SINGLE_CONDITION))
def test_one_condition_is_explained_with_its_evidence_and_knob(
        tmp_path: Path, scenario: Scenario, values: dict[str, object], evidence: list[str],
        advice: list[str], not_advised: list[str]) -> None:
    [finding] = explain(_summary(tmp_path, scenario, values))
    for text in evidence:
        assert text in finding.evidence
    for text in advice:
        assert text in finding.advice
    for text in not_advised:
        assert text not in finding.advice


def test_a_valid_run_needs_no_explanation(tmp_path: Path) -> None:
    perf = _summary(tmp_path, Scenario.OFFLINE, {
        "result_validity": "VALID", "result_min_duration_met": True,
        "result_min_queries_met": True, "early_stopping_met": True, "num_errors": 0,
    })
    assert explain(perf) == []


#: A tinylm Interactive-like Server run that broke its TTFT bound, with the keys a real
#: `suite run --benchmark tinylm --scenario server --backend torch-llm --quick` logs.
_LLM_SERVER = {
    "result_validity": "INVALID", "result_perf_constraints_met": False,
    "early_stopping_met": False, "effective_target_qps": 16,
    "effective_target_latency_ns": 20_000_000_000, "effective_target_latency_percentile": 0.99,
    "requested_server_ttft_latency": 500_000_000, "requested_server_tpot_latency": 50_000_000,
    "result_99.00_percentile_latency_ns": 1_184_333_009, "num_errors": 0,
    "result_scheduled_samples_per_sec": 15.5, "result_completed_samples_per_sec": 15.32,
    "result_completed_tokens_per_second": 969.5,
    "result_first_token_50.00_percentile_latency_ns": 14_672_141,
    "result_first_token_90.00_percentile_latency_ns": 300_322_058,
    "result_first_token_99.00_percentile_latency_ns": 756_597_996,
    "result_first_token_mean_latency_ns": 117_605_045,
    "result_time_per_output_token_50.00_percentile_ns": 7_132_904,
    "result_time_per_output_token_90.00_percentile_ns": 14_290_382,
    "result_time_per_output_token_99.00_percentile_ns": 18_474_211,
    "result_time_to_output_token_mean": 8_034_069,
    "early_stopping_ttft_result": " * Run unsuccessful.\n * Would need 80 more queries",
    "early_stopping_tpot_result": " * Run successful.",
}


def test_llm_server_is_explained_by_ttft_and_tpot_not_the_query_latency(tmp_path: Path) -> None:
    perf = _summary(tmp_path, Scenario.SERVER, _LLM_SERVER)
    [latency, early] = explain(perf, parse_detail_log(tmp_path / "d.txt"))
    assert latency.condition == "TTFT bound exceeded"
    assert "TTFT p99 756.60 ms >= 500 ms bound (p50 14.67 ms, p90 300.32 ms)" in latency.evidence
    assert "TPOT p99 18.47 ms < 50 ms bound (p50 7.13 ms, p90 14.29 ms)" in latency.evidence
    assert "20000" not in latency.evidence and "Server p99" not in latency.evidence
    assert "lower loadgen.target_qps so fewer queries wait" in latency.advice
    assert "max_batch_size" not in latency.advice  # TPOT met: its knob is not suggested
    assert "about 10.6" in latency.advice  # 16 x 500/756.6
    assert "queued up" not in latency.evidence  # 15.32 of 15.5 scheduled: it kept up
    assert "TTFT: * Run unsuccessful. * Would need 80 more queries" in early.evidence
    assert "TPOT: * Run successful." in early.evidence


def test_llm_server_over_the_tpot_bound_suggests_a_smaller_batch(tmp_path: Path) -> None:
    perf = _summary(tmp_path, Scenario.SERVER, {
        **_LLM_SERVER, "result_first_token_99.00_percentile_latency_ns": 56_597_996,
        "result_time_per_output_token_99.00_percentile_ns": 80_000_000,
        "early_stopping_met": True})
    [latency] = explain(perf, parse_detail_log(tmp_path / "d.txt"))
    assert latency.condition == "TPOT bound exceeded"
    assert "TPOT p99 80.00 ms >= 50 ms bound" in latency.evidence
    assert "TTFT p99 56.60 ms < 500 ms bound" in latency.evidence
    assert "lower sut.max_batch_size" in latency.advice


def test_llm_server_without_its_detail_log_names_where_the_bounds_are(tmp_path: Path) -> None:
    # result.json alone (suite report's table): the p99s it holds, never the query bound
    perf = _summary(tmp_path, Scenario.SERVER, _LLM_SERVER)
    [latency, early] = explain(perf)
    assert latency.condition == "token latency bounds exceeded"
    assert "TTFT p99 756.60 ms; TPOT p99 18.47 ms at 16 QPS" in latency.evidence
    assert "requested_server_ttft_latency" in latency.evidence
    assert "20000" not in latency.evidence
    assert "early_stopping_ttft_result" in early.evidence


def test_llm_server_that_fell_behind_what_loadgen_scheduled_says_so(tmp_path: Path) -> None:
    perf = _summary(tmp_path, Scenario.SERVER, {**_LLM_SERVER,
                                                "result_completed_samples_per_sec": 12.0})
    [latency, _] = explain(perf, parse_detail_log(tmp_path / "d.txt"))
    assert "completed only 12.0 of 15.5 scheduled samples/s" in latency.evidence
    assert "about 10.8" in latency.advice  # 0.9 x what it completed


def test_requests_sent_again_are_in_the_notes_whatever_the_verdict() -> None:
    from suite.reports.explain import client_notes
    from suite.reports.table import run_notes
    from suite.results import RunResult, Status, TestResult

    test = TestResult(mode="performance", directory="/nowhere", status=Status.VALID,
                      exit_code=0, backend={"name": "openai",
                                            "run": {"requests_resent": 3}})
    [note] = client_notes(test.backend)
    assert note.condition == "requests sent again" and "3 request(s)" in note.evidence
    result = RunResult(run_id="r", run_dir="/nowhere", created_utc="", benchmark="tinylm",
                       scenario="offline", mode="performance", backend="openai",
                       round="v6.0", model_sha256="", division="closed", submittable=True,
                       non_submittable_reasons=[], status=Status.VALID, exit_code=0,
                       tests=[test])
    assert any("requests sent again: 3 request(s)" in line for line in run_notes([result]))
    assert client_notes({"run": {"requests_resent": 0}}) == client_notes({}) == []
