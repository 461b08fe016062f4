"""Explain an INVALID performance result: the failing condition, its evidence, and the
knob to turn in which direction.

Everything here is read from LoadGen's own detail log (via ``PerformanceSummary``, and
the log itself where result.json does not hold a figure); suggestions are arithmetic on
those figures, labelled as estimates. An LLM Server run (token latencies on) is held to
its TTFT and TPOT bounds, not to the whole-query latency bound, so it is explained by them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from suite.logs import DetailLog
from suite.results import PerformanceSummary
from suite.scenarios import Scenario


@dataclass(frozen=True)
class Explanation:
    """One failed condition of a LoadGen verdict."""

    condition: str
    evidence: str
    advice: str

    def __str__(self) -> str:
        return f"{self.condition}: {self.evidence}. {self.advice}"


def _get(perf: PerformanceSummary, key: str, default: float = 0.0) -> float:
    value = perf.effective.get(key, default)
    return float(value) if isinstance(value, int | float) else default


def _duration_s(perf: PerformanceSummary, scenario: Scenario) -> float | None:
    value = perf.metric_value
    if scenario is Scenario.OFFLINE and value:
        return _get(perf, "samples_per_query") / value
    return None


def explain(perf: PerformanceSummary, log: DetailLog | None = None) -> list[Explanation]:
    """Why LoadGen judged ``perf`` INVALID (empty when it is VALID without errors).

    ``log`` is the test's detail log: for an LLM it holds what result.json does not (the
    TTFT/TPOT bounds LoadGen ran with, their percentiles, their early-stopping verdicts)."""
    scenario = Scenario(perf.scenario)
    llm = scenario is Scenario.SERVER and "ttft_p99_ns" in perf.tokens
    min_s = _get(perf, "min_duration_ms") / 1000
    found: list[Explanation] = []
    if perf.min_duration_met is False:
        found.append(_duration(perf, scenario, min_s))
    if perf.min_queries_met is False:
        found.append(Explanation(
            "min query count not met",
            f"{perf.query_count} queries < {int(_get(perf, 'min_query_count'))} required",
            "run longer (loadgen.min_duration_ms) or lower loadgen.expected_latency_ms so "
            "LoadGen generates enough queries",
        ))
    if perf.perf_constraints_met is False:
        found.append(_token_latency(perf, log) if llm else _latency(perf))
    if perf.early_stopping_met is False:
        found.append(Explanation(
            "early stopping not satisfied",
            _token_early_stopping(log) if llm else
            (perf.early_stopping_result or "").strip().replace("\n", " "),
            "run more queries: a longer loadgen.min_duration_ms, or for Server a lower "
            "loadgen.target_qps so fewer queries exceed the bound",
        ))
    if perf.num_errors:
        first = perf.errors[0] if perf.errors else "see mlperf_log_detail.txt"
        advice = ("remove loadgen.max_duration_ms (debugging only)" if "Max" in first
                  else "see harness.log and status.json in the test directory")
        found.append(Explanation("LoadGen logged errors",
                                 f"{perf.num_errors} error(s), first: {first}", advice))
    return found


def client_notes(backend: dict[str, Any]) -> list[Explanation]:
    """What an endpoint run's client did that a reader must weigh, whatever the verdict
    (``backend``: the test's backend record, its ``run`` from the client): requests sent
    again hide a server that closed a connection unanswered, maybe after reading it."""
    run = backend.get("run") or {}
    resent = run.get("requests_resent") if isinstance(run, dict) else None
    if not isinstance(resent, int) or resent <= 0:
        return []
    return [Explanation(
        "requests sent again",
        f"{resent} request(s) were sent again on a new connection after the server closed "
        "a kept-alive one without a byte of response (requests_resent)",
        "read the server's log for those closes: a server that read a request and died "
        "looks the same; its idle limit should exceed the client's 4 s keep-alive")]


def _duration(perf: PerformanceSummary, scenario: Scenario, min_s: float) -> Explanation:
    if scenario is Scenario.OFFLINE:
        rate = perf.metric_value or 0.0
        expected = _get(perf, "target_qps")
        ran = _duration_s(perf, scenario) or 0.0
        return Explanation(
            "min duration not met",
            f"the SUT processed {int(_get(perf, 'samples_per_query')):,} samples in {ran:.2f} s "
            f"< {min_s:g} s at {rate:,.0f} samples/s (expected_qps {expected:,.0f})",
            f"raise loadgen.expected_qps to about {rate:,.0f} (LoadGen issues 1.1 x duration x "
            f"expected_qps samples; `suite tune` finds it)",
        )
    if scenario is Scenario.SERVER:
        max_s = _get(perf, "max_duration_ms") / 1000
        # LoadGen schedules Server queries for min_duration at target_qps, so a Server
        # run ends short only when max_duration_ms stopped it first.
        return Explanation(
            "min duration not met",
            f"LoadGen stopped the run at {perf.query_count} queries"
            + (f" (loadgen.max_duration_ms = {max_s:g} s < min_duration {min_s:g} s)"
               if max_s else ""),
            "raise loadgen.max_duration_ms above loadgen.min_duration_ms (0: no limit)",
        )
    mean_ms = perf.latency_ns.get("mean", 0.0) / 1e6
    return Explanation(
        "min duration not met",
        f"LoadGen ran out of generated queries after {perf.query_count} queries "
        f"(mean latency {mean_ms:.4f} ms)",
        f"lower loadgen.expected_latency_ms to about {mean_ms:.4f} (LoadGen generates "
        f"2 x duration / expected latency queries; `suite tune` finds it)",
    )


def _latency(perf: PerformanceSummary) -> Explanation:
    bound_ms = _get(perf, "target_latency_ns") / 1e6
    percentile = _get(perf, "target_latency_percentile", 0.99) * 100
    key = f"{percentile:.2f}_percentile"
    observed_ms = perf.latency_ns.get(key, perf.latency_ns.get("99.00_percentile", 0.0)) / 1e6
    qps = _get(perf, "target_qps")
    # Latency is not proportional to the rate (it climbs steeply near capacity), so the
    # ratio to the bound is only a direction: never suggest more than halving.
    suggestion = qps * max(0.5, min(0.9, bound_ms / observed_ms)) if observed_ms else qps * 0.8
    evidence = (f"Server p{percentile:g} {observed_ms:.2f} ms > {bound_ms:g} ms bound at "
                f"{qps:,.0f} QPS")
    completed = perf.metric_value
    if completed and completed < _FELL_BEHIND * qps:
        # A queue grew without limit: the latency says how long, not how far to step
        # back. What the SUT did complete is the better estimate of what it sustains.
        suggestion = completed * 0.9
        evidence += (f"; the SUT completed only {completed:,.0f} samples/s, so queries "
                     "queued up behind it")
    return Explanation(
        "latency bound exceeded",
        evidence,
        f"lower loadgen.target_qps to about {suggestion:,.0f} (an estimate; `suite tune` finds "
        f"the highest VALID rate), or lower sut.max_wait_us so batches wait less",
    )


# Completing under this share of the target rate means the SUT fell behind.
_FELL_BEHIND = 0.98


#: LLM Server (detail-log keys): the bounds LoadGen ran with (``ttft_latency`` and
#: ``tpot_latency``, logged only as requested), and the percentiles it measured.
_TOKEN_BOUNDS = {"TTFT": "requested_server_ttft_latency", "TPOT": "requested_server_tpot_latency"}
_TOKEN_PERCENTILES = {"TTFT": "result_first_token_{p}_percentile_latency_ns",
                      "TPOT": "result_time_per_output_token_{p}_percentile_ns"}
_TOKEN_P99 = {"TTFT": "ttft_p99_ns", "TPOT": "tpot_p99_ns"}
#: Which knob moves which figure: a new query waits for a place in the running batch before
#: its first token; every live sequence shares each decode step.
_TOKEN_KNOB = {"TTFT": "lower loadgen.target_qps so fewer queries wait to join the batch",
               "TPOT": "lower sut.max_batch_size (every live sequence shares each decode "
                       "step) or loadgen.target_qps"}


def _token_latency(perf: PerformanceSummary, log: DetailLog | None) -> Explanation:
    qps = _get(perf, "target_qps")
    parts: list[str] = []
    over: list[str] = []
    ratio = 1.0  # the worst observed/bound share of a failing figure
    for name in ("TTFT", "TPOT"):
        p99 = perf.tokens.get(_TOKEN_P99[name], 0.0)
        bound = log.get(_TOKEN_BOUNDS[name]) if log is not None else None
        spread = ""
        if log is not None:
            found = [(p, log.get(_TOKEN_PERCENTILES[name].format(p=f"{p:.2f}")))
                     for p in (50, 90)]
            spread = ", ".join(f"p{p} {v / 1e6:.2f} ms" for p, v in found
                               if isinstance(v, int | float))
        text = f"{name} p99 {p99 / 1e6:.2f} ms"
        if isinstance(bound, int | float) and bound > 0:
            # the rules want p99 strictly below the bound (the checker's PERF-TOKEN-BOUNDS)
            failing = p99 >= bound
            text += f" {'>=' if failing else '<'} {bound / 1e6:g} ms bound"
            if failing:
                over.append(name)
                ratio = max(ratio, p99 / bound)
        parts.append(text + (f" ({spread})" if spread else ""))
    evidence = "; ".join(parts) + f" at {qps:,.0f} QPS"
    if log is None:
        evidence += (" (the bounds are requested_server_ttft_latency and "
                     "requested_server_tpot_latency in mlperf_log_detail.txt)")
    # Latency is not proportional to the rate: the ratio is a direction, at most halving.
    suggestion = qps * max(0.5, min(0.9, 1 / ratio)) if over else qps * 0.8
    completed = perf.metric_value
    # Against what LoadGen scheduled (Poisson arrivals fall short of target_qps in a short
    # run, and a generation's tail ends after the last arrival), else the target rate.
    offered = log.get("result_scheduled_samples_per_sec") if log is not None else None
    offered = offered if isinstance(offered, int | float) and offered > 0 else qps
    if completed and completed < _FELL_BEHIND * offered:
        suggestion = completed * 0.9
        evidence += (f"; the SUT completed only {completed:,.1f} of {offered:,.1f} scheduled "
                     "samples/s, so queries queued up behind it")
    knobs = [_TOKEN_KNOB[name] for name in over] or list(_TOKEN_KNOB.values())
    condition = (" and ".join(over) + (" bounds" if len(over) > 1 else " bound") + " exceeded"
                 if over else "token latency bounds exceeded")
    return Explanation(condition, evidence,
                       "; ".join(knobs) + f" (target_qps about {suggestion:,.1f} is an estimate; "
                       "`suite tune` finds the highest VALID rate)")


def _token_early_stopping(log: DetailLog | None) -> str:
    """LoadGen's TTFT and TPOT early-stopping verdicts (an LLM has no single one)."""
    if log is None:
        return ("see early_stopping_ttft_result and early_stopping_tpot_result in "
                "mlperf_log_detail.txt")
    found = [(name, log.get(f"early_stopping_{name.lower()}_result")) for name in ("TTFT", "TPOT")]
    return "; ".join(f"{name}: {' '.join(str(v).split())}" for name, v in found
                     if v is not None) or "LoadGen logged no TTFT/TPOT early-stopping result"
