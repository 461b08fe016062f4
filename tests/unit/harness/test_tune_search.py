"""The Server rate search of ``suite tune`` (``Tuner._highest_valid``), above a fake probe
that is VALID up to a known rate: which rates it asks for, where it stops, and the
``--max-qps`` cap. The real-LoadGen flow is in tests/integration/test_tune.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from suite.harness.tune import ProbeResult, Tuner


class FakeTuner(Tuner):
    """A Tuner whose Server probes are VALID at or below ``sustains`` QPS."""

    def __init__(self, sustains: float) -> None:  # no paths, no model: nothing is run
        self.sustains = sustains
        self.asked: list[float] = []

    def _server_probe(self, rate: float, sets: dict[str, Any]) -> ProbeResult:
        self.asked.append(rate)
        return ProbeResult(valid=rate <= self.sustains, metric=rate, mean_latency_ms=1.0,
                           run_dir=Path("/nonexistent"))


def test_halves_then_bisects_to_within_one_step() -> None:
    tuner = FakeTuner(sustains=70_000)
    found = tuner._highest_valid(1_200_000, {}, steps=6)
    assert tuner.asked[:5] == [600_000, 300_000, 150_000, 75_000, 37_500]
    assert len(tuner.asked) == 5 + 6
    # The bracket [37.5k, 75k] halves six times: the answer is VALID and within 1/64 of it.
    assert found <= 70_000
    assert 70_000 - found < (75_000 - 37_500) / 64


def test_cap_that_is_valid_is_the_answer_and_nothing_above_is_probed() -> None:
    tuner = FakeTuner(sustains=70_000)
    assert tuner._highest_valid(1_200_000, {}, steps=6, max_qps=20_000) == 20_000
    assert tuner.asked == [20_000]


def test_cap_bounds_the_bisection() -> None:
    tuner = FakeTuner(sustains=70_000)
    found = tuner._highest_valid(1_200_000, {}, steps=4, max_qps=100_000)
    assert tuner.asked[:2] == [100_000, 50_000]
    assert max(tuner.asked) == 100_000
    assert 50_000 <= found <= 70_000


@pytest.mark.parametrize("max_qps", [None, 5_000.0])
def test_nothing_valid_gives_zero_after_ten_halvings(max_qps: float | None) -> None:
    tuner = FakeTuner(sustains=0)
    assert tuner._highest_valid(1_200_000, {}, steps=6, max_qps=max_qps) == 0
    assert len(tuner.asked) == 10  # no bisection without a VALID lower end
