"""``bench/bench_sse.py`` measures what it says: its synthetic server streams the events it
claims (vLLM-shaped, one chunk each, in bursts), the openai backend's client folds every
one of them in both configurations, and the figure is per event of the marginal run."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "bench"))
import bench_sse as bench

pytest.importorskip("httptools", reason="the endpoint client needs httptools (.[openai])")


@pytest.mark.parametrize(("workers", "burst"), [(0, 16), (1, 1)])
def test_the_client_streams_every_event_of_each_run(workers: int, burst: int) -> None:
    with bench.server(burst) as url:
        report = bench.client(url, workers, tokens=300, sizes=[2, 5], concurrency=4)
    small, large = report["runs"]
    assert (small["requests"], large["requests"]) == (2, 5)
    assert (small["events"], large["events"]) == (2 * 301, 5 * 301)  # tokens and usage
    # the client's own count: the warm-up run (the small size) and both measured runs
    assert report["client_chunks"] == (2 + 2 + 5) * 301
    assert report["us_per_event"] == pytest.approx(
        (large["cpu_s"] - small["cpu_s"]) / (3 * 301) * 1e6)
