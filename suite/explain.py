"""Explain an INVALID performance result: the failing condition, its evidence, and the
knob to turn in which direction.

Everything here is read from LoadGen's own detail log (via ``PerformanceSummary``);
suggestions are arithmetic on those figures, labelled as estimates.
"""

from __future__ import annotations

from dataclasses import dataclass

from .results import PerformanceSummary
from .scenarios import Scenario


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


def explain(perf: PerformanceSummary) -> list[Explanation]:
    """Why LoadGen judged ``perf`` INVALID (empty when it is VALID without errors)."""
    scenario = Scenario(perf.scenario)
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
        found.append(_latency(perf))
    if perf.early_stopping_met is False:
        found.append(Explanation(
            "early stopping not satisfied",
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
