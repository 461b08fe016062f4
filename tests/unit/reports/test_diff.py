"""``suite diff``'s figures on their own: a number's delta (no relative change from 0,
none against a missing figure) and LoadGen's percentile keys named as p99.9, p50. Real
runs and edited copies of their records are in tests/integration/test_run_diff.py."""

from __future__ import annotations

import pytest

from suite.reports.diff import number_delta, percentile_name


def test_number_delta_and_percentile_names() -> None:
    assert number_delta("x", "ms", 2.0, 3.0).relative == pytest.approx(0.5)
    assert number_delta("x", "ms", 0.0, 3.0).relative is None  # no relative change from 0
    assert number_delta("x", "ms", None, 3.0).delta is None
    assert [percentile_name(k) for k in ("99.90_percentile", "50.00_percentile", "mean")] \
        == ["p99.9", "p50", "mean"]

