"""``suite diff``: real runs (digits, null backend, the real LoadGen) that differ in one
key, and the diff layer on edited copies of real run records (model, round, failed test,
unreadable records)."""

from __future__ import annotations

import pytest

from suite.reports.diff import number_delta, percentile_name


def test_number_delta_and_percentile_names() -> None:
    assert number_delta("x", "ms", 2.0, 3.0).relative == pytest.approx(0.5)
    assert number_delta("x", "ms", 0.0, 3.0).relative is None  # no relative change from 0
    assert number_delta("x", "ms", None, 3.0).delta is None
    assert [percentile_name(k) for k in ("99.90_percentile", "50.00_percentile", "mean")] \
        == ["p99.9", "p50", "mean"]

