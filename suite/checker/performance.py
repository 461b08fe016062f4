"""Performance rules (``PERF-*``): what ``performance/run_1/mlperf_log_detail.txt`` and
its summary must show. Like the official checker we trust LoadGen's own numbers and
read the *effective* settings it logged; in strict mode we also hold LoadGen's verdict
(``result_validity``), its error records and the measured Server p99 to the rules.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from suite.checker.context import (
    ResultContext,
    as_float,
    as_int,
    check_detail_log,
    counted_errors,
    log_problem,
    read_text,
)
from suite.checker.findings import RuleId
from suite.logs import DetailLog
from suite.scenarios import SPECS, Scenario

_EARLY_STOPPING = (Scenario.SINGLE_STREAM, Scenario.MULTI_STREAM, Scenario.SERVER)
_TTFT = "result_first_token_99.00_percentile_latency_ns"
_TPOT = "result_time_per_output_token_99.00_percentile_ns"
_SEED_KEYS = ("qsl_rng_seed", "sample_index_rng_seed", "schedule_rng_seed")


def check_performance(ctx: ResultContext) -> None:
    """Every ``PERF-*`` rule of one result."""
    path = ctx.files.perf_detail
    log = ctx.log(path)
    check_detail_log(ctx, RuleId.PERF_LOG, path, log, "performance",
                     "copy the run's performance/mlperf_log_detail.txt unchanged")
    _summary(ctx)
    if log is None:
        return  # every other PERF rule needs the log; PERF-LOG said why it is missing
    _scenario(ctx, log)
    _seeds(ctx, log)
    _settings(ctx, log)
    _latency(ctx, log)
    _tokens(ctx, log)
    _verdict(ctx, log)


def check_compliance_log(ctx: ResultContext, path: Path) -> None:
    """A TEST01/TEST04 performance log passes the same settings rules as the result's
    own (official C-2); findings name that log's file."""
    sub = dataclasses.replace(ctx, files=dataclasses.replace(ctx.files, perf_detail=path))
    log = sub.log(path)
    if path.exists():  # a missing log is COMP-DIR's finding; a corrupt one is PERF-LOG's
        with sub.rule(RuleId.PERF_LOG, path) as run:
            problem = log_problem(path, log, sub.log_reason(path)) if run else None
            if problem is not None:
                sub.add(RuleId.PERF_LOG, path, f"compliance performance log is {problem}",
                        expected="a LoadGen mlperf_log_detail.txt", found=problem,
                        hint="copy the compliance run's performance/mlperf_log_detail.txt "
                             "unchanged")
    if log is not None:
        _seeds(sub, log)
        _settings(sub, log)
        _latency(sub, log)
        _tokens(sub, log)


def _summary(ctx: ResultContext) -> None:
    path = ctx.files.perf_summary
    with ctx.rule(RuleId.PERF_SUMMARY, path) as run:
        if not run:
            return
        text = read_text(path)
        if text is None:
            ctx.add(RuleId.PERF_SUMMARY, path, "performance summary log is missing",
                    expected="mlperf_log_summary.txt", found="missing",
                    hint="copy the run's performance/mlperf_log_summary.txt")
        elif "Result is : VALID" not in text:
            ctx.add(RuleId.PERF_SUMMARY, path, "the summary log does not say 'Result is : VALID'",
                    expected="Result is : VALID", found=_result_line(text))


def _result_line(text: str) -> str:
    for line in text.splitlines():
        if line.startswith("Result is"):
            return line.strip()
    return "no 'Result is' line"


def _scenario(ctx: ResultContext, log: DetailLog) -> None:
    path = ctx.files.perf_detail
    with ctx.rule(RuleId.PERF_SCENARIO, path) as run:
        if run and ctx.scenario is not None:
            found = log.get("effective_scenario")
            expected = SPECS[ctx.scenario].loadgen_name
            if found != expected:
                ctx.add(RuleId.PERF_SCENARIO, path,
                        "the log's scenario differs from the directory's",
                        expected=expected, found=found,
                        hint="put the result under the scenario LoadGen ran")


