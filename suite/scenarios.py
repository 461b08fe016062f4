"""The four LoadGen scenarios, the test modes, and what each scenario reports.

``SPECS`` is the one table that says, per scenario, which detail-log key holds the
submission metric, its unit, and whether it is a latency (lower is better) or a
throughput. Everything that names a metric reads it from here.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Scenario(StrEnum):
    """A LoadGen scenario; the value is our lower-case CLI name."""

    SINGLE_STREAM = "singlestream"
    MULTI_STREAM = "multistream"
    SERVER = "server"
    OFFLINE = "offline"

    @property
    def loadgen_name(self) -> str:
        """The spelling LoadGen and ``mlperf.conf`` use."""
        return SPECS[self].loadgen_name


class Mode(StrEnum):
    """What a run measures; ``all`` is performance, then accuracy."""

    PERFORMANCE = "performance"
    ACCURACY = "accuracy"
    ALL = "all"

    def tests(self) -> tuple[Mode, ...]:
        """The LoadGen tests (one child process each) that this mode runs, in order."""
        if self is Mode.ALL:
            return (Mode.PERFORMANCE, Mode.ACCURACY)
        return (self,)


@dataclass(frozen=True)
class ScenarioSpec:
    """What LoadGen reports for a scenario and how we present it."""

    loadgen_name: str
    metric_key: str
    metric_name: str
    unit: str
    is_latency: bool


SPECS: dict[Scenario, ScenarioSpec] = {
    # SingleStream/MultiStream: the submission metric is the early-stopping estimate,
    # not the raw percentile in the summary headline (loadgen.md §2.1).
    Scenario.SINGLE_STREAM: ScenarioSpec(
        "SingleStream", "early_stopping_latency_ss", "90th percentile latency", "ms", True
    ),
    Scenario.MULTI_STREAM: ScenarioSpec(
        "MultiStream", "early_stopping_latency_ms", "99th percentile latency", "ms", True
    ),
    Scenario.SERVER: ScenarioSpec(
        "Server", "result_completed_samples_per_sec", "completed samples/s", "samples/s", False
    ),
    Scenario.OFFLINE: ScenarioSpec(
        "Offline", "result_samples_per_second", "samples/s", "samples/s", False
    ),
}