def _seeds(ctx: ResultContext, log: DetailLog) -> None:
    path = ctx.files.perf_detail
    with ctx.rule(RuleId.PERF_SEEDS, path) as run:
        if not run:
            return
        seeds = ctx.rules.seeds.model_dump()
        for key in _SEED_KEYS:
            found = as_int(log.get(f"effective_{key}"))
            if found != seeds[key]:
                ctx.add(RuleId.PERF_SEEDS, path, f"{key} is wrong for round {ctx.rules.round}",
                        expected=seeds[key], found=log.get(f"effective_{key}"),
                        hint=f"rerun with the round's seeds (suite run --round {ctx.rules.round})")


def _settings(ctx: ResultContext, log: DetailLog) -> None:
    path = ctx.files.perf_detail
    model = ctx.model
    with ctx.rule(RuleId.PERF_SAMPLE_COUNT, path) as run:
        if run and model is not None:
            need = model.performance_sample_count
            found = as_int(log.get("effective_performance_sample_count"))
            if found is None or found < need:
                ctx.add(RuleId.PERF_SAMPLE_COUNT, path, "performance_sample_count too small",
                        expected=f">= {need}", found=log.get("effective_performance_sample_count"),
                        hint="do not override loadgen.performance_sample_count")
    with ctx.rule(RuleId.PERF_DURATION, path) as run:
        if run and not (model is not None and model.min_duration_exempt):
            need = ctx.sub.test_duration_ms
            found = as_int(log.get("effective_min_duration_ms"))
            if found is None or found < need:
                ctx.add(RuleId.PERF_DURATION, path, "minimum duration below the round's",
                        expected=f">= {need}", found=log.get("effective_min_duration_ms"),
                        hint="run without --quick and without overriding loadgen.min_duration_ms")
    if ctx.scenario in _EARLY_STOPPING or ctx.scenario is None or model is None:
        return
    with ctx.rule(RuleId.PERF_MIN_QUERIES, path) as run:
        need_q = model.min_queries.get(ctx.dir_scenario or "")
        if run and need_q is not None:
            found = as_int(log.get("effective_min_query_count"))
            if found is None or found < need_q:
                ctx.add(RuleId.PERF_MIN_QUERIES, path, "min_query_count below the round's",
                        expected=f">= {need_q}", found=log.get("effective_min_query_count"))
    with ctx.rule(RuleId.PERF_OFFLINE_SPQ, path) as run:
        need_s = model.offline_min_samples_per_query
        if run and ctx.closed_like and ctx.scenario is Scenario.OFFLINE and need_s is not None:
            found = as_int(log.get("effective_samples_per_query"))
            if found is None or found < need_s:
                ctx.add(RuleId.PERF_OFFLINE_SPQ, path, "Offline query holds too few samples",
                        expected=f">= {need_s}", found=log.get("effective_samples_per_query"),
                        hint="raise loadgen.expected_qps")


def _latency(ctx: ResultContext, log: DetailLog) -> None:
    path = ctx.files.perf_detail
    if ctx.scenario not in _EARLY_STOPPING:
        return
    with ctx.rule(RuleId.PERF_EARLY_STOPPING, path) as run:
        if run and log.get("early_stopping_met") is not True:
            ctx.add(RuleId.PERF_EARLY_STOPPING, path, "early stopping condition not met",
                    expected=True, found=log.get("early_stopping_met"),
                    hint=str(log.get("early_stopping_result") or "run longer"))
    if ctx.scenario is not Scenario.SERVER or ctx.model is None:
        return
    bound_ns = _bound(ctx, ctx.model.latency_bound_ns)
    if bound_ns is None:
        return
    with ctx.rule(RuleId.PERF_LATENCY, path) as run:
        if run:
            found = as_int(log.get("effective_target_latency_ns"))
            if found is None or found > bound_ns:
                ctx.add(RuleId.PERF_LATENCY, path, "Server target latency above the bound",
                        expected=f"<= {bound_ns} ns", found=log.get("effective_target_latency_ns"),
                        hint="do not override loadgen.latency_bound_ms")
    if ctx.model.llm:
        return  # an LLM's whole-query latency has no bound: TTFT and TPOT do (_tokens)
    with ctx.rule(RuleId.PERF_LATENCY_MEASURED, path) as run:
        if run:
            p99 = as_float(log.get("result_99.00_percentile_latency_ns"))
            if p99 is None or p99 > bound_ns:
                ctx.add(RuleId.PERF_LATENCY_MEASURED, path, "measured Server p99 above the bound",
                        expected=f"<= {bound_ns} ns",
                        found=log.get("result_99.00_percentile_latency_ns"),
                        hint="lower loadgen.target_qps or sut.max_wait_us")


def _bound(ctx: ResultContext, table: dict[str, Any]) -> Any:
    """The bound of the result's scenario. Strict: the directory's scenario (an Interactive
    result is held to the Interactive row, inference_rules.adoc). Compat: the logged
    scenario, as the official checker does, which gives an Interactive dir Server's row."""
    logged = SPECS[ctx.scenario].loadgen_name if ctx.scenario is not None else None
    if ctx.strict and ctx.dir_scenario in table:
        return table[ctx.dir_scenario]
    return table.get(logged or "")


def _tokens(ctx: ResultContext, log: DetailLog) -> None:
    """LLMs: token latencies requested in every scenario; TTFT and TPOT p99 strictly
    below the bounds of Server and Interactive (checker P-11, inference_rules.adoc)."""
    path = ctx.files.perf_detail
    if ctx.model is None or not ctx.model.llm:
        return
    with ctx.rule(RuleId.PERF_TOKEN_LATENCIES, path) as run:
        if run and log.get("requested_use_token_latencies") is not True:
            ctx.add(RuleId.PERF_TOKEN_LATENCIES, path, "use_token_latencies was not requested",
                    expected=True, found=log.get("requested_use_token_latencies"),
                    hint="set <model>.<scenario>.use_token_latencies = 1 (mlperf.conf does)")
    bounds = _bound(ctx, ctx.model.token_latency_ns)
    if bounds is None or ctx.scenario is not Scenario.SERVER:
        return
    with ctx.rule(RuleId.PERF_TOKEN_BOUNDS, path) as run:
        if not run:
            return
        for name, key, bound in (("TTFT", _TTFT, bounds.ttft), ("TPOT", _TPOT, bounds.tpot)):
            found = as_float(log.get(key))
            if found is None or found >= bound:
                ctx.add(RuleId.PERF_TOKEN_BOUNDS, path, f"{name} p99 not below the "
                        f"{ctx.dir_scenario if ctx.strict else 'logged scenario'}'s bound",
                        expected=f"< {bound} ns", found=log.get(key),
                        hint="lower the target QPS; the bound is the round's")


def _verdict(ctx: ResultContext, log: DetailLog) -> None:
    path = ctx.files.perf_detail
    with ctx.rule(RuleId.PERF_VALIDITY, path) as run:
        if run and log.get("result_validity") != "VALID":
            ctx.add(RuleId.PERF_VALIDITY, path, "LoadGen did not call the run VALID",
                    expected="VALID", found=log.get("result_validity"),
                    hint=str(log.get("result_invalid_reason") or "see mlperf_log_summary.txt"))
    with ctx.rule(RuleId.PERF_ERRORS, path) as run:
        # The official checker reads these errors only with --submission-exceptions (and
        # then waives the uncommitted-build one); strict mode always reads them (P-3).
        errors = counted_errors(ctx, log)
        if run and (ctx.strict or ctx.exceptions) and errors:
            ctx.add(RuleId.PERF_ERRORS, path, f"LoadGen logged {len(errors)} error(s)",
                    expected="0 errors", found="; ".join(errors[:3]),
                    hint="fix the cause and rerun; an errored run is not a result")
